/* elementwise_kind.h - the elementwise op kind: out = f(inputs...) at every position of the
 * broadcast shape, any layout, mixed dtypes (level 3, between binding/elementwise.c and the
 * kernels' lab_launch_elementwise). */
#ifndef LAB_ELEMENTWISE_KIND_H
#define LAB_ELEMENTWISE_KIND_H

#include "dispatch/driver.h"
#include "dispatch/iterator.h"

/* The call's description: the binding fills operands (output first), op and the scalars it was
 * given (name NULL where not); the plan fills launch. */
typedef struct {
    lab_operands operands;
    lab_op op;
    lab_scalar_arg scalars[2]; /* alpha (or a Python-number scale), beta */
    lab_elementwise_launch launch;
} lab_elementwise_call;

extern const lab_op_kind lab_elementwise_kind;

/* How many array inputs each kernel op reads, and whether it computes on integers (ops.def). */
extern const int lab_op_inputs[LAB_NUM_OPS];
extern const int lab_op_integers[LAB_NUM_OPS];

/* The plan alone: the iterator's space, the compute dtype and the path (all of *launch but op and
 * scalars). The list kind plans tensors off its fast path with it. 0, or -1 with an error set. */
int lab_plan_elementwise(const lab_operands *ops, int integers_allowed, const char *func,
                         lab_elementwise_launch *launch);

extern const char *const lab_path_names[];

#endif
