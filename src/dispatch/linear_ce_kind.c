/* linear_ce_kind.c - the fused linear cross-entropy's launch (see linear_ce_kind.h; the plan is in
 * linear_ce_plan.c). Per chunk it runs the matmul kind's launch three times and cross-entropy's row
 * kernel once, each on views it builds over the user's arrays and the scratch memory: one op driver
 * call, one launch scope, no second copy of the call sequence. */
#include "dispatch/linear_ce_kind.h"

#include <string.h>

#include "dispatch/dtype.h"
#include "dispatch/elementwise_kind.h"
#include "dispatch/matmul_kind.h"
#include "dispatch/reduction_kind.h"

static lab_array matrix_view(char *data, lab_dtype dtype, int device, int64_t rows, int64_t cols,
                             int64_t row_stride, int64_t col_stride) {
    lab_array a;
    memset(&a, 0, sizeof a);
    a.data = data;
    a.dtype = dtype;
    a.device = device;
    a.ndim = 2;
    a.shape[0] = rows;
    a.shape[1] = cols;
    a.strides[0] = row_stride;
    a.strides[1] = col_stride;
    a.numel = rows * cols;
    return a;
}

static lab_array vector_view(char *data, lab_dtype dtype, int device, int64_t length, int64_t stride) {
    lab_array a = matrix_view(data, dtype, device, 1, length, length, stride);
    a.ndim = 1;
    a.shape[0] = length;
    a.strides[0] = stride;
    return a;
}

/* out (+)= a @ b (+ bias) through the matmul kind's own plan and launch. The plan cannot refuse what
 * this kind's plan let through; if it does, the step fails rather than launching. */
static int product(lab_op_call *call, lab_launch_scope *scope, lab_array a, lab_array b, lab_array *out,
                   lab_array *bias, int add, const char *step) {
    lab_matmul_call product_call = {.a = &a,
                                    .b = &b,
                                    .out = out,
                                    .c = add ? out : NULL, /* c is out: out += a @ b */
                                    .bias = bias,
                                    .alpha = 1.0,
                                    .beta = add ? 1.0 : 0.0};
    const int work = lab_plan_matmul(&product_call, call->func);
    if (work < 0) {
        return lab_launch_scope_step(scope, step, cudaErrorInvalidValue);
    }
    product_call.planned = 1 + work;
    lab_op_call sub = {.func = call->func, .description = &product_call};
    if (work) lab_matmul_kind.launch(&sub, scope);
    return lab_launch_scope_ok(scope);
}

/* out = x (+ y): lab's elementwise copy or add, for the bias gradient's float32 sums. */
static int elementwise(lab_op_call *call, lab_launch_scope *scope, lab_op op, const lab_array *out,
                       const lab_array *x, const lab_array *y, const char *step) {
    lab_operands ops;
    memset(&ops, 0, sizeof ops);
    ops.count = y ? 3 : 2;
    ops.n_outputs = 1;
    ops.arrays[0] = *out;
    ops.arrays[1] = *x;
    if (y) ops.arrays[2] = *y;
    ops.names[0] = "grad_bias";
    ops.names[1] = ops.names[2] = "bias sums";
    lab_elementwise_launch launch;
    if (lab_plan_elementwise(&ops, 0, call->func, &launch) < 0) {
        return lab_launch_scope_step(scope, step, cudaErrorInvalidValue);
    }
    launch.op = op;
    launch.scalars.as_float[0] = 1.0; /* add's alpha */
    return lab_launch_scope_step(scope, step, lab_launch_elementwise(&launch, scope->streams.launch));
}

/* sums = logits summed over their rows (float32), by the reduction kind. */
static int column_sums(lab_op_call *call, lab_launch_scope *scope, lab_array *logits, lab_array *sums) {
    lab_reduction_call r;
    memset(&r, 0, sizeof r);
    r.op = LAB_REDUCE_SUM;
    r.in = logits;
    r.out = sums;
    r.in_names[0] = "logits";
    r.reduced = 1u;
    lab_op_call sub = {.func = call->func, .description = &r};
    const int work = lab_reduction_kind.plan(&sub);
    if (work < 0) {
        return lab_launch_scope_step(scope, "planning the bias gradient's sums", cudaErrorInvalidValue);
    }
    if (work) lab_reduction_kind.launch(&sub, scope);
    return lab_launch_scope_ok(scope);
}

