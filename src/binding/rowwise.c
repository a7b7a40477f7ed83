/* rowwise.c - lab.softmax / log_softmax / layer_norm / rms_norm, cross_entropy and their backwards,
 * swiglu_backward / geglu_backward (level 2 for dispatch/rowwise_kind.c).
 *
 * Twelve functions, one runner: each function is a row of FUNCTIONS - its signature and, per
 * parameter, the operand slot it fills (a row operand, a column operand, or a number or option:
 * axis, eps, stream, cross-entropy's options (binding/loss_options.h)).
 * The runner parses, reads each array given (None leaves an optional operand out), and hands the
 * call to the op driver as the row-wise kind, which checks shapes and dtypes and plans the launch. */
#include "binding/rowwise.h"

#include "binding/args.h"
#include "binding/array_reader.h"
#include "binding/errors.h"
#include "binding/loss_options.h"
#include "dispatch/rowwise_kind.h"

typedef enum {
    ROLE_ROW,
    ROLE_COL,
    ROLE_AXIS,
    ROLE_EPS,
    ROLE_STREAM,
    ROLE_IGNORE_INDEX,
    ROLE_SMOOTHING,
    ROLE_REDUCTION,
    ROLE_SOFTCAP,
    ROLE_Z_LOSS
} param_role;

/* What a function returns: its output, the loss, or both gradients as a tuple. */
typedef enum { RETURN_OUT, RETURN_LOSS, RETURN_OUT_PAIR } return_kind;

typedef struct {
    param_role role;
    int slot;     /* ROLE_ROW: a lab_row_operand, ROLE_COL: a lab_col_operand */
    int in_place; /* ROLE_ROW: the array is read as the row input X too (scaled in place) */
} row_param;

typedef struct {
    const char *name;
    lab_row_op op;
    lab_signature signature;
    row_param params[LAB_MAX_PARAMS];
    double default_eps; /* < 0: the dtype's machine epsilon */
    return_kind returns;
} row_function;

/* The signatures say which arrays may be None (LAB_OR_NONE); the roles say where each goes. */
#define P LAB_PARAM
#define ROW(k) {ROLE_ROW, LAB_ROW_##k}
#define ROW_IN_PLACE(k) {ROLE_ROW, LAB_ROW_##k, 1}
#define COL(k) {ROLE_COL, LAB_COL_##k}
#define AXIS {ROLE_AXIS, 0}
#define EPS {ROLE_EPS, 0}
#define STREAM {ROLE_STREAM, 0}
#define OPTION(role) {ROLE_##role, 0}
#define STREAM_PARAM P(stream, STREAM | LAB_OR_NONE)
#define GLU_BACKWARD(name, op)                                                                               \
    {name,                                                                                                   \
     op,                                                                                                     \
     {5,                                                                                                     \
      5,                                                                                                     \
      7,                                                                                                     \
      {P(grad_out, ARRAY), P(gate, ARRAY), P(up, ARRAY), P(grad_gate, ARRAY), P(grad_up, ARRAY),             \
       P(product, ARRAY | LAB_OR_NONE), STREAM_PARAM}},                                                      \
     {ROW(GRAD), ROW(X), ROW(UP), ROW(OUT), ROW(GRAD_UP), ROW(PRODUCT), STREAM},                             \
     0,                                                                                                      \
     RETURN_OUT_PAIR}
#define SOFTMAX_SIGNATURE                                                                                    \
    {                                                                                                        \
        2, 2, 4, { P(x, ARRAY), P(out, ARRAY), P(axis, AXIS), STREAM_PARAM }                                 \
    }
#define SOFTMAX_BACKWARD_SIGNATURE                                                                           \
    {                                                                                                        \
        3, 3, 5, { P(grad_out, ARRAY), P(y, ARRAY), P(grad_x, ARRAY), P(axis, AXIS), STREAM_PARAM }          \
    }
