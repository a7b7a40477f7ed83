/* attention_kind.c - the attention kind's plan and launch (see attention_kind.h). */
#include "dispatch/attention_kind.h"

#include <math.h>
#include <string.h>

#include "dispatch/dtype.h"
#include "dispatch/iterator.h"

enum { MAX_OPERANDS = 11, GRID_LIMIT = 65535 };
/* Positions (and a packed batch's tokens) stay below 2^28, so that the kernels' window arithmetic -
 * a position plus a length difference plus a window side - never leaves int; a window side that
 * long bounds nothing, and becomes "no bound". */
#define POSITION_LIMIT ((int64_t)1 << 28)

/* q, k, v: one float16/bfloat16 dtype, 4 dimensions (3 packed), one supported head_dim, k's heads
 * dividing q's, k's batch q's (fixed), v k's shape. */
static int check_inputs(const lab_attention_call *c, const char *func, int packed) {
    const int ndim = packed ? 3 : 4;
    const char *layout = packed ? "(tokens, heads, head_dim)" : "(batch, heads, positions, head_dim)";
    const lab_array *q = c->q, *k = c->k, *v = c->v;
    const char *names[2] = {"q", "k"};
    const lab_array *arrays[2] = {q, k};
    for (int i = 0; i < 2; i++) {
        if (arrays[i]->ndim != ndim) {
            lab_fail(LAB_FAILURE_VALUE, "%s(): argument '%s' has %d dimensions; it must have %d: %s%s", func,
                     names[i], arrays[i]->ndim, ndim, layout,
                     packed ? " (a packed batch, with cu_seqlens_q and cu_seqlens_k)" : "");
            return -1;
        }
    }
    if (q->dtype != LAB_FLOAT16 && q->dtype != LAB_BFLOAT16) {
        return lab_fail_dtype(func, "q", q->dtype, "attention takes float16 or bfloat16");
    }
    const int64_t head_dim = q->shape[ndim - 1];
    const int widest_ok = !c->backward;
    if (head_dim != 64 && head_dim != 96 && head_dim != 128 && !(head_dim == 256 && widest_ok)) {
        lab_fail(LAB_FAILURE_VALUE, "%s(): argument 'q' has head_dim %lld; %s takes 64, 96 or 128%s", func,
                 (long long)head_dim, func, widest_ok ? " (or 256)" : "");
        return -1;
    }
    if (k->dtype != q->dtype) return lab_fail_dtype(func, "k", k->dtype, "it must have the dtype of 'q'");
    const int64_t heads_q = q->shape[1], heads_k = k->shape[1]; /* both layouts keep heads second */
    if (k->shape[ndim - 1] != head_dim || (!packed && k->shape[0] != q->shape[0]) || heads_k < 1 ||
        heads_q % heads_k != 0) {
        int64_t want[4];
        memcpy(want, k->shape, sizeof want);
        want[ndim - 1] = head_dim;
        if (!packed) want[0] = q->shape[0];
        if (heads_k < 1 || heads_q % heads_k != 0) want[1] = heads_q;
        return lab_fail_shape(func, "k", k, want, ndim,
                              packed ? "q's head_dim, a number of heads dividing q's"
                                     : "q's batch and head_dim, a number of heads dividing q's");
    }
    if (!lab_has_shape(v, k->shape, ndim)) {
        return lab_fail_shape(func, "v", v, k->shape, ndim, "the shape of 'k'");
    }
    if (v->dtype != q->dtype) return lab_fail_dtype(func, "v", v->dtype, "it must have the dtype of 'q'");
    const int64_t positions_q = packed ? q->shape[0] : q->shape[2],
                  positions_k = packed ? k->shape[0] : k->shape[2];
    if ((!packed && q->shape[0] > GRID_LIMIT) || heads_q > GRID_LIMIT || positions_q >= POSITION_LIMIT ||
        positions_k >= POSITION_LIMIT) {
        lab_fail(LAB_FAILURE_VALUE,
                 "%s(): at most %d sequences and %d heads, each below %lld positions (tokens)", func,
                 GRID_LIMIT, GRID_LIMIT, (long long)POSITION_LIMIT);
        return -1;
    }
    return 0;
}