static char *row_pointer(const lab_array *a, int64_t row, int64_t stride) {
    return a->data + row * stride * (int64_t)lab_dtype_itemsize[a->dtype];
}

/* Cross-entropy over rows [first, first + count): the logits at `logits` (contiguous, NULL for the
 * count and the sum, which read no logits), the gradient in place when `with_grad`. */
static lab_rowwise_launch cross_entropy_rows(const lab_linear_ce_call *c, char *logits, int64_t first,
                                             int64_t count, int with_grad) {
    lab_rowwise_launch l;
    memset(&l, 0, sizeof l);
    const lab_dtype dtype = c->hidden->dtype;
    const int64_t itemsize = lab_dtype_itemsize[dtype];
    l.op = LAB_ROW_CROSS_ENTROPY;
    l.dtype = dtype;
    l.stats_dtype = LAB_FLOAT32;
    l.target_dtype = c->target->dtype;
    l.loss_dtype = c->loss->dtype;
    l.upstream_dtype = c->grad_output ? c->grad_output->dtype : LAB_FLOAT32;
    l.rows = count;
    l.n = c->classes;
    l.reduction = c->reduction;
    l.ignore_index = c->ignore_index;
    l.label_smoothing = c->label_smoothing;
    l.softcap = c->softcap;
    l.z_loss = c->z_loss;
    l.row_data[LAB_ROW_X] = logits;
    l.col_strides[LAB_ROW_X] = itemsize;
    l.lead_strides[LAB_ROW_X][0] = c->chunks.logits_ld * itemsize;
    if (with_grad) {
        l.row_data[LAB_ROW_OUT] = logits;
        l.col_strides[LAB_ROW_OUT] = itemsize;
        l.lead_strides[LAB_ROW_OUT][0] = c->chunks.logits_ld * itemsize;
    }
    const struct {
        int slot;
        const lab_array *array;
        int64_t stride;
    } per_row[] = {{LAB_ROW_TARGET, c->target, c->target_stride},
                   {LAB_ROW_LOSS, c->loss, c->loss_stride},
                   {LAB_ROW_GRAD, c->grad_output, c->upstream_stride}};
    for (int i = 0; i < 3; i++) {
        if (!per_row[i].array) continue;
        l.row_data[per_row[i].slot] = row_pointer(per_row[i].array, first, per_row[i].stride);
        l.lead_strides[per_row[i].slot][0] = per_row[i].stride * lab_dtype_itemsize[per_row[i].array->dtype];
    }
    l.lead_ndim = count > 0 ? 1 : 0;
    l.lead_shape[0] = count;
    return l;
}

/* Rows [first, first + count) of a matrix view, or its columns. */
static lab_array rows_of(const lab_array *m, int64_t first, int64_t count) {
    lab_array part = *m;
    part.data += first * m->strides[0] * (int64_t)lab_dtype_itemsize[m->dtype];
    part.shape[0] = count;
    part.numel = count * (m->ndim > 1 ? m->shape[1] : 1);
    return part;
}
static lab_array columns_of(const lab_array *m, int64_t first, int64_t count) {
    lab_array part = *m;
    part.data += first * m->strides[1] * (int64_t)lab_dtype_itemsize[m->dtype];
    part.shape[1] = count;
    part.numel = m->shape[0] * count;
    return part;
}

/* The classes in at most two parts: the first a multiple of 64 classes, the rest fewer than 64.
 * cuBLASLt ran the products with a dimension of 50257 (GPT-2's vocabulary) at 109-150 TFLOP/s against
 * 690-730 for 50304 (H200, bf16, 8192 x 4096 tokens: torch.mm and lab.matmul alike), so every large
 * product keeps its dimensions multiples of 64 and the odd rest is a small product of its own. */