enum {
    SOFTMAX,
    LOG_SOFTMAX,
    SOFTMAX_BACKWARD,
    LOG_SOFTMAX_BACKWARD,
    LAYER_NORM,
    LAYER_NORM_BACKWARD,
    RMS_NORM,
    RMS_NORM_BACKWARD,
    CROSS_ENTROPY,
    CROSS_ENTROPY_BACKWARD,
    SWIGLU_BACKWARD,
    GEGLU_BACKWARD,
    N_FUNCTIONS
};
static const row_function FUNCTIONS[] = {
    [SOFTMAX] = {"softmax", LAB_ROW_SOFTMAX, SOFTMAX_SIGNATURE, {ROW(X), ROW(OUT), AXIS, STREAM}, 0},
    [LOG_SOFTMAX] =
        {"log_softmax", LAB_ROW_LOG_SOFTMAX, SOFTMAX_SIGNATURE, {ROW(X), ROW(OUT), AXIS, STREAM}, 0},
    [SOFTMAX_BACKWARD] = {"softmax_backward",
                          LAB_ROW_SOFTMAX_BACKWARD,
                          SOFTMAX_BACKWARD_SIGNATURE,
                          {ROW(GRAD), ROW(X), ROW(OUT), AXIS, STREAM},
                          0},
    [LOG_SOFTMAX_BACKWARD] = {"log_softmax_backward",
                              LAB_ROW_LOG_SOFTMAX_BACKWARD,
                              SOFTMAX_BACKWARD_SIGNATURE,
                              {ROW(GRAD), ROW(X), ROW(OUT), AXIS, STREAM},
                              0},
    [LAYER_NORM] = {"layer_norm",
                    LAB_ROW_LAYER_NORM,
                    {4,
                     4,
                     8,
                     {P(x, ARRAY), P(weight, ARRAY | LAB_OR_NONE), P(bias, ARRAY | LAB_OR_NONE),
                      P(out, ARRAY), P(eps, REAL | LAB_OR_NONE), P(mean, ARRAY | LAB_OR_NONE),
                      P(rstd, ARRAY | LAB_OR_NONE), STREAM_PARAM}},
                    {ROW(X), COL(WEIGHT), COL(BIAS), ROW(OUT), EPS, ROW(MEAN), ROW(RSTD), STREAM},
                    1e-5},
    [LAYER_NORM_BACKWARD] = {"layer_norm_backward",
                             LAB_ROW_LAYER_NORM_BACKWARD,
                             {6,
                              8,
                              9,
                              {P(grad_out, ARRAY), P(x, ARRAY), P(weight, ARRAY | LAB_OR_NONE),
                               P(mean, ARRAY), P(rstd, ARRAY), P(grad_x, ARRAY),
                               P(grad_weight, ARRAY | LAB_OR_NONE), P(grad_bias, ARRAY | LAB_OR_NONE),
                               STREAM_PARAM}},
                             {ROW(GRAD), ROW(X), COL(WEIGHT), ROW(MEAN), ROW(RSTD), ROW(OUT),
                              COL(GRAD_WEIGHT), COL(GRAD_BIAS), STREAM},
                             0},
    [RMS_NORM] = {"rms_norm",
                  LAB_ROW_RMS_NORM,
                  {3,
                   3,
                   8,
                   {P(x, ARRAY), P(weight, ARRAY | LAB_OR_NONE), P(out, ARRAY), P(eps, REAL | LAB_OR_NONE),
                    P(rstd, ARRAY | LAB_OR_NONE), P(residual, ARRAY | LAB_OR_NONE),
                    P(residual_out, ARRAY | LAB_OR_NONE), STREAM_PARAM}},
                  {ROW(X), COL(WEIGHT), ROW(OUT), EPS, ROW(RSTD), ROW(RESIDUAL), ROW(RESIDUAL_OUT), STREAM},
                  -1.0},
    [RMS_NORM_BACKWARD] = {"rms_norm_backward",
                           LAB_ROW_RMS_NORM_BACKWARD,
                           {5,
                            6,
                            7,
                            {P(grad_out, ARRAY), P(x, ARRAY), P(weight, ARRAY | LAB_OR_NONE), P(rstd, ARRAY),
                             P(grad_x, ARRAY), P(grad_weight, ARRAY | LAB_OR_NONE), STREAM_PARAM}},
                           {ROW(GRAD), ROW(X), COL(WEIGHT), ROW(RSTD), ROW(OUT), COL(GRAD_WEIGHT), STREAM},
                           0},
    [CROSS_ENTROPY] = {"cross_entropy",
                       LAB_ROW_CROSS_ENTROPY,
                       {3,
                        3,
                        10,
                        {P(logits, ARRAY), P(target, ARRAY), P(loss, ARRAY), P(ignore_index, INT),
                         P(label_smoothing, REAL), P(reduction, CHOICE), P(softcap, REAL | LAB_OR_NONE),
                         P(z_loss, REAL), P(grad, ARRAY | LAB_OR_NONE), STREAM_PARAM}},
                       {ROW(X), ROW(TARGET), ROW(LOSS), OPTION(IGNORE_INDEX), OPTION(SMOOTHING),
                        OPTION(REDUCTION), OPTION(SOFTCAP), OPTION(Z_LOSS), ROW(OUT), STREAM},
                       0,
                       RETURN_LOSS},
    [CROSS_ENTROPY_BACKWARD] = {"cross_entropy_backward",
                                LAB_ROW_CROSS_ENTROPY_BACKWARD,
                                {2, 2, 3, {P(grad_loss, ARRAY), P(grad, ARRAY), STREAM_PARAM}},
                                {ROW(LOSS), ROW_IN_PLACE(OUT), STREAM},
                                0,
                                RETURN_OUT},
    [SWIGLU_BACKWARD] = GLU_BACKWARD("swiglu_backward", LAB_ROW_SWIGLU_BACKWARD),
    [GEGLU_BACKWARD] = GLU_BACKWARD("geglu_backward", LAB_ROW_GEGLU_BACKWARD),
};
#undef P
#undef ROW
#undef ROW_IN_PLACE
#undef COL
#undef AXIS
#undef EPS
#undef STREAM
#undef OPTION
#undef STREAM_PARAM
#undef GLU_BACKWARD
#undef SOFTMAX_SIGNATURE
#undef SOFTMAX_BACKWARD_SIGNATURE