/* `a` has the shape and dtype of `like` (named like_name). */
static int check_like(const char *func, const char *name, const lab_array *a, const char *like_name,
                      const lab_array *like) {
    char what[64];
    snprintf(what, sizeof what, "the shape of '%s'", like_name);
    if (!lab_has_shape(a, like->shape, like->ndim)) {
        return lab_fail_shape(func, name, a, like->shape, like->ndim, what);
    }
    if (a->dtype != like->dtype) {
        snprintf(what, sizeof what, "it must have the dtype of '%s', %s", like_name,
                 lab_dtype_names[like->dtype]);
        return lab_fail_dtype(func, name, a->dtype, what);
    }
    return 0;
}

/* lse: float32, (batch, heads, positions) or packed (heads, tokens). */
static int check_lse(const lab_attention_call *c, const char *func, int packed) {
    const lab_array *q = c->q, *lse = c->lse;
    if (!lse) return 0;
    const int64_t fixed[3] = {q->ndim == 4 ? q->shape[0] : 0, q->shape[1], q->ndim == 4 ? q->shape[2] : 0};
    const int64_t packed_shape[2] = {q->shape[1], q->shape[0]};
    if (packed ? !lab_has_shape(lse, packed_shape, 2) : !lab_has_shape(lse, fixed, 3)) {
        return lab_fail_shape(func, "lse", lse, packed ? packed_shape : fixed, packed ? 2 : 3,
                              packed ? "(heads, tokens) of q" : "(batch, heads, positions) of q");
    }
    if (lse->dtype != LAB_FLOAT32) return lab_fail_dtype(func, "lse", lse->dtype, "lse is float32");
    return 0;
}

/* cu_seqlens_q and cu_seqlens_k: int32, 1-dimensional, one length; max_seqlen_* given, within the
 * tokens given. A fixed batch takes neither. Fills the launch's batch and lengths. */
static int check_packing(const lab_attention_call *c, const char *func, int packed, lab_attention_launch *l) {
    if (!packed) {
        if (c->max_seqlen_q >= 0 || c->max_seqlen_k >= 0) {
            lab_fail(LAB_FAILURE_TYPE,
                     "%s(): max_seqlen_q and max_seqlen_k go with a packed batch "
                     "(cu_seqlens_q and cu_seqlens_k); a fixed batch has its lengths in its shape",
                     func);
            return -1;
        }
        l->batch = c->q->shape[0];
        l->seqlen_q = c->q->shape[2];
        l->seqlen_k = c->k->shape[2];
        return 0;
    }
    const lab_array *cu[2] = {c->cu_seqlens_q, c->cu_seqlens_k};
    const char *names[2] = {"cu_seqlens_q", "cu_seqlens_k"};
    for (int i = 0; i < 2; i++) {
        if (cu[i]->dtype != LAB_INT32) {
            return lab_fail_dtype(func, names[i], cu[i]->dtype, "cumulative lengths are int32");
        }
        const int64_t want[1] = {cu[i]->ndim == 1 ? cu[i]->shape[0] : 1};
        if (cu[i]->ndim != 1 || cu[i]->shape[0] < 1 || (i == 1 && cu[1]->shape[0] != cu[0]->shape[0])) {
            const int64_t *expected = i == 1 ? cu[0]->shape : want;
            return lab_fail_shape(func, names[i], cu[i], expected, 1,
                                  "batch + 1 cumulative lengths, starting with 0; the two of one length");
        }
    }
    if (c->max_seqlen_q < 0 || c->max_seqlen_k < 0) {
        lab_fail(LAB_FAILURE_TYPE,
                 "%s(): a packed batch needs max_seqlen_q and max_seqlen_k (the longest sequences)", func);
        return -1;
    }
    const int64_t totals[2] = {c->q->shape[0], c->k->shape[0]},
                  longest[2] = {c->max_seqlen_q, c->max_seqlen_k};
    const char *longest_names[2] = {"max_seqlen_q", "max_seqlen_k"};
    for (int i = 0; i < 2; i++) {
        if (longest[i] > totals[i]) {
            lab_fail(LAB_FAILURE_VALUE,
                     "%s(): argument '%s' is %lld; a sequence cannot be longer than the %lld tokens of '%s'",
                     func, longest_names[i], (long long)longest[i], (long long)totals[i], i ? "k" : "q");
            return -1;
        }
    }
    if (cu[0]->shape[0] - 1 > GRID_LIMIT) {
        lab_fail(LAB_FAILURE_VALUE, "%s(): at most %d sequences", func, GRID_LIMIT);
        return -1;
    }
    l->batch = cu[0]->shape[0] - 1;
    l->seqlen_q = c->max_seqlen_q;
    l->seqlen_k = c->max_seqlen_k;
    l->cu_seqlens_q = (const int32_t *)cu[0]->data;
    l->cu_seqlens_k = (const int32_t *)cu[1]->data;
    l->cu_seqlens_q_stride = cu[0]->strides[0];
    l->cu_seqlens_k_stride = cu[1]->strides[0];
    l->total_q = totals[0];
    l->total_k = totals[1];
    return 0;
}

