/* reduction_kind.h - the reduction op kind: every row of kernels/reduce_ops.def over `axis`
 * (level 3, between binding/reduction.c and kernels/reduction.cuh).
 *
 * The plan views the output in keepdim form (size 1, stride 0 where the input is reduced), asks
 * the iterator for the space with those dimensions marked reduced, splits it into kept and
 * reduced dimensions and picks how threads share the work. Checks, all before CUDA: the axis set,
 * the output's shape, integer inputs to float-only reductions (mean, norm, var, std, logsumexp,
 * dot), an index output for argmax/argmin (int64 or int32), empty reductions that have no value
 * (amax, amin, argmax, argmin, the inf-norm), and dot's two vectors (one dtype, one length). */
#ifndef LAB_REDUCTION_KIND_H
#define LAB_REDUCTION_KIND_H

#include "dispatch/driver.h"

/* The call's description: the binding fills op, the arrays, the reduced-dimension mask and
 * keepdim; the plan fills launch. */
typedef struct {
    lab_reduce_op op;
    lab_array *in, *in2, *out; /* in2: dot's second input, else NULL */
    const char *in_names[2];   /* the inputs' parameter names, for messages */
    double correction;         /* var, std */
    uint32_t reduced;          /* bit d: the input's dimension d is reduced */
    int keepdim;
    lab_reduction_launch launch;
} lab_reduction_call;

extern const lab_op_kind lab_reduction_kind;

/* Whether the reduction takes integer input (reduce_ops.def's column; lab.jax asks before a call). */
int lab_reduce_integers_allowed(lab_reduce_op op);

#endif