const lab_signed_function lab_rowwise_signatures[N_FUNCTIONS + 1] = {
    {"softmax", &FUNCTIONS[SOFTMAX].signature},
    {"log_softmax", &FUNCTIONS[LOG_SOFTMAX].signature},
    {"softmax_backward", &FUNCTIONS[SOFTMAX_BACKWARD].signature},
    {"log_softmax_backward", &FUNCTIONS[LOG_SOFTMAX_BACKWARD].signature},
    {"layer_norm", &FUNCTIONS[LAYER_NORM].signature},
    {"layer_norm_backward", &FUNCTIONS[LAYER_NORM_BACKWARD].signature},
    {"rms_norm", &FUNCTIONS[RMS_NORM].signature},
    {"rms_norm_backward", &FUNCTIONS[RMS_NORM_BACKWARD].signature},
    {"cross_entropy", &FUNCTIONS[CROSS_ENTROPY].signature},
    {"cross_entropy_backward", &FUNCTIONS[CROSS_ENTROPY_BACKWARD].signature},
    {"swiglu_backward", &FUNCTIONS[SWIGLU_BACKWARD].signature},
    {"geglu_backward", &FUNCTIONS[GEGLU_BACKWARD].signature},
    {NULL, NULL},
};

static PyObject *run_rowwise(PyObject *module, int which, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const row_function *f = &FUNCTIONS[which];
    const char *func = f->name;
    PyObject *slots[LAB_MAX_PARAMS] = {NULL};
    if (lab_parse_args(state, func, &f->signature, args, nargs, kwnames, slots) < 0) return NULL;
    lab_array arrays[LAB_MAX_PARAMS];
    lab_rowwise_call description = {
        .op = f->op, .eps = f->default_eps, .reduction = LAB_LOSS_MEAN, .ignore_index = -100};
    PyObject *axis_obj = NULL, *stream_obj = NULL, *out_obj = NULL, *loss_obj = NULL, *grad_up_obj = NULL;
    for (int i = 0; i < f->signature.n_params; i++) {
        const row_param *p = &f->params[i];
        PyObject *obj = slots[i];
        if (p->role == ROLE_AXIS) {
            axis_obj = obj;
        } else if (p->role == ROLE_EPS) {
            if (lab_read_real_in(obj, func, "eps", &LAB_NONNEGATIVE, &description.eps) < 0) return NULL;
        } else if (p->role == ROLE_STREAM) {
            stream_obj = obj;
        } else if (p->role == ROLE_IGNORE_INDEX) {
            if (lab_read_ignore_index(obj, func, &description.ignore_index) < 0) return NULL;
        } else if (p->role == ROLE_SMOOTHING) {
            if (lab_read_label_smoothing(obj, func, &description.label_smoothing) < 0) return NULL;
        } else if (p->role == ROLE_REDUCTION) {
            if (lab_read_loss_reduction(state, obj, func, &description.reduction) < 0) return NULL;
        } else if (p->role == ROLE_SOFTCAP) {
            if (lab_read_softcap(obj, func, &description.softcap) < 0) return NULL;
        } else if (p->role == ROLE_Z_LOSS) {
            if (lab_read_z_loss(obj, func, &description.z_loss) < 0) return NULL;
        } else if (obj) { /* an array given (the signature refused None for a required one) */
            /* the parameter's name, for messages: only for arrays given (interned, its UTF-8 cached) */
            const char *name = PyUnicode_AsUTF8(state->names[f->signature.params[i].name]);
            if (!name || lab_read_array(state, obj, func, name, &arrays[i]) < 0) return NULL;
            if (p->role == ROLE_ROW) {
                description.rows[p->slot] = &arrays[i];
                description.row_names[p->slot] = name;
                if (p->in_place) {
                    description.rows[LAB_ROW_X] = &arrays[i];
                    description.row_names[LAB_ROW_X] = name;
                }
                if (p->slot == LAB_ROW_OUT) out_obj = obj;
                if (p->slot == LAB_ROW_LOSS) loss_obj = obj;
                if (p->slot == LAB_ROW_GRAD_UP) grad_up_obj = obj;
            } else {
                description.cols[p->slot] = &arrays[i];
                description.col_names[p->slot] = name;
            }
        }
    }
    if (f->op == LAB_ROW_RMS_NORM &&
        !description.rows[LAB_ROW_RESIDUAL] != !description.rows[LAB_ROW_RESIDUAL_OUT]) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): arguments 'residual' and 'residual_out' go together: give both or neither", func);
        return NULL;
    }
    const lab_array *x = description.rows[LAB_ROW_X];
    if (x->ndim == 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument '%s' is 0-dimensional; it needs a dimension to work along", func,
                     description.row_names[LAB_ROW_X]);
        return NULL;
    }
    description.axis = x->ndim - 1;
    if (axis_obj && lab_read_axis(axis_obj, x->ndim, "an int", func, &description.axis) < 0) return NULL;

    lab_op_call call = {.func = func, .description = &description};
    if (lab_parse_stream_arg(state, stream_obj, func, &call.stream) < 0) return NULL;
    lab_rowwise_add_operands(&call, &description);
    if (lab_run_op(&state->dispatch, &lab_rowwise_kind, &call) < 0) {
        return lab_raise_failure(&state->dispatch);
    }
    if (f->returns == RETURN_LOSS) return Py_NewRef(loss_obj);
    if (f->returns == RETURN_OUT_PAIR) return PyTuple_Pack(2, out_obj, grad_up_obj);
    return Py_NewRef(out_obj);
}

