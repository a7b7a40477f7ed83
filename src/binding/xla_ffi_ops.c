/* xla_ffi_ops.c - lab's built-in ops as XLA FFI targets: the norms, softmax, cross-entropy, the GLUs
 * and the rotary embedding, each a function that reads its call's buffers and attributes into the same
 * description the Python binding fills and runs the op driver on XLA's stream (xla_ffi.c reads the
 * frame and answers XLA; lab.jax registers what _xla_ffi_targets() hands out). */
#include <string.h>

#include "binding/xla_ffi.h"
#include "dispatch/elementwise_kind.h"
#include "dispatch/rope_kind.h"
#include "dispatch/rowwise_kind.h"

/* Runs a row-wise description (its arrays and names filled) through the op driver. */
static int run_rowwise(lab_ffi_call *f, lab_rowwise_call *d) {
    d->axis = d->rows[LAB_ROW_X]->ndim - 1;
    lab_op_call call = lab_ffi_op_call(f, d);
    lab_rowwise_add_operands(&call, d);
    return lab_run_op(&lab_ffi_state(f)->dispatch, &lab_rowwise_kind, &call);
}

/* ---- the ops ---- */

/* lab_rms_norm: (x[, weight]) -> (out, rstd); attribute eps (< 0: the dtype's machine epsilon). */
static int rms_norm(lab_ffi_call *f) {
    const int64_t n_args = lab_ffi_count(f, 0);
    lab_rowwise_call d = {.op = LAB_ROW_RMS_NORM};
    if (lab_ffi_attr(f, "eps", -1.0, &d.eps) < 0) return -1;
    if (!(d.rows[LAB_ROW_X] = lab_ffi_buffer(f, 0, 0, "x"))) return -1;
    if (n_args > 1 && !(d.cols[LAB_COL_WEIGHT] = lab_ffi_buffer(f, 0, 1, "weight"))) return -1;
    if (!(d.rows[LAB_ROW_OUT] = lab_ffi_buffer(f, 1, 0, "out")) ||
        !(d.rows[LAB_ROW_RSTD] = lab_ffi_buffer(f, 1, 1, "rstd"))) {
        return -1;
    }
    d.row_names[LAB_ROW_X] = "x", d.row_names[LAB_ROW_OUT] = "out", d.row_names[LAB_ROW_RSTD] = "rstd";
    d.col_names[LAB_COL_WEIGHT] = "weight";
    return run_rowwise(f, &d);
}

/* lab_rms_norm_backward: (grad_out, x, rstd[, weight]) -> (grad_x[, grad_weight]). */
static int rms_norm_backward(lab_ffi_call *f) {
    const int64_t n_args = lab_ffi_count(f, 0), n_rets = lab_ffi_count(f, 1);
    lab_rowwise_call d = {.op = LAB_ROW_RMS_NORM_BACKWARD};
    if (!(d.rows[LAB_ROW_GRAD] = lab_ffi_buffer(f, 0, 0, "grad_out")) ||
        !(d.rows[LAB_ROW_X] = lab_ffi_buffer(f, 0, 1, "x")) ||
        !(d.rows[LAB_ROW_RSTD] = lab_ffi_buffer(f, 0, 2, "rstd")) ||
        (n_args > 3 && !(d.cols[LAB_COL_WEIGHT] = lab_ffi_buffer(f, 0, 3, "weight"))) ||
        !(d.rows[LAB_ROW_OUT] = lab_ffi_buffer(f, 1, 0, "grad_x")) ||
        (n_rets > 1 && !(d.cols[LAB_COL_GRAD_WEIGHT] = lab_ffi_buffer(f, 1, 1, "grad_weight")))) {
        return -1;
    }
    d.row_names[LAB_ROW_GRAD] = "grad_out", d.row_names[LAB_ROW_X] = "x", d.row_names[LAB_ROW_RSTD] = "rstd";
    d.row_names[LAB_ROW_OUT] = "grad_x", d.col_names[LAB_COL_WEIGHT] = "weight";
    d.col_names[LAB_COL_GRAD_WEIGHT] = "grad_weight";
    return run_rowwise(f, &d);
}

/* lab_layer_norm: (x[, weight[, bias]]) -> (out, mean, rstd); attribute eps. */
static int layer_norm(lab_ffi_call *f) {
    const int64_t n_args = lab_ffi_count(f, 0);
    lab_rowwise_call d = {.op = LAB_ROW_LAYER_NORM};
    if (lab_ffi_attr(f, "eps", 1e-5, &d.eps) < 0) return -1;
    if (!(d.rows[LAB_ROW_X] = lab_ffi_buffer(f, 0, 0, "x")) ||
        (n_args > 1 && !(d.cols[LAB_COL_WEIGHT] = lab_ffi_buffer(f, 0, 1, "weight"))) ||
        (n_args > 2 && !(d.cols[LAB_COL_BIAS] = lab_ffi_buffer(f, 0, 2, "bias"))) ||
        !(d.rows[LAB_ROW_OUT] = lab_ffi_buffer(f, 1, 0, "out")) ||
        !(d.rows[LAB_ROW_MEAN] = lab_ffi_buffer(f, 1, 1, "mean")) ||
        !(d.rows[LAB_ROW_RSTD] = lab_ffi_buffer(f, 1, 2, "rstd"))) {
        return -1;
    }
    d.row_names[LAB_ROW_X] = "x", d.row_names[LAB_ROW_OUT] = "out";
    d.row_names[LAB_ROW_MEAN] = "mean", d.row_names[LAB_ROW_RSTD] = "rstd";
    d.col_names[LAB_COL_WEIGHT] = "weight", d.col_names[LAB_COL_BIAS] = "bias";
    return run_rowwise(f, &d);
}

