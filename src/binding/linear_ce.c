/* linear_ce.c - lab.linear_cross_entropy and lab.linear_cross_entropy_plan (level 2 for
 * dispatch/linear_ce_kind.c): parse the call, read the options and then the arrays, load cuBLASLt,
 * and hand the call to the op driver as the linear cross-entropy kind. */
#include "binding/linear_ce.h"

#include <string.h>

#include "binding/array_reader.h"
#include "binding/errors.h"
#include "binding/loss_options.h"
#include "binding/matmul.h"
#include "dispatch/dtype.h"
#include "dispatch/linear_ce_kind.h"

#define P LAB_PARAM
static const lab_signature SIGNATURE = {
    4,
    4,
    18,
    {P(hidden, ARRAY), P(weight, ARRAY), P(target, ARRAY), P(loss, ARRAY), P(bias, ARRAY | LAB_OR_NONE),
     P(grad_hidden, ARRAY | LAB_OR_NONE), P(grad_weight, ARRAY | LAB_OR_NONE),
     P(grad_bias, ARRAY | LAB_OR_NONE), P(grad_output, ARRAY | LAB_OR_NONE), P(accumulate, FLAG),
     P(ignore_index, INT), P(label_smoothing, REAL), P(reduction, CHOICE), P(softcap, REAL | LAB_OR_NONE),
     P(z_loss, REAL), P(max_scratch_bytes, INT | LAB_OR_NONE), P(scratch, ARRAY | LAB_OR_NONE),
     P(stream, STREAM | LAB_OR_NONE)}};
static const lab_signature PLAN_SIGNATURE = {3,
                                             6,
                                             6,
                                             {P(rows, INT), P(classes, INT), P(dtype, CHOICE),
                                              P(reduction, CHOICE), P(bias_grad, FLAG),
                                              P(max_scratch_bytes, INT | LAB_OR_NONE)}};
#undef P
enum {
    HIDDEN,
    WEIGHT,
    TARGET,
    LOSS,
    BIAS,
    GRAD_HIDDEN,
    GRAD_WEIGHT,
    GRAD_BIAS,
    GRAD_OUTPUT,
    ACCUMULATE,
    IGNORE_INDEX,
    LABEL_SMOOTHING,
    REDUCTION,
    SOFTCAP,
    Z_LOSS,
    MAX_SCRATCH_BYTES,
    SCRATCH,
    STREAM,
    N_PARAMS
};

/* Everything but the arrays: numbers and options may run Python (__index__, __float__), which must
 * not see half-read arrays, so they come first. */
static int read_options(lab_state *state, PyObject *const *slots, const char *func, lab_linear_ce_call *c) {
    c->reduction = LAB_LOSS_MEAN;
    c->ignore_index = -100;
    c->max_scratch_bytes = -1; /* the default, or the scratch array's size */
    return lab_read_flag(slots[ACCUMULATE], func, "accumulate", &c->accumulate) < 0 ||
                   lab_read_ignore_index(slots[IGNORE_INDEX], func, &c->ignore_index) < 0 ||
                   lab_read_label_smoothing(slots[LABEL_SMOOTHING], func, &c->label_smoothing) < 0 ||
                   lab_read_loss_reduction(state, slots[REDUCTION], func, &c->reduction) < 0 ||
                   lab_read_softcap(slots[SOFTCAP], func, &c->softcap) < 0 ||
                   lab_read_z_loss(slots[Z_LOSS], func, &c->z_loss) < 0 ||
                   lab_read_int_in(slots[MAX_SCRATCH_BYTES], func, "max_scratch_bytes", &LAB_COUNT,
                                   &c->max_scratch_bytes) < 0
               ? -1
               : 0;
}

static PyObject *py_linear_cross_entropy(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                         PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "linear_cross_entropy";
    PyObject *slots[N_PARAMS];
    if (lab_parse_args(state, func, &SIGNATURE, args, nargs, kwnames, slots) < 0) return NULL;
    lab_linear_ce_call description;
    memset(&description, 0, sizeof description);
    if (read_options(state, slots, func, &description) < 0) return NULL;
    lab_array arrays[N_PARAMS];
    const struct {
        int slot;
        const char *name;
        lab_array **field;
        int written;
    } operands[] = {{LOSS, "loss", &description.loss, 1},
                    {GRAD_HIDDEN, "grad_hidden", &description.grad_hidden, 1},
                    {GRAD_WEIGHT, "grad_weight", &description.grad_weight, 1},
                    {GRAD_BIAS, "grad_bias", &description.grad_bias, 1},
                    {SCRATCH, "scratch", &description.scratch, 1},
                    {HIDDEN, "hidden", &description.hidden, 0},
                    {WEIGHT, "weight", &description.weight, 0},
                    {TARGET, "target", &description.target, 0},
                    {BIAS, "bias", &description.bias, 0},
                    {GRAD_OUTPUT, "grad_output", &description.grad_output, 0}};
    lab_op_call call = {.func = func, .description = &description};
    if (lab_parse_stream_arg(state, slots[STREAM], func, &call.stream) < 0) return NULL;
    /* written operands first: the first decides the launch stream */
    for (size_t i = 0; i < sizeof operands / sizeof operands[0]; i++) {
        PyObject *obj = slots[operands[i].slot];
        if (!obj) continue; /* an optional one left out, or None (the signature refused None elsewhere) */
        lab_array *array = &arrays[operands[i].slot];
        if (lab_read_array(state, obj, func, operands[i].name, array) < 0) return NULL;
        *operands[i].field = array;
        lab_op_call_add(&call, operands[i].name, array, 1, 0, operands[i].written);
    }
    /* planned here, so a bad argument is a TypeError/ValueError also where cuBLASLt is missing */
    const int work = lab_linear_ce_kind.plan(&call);
    if (work < 0) return lab_raise_failure(&state->dispatch);
    if (work > 0 && lab_ensure_cublaslt() < 0) return NULL;
    description.planned = 1 + work;
    if (lab_run_op(&state->dispatch, &lab_linear_ce_kind, &call) < 0) {
        return lab_raise_failure(&state->dispatch);
    }
    return Py_NewRef(slots[LOSS]);
}