#define LAB_ROWWISE_FUNCTION(name, which)                                                                    \
    static PyObject *py_##name(PyObject *module, PyObject *const *args, Py_ssize_t nargs,                    \
                               PyObject *kwnames) {                                                          \
        return run_rowwise(module, which, args, nargs, kwnames);                                             \
    }
LAB_ROWWISE_FUNCTION(softmax, SOFTMAX)
LAB_ROWWISE_FUNCTION(log_softmax, LOG_SOFTMAX)
LAB_ROWWISE_FUNCTION(softmax_backward, SOFTMAX_BACKWARD)
LAB_ROWWISE_FUNCTION(log_softmax_backward, LOG_SOFTMAX_BACKWARD)
LAB_ROWWISE_FUNCTION(layer_norm, LAYER_NORM)
LAB_ROWWISE_FUNCTION(layer_norm_backward, LAYER_NORM_BACKWARD)
LAB_ROWWISE_FUNCTION(rms_norm, RMS_NORM)
LAB_ROWWISE_FUNCTION(rms_norm_backward, RMS_NORM_BACKWARD)
LAB_ROWWISE_FUNCTION(cross_entropy, CROSS_ENTROPY)
LAB_ROWWISE_FUNCTION(cross_entropy_backward, CROSS_ENTROPY_BACKWARD)
LAB_ROWWISE_FUNCTION(swiglu_backward, SWIGLU_BACKWARD)
LAB_ROWWISE_FUNCTION(geglu_backward, GEGLU_BACKWARD)
#undef LAB_ROWWISE_FUNCTION

