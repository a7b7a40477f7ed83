/* rowwise_kind.h - the row-wise op kind: softmax, log_softmax, layer_norm, rms_norm, cross_entropy,
 * the GLU backwards, over one dimension of the input, a row at a time (level 3, between
 * binding/rowwise.c and kernels/rowwise_*.cuh).
 *
 * The plan checks, before any CUDA call: float dtypes; every row operand (outputs, gradients, the
 * residual, up) with the input's shape and dtype; the per-row operands with the input's shape less
 * the row dimension - the statistics (mean, rstd) float32 or float64, cross-entropy's targets int32
 * or int64, its loss any float dtype (0-dimensional when reduced); weight, bias and their gradients
 * 1-dimensional with the row's length and the input's dtype; outputs writable, never writing an
 * element twice, never overlapping another operand (an output may be the very view of the input it
 * replaces, or interleave with another array without sharing an element). Then it merges the
 * leading dimensions where every operand allows, so a contiguous input is one loop of rows. */
#ifndef LAB_ROWWISE_KIND_H
#define LAB_ROWWISE_KIND_H

#include "dispatch/driver.h"

/* The call's description: the binding fills op, the operands it has (NULL where unused) with
 * their parameter names, the row dimension, eps (< 0: the dtype's machine epsilon, rms_norm's
 * default) and which operands are written; the plan fills launch. */
typedef struct {
    lab_row_op op;
    lab_array *rows[LAB_ROW_OPERANDS];
    const char *row_names[LAB_ROW_OPERANDS];
    lab_array *cols[LAB_COL_OPERANDS];
    const char *col_names[LAB_COL_OPERANDS];
    int axis; /* the row dimension of rows[LAB_ROW_X], already in range */
    double eps;
    /* cross-entropy */
    lab_loss_reduction reduction;
    int64_t ignore_index;
    double label_smoothing;
    double softcap, z_loss; /* 0: off */
    lab_rowwise_launch launch;
} lab_rowwise_call;

/* Which operands an op writes: the rest it reads. */
int lab_row_operand_written(lab_row_op op, lab_row_operand k);
int lab_col_operand_written(lab_col_operand k);

/* Adds the description's arrays to the call, the written ones first (the first decides the launch
 * stream): what every face of the row-wise ops (the Python functions, the XLA FFI handlers) does. */
void lab_rowwise_add_operands(lab_op_call *call, lab_rowwise_call *c);

extern const lab_op_kind lab_rowwise_kind;

#endif