/* lab_layer_norm_backward: (grad_out, x, mean, rstd[, weight]) -> (grad_x[, grad_weight, grad_bias]). */
static int layer_norm_backward(lab_ffi_call *f) {
    const int64_t n_args = lab_ffi_count(f, 0), n_rets = lab_ffi_count(f, 1);
    lab_rowwise_call d = {.op = LAB_ROW_LAYER_NORM_BACKWARD};
    if (!(d.rows[LAB_ROW_GRAD] = lab_ffi_buffer(f, 0, 0, "grad_out")) ||
        !(d.rows[LAB_ROW_X] = lab_ffi_buffer(f, 0, 1, "x")) ||
        !(d.rows[LAB_ROW_MEAN] = lab_ffi_buffer(f, 0, 2, "mean")) ||
        !(d.rows[LAB_ROW_RSTD] = lab_ffi_buffer(f, 0, 3, "rstd")) ||
        (n_args > 4 && !(d.cols[LAB_COL_WEIGHT] = lab_ffi_buffer(f, 0, 4, "weight"))) ||
        !(d.rows[LAB_ROW_OUT] = lab_ffi_buffer(f, 1, 0, "grad_x")) ||
        (n_rets > 1 && !(d.cols[LAB_COL_GRAD_WEIGHT] = lab_ffi_buffer(f, 1, 1, "grad_weight"))) ||
        (n_rets > 2 && !(d.cols[LAB_COL_GRAD_BIAS] = lab_ffi_buffer(f, 1, 2, "grad_bias")))) {
        return -1;
    }
    d.row_names[LAB_ROW_GRAD] = "grad_out", d.row_names[LAB_ROW_X] = "x", d.row_names[LAB_ROW_MEAN] = "mean";
    d.row_names[LAB_ROW_RSTD] = "rstd", d.row_names[LAB_ROW_OUT] = "grad_x",
    d.col_names[LAB_COL_WEIGHT] = "weight";
    d.col_names[LAB_COL_GRAD_WEIGHT] = "grad_weight", d.col_names[LAB_COL_GRAD_BIAS] = "grad_bias";
    return run_rowwise(f, &d);
}

/* lab_softmax: (x) -> (out); attribute log (1: log_softmax). Over the last dimension. */
static int softmax(lab_ffi_call *f) {
    double log;
    if (lab_ffi_attr(f, "log", 0.0, &log) < 0) return -1;
    lab_rowwise_call d = {.op = log != 0.0 ? LAB_ROW_LOG_SOFTMAX : LAB_ROW_SOFTMAX};
    if (!(d.rows[LAB_ROW_X] = lab_ffi_buffer(f, 0, 0, "x")) ||
        !(d.rows[LAB_ROW_OUT] = lab_ffi_buffer(f, 1, 0, "out"))) {
        return -1;
    }
    d.row_names[LAB_ROW_X] = "x", d.row_names[LAB_ROW_OUT] = "out";
    return run_rowwise(f, &d);
}

/* lab_softmax_backward: (grad_out, y) -> (grad_x); attribute log. */
static int softmax_backward(lab_ffi_call *f) {
    double log;
    if (lab_ffi_attr(f, "log", 0.0, &log) < 0) return -1;
    lab_rowwise_call d = {.op = log != 0.0 ? LAB_ROW_LOG_SOFTMAX_BACKWARD : LAB_ROW_SOFTMAX_BACKWARD};
    if (!(d.rows[LAB_ROW_GRAD] = lab_ffi_buffer(f, 0, 0, "grad_out")) ||
        !(d.rows[LAB_ROW_X] = lab_ffi_buffer(f, 0, 1, "y")) ||
        !(d.rows[LAB_ROW_OUT] = lab_ffi_buffer(f, 1, 0, "grad_x"))) {
        return -1;
    }
    d.row_names[LAB_ROW_GRAD] = "grad_out", d.row_names[LAB_ROW_X] = "y", d.row_names[LAB_ROW_OUT] = "grad_x";
    return run_rowwise(f, &d);
}

/* lab_cross_entropy: (logits, target) -> (loss[, grad]); attributes ignore_index, label_smoothing,
 * reduction (0 none, 1 mean, 2 sum). With grad: d loss / d logits in the same pass. */
