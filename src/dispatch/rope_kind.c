/* rope_kind.c - the rotary position embedding kind's plan and launch (see rope_kind.h). */
#include "dispatch/rope_kind.h"

#include <stdlib.h>

#include "dispatch/dtype.h"
#include "dispatch/iterator.h"

/* q: (batch, heads, positions, head_dim), float; k: the same but for its number of heads. */
static int check_inputs(const lab_rope_call *c, const char *func) {
    const lab_array *q = c->x[0];
    if (q->ndim != 4) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): argument '%s' has %d dimensions; it must have 4: (batch, heads, positions, head_dim)",
                 func, c->x_names[0], q->ndim);
        return -1;
    }
    if (lab_dtype_is_integer(q->dtype)) {
        char want[96];
        snprintf(want, sizeof want, "%s takes %s", func, lab_supported_dtypes_text(0));
        return lab_fail_dtype(func, c->x_names[0], q->dtype, want);
    }
    const lab_array *k = c->x[1];
    if (!k) return 0;
    const int64_t want[4] = {q->shape[0], k->ndim == 4 ? k->shape[1] : 1, q->shape[2], q->shape[3]};
    if (!lab_has_shape(k, want, 4)) {
        return lab_fail_shape(func, c->x_names[1], k, want, 4,
                              "q's batch, positions and head_dim, any number of heads");
    }
    if (k->dtype != q->dtype) {
        char text[64];
        snprintf(text, sizeof text, "it must have the dtype of '%s', %s", c->x_names[0],
                 lab_dtype_names[q->dtype]);
        return lab_fail_dtype(func, c->x_names[1], k->dtype, text);
    }
    return 0;
}

static int check_outputs_shapes(const lab_rope_call *c, const char *func) {
    for (int t = 0; t < 2; t++) {
        const lab_array *x = c->x[t], *out = c->out[t];
        if (!x) continue;
        if (!lab_has_shape(out, x->shape, x->ndim)) {
            char what[64];
            snprintf(what, sizeof what, "the shape of '%s'", c->x_names[t]);
            return lab_fail_shape(func, c->out_names[t], out, x->shape, x->ndim, what);
        }
        if (out->dtype != x->dtype) {
            char text[64];
            snprintf(text, sizeof text, "it must have the dtype of '%s', %s", c->x_names[t],
                     lab_dtype_names[x->dtype]);
            return lab_fail_dtype(func, c->out_names[t], out->dtype, text);
        }
    }
    return 0;
}

/* cos and sin: one shape, one dtype (q's or float32), (S, C), (B or 1, S, C) or (B or 1, 1, S, C).
 * Fills the rotary dimension and whether a column is per pair. */
static int check_tables(const lab_rope_call *c, const char *func, int64_t *rotary_dim, int *pair_table) {
    const lab_array *q = c->x[0], *cos = c->cos, *sin = c->sin;
    const int64_t batch = q->shape[0], positions = q->shape[2], head_dim = q->shape[3];
    if (cos->dtype != q->dtype && cos->dtype != LAB_FLOAT32) {
        char text[96];
        snprintf(text, sizeof text, "the tables have the dtype of '%s' (%s) or float32", c->x_names[0],
                 lab_dtype_names[q->dtype]);
        return lab_fail_dtype(func, "cos", cos->dtype, text);
    }
    const int nd = cos->ndim;
    const int64_t columns = nd >= 2 ? cos->shape[nd - 1] : 0;
    const int64_t table_batch = nd >= 3 ? cos->shape[0] : 1;
    const int heads_ok = nd != 4 || cos->shape[1] == 1;
    if (nd < 2 || nd > 4 || cos->shape[nd - 2] != positions || (table_batch != 1 && table_batch != batch) ||
        !heads_ok) {
        const int want_ndim = nd == 2 || nd == 4 ? nd : 3;
        const int64_t want[4] = {batch, 1, positions, columns};
        const int64_t *from = want_ndim == 4   ? want
                              : want_ndim == 3 ? (const int64_t[3]){batch, positions, columns}
                                               : want + 2;
        return lab_fail_shape(func, "cos", cos, from, want_ndim,
                              "(positions, C), (batch or 1, positions, C) or (batch or 1, 1, positions, C): "
                              "C the rotary dimension or half of it");
    }
    *rotary_dim = c->rotary_dim < 0 ? columns : c->rotary_dim;
    *pair_table = c->rotary_dim >= 0 && columns * 2 == c->rotary_dim && columns != c->rotary_dim;
    if (*rotary_dim % 2 != 0 || *rotary_dim < 2 || *rotary_dim > head_dim) {
        lab_fail(
            LAB_FAILURE_VALUE,
            "%s(): the rotary dimension is %lld; it must be even, at least 2 and at most head_dim (%lld)",
            func, (long long)*rotary_dim, (long long)head_dim);
        return -1;
    }
    if (columns != *rotary_dim && !*pair_table) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): 'cos' has %lld columns; for rotary_dim=%lld it must have %lld (one per element) or "
                 "%lld (one per pair)",
                 func, (long long)columns, (long long)*rotary_dim, (long long)*rotary_dim,
                 (long long)(*rotary_dim / 2));
        return -1;
    }
    if (!lab_has_shape(sin, cos->shape, cos->ndim)) {
        return lab_fail_shape(func, "sin", sin, cos->shape, cos->ndim, "the shape of 'cos'");
    }
    if (sin->dtype != cos->dtype) {
        char text[64];
        snprintf(text, sizeof text, "it must have the dtype of 'cos', %s", lab_dtype_names[cos->dtype]);
        return lab_fail_dtype(func, "sin", sin->dtype, text);
    }
    return 0;
}

