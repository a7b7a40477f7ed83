/* linear_ce_plan.c - the fused linear cross-entropy's plan (see linear_ce_kind.h): the chunk planner,
 * and the checks of every operand, which also flatten hidden's leading dimensions into rows so that a
 * chunk is a pointer and a row count. Pure C, no CUDA call: tested on the CPU. */
#include <string.h>

#include "dispatch/dtype.h"
#include "dispatch/iterator.h"
#include "dispatch/linear_ce_kind.h"

/* ---- the chunk planner ---- */

int lab_plan_linear_ce_chunks(int64_t rows, int64_t classes, lab_dtype dtype, int reduced_loss, int bias_grad,
                              int64_t max_scratch_bytes, const char *func, const char *budget_name,
                              lab_linear_ce_chunks *k) {
    memset(k, 0, sizeof *k);
    const int64_t accumulator = dtype == LAB_FLOAT64 ? 8 : 4; /* the losses' compute type */
    k->logits_ld = (classes + 63) / 64 * 64;
    const int64_t row_bytes = k->logits_ld * lab_dtype_itemsize[dtype];
    /* everything but the logits, laid out after them */
    const int64_t fixed = lab_align256(2 * accumulator) +
                          (reduced_loss ? lab_align256(rows * accumulator) : 0) +
                          (bias_grad ? 2 * lab_align256(classes * 4) : 0);
    const int64_t room = max_scratch_bytes - fixed;
    const int64_t fit = row_bytes > 0 ? room / row_bytes : rows;
    if (rows > 0 && (room <= 0 || fit < 1)) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): argument '%s' gives %lld bytes of scratch memory; one row of logits (%lld "
                 "bytes) and the call's totals (%lld bytes) need at least %lld",
                 func, budget_name, (long long)max_scratch_bytes, (long long)row_bytes, (long long)fixed,
                 (long long)(fixed + lab_align256(row_bytes)));
        return -1;
    }
    k->chunks = rows > 0 ? (rows + fit - 1) / fit : 1;
    k->chunk_rows = rows > 0 ? (rows + k->chunks - 1) / k->chunks : 0;
    const int64_t tile = (k->chunk_rows + 63) / 64 * 64;
    if (tile <= fit && tile < rows) k->chunk_rows = tile;
    if (k->chunk_rows > 0) k->chunks = (rows + k->chunk_rows - 1) / k->chunk_rows;
    /* the logits first, then the rest: every part on a 256-byte boundary, as cuBLASLt prefers */
    k->logits_offset = 0;
    k->totals_offset = lab_align256(k->chunk_rows * row_bytes);
    k->losses_offset = k->totals_offset + lab_align256(2 * accumulator);
    k->bias_offset = k->losses_offset + (reduced_loss ? lab_align256(rows * accumulator) : 0);
    k->bytes = k->bias_offset + (bias_grad ? 2 * lab_align256(classes * 4) : 0);
    return 0;
}

/* ---- the plan ---- */

/* The stride (elements) that walks a's first `ndim` dimensions as one run of rows, or 0 when they do
 * not merge (a view that would need a copy to be flattened). Size-1 dimensions carry any stride. */
static int flat_stride(const lab_array *a, int ndim, int64_t *stride) {
    int64_t step = 0, span = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (a->shape[d] == 1) continue;
        if (step == 0) {
            step = a->strides[d];
        } else if (a->strides[d] != step * span) {
            return 0;
        }
        span *= a->shape[d];
    }
    *stride = step ? step : 1;
    return 1;
}

static int fail_unflattenable(const char *func, const char *name) {
    lab_fail(LAB_FAILURE_VALUE,
             "%s(): argument '%s' has leading dimensions that do not flatten into one run of rows "
             "without a copy; pass a view whose leading dimensions are contiguous with one another "
             "(a reshape of it, or a copy)",
             func, name);
    return -1;
}

/* A matrix the products read or write must have its rows or its columns contiguous. */
static int check_matrix_layout(const char *func, const char *name, int64_t rows, int64_t cols, int64_t rs,
                               int64_t cs) {
    if (rows <= 1 || cols <= 1 || rs == 1 || cs == 1) return 0;
    lab_fail(LAB_FAILURE_VALUE,
             "%s(): argument '%s' has strides (%lld, %lld) as a (%lld, %lld) matrix; the products read "
             "matrices whose rows or columns are contiguous (stride 1) - copy it into one first",
             func, name, (long long)rs, (long long)cs, (long long)rows, (long long)cols);
    return -1;
}