static PyObject *py_linear_cross_entropy_plan(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                              PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "linear_cross_entropy_plan";
    PyObject *slots[6];
    if (lab_parse_args(state, func, &PLAN_SIGNATURE, args, nargs, kwnames, slots) < 0) return NULL;
    int64_t rows = 0, classes = 1, max_scratch_bytes = -1;
    lab_loss_reduction reduction = LAB_LOSS_MEAN;
    int bias_grad = 0;
    if (lab_read_int_in(slots[0], func, "rows", &LAB_COUNT, &rows) < 0 ||
        lab_read_int_in(slots[1], func, "classes", &LAB_POSITIVE_INT, &classes) < 0 ||
        lab_read_loss_reduction(state, slots[3], func, &reduction) < 0 ||
        lab_read_flag(slots[4], func, "bias_grad", &bias_grad) < 0 ||
        lab_read_int_in(slots[5], func, "max_scratch_bytes", &LAB_COUNT, &max_scratch_bytes) < 0) {
        return NULL;
    }
    int dtype = -1;
    for (int d = 0; d < LAB_NUM_DTYPES && PyUnicode_Check(slots[2]); d++) {
        if (!lab_dtype_is_integer((lab_dtype)d) &&
            PyUnicode_CompareWithASCIIString(slots[2], lab_dtype_names[d]) == 0) {
            dtype = d;
        }
    }
    if (dtype < 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument 'dtype' must be 'float16', 'bfloat16', 'float32' or 'float64', got %R",
                     func, slots[2]);
        return NULL;
    }
    lab_linear_ce_chunks chunks;
    if (lab_plan_linear_ce_chunks(rows, classes, (lab_dtype)dtype, reduction != LAB_LOSS_NONE, bias_grad,
                                  max_scratch_bytes < 0 ? LAB_LINEAR_CE_DEFAULT_SCRATCH : max_scratch_bytes,
                                  func, "max_scratch_bytes", &chunks) < 0) {
        return lab_raise_failure(&state->dispatch);
    }
    return Py_BuildValue("{s:L, s:L, s:L, s:L}", "chunk_rows", (long long)chunks.chunk_rows, "chunks",
                         (long long)chunks.chunks, "logits_ld", (long long)chunks.logits_ld, "scratch_bytes",
                         (long long)chunks.bytes);
}

PyMethodDef lab_linear_ce_methods[] = {
    {"linear_cross_entropy", (PyCFunction)(void (*)(void))py_linear_cross_entropy,
     METH_FASTCALL | METH_KEYWORDS,
     "linear_cross_entropy(hidden, weight, target, loss, *, bias=None, grad_hidden=None, grad_weight=None, "
     "grad_bias=None, grad_output=None, accumulate=False, ignore_index=-100, label_smoothing=0.0, "
     "reduction='mean', softcap=None, z_loss=0.0, max_scratch_bytes=None, scratch=None, stream=None)\n--\n\n"
     "The cross-entropy of logits = hidden @ weight.T + bias against target, and its gradients, without "
     "ever holding the logits: the rows are cut into chunks whose logits fit the scratch memory, and each "
     "chunk's logits become their gradient in place before the next chunk's are made.\n\n"
     "hidden (..., depth) and weight (classes, depth): float16, bfloat16, float32 or float64, one dtype; any "
     "view whose rows or columns are contiguous. target: int64 or int32, hidden's shape without depth. loss: "
     "0-dimensional for 'mean' and 'sum', target's shape for 'none'; any float dtype. The options are "
     "cross_entropy's (ignore_index, label_smoothing, reduction, softcap, z_loss).\n\n"
     "grad_hidden, grad_weight, grad_bias: written when given (hidden's dtype or float32); accumulate=True "
     "adds to them instead. grad_weight is accumulated across chunks in its own dtype by the products "
     "(beta = 1), grad_bias in float32. grad_output: the upstream gradient that scales them - one number, or "
     "one per row for 'none' (default 1).\n\n"
     "max_scratch_bytes: the memory the call may take beyond its outputs (default 256 MiB, or scratch's "
     "size); scratch: a contiguous device array to take it from instead of lab's pool "
     "(linear_cross_entropy_plan says how many bytes). Deterministic: a fixed chunk order, no atomics. "
     "Returns loss."},
    {"linear_cross_entropy_plan", (PyCFunction)(void (*)(void))py_linear_cross_entropy_plan,
     METH_FASTCALL | METH_KEYWORDS,
     "linear_cross_entropy_plan(rows, classes, dtype, reduction='mean', bias_grad=False, "
     "max_scratch_bytes=None)\n--\n\n"
     "How linear_cross_entropy would chunk `rows` rows of `classes` logits of `dtype` (a name, "
     "'bfloat16') within max_scratch_bytes (default 256 MiB): a dict of chunk_rows, chunks, logits_ld "
     "(a chunk's row stride in elements: classes rounded up to 64) and scratch_bytes (what it takes, at "
     "most max_scratch_bytes). No GPU needed."},
    {NULL, NULL, 0, NULL},
};

const lab_signed_function lab_linear_ce_signatures[] = {
    {"linear_cross_entropy", &SIGNATURE}, {"linear_cross_entropy_plan", &PLAN_SIGNATURE}, {NULL, NULL}};
