/* xla_ffi_ops.c - lab's built-in ops as XLA FFI targets: the norms, softmax, cross-entropy, the GLUs,
 * the rotary embedding and attention, each a function that reads its call's buffers and attributes into the
 * same description the Python binding fills and runs the op driver on XLA's stream (xla_ffi.c reads the frame
 * and answers XLA; lab.jax registers what _xla_ffi_targets() hands out). */
#include <string.h>

#include "binding/xla_ffi.h"
#include "dispatch/attention_kind.h"
#include "dispatch/elementwise_kind.h"
#include "dispatch/reduction_kind.h"
#include "dispatch/rope_kind.h"
#include "dispatch/rowwise_kind.h"

/* One buffer of a row-wise target: an argument or a result, taken in order within its list, into the
 * description's rows or columns under `name`. An optional one is read only where XLA gave that many
 * buffers (the optional ones come last in their list). */
typedef struct {
    unsigned char result, column, optional, slot;
    const char *name;
} ffi_operand;

#define IN(slot, name) {0, 0, 0, LAB_ROW_##slot, name}
#define IN_COLUMN(slot, name) {0, 1, 1, LAB_COL_##slot, name} /* a weight or a bias: optional */
#define OUT(slot, name) {1, 0, 0, LAB_ROW_##slot, name}
#define OUT_OPTIONAL(slot, name) {1, 0, 1, LAB_ROW_##slot, name}
#define OUT_COLUMN(slot, name) {1, 1, 1, LAB_COL_##slot, name}
#define COUNT(list) ((int)(sizeof list / sizeof list[0]))

/* Reads the listed buffers into a row-wise description and runs it through the op driver, over the
 * last dimension. */
static int run_rowwise(lab_ffi_call *f, lab_rowwise_call *d, const ffi_operand *operands, int count) {
    int64_t next[2] = {0, 0};
    for (int k = 0; k < count; k++) {
        const ffi_operand *o = &operands[k];
        const int64_t index = next[o->result]++;
        if (o->optional && index >= lab_ffi_count(f, o->result)) continue;
        lab_array *a = lab_ffi_buffer(f, o->result, index, o->name);
        if (!a) return -1;
        if (o->column) {
            d->cols[o->slot] = a, d->col_names[o->slot] = o->name;
        } else {
            d->rows[o->slot] = a, d->row_names[o->slot] = o->name;
        }
    }
    d->axis = d->rows[LAB_ROW_X]->ndim - 1;
    lab_op_call call = lab_ffi_op_call(f, d);
    lab_rowwise_add_operands(&call, d);
    return lab_run_op(&lab_ffi_state(f)->dispatch, &lab_rowwise_kind, &call);
}

/* ---- the ops ---- */

/* lab_rms_norm: (x[, weight]) -> (out, rstd); attribute eps (< 0: the dtype's machine epsilon). */
static int rms_norm(lab_ffi_call *f) {
    static const ffi_operand operands[] = {IN(X, "x"), IN_COLUMN(WEIGHT, "weight"), OUT(OUT, "out"),
                                           OUT(RSTD, "rstd")};
    lab_rowwise_call d = {.op = LAB_ROW_RMS_NORM};
    if (lab_ffi_attr(f, "eps", -1.0, &d.eps) < 0) return -1;
    return run_rowwise(f, &d, operands, COUNT(operands));
}

/* lab_rms_norm_backward: (grad_out, x, rstd[, weight]) -> (grad_x[, grad_weight]). */
static int rms_norm_backward(lab_ffi_call *f) {
    static const ffi_operand operands[] = {IN(GRAD, "grad_out"), IN(X, "x"),
                                           IN(RSTD, "rstd"),     IN_COLUMN(WEIGHT, "weight"),
                                           OUT(OUT, "grad_x"),   OUT_COLUMN(GRAD_WEIGHT, "grad_weight")};
    lab_rowwise_call d = {.op = LAB_ROW_RMS_NORM_BACKWARD};
    return run_rowwise(f, &d, operands, COUNT(operands));
}

