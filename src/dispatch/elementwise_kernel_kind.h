/* elementwise_kernel_kind.h - the op kind of lab.ElementwiseKernel: a user's elementwise operation,
 * compiled at run time, walked over any layout (level 3, between binding/elementwise_kernel.c and
 * the generated kernels of kernels/elementwise_kernel.cuh).
 *
 * The plan is lab's iterator's, as for the built-in ops - broadcasting, outputs checked, dimensions
 * reordered and merged - and picks one of the specialization's two kernels: `vectorized` when every
 * operand is contiguous and 16-byte aligned, `strided` otherwise. Everything after that is the op
 * driver's, as for every op. */
#ifndef LAB_ELEMENTWISE_KERNEL_KIND_H
#define LAB_ELEMENTWISE_KERNEL_KIND_H

#include "dispatch/driver.h"
#include "dispatch/iterator.h"

/* The most arrays (inputs and outputs) one lab.ElementwiseKernel call takes; one more operand is
 * the position counter when the operation uses `i`. */
#define LAB_KERNEL_MAX_ARRAYS (LAB_ITER_MAX_OPERANDS - 1)
#define LAB_KERNEL_MAX_SCALARS 32

/* What a strided generated kernel receives: a StridedLayout<k> for the most operands; the kernel's
 * own (fewer operands) is the first bytes of it. */
typedef struct {
    LAB_STRIDED_LAYOUT_MEMBERS(LAB_ITER_MAX_OPERANDS);
} lab_kernel_layout;

typedef struct {
    /* filled by the binding */
    lab_operands operands; /* outputs, array inputs, then the position counter when uses_index */
    int uses_index;
    int vector_elements;              /* elements of one vectorized item (kernels/elementwise_kernel.cuh) */
    const void *vectorized, *strided; /* cudaKernel_t */
    void *scalar_argv[LAB_KERNEL_MAX_SCALARS]; /* each scalar parameter's bytes */
    int n_scalars;
    char step[160]; /* "launching kernel 'name'" */
    /* filled by the plan */
    int use_vectorized;
    int64_t numel;
    unsigned int blocks;
    char *pointers[LAB_ITER_MAX_OPERANDS];
    lab_kernel_layout layout;
} lab_elementwise_kernel_call;

extern const lab_op_kind lab_elementwise_kernel_kind;

/* The position counter's operand: 1-byte elements from address 0, C-contiguous over `shape`, so
 * its byte offset at an element is the element's index in C order. */
lab_array lab_position_counter(const lab_array *shape_of);

#endif
