/* elementwise_kind.c - the elementwise op kind's plan and launch (see elementwise_kind.h). */
#include "dispatch/elementwise_kind.h"

#include <string.h>

#include "dispatch/dtype.h"

const char *const lab_path_names[] = {
    "empty",   "vectorized",        "contiguous", "strided", "strided_vectorized",
    "casting", "casting_contiguous"}; /* in lab_path's order */

const int lab_op_inputs[LAB_NUM_OPS] = {
#define LAB_OP(id, functor, n_inputs, integers) n_inputs,
#include "kernels/ops.def"
#undef LAB_OP
};
const int lab_op_integers[LAB_NUM_OPS] = {
#define LAB_OP(id, functor, n_inputs, integers) integers,
#include "kernels/ops.def"
#undef LAB_OP
};

/* The dtype arithmetic happens in: NumPy's promotion over the inputs, halves widened to float32. */
static int choose_compute_dtype(const lab_operands *ops, int integers_allowed, const char *func,
                                lab_dtype *compute) {
    lab_dtype promoted = ops->arrays[ops->count > 1 ? 1 : 0].dtype;
    for (int i = 2; i < ops->count; i++) promoted = lab_promote(promoted, ops->arrays[i].dtype);
    if (lab_dtype_is_integer(promoted) && !integers_allowed) {
        lab_fail(LAB_FAILURE_TYPE,
                 "%s(): argument '%s' has dtype %s%s; this op computes on floating-point inputs only (%s) - "
                 "convert first, e.g. lab.copy into a float array",
                 func, ops->names[1 % ops->count], lab_dtype_names[ops->arrays[1 % ops->count].dtype],
                 ops->count > 2 ? " (and so do the other inputs)" : "", lab_supported_dtypes_text(0));
        return -1;
    }
    *compute = lab_compute_dtype(promoted);
    return 0;
}

/* Whether the innermost dimension can be walked in 16-byte packets: its length a multiple of the
 * packet, and for each operand either contiguous along it (stride = item size, start and outer
 * strides 16-byte aligned) or broadcast along it (stride 0: one element fills the packet). A bias
 * row added to a matrix is the case this is for. */
static int inner_dimension_packs(const lab_elementwise_launch *launch, int n_operands) {
    const int64_t itemsize = lab_dtype_itemsize[launch->dtypes[0]];
    const int inner = launch->ndim - 1;
    if (launch->shape[inner] % (16 / itemsize) != 0 || launch->byte_strides[0][inner] != itemsize) return 0;
    for (int i = 0; i < n_operands; i++) {
        if (launch->byte_strides[i][inner] == 0) continue;
        if (launch->byte_strides[i][inner] != itemsize || ((uintptr_t)launch->data[i] & 15u) != 0) return 0;
        for (int d = 0; d < inner; d++)
            if (launch->byte_strides[i][d] % 16 != 0) return 0;
    }
    return 1;
}

/* Mixed dtypes in groups of 8 elements (elementwise_casting_contiguous.cu): one dimension, every
 * operand contiguous along it (no broadcast) and starting on a whole group of its own dtype, so
 * each group is one to four aligned 16-byte loads. */
static int casting_groups_fit(const lab_elementwise_launch *launch, int n_operands) {
    if (launch->ndim != 1) return 0;
    for (int i = 0; i < n_operands; i++) {
        const int64_t itemsize = lab_dtype_itemsize[launch->dtypes[i]];
        const int whole_group = (uintptr_t)launch->data[i] % (uintptr_t)(8 * itemsize) == 0;
        if (launch->byte_strides[i][0] != itemsize || !whole_group) return 0;
    }
    return 1;
}

int lab_plan_elementwise(const lab_operands *ops, int integers_allowed, const char *func,
                         lab_elementwise_launch *launch) {
    lab_iteration it;
    if (lab_iterate(ops, 0, func, &it) < 0) return -1;
    if (choose_compute_dtype(ops, integers_allowed, func, &launch->compute) < 0) return -1;
    const lab_dtype out_dtype = ops->arrays[0].dtype;
    int same_dtype = 1;
    launch->n_inputs = ops->count - 1;
    for (int i = 0; i < ops->count; i++) {
        launch->dtypes[i] = ops->arrays[i].dtype;
        launch->data[i] = it.data[i];
        memcpy(launch->byte_strides[i], it.byte_strides[i], sizeof(int64_t) * (size_t)it.ndim);
        same_dtype &= ops->arrays[i].dtype == out_dtype;
    }
    launch->numel = it.numel;
    launch->ndim = it.ndim;
    memcpy(launch->shape, it.shape, sizeof(int64_t) * (size_t)it.ndim);
    if (it.numel == 0) {
        launch->path = LAB_PATH_EMPTY;
        return 0;
    }
    if (!same_dtype) {
        launch->path =
            casting_groups_fit(launch, ops->count) ? LAB_PATH_CASTING_CONTIGUOUS : LAB_PATH_CASTING;
        return 0;
    }
    int contiguous = it.ndim == 1, aligned = 1;
    for (int i = 0; i < ops->count; i++) {
        contiguous &= launch->byte_strides[i][0] == lab_dtype_itemsize[out_dtype];
        aligned &= ((uintptr_t)launch->data[i] & 15u) == 0;
    }
    if (contiguous) {
        launch->path = aligned ? LAB_PATH_VECTORIZED : LAB_PATH_CONTIGUOUS;
    } else {
        launch->path =
            inner_dimension_packs(launch, ops->count) ? LAB_PATH_STRIDED_VECTORIZED : LAB_PATH_STRIDED;
    }
    return 0;
}

static int plan(lab_op_call *call) {
    lab_elementwise_call *c = call->description;
    if (c->operands.count - 1 != lab_op_inputs[c->op]) { /* a table bug, not a user error */
        lab_fail(LAB_FAILURE_RUNTIME, "%s(): op table expects %d inputs, got %d", call->func,
                 lab_op_inputs[c->op], c->operands.count - 1);
        return -1;
    }
    if (lab_plan_elementwise(&c->operands, lab_op_integers[c->op], call->func, &c->launch) < 0) return -1;
    c->launch.op = c->op;
    /* Scalars take the compute type: integers for integer arithmetic, else any real number. */
    c->launch.scalars = (lab_scalars){{1.0, 1.0}, {1, 1}};
    for (int k = 0; k < 2; k++)
        if (c->scalars[k].name &&
            lab_scalar_for_dtype(&c->scalars[k], c->launch.compute, call->func,
                                 &c->launch.scalars.as_float[k], &c->launch.scalars.as_int[k]) < 0) {
            return -1;
        }
    return c->launch.path != LAB_PATH_EMPTY;
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    const lab_elementwise_call *c = call->description;
    lab_launch_scope_step(scope, "kernel launch", lab_launch_elementwise(&c->launch, scope->streams.launch));
}

const lab_op_kind lab_elementwise_kind = {"elementwise", plan, launch};