/* lab_layer_norm: (x[, weight[, bias]]) -> (out, mean, rstd); attribute eps. */
static int layer_norm(lab_ffi_call *f) {
    static const ffi_operand operands[] = {
        IN(X, "x"),      IN_COLUMN(WEIGHT, "weight"), IN_COLUMN(BIAS, "bias"),
        OUT(OUT, "out"), OUT(MEAN, "mean"),           OUT(RSTD, "rstd")};
    lab_rowwise_call d = {.op = LAB_ROW_LAYER_NORM};
    if (lab_ffi_attr(f, "eps", 1e-5, &d.eps) < 0) return -1;
    return run_rowwise(f, &d, operands, COUNT(operands));
}

/* lab_layer_norm_backward: (grad_out, x, mean, rstd[, weight]) -> (grad_x[, grad_weight, grad_bias]). */
static int layer_norm_backward(lab_ffi_call *f) {
    static const ffi_operand operands[] = {IN(GRAD, "grad_out"),
                                           IN(X, "x"),
                                           IN(MEAN, "mean"),
                                           IN(RSTD, "rstd"),
                                           IN_COLUMN(WEIGHT, "weight"),
                                           OUT(OUT, "grad_x"),
                                           OUT_COLUMN(GRAD_WEIGHT, "grad_weight"),
                                           OUT_COLUMN(GRAD_BIAS, "grad_bias")};
    lab_rowwise_call d = {.op = LAB_ROW_LAYER_NORM_BACKWARD};
    return run_rowwise(f, &d, operands, COUNT(operands));
}

/* lab_softmax: (x) -> (out); attribute log (1: log_softmax). Over the last dimension. */
static int softmax(lab_ffi_call *f) {
    static const ffi_operand operands[] = {IN(X, "x"), OUT(OUT, "out")};
    double log;
    if (lab_ffi_attr(f, "log", 0.0, &log) < 0) return -1;
    lab_rowwise_call d = {.op = log != 0.0 ? LAB_ROW_LOG_SOFTMAX : LAB_ROW_SOFTMAX};
    return run_rowwise(f, &d, operands, COUNT(operands));
}

/* lab_softmax_backward: (grad_out, y) -> (grad_x); attribute log. */
static int softmax_backward(lab_ffi_call *f) {
    static const ffi_operand operands[] = {IN(GRAD, "grad_out"), IN(X, "y"), OUT(OUT, "grad_x")};
    double log;
    if (lab_ffi_attr(f, "log", 0.0, &log) < 0) return -1;
    lab_rowwise_call d = {.op = log != 0.0 ? LAB_ROW_LOG_SOFTMAX_BACKWARD : LAB_ROW_SOFTMAX_BACKWARD};
    return run_rowwise(f, &d, operands, COUNT(operands));
}

/* lab_cross_entropy: (logits, target) -> (loss[, grad]); attributes ignore_index, label_smoothing,
 * reduction (0 none, 1 mean, 2 sum). With grad: d loss / d logits in the same pass. */
static int cross_entropy(lab_ffi_call *f) {
    static const ffi_operand operands[] = {IN(X, "logits"), IN(TARGET, "target"), OUT(LOSS, "loss"),
                                           OUT_OPTIONAL(OUT, "grad")};
    double ignore_index, smoothing, reduction;
    if (lab_ffi_attr(f, "ignore_index", -100.0, &ignore_index) < 0 ||
        lab_ffi_attr(f, "label_smoothing", 0.0, &smoothing) < 0 ||
        lab_ffi_attr(f, "reduction", 1.0, &reduction) < 0) {
        return -1;
    }
    lab_rowwise_call d = {.op = LAB_ROW_CROSS_ENTROPY,
                          .ignore_index = (int64_t)ignore_index,
                          .label_smoothing = smoothing,
                          .reduction = reduction == 0.0   ? LAB_LOSS_NONE
                                       : reduction == 2.0 ? LAB_LOSS_SUM
                                                          : LAB_LOSS_MEAN};
    return run_rowwise(f, &d, operands, COUNT(operands));
}