/* A gradient output: the dtype of hidden, or float32 (to accumulate in). */
static int check_grad_dtype(const char *func, const char *name, const lab_array *a, lab_dtype dtype) {
    if (a->dtype == dtype || a->dtype == LAB_FLOAT32) return 0;
    char what[96];
    snprintf(what, sizeof what, "it must be hidden's, %s, or float32", lab_dtype_names[dtype]);
    return lab_fail_dtype(func, name, a->dtype, what);
}

static int check_operands(lab_linear_ce_call *c, const char *func) {
    const lab_array *h = c->hidden, *w = c->weight;
    const lab_dtype dtype = h->dtype;
    if (lab_dtype_is_integer(dtype)) {
        return lab_fail_dtype(func, "hidden", dtype, "it must be float16, bfloat16, float32 or float64");
    }
    if (h->ndim < 1) {
        lab_fail(LAB_FAILURE_VALUE, "%s(): argument 'hidden' is 0-dimensional; it must be (..., depth)",
                 func);
        return -1;
    }
    const int lead = h->ndim - 1;
    c->depth = h->shape[lead];
    if (w->ndim != 2 || w->shape[1] != c->depth) {
        const int64_t want[2] = {w->ndim == 2 ? w->shape[0] : 1, c->depth};
        return lab_fail_shape(func, "weight", w, want, 2,
                              "(classes, depth): one row of hidden's depth per class");
    }
    c->classes = w->shape[0];
    if (c->classes == 0) {
        lab_fail(LAB_FAILURE_VALUE, "%s(): argument 'weight' has no classes (its first dimension is 0)",
                 func);
        return -1;
    }
    if (w->dtype != dtype) {
        char what[64];
        snprintf(what, sizeof what, "it must be hidden's, %s", lab_dtype_names[dtype]);
        return lab_fail_dtype(func, "weight", w->dtype, what);
    }
    c->rows = 1;
    for (int d = 0; d < lead; d++) c->rows *= h->shape[d];
    if (!lab_has_shape(c->target, h->shape, lead)) {
        return lab_fail_shape(func, "target", c->target, h->shape, lead,
                              "hidden's shape without its last dimension");
    }
    if (c->target->dtype != LAB_INT64 && c->target->dtype != LAB_INT32) {
        return lab_fail_dtype(func, "target", c->target->dtype, "class indices are int64 or int32");
    }
    const int reduced = c->reduction != LAB_LOSS_NONE;
    if (reduced ? c->loss->ndim != 0 : !lab_has_shape(c->loss, h->shape, lead)) {
        return lab_fail_shape(func, "loss", c->loss, h->shape, reduced ? 0 : lead,
                              reduced ? "one number: the loss reduced by 'mean' or 'sum'"
                                      : "one loss per row");
    }
    if (lab_dtype_is_integer(c->loss->dtype)) {
        return lab_fail_dtype(func, "loss", c->loss->dtype,
                              "the loss is float16, bfloat16, float32 or float64");
    }
    if (c->bias) {
        if (!lab_has_shape(c->bias, &c->classes, 1)) {
            return lab_fail_shape(func, "bias", c->bias, &c->classes, 1, "one per class");
        }
        if (c->bias->dtype != dtype) {
            return lab_fail_dtype(func, "bias", c->bias->dtype, "it must be hidden's dtype");
        }
    }
    if (c->grad_hidden) {
        if (!lab_has_shape(c->grad_hidden, h->shape, h->ndim)) {
            return lab_fail_shape(func, "grad_hidden", c->grad_hidden, h->shape, h->ndim, "hidden's shape");
        }
        if (check_grad_dtype(func, "grad_hidden", c->grad_hidden, dtype) < 0) return -1;
    }
    if (c->grad_weight) {
        if (!lab_has_shape(c->grad_weight, w->shape, 2)) {
            return lab_fail_shape(func, "grad_weight", c->grad_weight, w->shape, 2, "weight's shape");
        }
        if (check_grad_dtype(func, "grad_weight", c->grad_weight, dtype) < 0) return -1;
    }
    if (c->grad_bias) {
        if (!lab_has_shape(c->grad_bias, &c->classes, 1)) {
            return lab_fail_shape(func, "grad_bias", c->grad_bias, &c->classes, 1, "one per class");
        }
        if (check_grad_dtype(func, "grad_bias", c->grad_bias, dtype) < 0) return -1;
    }
    if (c->grad_output) {
        const int per_row = c->grad_output->ndim != 0;
        if (per_row && (reduced || !lab_has_shape(c->grad_output, h->shape, lead))) {
            return lab_fail_shape(func, "grad_output", c->grad_output, h->shape, reduced ? 0 : lead,
                                  reduced ? "the upstream gradient of a reduced loss is one number"
                                          : "one upstream gradient per row, or one number");
        }
        if (lab_dtype_is_integer(c->grad_output->dtype)) {
            return lab_fail_dtype(func, "grad_output", c->grad_output->dtype, "it must be a float dtype");
        }
    }
    return 0;
}