/* An operand's strides for the kernels: head_dim contiguous, the rest multiples of 8 elements, data
 * 16-byte aligned (a dimension of length 1 may have any stride: it is never stepped). */
static int tensor_of(const lab_array *a, const char *func, const char *name, int packed,
                     lab_attention_tensor *t) {
    const int nd = a->ndim;
    int64_t strides[4];
    for (int d = 0; d < nd; d++) strides[d] = a->shape[d] == 1 ? 0 : a->strides[d];
    int aligned = a->strides[nd - 1] == 1 && ((uintptr_t)a->data % 16) == 0;
    for (int d = 0; d < nd - 1; d++) aligned = aligned && strides[d] % 8 == 0;
    if (!aligned && a->numel > 0) {
        lab_fail(
            LAB_FAILURE_VALUE,
            "%s(): argument '%s' must have a contiguous head_dim (stride 1), every other stride a multiple "
            "of 8 elements and 16-byte aligned data - any view of a contiguous array that keeps head_dim "
            "whole does (transposed (batch, positions, heads, head_dim) too)",
            func, name);
        return -1;
    }
    t->data = a->data;
    t->batch_stride = packed ? 0 : strides[0];
    t->head_stride = strides[1];
    t->position_stride = packed ? strides[0] : strides[2];
    return 0;
}

static int check_written(const lab_attention_call *c, const char *func) {
    const lab_array *all[MAX_OPERANDS];
    const char *names[MAX_OPERANDS];
    int written[MAX_OPERANDS], count = 0;
#define OPERAND(array, text, is_written)                                                                     \
    if (array) all[count] = array, names[count] = text, written[count++] = is_written
    OPERAND(c->q, "q", 0);
    OPERAND(c->k, "k", 0);
    OPERAND(c->v, "v", 0);
    OPERAND(c->out, "out", !c->backward);
    OPERAND(c->lse, "lse", !c->backward);
    OPERAND(c->grad_out, "grad_out", 0);
    OPERAND(c->grad_q, "grad_q", 1);
    OPERAND(c->grad_k, "grad_k", 1);
    OPERAND(c->grad_v, "grad_v", 1);
    OPERAND(c->cu_seqlens_q, "cu_seqlens_q", 0);
    OPERAND(c->cu_seqlens_k, "cu_seqlens_k", 0);
#undef OPERAND
    return lab_check_written_apart(all, names, written, NULL, count, func);
}

