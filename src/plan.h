/* plan.h - lab's TensorIterator: from the operands of one elementwise call to one launch (level 3).
 *
 * lab_plan_elementwise() broadcasts the inputs against the output, checks the output is writable
 * and never repeats or overlaps itself, refuses inputs that partially overlap the output, picks
 * the compute dtype, then simplifies the iteration space - drop size-1 dimensions, flip dimensions
 * the output walks backwards, order dimensions by the output's strides, merge dimensions that are
 * contiguous with each other - and chooses the path: vectorized, contiguous, strided or casting.
 * No CUDA call; everything here runs (and is tested) on machines without a GPU. */
#ifndef LAB_PLAN_H
#define LAB_PLAN_H

#include "array.h"

/* Operands of one call: the output first (it decides device and stream), then the array inputs. */
typedef struct {
    lab_array arrays[LAB_MAX_OPERANDS];
    const char *names[LAB_MAX_OPERANDS];
    int count;
} lab_operands;

/* Fills *launch (all but op and scalars). integers_allowed: whether the op computes on integers.
 * Returns 0, or -1 with TypeError/ValueError set naming the arguments. */
int lab_plan_elementwise(const lab_operands *ops, int integers_allowed, const char *func,
                         lab_elementwise_launch *launch);

extern const char *const lab_path_names[];

#endif
