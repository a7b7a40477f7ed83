/* rowwise_kind.c - the row-wise op kind's plan and launch (see rowwise_kind.h). */
#include "dispatch/rowwise_kind.h"

#include <float.h>

#include "dispatch/dtype.h"
#include "dispatch/iterator.h"

static int is_backward(lab_row_op op) {
    return op == LAB_ROW_SOFTMAX_BACKWARD || op == LAB_ROW_LOG_SOFTMAX_BACKWARD ||
           op == LAB_ROW_LAYER_NORM_BACKWARD || op == LAB_ROW_RMS_NORM_BACKWARD ||
           op == LAB_ROW_SWIGLU_BACKWARD || op == LAB_ROW_GEGLU_BACKWARD ||
           op == LAB_ROW_CROSS_ENTROPY_BACKWARD;
}

int lab_row_operand_written(lab_row_op op, lab_row_operand k) {
    if (k == LAB_ROW_OUT || k == LAB_ROW_RESIDUAL_OUT || k == LAB_ROW_PRODUCT) return 1;
    return (k == LAB_ROW_MEAN || k == LAB_ROW_RSTD || k == LAB_ROW_LOSS) && !is_backward(op);
}

int lab_col_operand_written(lab_col_operand k) { return k == LAB_COL_GRAD_WEIGHT || k == LAB_COL_GRAD_BIAS; }

void lab_rowwise_add_operands(lab_op_call *call, lab_rowwise_call *c) {
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < LAB_ROW_OPERANDS; k++) {
            const int written = lab_row_operand_written(c->op, (lab_row_operand)k);
            if (c->rows[k] && written == !pass) {
                lab_op_call_add(call, c->row_names[k], c->rows[k], 1, 0, written);
            }
        }
        for (int k = 0; k < LAB_COL_OPERANDS; k++) {
            const int written = lab_col_operand_written((lab_col_operand)k);
            if (c->cols[k] && written == !pass) {
                lab_op_call_add(call, c->col_names[k], c->cols[k], 1, 0, written);
            }
        }
    }
}

/* Operands with one value per row: the input's shape less the row dimension. */
static int is_per_row(int k) {
    return k == LAB_ROW_MEAN || k == LAB_ROW_RSTD || k == LAB_ROW_TARGET || k == LAB_ROW_LOSS;
}

/* Cross-entropy's loss reduced to one number, and its backward's upstream gradient of one (it
 * scales every row): a 0-dimensional operand. */
static int is_reduced_loss(const lab_rowwise_call *c, int k) {
    if (k != LAB_ROW_LOSS) return 0;
    return c->op == LAB_ROW_CROSS_ENTROPY_BACKWARD ? c->rows[k]->ndim == 0 : c->reduction != LAB_LOSS_NONE;
}

/* A per-row operand's dtype, or -1 with a TypeError saying what it must be. */
static int check_per_row_dtype(const lab_rowwise_call *c, int k, const char *func) {
    const lab_dtype dtype = c->rows[k]->dtype;
    const char *what = NULL;
    if (k == LAB_ROW_TARGET && dtype != LAB_INT64 && dtype != LAB_INT32) {
        what = "class indices are int64 or int32";
    } else if (k == LAB_ROW_LOSS && lab_dtype_is_integer(dtype)) {
        what = "the loss is float16, bfloat16, float32 or float64";
    } else if ((k == LAB_ROW_MEAN || k == LAB_ROW_RSTD) && dtype != LAB_FLOAT32 && dtype != LAB_FLOAT64) {
        what = "the statistics are float32 (or float64)";
    }
    if (!what) return 0;
    return lab_fail_dtype(func, c->row_names[k], dtype, what);
}