static int check_layouts(lab_linear_ce_call *c, const char *func) {
    const lab_array *h = c->hidden;
    const int lead = h->ndim - 1;
    if (!flat_stride(h, lead, &c->hidden_stride)) return fail_unflattenable(func, "hidden");
    if (!flat_stride(c->target, lead, &c->target_stride)) return fail_unflattenable(func, "target");
    c->loss_stride = 0;
    if (c->reduction == LAB_LOSS_NONE && !flat_stride(c->loss, lead, &c->loss_stride)) {
        return fail_unflattenable(func, "loss");
    }
    c->upstream_stride = 0;
    if (c->grad_output && c->grad_output->ndim && !flat_stride(c->grad_output, lead, &c->upstream_stride)) {
        return fail_unflattenable(func, "grad_output");
    }
    const int64_t col = h->strides[lead];
    if (check_matrix_layout(func, "hidden", c->rows, c->depth, c->hidden_stride, col) < 0) return -1;
    const lab_array *w = c->weight;
    if (check_matrix_layout(func, "weight", c->classes, c->depth, w->strides[0], w->strides[1]) < 0) {
        return -1;
    }
    if (c->grad_hidden) {
        if (!flat_stride(c->grad_hidden, lead, &c->grad_hidden_stride)) {
            return fail_unflattenable(func, "grad_hidden");
        }
        if (check_matrix_layout(func, "grad_hidden", c->rows, c->depth, c->grad_hidden_stride,
                                c->grad_hidden->strides[lead]) < 0) {
            return -1;
        }
    }
    const lab_array *gw = c->grad_weight;
    if (gw &&
        check_matrix_layout(func, "grad_weight", c->classes, c->depth, gw->strides[0], gw->strides[1]) < 0) {
        return -1;
    }
    return 0;
}

int lab_plan_linear_ce(lab_op_call *call) {
    lab_linear_ce_call *c = call->description;
    const char *func = call->func;
    if (c->planned) return c->planned - 1;
    if (check_operands(c, func) < 0 || check_layouts(c, func) < 0) return -1;
    const lab_array *const operands[] = {c->hidden,      c->weight,      c->target,      c->loss,
                                         c->bias,        c->grad_hidden, c->grad_weight, c->grad_bias,
                                         c->grad_output, c->scratch};
    static const char *const operand_names[] = {"hidden",      "weight",      "target",      "loss",
                                                "bias",        "grad_hidden", "grad_weight", "grad_bias",
                                                "grad_output", "scratch"};
    static const int operand_written[] = {0, 0, 0, 1, 0, 1, 1, 1, 0, 1};
    enum { OPERANDS = sizeof operand_written / sizeof operand_written[0] };
    const lab_array *given[OPERANDS];
    const char *names[OPERANDS];
    int written[OPERANDS], count = 0;
    for (int i = 0; i < OPERANDS; i++) {
        if (!operands[i]) continue;
        given[count] = operands[i];
        names[count] = operand_names[i];
        written[count++] = operand_written[i];
    }
    if (lab_check_written_apart(given, names, written, NULL, count, func) < 0) return -1;
    const int64_t scratch_bytes =
        c->scratch ? c->scratch->numel * (int64_t)lab_dtype_itemsize[c->scratch->dtype] : 0;
    if (c->scratch && !lab_array_is_contiguous(c->scratch)) {
        lab_fail(LAB_FAILURE_VALUE, "%s(): argument 'scratch' must be contiguous", func);
        return -1;
    }
    const int64_t budget = c->max_scratch_bytes >= 0 ? c->max_scratch_bytes
                           : c->scratch              ? scratch_bytes
                                                     : LAB_LINEAR_CE_DEFAULT_SCRATCH;
    if (lab_plan_linear_ce_chunks(c->rows, c->classes, c->hidden->dtype, c->reduction != LAB_LOSS_NONE,
                                  c->grad_bias != NULL, budget, func,
                                  c->max_scratch_bytes < 0 && c->scratch ? "scratch" : "max_scratch_bytes",
                                  &c->chunks) < 0) {
        return -1;
    }
    if (c->scratch && scratch_bytes < c->chunks.bytes) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): argument 'scratch' holds %lld bytes; this call's chunks need %lld "
                 "(lab.linear_cross_entropy_plan says how many)",
                 func, (long long)scratch_bytes, (long long)c->chunks.bytes);
        return -1;
    }
    return 1; /* even with no rows: a reduced loss, zeroed gradients */
}