typedef struct {
    int64_t first[2], count[2];
    int parts;
} class_parts;

static class_parts split_classes(int64_t classes) {
    const int64_t aligned = classes / 64 * 64;
    class_parts p = {{0, aligned}, {aligned, classes - aligned}, 2};
    if (aligned == 0 || aligned == classes) {
        p.count[0] = classes;
        p.parts = 1;
    }
    return p;
}

/* Where a chunk's products read and write. */
typedef struct {
    lab_array hidden, weight, weight_t, logits, logits_t, grad_hidden, grad_weight, bias;
    int has_bias;
} chunk_views;

/* logits = hidden @ weight^T (+ bias), one product per part of the classes (its own columns). */
static int logits_products(lab_op_call *call, lab_launch_scope *scope, chunk_views *v, const class_parts *p) {
    for (int i = 0; i < p->parts; i++) {
        lab_array out = columns_of(&v->logits, p->first[i], p->count[i]);
        lab_array bias = v->bias;
        if (v->has_bias) {
            bias.data += p->first[i] * bias.strides[0] * (int64_t)lab_dtype_itemsize[bias.dtype];
            bias.shape[0] = bias.numel = p->count[i];
        }
        if (!product(call, scope, v->hidden, columns_of(&v->weight_t, p->first[i], p->count[i]), &out,
                     v->has_bias ? &bias : NULL, 0, "the chunk's logits")) {
            return 0;
        }
    }
    return 1;
}

/* grad_hidden (+)= dlogits @ weight: the parts split the product's depth, the second adds. */
static int grad_hidden_products(lab_op_call *call, lab_launch_scope *scope, chunk_views *v,
                                const class_parts *p, int accumulate) {
    for (int i = 0; i < p->parts; i++) {
        if (!product(call, scope, columns_of(&v->logits, p->first[i], p->count[i]),
                     rows_of(&v->weight, p->first[i], p->count[i]), &v->grad_hidden, NULL,
                     accumulate || i > 0, "the chunk's grad_hidden")) {
            return 0;
        }
    }
    return 1;
}

/* grad_weight (+)= dlogits^T @ hidden, one product per part of the classes (its own rows). */
static int grad_weight_products(lab_op_call *call, lab_launch_scope *scope, chunk_views *v,
                                const class_parts *p, int accumulate) {
    for (int i = 0; i < p->parts; i++) {
        lab_array out = rows_of(&v->grad_weight, p->first[i], p->count[i]);
        if (!product(call, scope, rows_of(&v->logits_t, p->first[i], p->count[i]), v->hidden, &out, NULL,
                     accumulate, "the chunk's grad_weight")) {
            return 0;
        }
    }
    return 1;
}