/* Dtypes and shapes of every operand against x's. */
static int check_operands(const lab_rowwise_call *c, const char *func) {
    const lab_array *x = c->rows[LAB_ROW_X];
    const char *x_name = c->row_names[LAB_ROW_X];
    if (lab_dtype_is_integer(x->dtype)) {
        lab_fail(LAB_FAILURE_TYPE, "%s(): argument '%s' has dtype %s; %s takes %s", func, x_name,
                 lab_dtype_names[x->dtype], func, lab_supported_dtypes_text(0));
        return -1;
    }
    int64_t lead[LAB_MAX_DIMS];
    for (int d = 0, k = 0; d < x->ndim; d++) {
        if (d != c->axis) lead[k++] = x->shape[d];
    }
    for (int k = 0; k < LAB_ROW_OPERANDS; k++) {
        const lab_array *a = c->rows[k];
        if (!a || k == LAB_ROW_X) continue;
        if (is_reduced_loss(c, k)) {
            if (a->ndim != 0) {
                return lab_fail_shape(func, c->row_names[k], a, lead, 0,
                                      "one number: the loss reduced by 'mean' or 'sum'");
            }
            if (check_per_row_dtype(c, k, func) < 0) return -1;
            continue;
        }
        if (is_per_row(k)) {
            if (!lab_has_shape(a, lead, x->ndim - 1)) {
                return lab_fail_shape(func, c->row_names[k], a, lead, x->ndim - 1,
                                      "one value per row: the input's shape without its last dimension");
            }
            if (check_per_row_dtype(c, k, func) < 0) return -1;
            continue;
        }
        if (!lab_has_shape(a, x->shape, x->ndim)) {
            char what[64];
            snprintf(what, sizeof what, "the shape of '%s'", x_name);
            return lab_fail_shape(func, c->row_names[k], a, x->shape, x->ndim, what);
        }
        if (a->dtype != x->dtype) {
            lab_fail(LAB_FAILURE_TYPE, "%s(): argument '%s' has dtype %s; it must have the dtype of '%s', %s",
                     func, c->row_names[k], lab_dtype_names[a->dtype], x_name, lab_dtype_names[x->dtype]);
            return -1;
        }
    }
    const int64_t n = x->shape[c->axis];
    for (int k = 0; k < LAB_COL_OPERANDS; k++) {
        const lab_array *a = c->cols[k];
        if (!a) continue;
        if (!lab_has_shape(a, &n, 1)) {
            return lab_fail_shape(func, c->col_names[k], a, &n, 1,
                                  "one element per position of the normalized dimension");
        }
        if (a->dtype != x->dtype) {
            lab_fail(LAB_FAILURE_TYPE, "%s(): argument '%s' has dtype %s; it must have the dtype of '%s', %s",
                     func, c->col_names[k], lab_dtype_names[a->dtype], x_name, lab_dtype_names[x->dtype]);
            return -1;
        }
    }
    if (c->rows[LAB_ROW_MEAN] && c->rows[LAB_ROW_RSTD] &&
        c->rows[LAB_ROW_MEAN]->dtype != c->rows[LAB_ROW_RSTD]->dtype) {
        lab_fail(LAB_FAILURE_TYPE, "%s(): arguments 'mean' and 'rstd' must have one dtype, got %s and %s",
                 func, lab_dtype_names[c->rows[LAB_ROW_MEAN]->dtype],
                 lab_dtype_names[c->rows[LAB_ROW_RSTD]->dtype]);
        return -1;
    }
    return 0;
}

/* Outputs: writable, one element per position, sharing memory with no other operand - except a
 * row output that is the very view of a row input (in place: every kernel reads an element before
 * the same thread writes it). */
static int check_outputs(const lab_rowwise_call *c, const char *func) {
    const lab_array *all[LAB_ROW_OPERANDS + LAB_COL_OPERANDS];
    const char *names[LAB_ROW_OPERANDS + LAB_COL_OPERANDS];
    int written[LAB_ROW_OPERANDS + LAB_COL_OPERANDS], in_place_group[LAB_ROW_OPERANDS + LAB_COL_OPERANDS];
    int count = 0;
    for (int k = 0; k < LAB_ROW_OPERANDS + LAB_COL_OPERANDS; k++) {
        const int is_row = k < LAB_ROW_OPERANDS;
        const lab_array *a = is_row ? c->rows[k] : c->cols[k - LAB_ROW_OPERANDS];
        if (!a) continue;
        all[count] = a;
        names[count] = is_row ? c->row_names[k] : c->col_names[k - LAB_ROW_OPERANDS];
        written[count] = is_row ? lab_row_operand_written(c->op, (lab_row_operand)k)
                                : lab_col_operand_written((lab_col_operand)(k - LAB_ROW_OPERANDS));
        in_place_group[count] = is_row && !is_per_row(k); /* any row operand may be a row input's view */
        count++;
    }
    return lab_check_written_apart(all, names, written, in_place_group, count, func);
}

/* The leading dimensions (all but the row's), each operand's byte strides along them, merged where
 * every operand walks two neighbours as one. Size-1 dimensions drop out. */
