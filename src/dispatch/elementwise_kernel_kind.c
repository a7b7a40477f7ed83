/* elementwise_kernel_kind.c - lab.ElementwiseKernel's plan and launch (see elementwise_kernel_kind.h). */
#include "dispatch/elementwise_kernel_kind.h"

#include <string.h>

#include "dispatch/dtype.h"

enum { kThreads = 128, kItemsPerThread = 2, kElementsPerThread = 4 }; /* elementwise_kernel.cuh's */

lab_array lab_position_counter(const lab_array *shape_of) {
    lab_array counter = lab_contiguous_like(shape_of);
    counter.dtype = LAB_UINT8;
    lab_fill_contiguous_strides(&counter);
    counter.data = NULL; /* "address" 0: below any allocation, so no overlap check ever fires */
    counter.readonly = 1;
    return counter;
}

/* Every operand walks its elements contiguously in one dimension from a 16-byte aligned start. */
static int all_contiguous_aligned(const lab_operands *ops, const lab_iteration *it) {
    if (it->ndim != 1) return 0;
    for (int k = 0; k < ops->count; k++) {
        if (it->byte_strides[k][0] != lab_dtype_itemsize[ops->arrays[k].dtype]) return 0;
        if (ops->arrays[k].data && ((uintptr_t)it->data[k] & 15u) != 0) return 0; /* not the counter */
    }
    return 1;
}

static int plan(lab_op_call *call) {
    lab_elementwise_kernel_call *c = call->description;
    lab_iteration it;
    if (lab_iterate(&c->operands, 0, call->func, &it) < 0) return -1;
    c->numel = it.numel;
    if (it.numel == 0) return 0;
    const int n = c->operands.count;
    memcpy(c->pointers, it.data, sizeof(char *) * (size_t)n);
    c->use_vectorized = all_contiguous_aligned(&c->operands, &it);
    int64_t blocks;
    if (c->use_vectorized) {
        const int64_t items = it.numel / c->vector_elements; /* the rest: block 0's tail */
        blocks = (items + kThreads * kItemsPerThread - 1) / (kThreads * kItemsPerThread);
    } else {
        lab_fill_layout(&c->layout.dims, c->layout.strides, n, it.ndim, it.shape,
                        (const int64_t (*)[LAB_MAX_DIMS])it.byte_strides, it.numel);
        blocks = (it.numel + kThreads * kElementsPerThread - 1) / (kThreads * kElementsPerThread);
    }
    if (blocks > 0x7fffffff) {
        lab_fail(LAB_FAILURE_VALUE, "%s(): %lld elements are more than one launch covers", call->func,
                 (long long)it.numel);
        return -1;
    }
    c->blocks = blocks < 1 ? 1 : (unsigned int)blocks;
    return 1;
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    lab_elementwise_kernel_call *c = call->description;
    void *argv[3 + LAB_KERNEL_MAX_SCALARS];
    int n_args = 0;
    argv[n_args++] = c->pointers;
    if (!c->use_vectorized) argv[n_args++] = &c->layout;
    argv[n_args++] = &c->numel;
    for (int k = 0; k < c->n_scalars; k++) argv[n_args++] = c->scalar_argv[k];
    const dim3 grid = {c->blocks, 1, 1}, block = {kThreads, 1, 1};
    const void *kernel = c->use_vectorized ? c->vectorized : c->strided;
    lab_launch_scope_step(scope, c->step,
                          cudaLaunchKernel(kernel, grid, block, argv, 0, scope->streams.launch));
}

const lab_op_kind lab_elementwise_kernel_kind = {"elementwise kernel", plan, launch};