/* The elementwise ops lab.jax offers inside jit: rows of kernels/ops.def, with the names their inputs
 * have in messages and the number attributes they take (alpha and beta of the kernel's parameters, as
 * the Python functions name them). lab_elementwise's attribute op is a row's number here; lab.jax
 * reads the rows from _xla_ffi_ops() (what a row means lives in this one table), new rows at the end. */
#define UNARY {"x"}
#define BINARY {"a", "b"}
#define NO_NUMBERS {NULL, NULL}
static const struct {
    const char *name;
    lab_op op;
    const char *inputs[3];
    const char *scalars[2];
} ELEMENTWISE_OPS[] = {
    {"add", LAB_OP_ADD, BINARY, {"alpha", NULL}},
    {"sub", LAB_OP_SUB, BINARY, NO_NUMBERS},
    {"mul", LAB_OP_MUL, BINARY, NO_NUMBERS},
    {"div", LAB_OP_DIV, BINARY, NO_NUMBERS},
    {"maximum", LAB_OP_MAXIMUM, BINARY, NO_NUMBERS},
    {"minimum", LAB_OP_MINIMUM, BINARY, NO_NUMBERS},
    {"add_relu", LAB_OP_ADD_RELU, BINARY, NO_NUMBERS},
    {"fused_add_mul", LAB_OP_FUSED_ADD_MUL, {"a", "b", "s"}, NO_NUMBERS},
    {"neg", LAB_OP_NEG, UNARY, NO_NUMBERS},
    {"abs", LAB_OP_ABS, UNARY, NO_NUMBERS},
    {"sqrt", LAB_OP_SQRT, UNARY, NO_NUMBERS},
    {"exp", LAB_OP_EXP, UNARY, NO_NUMBERS},
    {"relu", LAB_OP_RELU, UNARY, NO_NUMBERS},
    {"sigmoid", LAB_OP_SIGMOID, UNARY, NO_NUMBERS},
    {"silu", LAB_OP_SILU, UNARY, NO_NUMBERS},
    {"gelu", LAB_OP_GELU, UNARY, NO_NUMBERS},
    {"gelu_tanh", LAB_OP_GELU_TANH, UNARY, NO_NUMBERS},
    {"swiglu", LAB_OP_SWIGLU, {"gate", "up"}, NO_NUMBERS},
    {"geglu", LAB_OP_GEGLU, {"gate", "up"}, NO_NUMBERS},
    {"axpby", LAB_OP_AXPBY, {"x", "y"}, {"alpha", "beta"}},
    {"fused_add_mul_scalar", LAB_OP_FUSED_ADD_MUL_SCALAR, BINARY, {"s", NULL}},
};
#undef UNARY
#undef BINARY
#undef NO_NUMBERS

/* The reductions lab.jax offers inside jit (lab_reduce's attribute op), rows of kernels/reduce_ops.def. */
static const struct {
    const char *name;
    lab_reduce_op op;
} REDUCTIONS[] = {
    {"sum", LAB_REDUCE_SUM},       {"mean", LAB_REDUCE_MEAN},
    {"prod", LAB_REDUCE_PROD},     {"amax", LAB_REDUCE_AMAX},
    {"amin", LAB_REDUCE_AMIN},     {"argmax", LAB_REDUCE_ARGMAX},
    {"argmin", LAB_REDUCE_ARGMIN}, {"var", LAB_REDUCE_VAR},
    {"std", LAB_REDUCE_STD},       {"logsumexp", LAB_REDUCE_LOGSUMEXP},
    {"dot", LAB_REDUCE_DOT},       {"norm1", LAB_REDUCE_NORM1},
    {"norm2", LAB_REDUCE_NORM2},   {"norm_inf", LAB_REDUCE_NORMINF},
};