static void plan_rows(const lab_rowwise_call *c, lab_rowwise_launch *l) {
    const lab_array *x = c->rows[LAB_ROW_X];
    l->lead_ndim = 0;
    l->rows = 1;
    for (int d = 0, s = 0; d < x->ndim; d++) {
        if (d == c->axis) continue;
        const int stat_dim = s++; /* the per-row operands have the leading dimensions only */
        l->rows *= x->shape[d];
        if (x->shape[d] == 1) continue;
        const int at = l->lead_ndim;
        l->lead_shape[at] = x->shape[d];
        for (int k = 0; k < LAB_ROW_OPERANDS; k++) {
            const lab_array *a = c->rows[k];
            const int64_t stride = !a || is_reduced_loss(c, k) ? 0
                                   : is_per_row(k)             ? a->strides[stat_dim]
                                                               : a->strides[d];
            l->lead_strides[k][at] = a ? stride * lab_dtype_itemsize[a->dtype] : 0;
        }
        int mergeable = at > 0;
        for (int k = 0; mergeable && k < LAB_ROW_OPERANDS; k++) {
            mergeable = l->lead_strides[k][at - 1] == l->lead_strides[k][at] * x->shape[d];
        }
        if (mergeable) {
            l->lead_shape[at - 1] *= x->shape[d];
            for (int k = 0; k < LAB_ROW_OPERANDS; k++) l->lead_strides[k][at - 1] = l->lead_strides[k][at];
        } else {
            l->lead_ndim++;
        }
    }
}

static int plan(lab_op_call *call) {
    lab_rowwise_call *c = call->description;
    const char *func = call->func;
    lab_rowwise_launch *l = &c->launch;
    if (check_operands(c, func) < 0 || check_outputs(c, func) < 0) return -1;
    const lab_array *x = c->rows[LAB_ROW_X];
    l->op = c->op;
    l->dtype = x->dtype;
    l->stats_dtype = c->rows[LAB_ROW_RSTD]   ? c->rows[LAB_ROW_RSTD]->dtype
                     : c->rows[LAB_ROW_MEAN] ? c->rows[LAB_ROW_MEAN]->dtype
                                             : LAB_FLOAT32;
    l->target_dtype = c->rows[LAB_ROW_TARGET] ? c->rows[LAB_ROW_TARGET]->dtype : LAB_INT64;
    l->loss_dtype = c->rows[LAB_ROW_LOSS] ? c->rows[LAB_ROW_LOSS]->dtype : x->dtype;
    l->reduction = c->reduction;
    l->ignore_index = c->ignore_index;
    l->label_smoothing = c->label_smoothing;
    l->softcap = c->softcap;
    l->z_loss = c->z_loss;
    l->n = x->shape[c->axis];
    if (c->op == LAB_ROW_CROSS_ENTROPY && l->n == 0) {
        lab_fail(LAB_FAILURE_VALUE, "%s(): argument '%s' has no classes (its last dimension is 0)", func,
                 c->row_names[LAB_ROW_X]);
        return -1;
    }
    static const double machine_epsilon[LAB_NUM_DTYPES] = {[LAB_FLOAT16] = 0.0009765625,
                                                           [LAB_BFLOAT16] = 0.0078125,
                                                           [LAB_FLOAT32] = FLT_EPSILON,
                                                           [LAB_FLOAT64] = DBL_EPSILON};
    l->eps = c->eps < 0 ? machine_epsilon[x->dtype] : c->eps;
    for (int k = 0; k < LAB_ROW_OPERANDS; k++) {
        const lab_array *a = c->rows[k];
        l->row_data[k] = a ? a->data : NULL;
        l->col_strides[k] = a && !is_per_row(k) ? a->strides[c->axis] * lab_dtype_itemsize[a->dtype] : 0;
    }
    for (int k = 0; k < LAB_COL_OPERANDS; k++) {
        const lab_array *a = c->cols[k];
        l->col_data[k] = a ? a->data : NULL;
        l->col_data_strides[k] = a ? a->strides[0] * lab_dtype_itemsize[a->dtype] : 0;
    }
    plan_rows(c, l);
    if (l->rows == 0) l->lead_ndim = 0; /* no row to find (and no zero-sized dimension to divide by) */
    /* Work: any row to compute, or weight/bias gradients to write (zeros when there are no rows). */
    const int gradients = (c->cols[LAB_COL_GRAD_WEIGHT] || c->cols[LAB_COL_GRAD_BIAS]) && l->n > 0;
    const int statistics = c->rows[LAB_ROW_MEAN] || c->rows[LAB_ROW_RSTD];
    const int rows_to_compute = l->rows > 0 && (l->n > 0 || (statistics && !is_backward(c->op)));
    const int reduced_loss =
        c->op == LAB_ROW_CROSS_ENTROPY && c->reduction != LAB_LOSS_NONE; /* 0 rows: 0 or NaN */
    return rows_to_compute || gradients || reduced_loss;
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    const lab_rowwise_call *c = call->description;
    lab_launch_scope_step(scope, "kernel launch", lab_launch_rowwise(&c->launch, scope->streams.launch));
}

const lab_op_kind lab_rowwise_kind = {"row-wise", plan, launch};