static int plan(lab_op_call *call) {
    lab_attention_call *c = call->description;
    const char *func = call->func;
    lab_attention_launch *l = &c->launch;
    memset(l, 0, sizeof *l);
    const int packed = c->cu_seqlens_q != NULL;
    if (check_inputs(c, func, packed) < 0 || check_like(func, "out", c->out, "q", c->q) < 0 ||
        check_lse(c, func, packed) < 0 || check_packing(c, func, packed, l) < 0) {
        return -1;
    }
    if (c->backward && (check_like(func, "grad_out", c->grad_out, "q", c->q) < 0 ||
                        check_like(func, "grad_q", c->grad_q, "q", c->q) < 0 ||
                        check_like(func, "grad_k", c->grad_k, "k", c->k) < 0 ||
                        check_like(func, "grad_v", c->grad_v, "v", c->v) < 0)) {
        return -1;
    }
    if (check_written(c, func) < 0) return -1;
    const int nd = c->q->ndim;
    l->dtype = c->q->dtype;
    l->head_dim = (int)c->q->shape[nd - 1];
    l->heads_q = c->q->shape[1];
    l->heads_k = c->k->shape[1];
    const lab_array *arrays[8] = {c->q, c->k, c->v, c->out, c->grad_out, c->grad_q, c->grad_k, c->grad_v};
    const char *names[8] = {"q", "k", "v", "out", "grad_out", "grad_q", "grad_k", "grad_v"};
    lab_attention_tensor *tensors[8] = {&l->q,        &l->k,      &l->v,      &l->out,
                                        &l->grad_out, &l->grad_q, &l->grad_k, &l->grad_v};
    for (int i = 0; i < 8; i++) {
        if (arrays[i] && tensor_of(arrays[i], func, names[i], packed, tensors[i]) < 0) return -1;
    }
    if (c->lse) {
        l->lse = (float *)c->lse->data;
        l->lse_batch_stride = packed ? 0 : c->lse->strides[0];
        l->lse_head_stride = c->lse->strides[packed ? 0 : 1];
        l->lse_position_stride = c->lse->strides[packed ? 1 : 2];
    }
    l->scale = (float)(c->scale < 0 ? 1.0 / sqrt((double)l->head_dim) : c->scale);
    l->softcap = (float)c->softcap;
    l->window_left = c->window_left >= POSITION_LIMIT ? -1 : c->window_left;
    l->window_right = c->causal ? 0 : c->window_right >= POSITION_LIMIT ? -1 : c->window_right;
    if (l->batch == 0 || l->heads_q == 0) return 0;
    return c->backward ? l->seqlen_q > 0 || l->seqlen_k > 0 : l->seqlen_q > 0;
}

void lab_attention_add_operands(lab_op_call *call, lab_attention_call *c) {
    lab_array *written[3] = {c->backward ? c->grad_q : c->out, c->backward ? c->grad_k : c->lse,
                             c->backward ? c->grad_v : NULL};
    const char *written_names[3] = {c->backward ? "grad_q" : "out", c->backward ? "grad_k" : "lse",
                                    c->backward ? "grad_v" : NULL};
    for (int i = 0; i < 3; i++) {
        if (written[i]) lab_op_call_add(call, written_names[i], written[i], 1, 0, 1);
    }
    lab_array *read[8] = {c->q,
                          c->k,
                          c->v,
                          c->backward ? c->out : NULL,
                          c->backward ? c->lse : NULL,
                          c->grad_out,
                          c->cu_seqlens_q,
                          c->cu_seqlens_k};
    const char *read_names[8] = {"q", "k", "v", "out", "lse", "grad_out", "cu_seqlens_q", "cu_seqlens_k"};
    for (int i = 0; i < 8; i++) {
        if (read[i]) lab_op_call_add(call, read_names[i], read[i], 1, 0, 0);
    }
}

static void launch(lab_op_call *call, lab_launch_scope *scope) {
    const lab_attention_call *c = call->description;
    const cudaError_t err = c->backward ? lab_launch_attention_backward(&c->launch, scope->streams.launch)
                                        : lab_launch_attention_forward(&c->launch, scope->streams.launch);
    lab_launch_scope_step(scope, "kernel launch", err);
}

const lab_op_kind lab_attention_kind = {"attention", plan, launch};