/* The row the attribute op names in a table of `rows`; -1 with ValueError where it names none. */
static int table_row(lab_ffi_call *f, int rows) {
    double number;
    if (lab_ffi_attr(f, "op", -1.0, &number) < 0) return -1;
    if (!(number >= 0.0 && number < rows)) {
        lab_fail(LAB_FAILURE_VALUE, "%s: attribute 'op' (%lld) names none of its %d ops", lab_ffi_name(f),
                 (long long)(number > -1e18 && number < 1e18 ? number : -1), rows);
        return -1;
    }
    return (int)number;
}

/* Refuses a call whose argument and result counts are not the op's; 0 or -1 with ValueError. */
static int check_counts(lab_ffi_call *f, const char *op, int64_t arguments, int64_t results) {
    if (lab_ffi_count(f, 0) == arguments && lab_ffi_count(f, 1) == results) return 0;
    lab_fail(LAB_FAILURE_VALUE, "%s: %s takes %lld arguments and %lld results, XLA gave %lld and %lld",
             lab_ffi_name(f), op, (long long)arguments, (long long)results, (long long)lab_ffi_count(f, 0),
             (long long)lab_ffi_count(f, 1));
    return -1;
}

/* lab_elementwise: (inputs...) -> (out); attribute op (a row of ELEMENTWISE_OPS) and the row's number
 * attributes, each optional (alpha and beta default to 1). The inputs broadcast against out by NumPy's
 * rules and may have other dtypes than out's, as in a call from Python. */
static int elementwise(lab_ffi_call *f) {
    const int row = table_row(f, (int)(sizeof ELEMENTWISE_OPS / sizeof ELEMENTWISE_OPS[0]));
    if (row < 0) return -1;
    const lab_op op = ELEMENTWISE_OPS[row].op;
    const int inputs = lab_op_inputs[op];
    if (check_counts(f, ELEMENTWISE_OPS[row].name, inputs, 1) < 0) return -1;
    lab_elementwise_call d;
    memset(&d, 0, sizeof d);
    d.op = op;
    for (int k = 0; k < 2; k++) {
        const char *scalar = ELEMENTWISE_OPS[row].scalars[k];
        if (scalar && lab_ffi_scalar(f, scalar, &d.scalars[k]) < 0) return -1;
    }
    lab_operands *ops = &d.operands;
    ops->count = inputs + 1, ops->n_outputs = 1;
    for (int i = 0; i < ops->count; i++) {
        ops->names[i] = i == 0 ? "out" : ELEMENTWISE_OPS[row].inputs[i - 1];
        const lab_array *a = lab_ffi_buffer(f, i == 0, i == 0 ? 0 : i - 1, ops->names[i]);
        if (!a) return -1;
        ops->arrays[i] = *a;
    }
    lab_op_call call = lab_ffi_op_call(f, &d);
    for (int i = 0; i < ops->count; i++) lab_op_call_add(&call, ops->names[i], &ops->arrays[i], 1, 0, i == 0);
    return lab_run_op(&lab_ffi_state(f)->dispatch, &lab_elementwise_kind, &call);
}

/* lab_reduce: (x) -> (out), or dot's (a, b) -> (out); attributes op (a row of REDUCTIONS), reduced (bit
 * k: x's k-th axis from the last is reduced - counted from the end, so that a leading axis vmap adds is
 * kept) and correction (var, std). out has x's shape without the reduced axes. */