static int cross_entropy(lab_ffi_call *f) {
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
    const int64_t n_rets = lab_ffi_count(f, 1);
    if (!(d.rows[LAB_ROW_X] = lab_ffi_buffer(f, 0, 0, "logits")) ||
        !(d.rows[LAB_ROW_TARGET] = lab_ffi_buffer(f, 0, 1, "target")) ||
        !(d.rows[LAB_ROW_LOSS] = lab_ffi_buffer(f, 1, 0, "loss")) ||
        (n_rets > 1 && !(d.rows[LAB_ROW_OUT] = lab_ffi_buffer(f, 1, 1, "grad")))) {
        return -1;
    }
    d.row_names[LAB_ROW_X] = "logits", d.row_names[LAB_ROW_TARGET] = "target";
    d.row_names[LAB_ROW_LOSS] = "loss", d.row_names[LAB_ROW_OUT] = "grad";
    return run_rowwise(f, &d);
}

/* lab_glu: (gate, up) -> (out); attribute act (0: silu, SwiGLU; 1: gelu's tanh form, GeGLU). The
 * forward is an elementwise op (lab.swiglu's kind), the backward a row-wise one. */
static int glu(lab_ffi_call *f) {
    double act;
    if (lab_ffi_attr(f, "act", 0.0, &act) < 0) return -1;
    lab_elementwise_call d;
    memset(&d, 0, sizeof d);
    d.op = act != 0.0 ? LAB_OP_GEGLU : LAB_OP_SWIGLU;
    lab_operands *ops = &d.operands;
    static const char *const names[] = {"out", "gate", "up"};
    for (int i = 0; i < 3; i++) {
        const lab_array *a = lab_ffi_buffer(f, i == 0, i == 0 ? 0 : i - 1, names[i]);
        if (!a) return -1;
        ops->arrays[i] = *a;
        ops->names[i] = names[i];
    }
    ops->count = 3, ops->n_outputs = 1;
    lab_op_call call = lab_ffi_op_call(f, &d);
    for (int i = 0; i < 3; i++) lab_op_call_add(&call, ops->names[i], &ops->arrays[i], 1, 0, i == 0);
    return lab_run_op(&lab_ffi_state(f)->dispatch, &lab_elementwise_kind, &call);
}

/* lab_glu_backward: (grad_out, gate, up) -> (grad_gate, grad_up); attribute act. */
static int glu_backward(lab_ffi_call *f) {
    double act;
    if (lab_ffi_attr(f, "act", 0.0, &act) < 0) return -1;
    lab_rowwise_call d = {.op = act != 0.0 ? LAB_ROW_GEGLU_BACKWARD : LAB_ROW_SWIGLU_BACKWARD};
    if (!(d.rows[LAB_ROW_GRAD] = lab_ffi_buffer(f, 0, 0, "grad_out")) ||
        !(d.rows[LAB_ROW_X] = lab_ffi_buffer(f, 0, 1, "gate")) ||
        !(d.rows[LAB_ROW_UP] = lab_ffi_buffer(f, 0, 2, "up")) ||
        !(d.rows[LAB_ROW_OUT] = lab_ffi_buffer(f, 1, 0, "grad_gate")) ||
        !(d.rows[LAB_ROW_GRAD_UP] = lab_ffi_buffer(f, 1, 1, "grad_up"))) {
        return -1;
    }
    d.row_names[LAB_ROW_GRAD] = "grad_out", d.row_names[LAB_ROW_X] = "gate", d.row_names[LAB_ROW_UP] = "up";
    d.row_names[LAB_ROW_OUT] = "grad_gate", d.row_names[LAB_ROW_GRAD_UP] = "grad_up";
    return run_rowwise(f, &d);
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

/* ---- the targets ---- */

#define LAB_FFI_TARGET(name)                                                                                 \
    static lab_xla_ffi_error *target_##name(lab_xla_ffi_call_frame *frame) {                                 \
        return lab_ffi_handle(frame, "lab_" #name, name);                                                    \
    }
LAB_FFI_TARGET(rms_norm)
LAB_FFI_TARGET(rms_norm_backward)
LAB_FFI_TARGET(layer_norm)
LAB_FFI_TARGET(layer_norm_backward)
LAB_FFI_TARGET(softmax)
LAB_FFI_TARGET(softmax_backward)
LAB_FFI_TARGET(cross_entropy)
LAB_FFI_TARGET(rope)
LAB_FFI_TARGET(glu)
LAB_FFI_TARGET(glu_backward)
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
                   {"lab_glu", target_glu},
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

static PyObject *py_xla_ffi_elsewhere(PyObject *module, PyObject *unused) {
    return PyCapsule_New((void *)lab_ffi_user_kernel_elsewhere, NULL, NULL);
}

PyMethodDef lab_xla_ffi_methods[] = {
    {"_xla_ffi_elsewhere", py_xla_ffi_elsewhere, METH_NOARGS,
     "_xla_ffi_elsewhere()\n--\n\nThe handler of lab_kernel for platforms other than CUDA (an error "
     "saying a user's CUDA kernel runs only there), as a capsule."},
    {"_xla_ffi_targets", py_xla_ffi_targets, METH_NOARGS,
     "_xla_ffi_targets()\n--\n\nlab's XLA FFI handlers by target name, as capsules for "
     "jax.ffi.register_ffi_target (lab.jax registers them)."},
    {NULL, NULL, 0, NULL},
};