static void run_chunks(lab_op_call *call, lab_launch_scope *scope, char *scratch) {
    const lab_linear_ce_call *c = call->description;
    const lab_linear_ce_chunks *k = &c->chunks;
    const cudaStream_t stream = scope->streams.launch;
    const lab_dtype dtype = c->hidden->dtype;
    const int device = scope->target, lead = c->hidden->ndim - 1;
    const int64_t V = c->classes, D = c->depth, accumulator = dtype == LAB_FLOAT64 ? 8 : 4;
    char *logits = scratch + k->logits_offset, *totals = scratch + k->totals_offset,
         *losses = scratch + k->losses_offset;
    lab_array bias_sums = vector_view(scratch + k->bias_offset, LAB_FLOAT32, device, V, 1);
    lab_array bias_chunk =
        vector_view(scratch + k->bias_offset + lab_align256(V * 4), LAB_FLOAT32, device, V, 1);
    const int with_grad = c->grad_hidden || c->grad_weight || c->grad_bias;
    const class_parts parts = split_classes(V);
    const lab_rowwise_launch every_row = cross_entropy_rows(c, NULL, 0, c->rows, 0);
    if (c->reduction == LAB_LOSS_MEAN &&
        !lab_launch_scope_step(
            scope, "counting the rows whose target counts",
            lab_launch_cross_entropy_part(&every_row, LAB_CE_COUNT, totals, losses, stream))) {
        return;
    }
    const lab_array *w = c->weight;
    chunk_views v;
    memset(&v, 0, sizeof v);
    v.weight_t = matrix_view(w->data, dtype, device, D, V, w->strides[1], w->strides[0]);
    v.weight = matrix_view(w->data, dtype, device, V, D, w->strides[0], w->strides[1]);
    v.has_bias = c->bias != NULL;
    if (c->bias) v.bias = *c->bias;
    if (c->grad_weight) v.grad_weight = *c->grad_weight;
    for (int64_t chunk = 0; chunk < k->chunks; chunk++) {
        const int64_t first = chunk * k->chunk_rows;
        const int64_t count = first + k->chunk_rows <= c->rows ? k->chunk_rows : c->rows - first;
        v.hidden = matrix_view(row_pointer(c->hidden, first, c->hidden_stride), dtype, device, count, D,
                               c->hidden_stride, c->hidden->strides[lead]);
        v.logits = matrix_view(logits, dtype, device, count, V, k->logits_ld, 1);
        v.logits_t = matrix_view(logits, dtype, device, V, count, 1, k->logits_ld);
        if (!logits_products(call, scope, &v, &parts)) return;
        const lab_rowwise_launch rows = cross_entropy_rows(c, logits, first, count, with_grad);
        if (!lab_launch_scope_step(scope, "the chunk's cross-entropy rows",
                                   lab_launch_cross_entropy_part(&rows, LAB_CE_ROWS, totals,
                                                                 losses + first * accumulator, stream))) {
            return;
        }
        if (c->grad_hidden) {
            v.grad_hidden =
                matrix_view(row_pointer(c->grad_hidden, first, c->grad_hidden_stride), c->grad_hidden->dtype,
                            device, count, D, c->grad_hidden_stride, c->grad_hidden->strides[lead]);
            if (!grad_hidden_products(call, scope, &v, &parts, c->accumulate)) return;
        }
        if (c->grad_weight && !grad_weight_products(call, scope, &v, &parts, chunk > 0 || c->accumulate)) {
            return;
        }
        if (c->grad_bias) {
            lab_array *sums = chunk == 0 ? &bias_sums : &bias_chunk;
            if (!column_sums(call, scope, &v.logits, sums)) return;
            if (chunk > 0 && !elementwise(call, scope, LAB_OP_ADD, &bias_sums, &bias_sums, &bias_chunk,
                                          "adding the chunk's bias gradient")) {
                return;
            }
        }
    }
    if (c->grad_bias) {
        const lab_array *g = c->grad_bias;
        if (!(c->accumulate
                  ? elementwise(call, scope, LAB_OP_ADD, g, g, &bias_sums, "accumulating grad_bias")
                  : elementwise(call, scope, LAB_OP_COPY, g, &bias_sums, NULL, "writing grad_bias"))) {
            return;
        }
    }
    if (c->reduction != LAB_LOSS_NONE) {
        lab_launch_scope_step(scope, "reducing the rows' losses",
                              lab_launch_cross_entropy_part(&every_row, LAB_CE_SUM, totals, losses, stream));
    }
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    const lab_linear_ce_call *c = call->description;
    const cudaStream_t stream = scope->streams.launch;
    char *scratch = c->scratch ? c->scratch->data : NULL;
    if (!scratch &&
        !lab_launch_scope_step(
            scope, "taking scratch memory",
            lab_scratch_alloc((void **)&scratch, (size_t)(c->chunks.bytes ? c->chunks.bytes : 1), stream))) {
        return;
    }
    run_chunks(call, scope, scratch);
    if (!c->scratch) {
        lab_launch_scope_step(scope, "returning scratch memory to the pool", cudaFreeAsync(scratch, stream));
    }
}

const lab_op_kind lab_linear_ce_kind = {"linear cross-entropy", lab_plan_linear_ce, launch};