static int reduce(lab_ffi_call *f) {
    const int row = table_row(f, (int)(sizeof REDUCTIONS / sizeof REDUCTIONS[0]));
    if (row < 0) return -1;
    double reduced, correction;
    if (lab_ffi_attr(f, "reduced", 0.0, &reduced) < 0 ||
        lab_ffi_attr(f, "correction", 0.0, &correction) < 0) {
        return -1;
    }
    lab_reduction_call d = {.op = REDUCTIONS[row].op, .correction = correction};
    const int dot = d.op == LAB_REDUCE_DOT;
    d.in_names[0] = dot ? "a" : "x", d.in_names[1] = dot ? "b" : NULL;
    if (check_counts(f, REDUCTIONS[row].name, dot ? 2 : 1, 1) < 0) return -1;
    if (!(d.in = lab_ffi_buffer(f, 0, 0, d.in_names[0])) ||
        (dot && !(d.in2 = lab_ffi_buffer(f, 0, 1, "b"))) || !(d.out = lab_ffi_buffer(f, 1, 0, "out"))) {
        return -1;
    }
    const int ndim = d.in->ndim;
    const uint64_t trailing = (uint64_t)reduced;
    if (!(reduced >= 0.0 && (double)trailing == reduced && (ndim >= 64 || trailing >> ndim == 0))) {
        lab_fail(LAB_FAILURE_VALUE, "%s: attribute 'reduced' (%lld) must mark axes of '%s', which has %d",
                 lab_ffi_name(f), (long long)(reduced > -1e18 && reduced < 1e18 ? reduced : -1),
                 d.in_names[0], ndim);
        return -1;
    }
    for (int k = 0; k < ndim; k++) {
        if (trailing >> k & 1) d.reduced |= 1u << (ndim - 1 - k);
    }
    lab_op_call call = lab_ffi_op_call(f, &d);
    lab_op_call_add(&call, "out", d.out, 1, 0, 1);
    lab_op_call_add(&call, d.in_names[0], d.in, 1, 0, 0);
    if (dot) lab_op_call_add(&call, "b", d.in2, 1, 0, 0);
    return lab_run_op(&lab_ffi_state(f)->dispatch, &lab_reduction_kind, &call);
}

/* lab_glu_backward: (grad_out, gate, up) -> (grad_gate, grad_up); attribute act. */
static int glu_backward(lab_ffi_call *f) {
    static const ffi_operand operands[] = {IN(GRAD, "grad_out"), IN(X, "gate"), IN(UP, "up"),
                                           OUT(OUT, "grad_gate"), OUT(GRAD_UP, "grad_up")};
    double act;
    if (lab_ffi_attr(f, "act", 0.0, &act) < 0) return -1;
    lab_rowwise_call d = {.op = act != 0.0 ? LAB_ROW_GEGLU_BACKWARD : LAB_ROW_SWIGLU_BACKWARD};
    return run_rowwise(f, &d, operands, COUNT(operands));
}

/* lab_rope: (q, k, cos, sin) -> (q_out, k_out); attributes interleaved, backward, rotary_dim (-1: the
 * tables' width). */
static int rope(lab_ffi_call *f) {
    double interleaved, backward, rotary_dim;
    if (lab_ffi_attr(f, "interleaved", 0.0, &interleaved) < 0 ||
        lab_ffi_attr(f, "backward", 0.0, &backward) < 0 ||
        lab_ffi_attr(f, "rotary_dim", -1.0, &rotary_dim) < 0) {
        return -1;
    }
    lab_rope_call d;
    memset(&d, 0, sizeof d);
    d.interleaved = interleaved != 0.0, d.backward = backward != 0.0, d.rotary_dim = (int64_t)rotary_dim;
    if (!(d.x[0] = lab_ffi_buffer(f, 0, 0, "q")) || !(d.x[1] = lab_ffi_buffer(f, 0, 1, "k")) ||
        !(d.cos = lab_ffi_buffer(f, 0, 2, "cos")) || !(d.sin = lab_ffi_buffer(f, 0, 3, "sin")) ||
        !(d.out[0] = lab_ffi_buffer(f, 1, 0, "q_out")) || !(d.out[1] = lab_ffi_buffer(f, 1, 1, "k_out"))) {
        return -1;
    }
    d.x_names[0] = "q", d.x_names[1] = "k", d.out_names[0] = "q_out", d.out_names[1] = "k_out";
    lab_op_call call = lab_ffi_op_call(f, &d);
    lab_rope_add_operands(&call, &d);
    return lab_run_op(&lab_ffi_state(f)->dispatch, &lab_rope_kind, &call);
}