#define LAB_ROWWISE_DOC_TAIL                                                                                 \
    " Any producer, any strides; float16, bfloat16, float32 or float64, computing in float32 (float64 for "  \
    "float64). Writes into the output and returns it."
#define LAB_METHOD(name, doc)                                                                                \
    {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef lab_rowwise_methods[] = {
    LAB_METHOD(softmax,
               "softmax(x, out, *, axis=-1, stream=None)\n--\n\nout = exp(x - max) / sum(exp(x - max)) along "
               "axis (as torch.softmax; a row of -inf gives NaN, as torch). `out` may be x "
               "itself." LAB_ROWWISE_DOC_TAIL),
    LAB_METHOD(log_softmax,
               "log_softmax(x, out, *, axis=-1, stream=None)\n--\n\nout = x - max - log(sum(exp(x - max))) "
               "along axis (as torch.log_softmax). `out` may be x itself." LAB_ROWWISE_DOC_TAIL),
    LAB_METHOD(
        softmax_backward,
        "softmax_backward(grad_out, y, grad_x, *, axis=-1, stream=None)\n--\n\ngrad_x = y * (grad_out - "
        "sum(grad_out * y)) along axis, where y = softmax(x) is the forward's output. grad_x may be grad_out "
        "itself." LAB_ROWWISE_DOC_TAIL),
    LAB_METHOD(
        log_softmax_backward,
        "log_softmax_backward(grad_out, y, grad_x, *, axis=-1, stream=None)\n--\n\ngrad_x = grad_out - "
        "exp(y) * "
        "sum(grad_out) along axis, where y = log_softmax(x) is the forward's output. grad_x may be grad_out "
        "itself." LAB_ROWWISE_DOC_TAIL),
    LAB_METHOD(
        layer_norm,
        "layer_norm(x, weight, bias, out, *, eps=1e-05, mean=None, rstd=None, stream=None)\n--\n\nout = (x - "
        "mean) * rstd * weight + bias over the last dimension, rstd = 1 / sqrt(var + eps) with the "
        "population "
        "variance (as torch.nn.functional.layer_norm). weight and bias: 1-dimensional, the last dimension's "
        "length, or None. mean and rstd, if given (shape x.shape[:-1], float32 or float64), receive the "
        "statistics layer_norm_backward takes." LAB_ROWWISE_DOC_TAIL),
    LAB_METHOD(
        layer_norm_backward,
        "layer_norm_backward(grad_out, x, weight, mean, rstd, grad_x, grad_weight=None, grad_bias=None, *, "
        "stream=None)\n--\n\nThe gradients of layer_norm: grad_x = rstd * (g - mean(g) - xhat * mean(g * "
        "xhat)) with g = grad_out * weight, xhat = (x - mean) * rstd; grad_weight = sum over rows of "
        "grad_out * "
        "xhat, grad_bias = sum of grad_out (either may be None). mean and rstd are the forward's. The sums "
        "over "
        "rows go through per-block partials added in a fixed order: the same bits on every run. Returns "
        "grad_x." LAB_ROWWISE_DOC_TAIL),
    LAB_METHOD(
        rms_norm,
        "rms_norm(x, weight, out, *, eps=None, rstd=None, residual=None, residual_out=None, "
        "stream=None)\n--\n\n"
        "out = x * rstd * weight over the last dimension, rstd = 1 / sqrt(mean(x**2) + eps); eps=None is the "
        "dtype's machine epsilon (as torch.nn.functional.rms_norm). weight may be None. With residual (and "
        "residual_out): h = x + residual, rounded to the dtype, is written to residual_out and normalized - "
        "the "
        "pre-norm residual block in one pass. rstd, if given (shape x.shape[:-1], float32 or float64), "
        "receives "
        "what rms_norm_backward takes." LAB_ROWWISE_DOC_TAIL),
    LAB_METHOD(
        rms_norm_backward,
        "rms_norm_backward(grad_out, x, weight, rstd, grad_x, grad_weight=None, *, stream=None)\n--\n\nThe "
        "gradients of rms_norm: grad_x = rstd * (g - xhat * mean(g * xhat)) with g = grad_out * weight, xhat "
        "= "
        "x * rstd; grad_weight = sum over rows of grad_out * xhat (None to skip), in a fixed order (the same "
        "bits on every run). x is what was normalized (residual_out, with a residual). Returns "
        "grad_x." LAB_ROWWISE_DOC_TAIL),
    LAB_METHOD(
        cross_entropy,
        "cross_entropy(logits, target, loss, *, ignore_index=-100, label_smoothing=0.0, reduction='mean', "
        "softcap=None, z_loss=0.0, grad=None, stream=None)\n--\n\nThe cross-entropy of each row of logits "
        "(the last dimension: the "
        "classes) against its target class, as torch.nn.functional.cross_entropy with class indices: "
        "logsumexp(x) - (1 - s) * x[target] - s * mean(x) for label_smoothing s. target: int64 or int32, "
        "logits' shape without the last dimension. Rows whose target is ignore_index add 0 and do not count. "
        "reduction 'none' writes one loss per row (loss: target's shape); 'mean' (over the rows that count; "
        "none: NaN, as torch) and 'sum' write one number (loss: 0-dimensional), added in a fixed order. "
        "loss may be any float dtype. A target outside [0, classes) that is not ignore_index gives NaN for "
        "its row (and so for 'mean' and 'sum'): a device-side check that needs no synchronization. "
        "softcap c (Gemma's): each logit x is read as c * tanh(x / c). z_loss z (PaLM's): adds z * "
        "logsumexp(x)^2 to each row's loss. "
        "grad (logits' shape and dtype, or logits itself to overwrite them): receives d loss / d logits = "
        "softmax(x) - (1 - s) * onehot(target) - s / classes, times 1 / (rows that count) for 'mean', in "
        "the same pass - the softmax is never stored. For an upstream gradient other than 1, multiply grad "
        "by it (cross_entropy_backward). Returns loss." LAB_ROWWISE_DOC_TAIL),
    LAB_METHOD(
        cross_entropy_backward,
        "cross_entropy_backward(grad_loss, grad, *, stream=None)\n--\n\ngrad *= grad_loss, in place: "
        "the gradient cross_entropy wrote, times the upstream gradient of the loss - one number "
        "(0-dimensional, for 'mean' and 'sum') or one per row ('none'). A row whose grad_loss is exactly 1 "
        "(loss.backward() on a mean or a sum) is skipped without reading or writing it: the check is on "
        "the device, nothing synchronizes. Returns grad." LAB_ROWWISE_DOC_TAIL),
    LAB_METHOD(swiglu_backward,
               "swiglu_backward(grad_out, gate, up, grad_gate, grad_up, *, product=None, stream=None)\n--\n\n"
               "The gradients of lab.swiglu (out = silu(gate) * up) in one pass: grad_gate = grad_out * up * "
               "silu'(gate), grad_up = grad_out * silu(gate). With product, the forward's out is written "
               "there too, in the same pass (a following layer's weight gradient needs it: cheaper than "
               "running lab.swiglu again). All arrays one shape and dtype; gate and up (and grad_gate and "
               "grad_up) may be the two halves of one array, and an output may be the very view of an "
               "input. Returns (grad_gate, grad_up)." LAB_ROWWISE_DOC_TAIL),
    LAB_METHOD(geglu_backward,
               "geglu_backward(grad_out, gate, up, grad_gate, grad_up, *, product=None, stream=None)\n--\n\n"
               "The gradients of lab.geglu (out = gelu_tanh(gate) * up) in one pass, as swiglu_backward with "
               "gelu's tanh approximation (product: gelu_tanh(gate) * up). Returns (grad_gate, "
               "grad_up)." LAB_ROWWISE_DOC_TAIL),
    {NULL, NULL, 0, NULL},
};
#undef LAB_METHOD