/* The outputs: writable, apart from every operand but their own input (in place: a kernel thread
 * reads a pair before it writes it). q and k are each their own in-place group, so an output that is
 * the other tensor's input is refused: the two tensors are rotated by different threads at once. */
static int check_written(const lab_rope_call *c, const char *func) {
    const lab_array *all[6];
    const char *names[6];
    int written[6], in_place_group[6], count = 0;
    for (int t = 0; t < 2; t++) {
        if (!c->x[t]) continue;
        all[count] = c->x[t], names[count] = c->x_names[t], written[count] = 0,
        in_place_group[count++] = 1 + t;
        all[count] = c->out[t], names[count] = c->out_names[t], written[count] = 1,
        in_place_group[count++] = 1 + t;
    }
    all[count] = c->cos, names[count] = "cos", written[count] = 0, in_place_group[count++] = 0;
    all[count] = c->sin, names[count] = "sin", written[count] = 0, in_place_group[count++] = 0;
    return lab_check_written_apart(all, names, written, in_place_group, count, func);
}

/* One tensor's rows: (batch, heads, positions) with the byte strides of x, out, cos and sin, ordered
 * by x's strides (largest outermost), so consecutive threads walk x's memory in order. */
static void plan_tensor(const lab_array *x, const lab_array *out, const int64_t cos_strides[3],
                        const int64_t sin_strides[3], lab_dtype table_dtype, lab_rope_tensor *t) {
    const int64_t size = lab_dtype_itemsize[x->dtype], table_size = lab_dtype_itemsize[table_dtype];
    const int64_t cos_lead[3] = {cos_strides[0], 0, cos_strides[1]};
    const int64_t sin_lead[3] = {sin_strides[0], 0, sin_strides[1]};
    int order[3] = {0, 1, 2};
    for (int i = 1; i < 3; i++) { /* insertion sort: stable, so ties keep (batch, heads, positions) */
        for (int j = i; j > 0 && llabs(x->strides[order[j]]) > llabs(x->strides[order[j - 1]]); j--) {
            const int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    }
    t->x = x->data;
    t->out = out->data;
    t->rows = x->shape[0] * x->shape[1] * x->shape[2];
    for (int i = 0; i < 3; i++) {
        const int d = order[i];
        t->shape[i] = x->shape[d];
        t->strides[LAB_ROPE_X][i] = x->strides[d] * size;
        t->strides[LAB_ROPE_OUT][i] = out->strides[d] * size;
        t->strides[LAB_ROPE_COS][i] = cos_lead[d] * table_size;
        t->strides[LAB_ROPE_SIN][i] = sin_lead[d] * table_size;
    }
    t->col_strides[LAB_ROPE_X] = x->strides[3] * size;
    t->col_strides[LAB_ROPE_OUT] = out->strides[3] * size;
    t->col_strides[LAB_ROPE_COS] = cos_strides[2] * table_size;
    t->col_strides[LAB_ROPE_SIN] = sin_strides[2] * table_size;
    t->in_place = out->data == x->data; /* the same view: check_written refused any other overlap */
}

/* A table's (batch, position, column) strides in elements; batch 0 when it broadcasts. */
static void table_strides(const lab_array *table, int64_t strides[3]) {
    const int nd = table->ndim;
    strides[0] = nd >= 3 && table->shape[0] > 1 ? table->strides[0] : 0;
    strides[1] = table->strides[nd - 2];
    strides[2] = table->strides[nd - 1];
}

static int plan(lab_op_call *call) {
    lab_rope_call *c = call->description;
    const char *func = call->func;
    int64_t rotary_dim = 0;
    int pair_table = 0;
    if (check_inputs(c, func) < 0 || check_outputs_shapes(c, func) < 0 ||
        check_tables(c, func, &rotary_dim, &pair_table) < 0 || check_written(c, func) < 0) {
        return -1;
    }
    lab_rope_launch *l = &c->launch;
    const lab_array *q = c->x[0];
    l->dtype = q->dtype;
    l->table_dtype = c->cos->dtype;
    l->interleaved = c->interleaved;
    l->backward = c->backward;
    l->pair_table = pair_table;
    l->head_dim = q->shape[3];
    l->rotary_dim = rotary_dim;
    l->cos = c->cos->data;
    l->sin = c->sin->data;
    int64_t cos_strides[3], sin_strides[3];
    table_strides(c->cos, cos_strides);
    table_strides(c->sin, sin_strides);
    l->n_tensors = 0;
    int64_t rows = 0;
    for (int t = 0; t < 2; t++) {
        if (!c->x[t]) continue;
        lab_rope_tensor *tensor = &l->tensors[l->n_tensors++];
        plan_tensor(c->x[t], c->out[t], cos_strides, sin_strides, l->table_dtype, tensor);
        rows += tensor->rows;
    }
    return rows > 0 && l->head_dim > 0;
}

void lab_rope_add_operands(lab_op_call *call, lab_rope_call *c) {
    for (int t = 0; t < 2; t++) {
        if (c->out[t]) lab_op_call_add(call, c->out_names[t], c->out[t], 1, 0, 1);
    }
    for (int t = 0; t < 2; t++) {
        if (c->x[t]) lab_op_call_add(call, c->x_names[t], c->x[t], 1, 0, 0);
    }
    lab_op_call_add(call, "cos", c->cos, 1, 0, 0);
    lab_op_call_add(call, "sin", c->sin, 1, 0, 0);
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    const lab_rope_call *c = call->description;
    lab_launch_scope_step(scope, "kernel launch", lab_launch_rope(&c->launch, scope->streams.launch));
}

const lab_op_kind lab_rope_kind = {"rope", plan, launch};