/* A 4-dimensional buffer's dimensions 1 and 2 exchanged: the same memory read as the other layout. */
static void swap_positions_and_heads(lab_array *a) {
    if (a->ndim != 4) return; /* the plan names what is wrong with it */
    const int64_t shape = a->shape[1], stride = a->strides[1];
    a->shape[1] = a->shape[2], a->strides[1] = a->strides[2];
    a->shape[2] = shape, a->strides[2] = stride;
}

/* lab_attention: (q, k, v[, cu_seqlens_q, cu_seqlens_k]) -> (out, lse), and with backward set
 * (grad_out, q, k, v, out, lse[, cu_seqlens_q, cu_seqlens_k]) -> (grad_q, grad_k, grad_v); attributes
 * causal, window_left, window_right (-1: no bound), softcap, scale, max_seqlen_q, max_seqlen_k (a packed
 * batch's, with its cumulative lengths), and sequence_major: the 4-dimensional buffers are jax.nn's
 * (batch, positions, heads, head_dim), read as lab's (batch, heads, positions, head_dim) view. */
static int attention(lab_ffi_call *f) {
    double backward, causal, left, right, softcap, scale, max_q, max_k;
    if (lab_ffi_attr(f, "backward", 0.0, &backward) < 0 || lab_ffi_attr(f, "causal", 0.0, &causal) < 0 ||
        lab_ffi_attr(f, "window_left", -1.0, &left) < 0 ||
        lab_ffi_attr(f, "window_right", -1.0, &right) < 0 || lab_ffi_attr(f, "softcap", 0.0, &softcap) < 0 ||
        lab_ffi_attr(f, "scale", -1.0, &scale) < 0 || lab_ffi_attr(f, "max_seqlen_q", -1.0, &max_q) < 0 ||
        lab_ffi_attr(f, "max_seqlen_k", -1.0, &max_k) < 0) {
        return -1;
    }
    lab_attention_call d;
    memset(&d, 0, sizeof d);
    d.backward = backward != 0.0, d.causal = causal != 0.0, d.window_left = (int64_t)left;
    d.window_right = (int64_t)right, d.softcap = softcap, d.scale = scale;
    d.max_seqlen_q = (int64_t)max_q, d.max_seqlen_k = (int64_t)max_k;
    static const char *const forward_in[] = {"q", "k", "v"}, *const backward_in[] = {
                                                                 "grad_out", "q", "k", "v", "out", "lse"};
    lab_array **forward_fields[] = {&d.q, &d.k, &d.v},
              **backward_fields[] = {&d.grad_out, &d.q, &d.k, &d.v, &d.out, &d.lse};
    const char *const *in_names = d.backward ? backward_in : forward_in;
    lab_array ***in_fields = d.backward ? backward_fields : forward_fields;
    const int n_in = d.backward ? 6 : 3;
    for (int i = 0; i < n_in; i++) {
        if (!(*in_fields[i] = lab_ffi_buffer(f, 0, i, in_names[i]))) return -1;
    }
    double sequence_major;
    if (lab_ffi_attr(f, "sequence_major", 0.0, &sequence_major) < 0) return -1;
    if (sequence_major !=
        0.0) { /* jax.nn's (batch, positions, heads, head_dim): viewed as (batch, heads, ...) */
        for (int i = 0; i < n_in; i++) {
            if (*in_fields[i] != d.lse) swap_positions_and_heads(*in_fields[i]);
        }
    }
    if (lab_ffi_count(f, 0) > n_in && (!(d.cu_seqlens_q = lab_ffi_buffer(f, 0, n_in, "cu_seqlens_q")) ||
                                       !(d.cu_seqlens_k = lab_ffi_buffer(f, 0, n_in + 1, "cu_seqlens_k")))) {
        return -1;
    }
    if (d.backward) {
        if (!(d.grad_q = lab_ffi_buffer(f, 1, 0, "grad_q")) ||
            !(d.grad_k = lab_ffi_buffer(f, 1, 1, "grad_k")) ||
            !(d.grad_v = lab_ffi_buffer(f, 1, 2, "grad_v"))) {
            return -1;
        }
    } else if (!(d.out = lab_ffi_buffer(f, 1, 0, "out")) || !(d.lse = lab_ffi_buffer(f, 1, 1, "lse"))) {
        return -1;
    }
    if (sequence_major != 0.0) {
        lab_array *written[3] = {d.backward ? d.grad_q : d.out, d.backward ? d.grad_k : NULL,
                                 d.backward ? d.grad_v : NULL};
        for (int i = 0; i < 3; i++) {
            if (written[i]) swap_positions_and_heads(written[i]);
        }
    }
    lab_op_call call = lab_ffi_op_call(f, &d);
    lab_attention_add_operands(&call, &d);
    return lab_run_op(&lab_ffi_state(f)->dispatch, &lab_attention_kind, &call);
}

#undef IN
#undef IN_COLUMN
#undef OUT
#undef OUT_OPTIONAL
#undef OUT_COLUMN
#undef COUNT

/* ---- the targets ---- */

#define LAB_FFI_TARGET(name, flags)                                                                          \
    static lab_xla_ffi_error *target_##name(lab_xla_ffi_call_frame *frame) {                                 \
        return lab_ffi_handle(frame, "lab_" #name, name, flags);                                             \
    }
/* None takes the GIL: nothing on their way calls into Python. The ones with partial results (column
 * sums of the norms' weight gradients, the loss's per-row values, split reductions) take scratch
 * memory on the stream and are left out of XLA's command buffers. */
LAB_FFI_TARGET(rms_norm, LAB_FFI_TRACEABLE)
LAB_FFI_TARGET(rms_norm_backward, 0)
LAB_FFI_TARGET(layer_norm, LAB_FFI_TRACEABLE)
LAB_FFI_TARGET(layer_norm_backward, 0)
LAB_FFI_TARGET(softmax, LAB_FFI_TRACEABLE)
LAB_FFI_TARGET(softmax_backward, LAB_FFI_TRACEABLE)
LAB_FFI_TARGET(cross_entropy, 0)
LAB_FFI_TARGET(rope, LAB_FFI_TRACEABLE)
LAB_FFI_TARGET(attention, 0) /* the backward takes scratch memory (each row's delta) */
LAB_FFI_TARGET(elementwise, LAB_FFI_TRACEABLE)
LAB_FFI_TARGET(reduce, 0)
LAB_FFI_TARGET(glu_backward, LAB_FFI_TRACEABLE)
#undef LAB_FFI_TARGET

/* _xla_ffi_targets() -> {name: capsule}: what lab.jax hands to jax.ffi.register_ffi_target for CUDA;
 * lab_kernel's handler for the other platforms is _xla_ffi_elsewhere(). */
static PyObject *py_xla_ffi_targets(PyObject *module, PyObject *unused) {
    static const struct {
        const char *name;
        lab_xla_ffi_error *(*handler)(lab_xla_ffi_call_frame *);
    } targets[] = {{"lab_rms_norm", target_rms_norm},
                   {"lab_rms_norm_backward", target_rms_norm_backward},
                   {"lab_layer_norm", target_layer_norm},
                   {"lab_layer_norm_backward", target_layer_norm_backward},
                   {"lab_softmax", target_softmax},
                   {"lab_softmax_backward", target_softmax_backward},
                   {"lab_cross_entropy", target_cross_entropy},
                   {"lab_rope", target_rope},
                   {"lab_attention", target_attention},
                   {"lab_elementwise", target_elementwise},
                   {"lab_reduce", target_reduce},
                   {"lab_glu_backward", target_glu_backward},
                   {"lab_kernel", lab_ffi_user_kernel_target}};
    lab_ffi_bind_module(module);
    PyObject *found = PyDict_New();
    for (size_t i = 0; found && i < sizeof targets / sizeof targets[0]; i++) {
        PyObject *capsule =
            PyCapsule_New((void *)targets[i].handler, NULL, NULL); /* the name jax expects: none */
        if (!capsule || PyDict_SetItemString(found, targets[i].name, capsule) < 0) Py_CLEAR(found);
        Py_XDECREF(capsule);
    }
    return found;
}

/* _xla_ffi_ops() -> {"elementwise": ((name, inputs, integers allowed, number attributes), ...),
 * "reduction": ((name, inputs, integers allowed), ...)}: the rows lab.jax numbers its calls by, in the
 * tables' order. */
static PyObject *py_xla_ffi_ops(PyObject *module, PyObject *unused) {
    const Py_ssize_t n_elementwise = sizeof ELEMENTWISE_OPS / sizeof ELEMENTWISE_OPS[0];
    const Py_ssize_t n_reductions = sizeof REDUCTIONS / sizeof REDUCTIONS[0];
    PyObject *elementwise = PyTuple_New(n_elementwise), *reductions = PyTuple_New(n_reductions);
    for (Py_ssize_t i = 0; elementwise && i < n_elementwise; i++) {
        const lab_op op = ELEMENTWISE_OPS[i].op;
        const char *const *scalars = ELEMENTWISE_OPS[i].scalars;
        PyObject *names = !scalars[0]   ? PyTuple_New(0)
                          : !scalars[1] ? Py_BuildValue("(s)", scalars[0])
                                        : Py_BuildValue("(ss)", scalars[0], scalars[1]);
        PyObject *row = names ? Py_BuildValue("(siiN)", ELEMENTWISE_OPS[i].name, lab_op_inputs[op],
                                              lab_op_integers[op], names)
                              : NULL;
        if (!row) {
            Py_CLEAR(elementwise);
        } else {
            PyTuple_SET_ITEM(elementwise, i, row);
        }
    }
    for (Py_ssize_t i = 0; reductions && i < n_reductions; i++) {
        const lab_reduce_op op = REDUCTIONS[i].op;
        PyObject *row = Py_BuildValue("(sii)", REDUCTIONS[i].name, op == LAB_REDUCE_DOT ? 2 : 1,
                                      lab_reduce_integers_allowed(op));
        if (!row) {
            Py_CLEAR(reductions);
        } else {
            PyTuple_SET_ITEM(reductions, i, row);
        }
    }
    PyObject *found = elementwise && reductions
                          ? Py_BuildValue("{sOsO}", "elementwise", elementwise, "reduction", reductions)
                          : NULL;
    Py_XDECREF(elementwise);
    Py_XDECREF(reductions);
    return found;
}

static PyObject *py_xla_ffi_elsewhere(PyObject *module, PyObject *unused) {
    return PyCapsule_New((void *)lab_ffi_user_kernel_elsewhere, NULL, NULL);
}

PyMethodDef lab_xla_ffi_methods[] = {
    {"_xla_ffi_elsewhere", py_xla_ffi_elsewhere, METH_NOARGS,
     "_xla_ffi_elsewhere()\n--\n\nThe handler of lab_kernel for platforms other than CUDA (an error "
     "saying a user's CUDA kernel runs only there), as a capsule."},
    {"_xla_ffi_ops", py_xla_ffi_ops, METH_NOARGS,
     "_xla_ffi_ops()\n--\n\nThe elementwise ops and reductions lab_elementwise and lab_reduce run, as "
     "(name, inputs, integers allowed[, number attributes]) rows whose positions are the numbers the calls' "
     "attribute op takes."},
    {"_xla_ffi_targets", py_xla_ffi_targets, METH_NOARGS,
     "_xla_ffi_targets()\n--\n\nlab's XLA FFI handlers by target name, as capsules for "
     "jax.ffi.register_ffi_target (lab.jax registers them)."},
    {NULL, NULL, 0, NULL},
};
