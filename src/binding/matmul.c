/* matmul.c - lab.matmul (level 2 for dispatch/matmul_kind.c): parse the call, read the arrays, plan,
 * load cuBLASLt at the first product, then hand the call to the op driver as the matmul kind.
 *
 * The plan runs here, before the library is loaded, so a bad argument is a TypeError/ValueError on
 * any machine - also one without cuBLASLt - and a missing library is an ImportError only for a call
 * that would compute. Where to look for the library is Python's business (lab/_blas.py knows the
 * wheels' folders); loading it and calling it is C's. */
#include "binding/matmul.h"

#include <string.h>

#include "binding/array_reader.h"
#include "binding/errors.h"
#include "dispatch/cublaslt.h"
#include "dispatch/device.h"
#include "dispatch/dtype.h"

#define P LAB_PARAM
static const lab_signature SIGNATURE = {
    2,
    3,
    16,
    {P(a, ARRAY), P(b, ARRAY), P(out, ARRAY | LAB_OR_NONE), P(c, ARRAY | LAB_OR_NONE), P(alpha, REAL),
     P(beta, REAL | LAB_OR_NONE), P(bias, ARRAY | LAB_OR_NONE), P(epilogue, CHOICE | LAB_OR_NONE),
     P(aux_out, ARRAY | LAB_OR_NONE), P(aux, ARRAY | LAB_OR_NONE), P(bias_grad_out, ARRAY | LAB_OR_NONE),
     P(allow_tf32, FLAG), P(stream, STREAM | LAB_OR_NONE), P(scale_a, ARRAY | LAB_OR_NONE),
     P(scale_b, ARRAY | LAB_OR_NONE), P(fast_accum, FLAG)}};
#undef P
enum {
    A,
    B,
    OUT,
    C,
    ALPHA,
    BETA,
    BIAS,
    EPILOGUE,
    AUX_OUT,
    AUX,
    BIAS_GRAD_OUT,
    ALLOW_TF32,
    STREAM,
    SCALE_A,
    SCALE_B,
    FAST_ACCUM
};

static int read_epilogue(lab_state *state, PyObject *obj, const char *func, lab_matmul_epilogue *epilogue) {
    *epilogue = LAB_MATMUL_NONE;
    if (!obj) return 0;
    static const struct {
        lab_name name;
        lab_matmul_epilogue value;
    } choices[] = {{LAB_NAME_none, LAB_MATMUL_NONE},
                   {LAB_NAME_relu, LAB_MATMUL_RELU},
                   {LAB_NAME_gelu_tanh, LAB_MATMUL_GELU_TANH},
                   {LAB_NAME_dgelu, LAB_MATMUL_DGELU}};
    for (size_t i = 0; PyUnicode_Check(obj) && i < sizeof choices / sizeof choices[0]; i++) {
        if (PyUnicode_Compare(obj, state->names[choices[i].name]) == 0) {
            *epilogue = choices[i].value;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError,
                 "%s(): argument 'epilogue' must be None, 'relu', 'gelu_tanh' or 'dgelu', got %R", func, obj);
    return -1;
}

/* out=None: a new lab.Array of a @ b's shape and a's dtype (bfloat16 for float8 inputs, which no lab
 * kernel stores), on a's device and the call's stream. */
static PyObject *allocate_out(PyObject *module, lab_state *state, const lab_array *a, const lab_array *b,
                              PyObject *stream_obj, const char *func) {
    int64_t shape[LAB_MAX_DIMS];
    int ndim;
    if (lab_matmul_result_shape(a, b, func, shape, &ndim) < 0) return lab_raise_failure(&state->dispatch);
    lab_array located = *a;
    if (located.device < 0 && located.numel > 0 &&
        lab_locate_array(&state->dispatch, &located, "a", -1, func) < 0) {
        return lab_raise_failure(&state->dispatch);
    }
    PyObject *empty = PyObject_GetAttrString(module, "empty");
    PyObject *shape_tuple = lab_shape_tuple(shape, ndim);
    PyObject *dtype =
        PyUnicode_FromString(lab_dtype_names[lab_dtype_is_float8(a->dtype) ? LAB_BFLOAT16 : a->dtype]);
    PyObject *device = located.device >= 0 ? PyLong_FromLong(located.device) : Py_NewRef(Py_None);
    PyObject *keywords = Py_BuildValue("(OO)", LAB_NAME_OBJ(state, device), LAB_NAME_OBJ(state, stream));
    PyObject *out = NULL;
    if (empty && shape_tuple && dtype && device && keywords) {
        PyObject *call_args[4] = {shape_tuple, dtype, device, stream_obj ? stream_obj : Py_None};
        out = PyObject_Vectorcall(empty, call_args, 2, keywords);
    }
    Py_XDECREF(empty);
    Py_XDECREF(shape_tuple);
    Py_XDECREF(dtype);
    Py_XDECREF(device);
    Py_XDECREF(keywords);
    return out;
}

int lab_ensure_cublaslt(void) {
    if (lab_cublaslt.library) return 0;
    PyObject *blas = PyImport_ImportModule("lab._blas");
    PyObject *paths = blas ? PyObject_CallMethod(blas, "cublaslt_candidates", NULL) : NULL;
    Py_XDECREF(blas);
    PyObject *tuple = paths ? PySequence_Tuple(paths) : NULL;
    Py_XDECREF(paths);
    if (!tuple) return -1;
    const Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    const char **texts = PyMem_Calloc((size_t)n + 1, sizeof *texts);
    int rc = texts ? 0 : -1;
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        texts[i] =
            PyUnicode_Check(PyTuple_GET_ITEM(tuple, i)) ? PyUnicode_AsUTF8(PyTuple_GET_ITEM(tuple, i)) : NULL;
        if (!texts[i]) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "lab._blas.cublaslt_candidates() must list str paths");
            }
            rc = -1;
        }
    }
    if (rc == 0 && (rc = lab_cublaslt_load(texts, (int)n)) < 0) lab_raise_failure(NULL);
    PyMem_Free(texts);
    Py_DECREF(tuple);
    if (!texts) PyErr_NoMemory();
    return rc;
}

int lab_matmul_read(lab_state *state, const char *func, PyObject *const *slots, PyObject *out_obj,
                    lab_matmul_arrays *arrays, lab_matmul_call *call) {
    memset(call, 0, sizeof *call);
    call->alpha = 1.0;
    call->beta = slots[C] ? 1.0 : 0.0; /* with c: out = alpha * a @ b + c, as torch.addmm */
    if (lab_read_real(slots[ALPHA], func, "alpha", &call->alpha) < 0 ||
        lab_read_real(slots[BETA], func, "beta", &call->beta) < 0 ||
        read_epilogue(state, slots[EPILOGUE], func, &call->epilogue) < 0 ||
        lab_read_flag(slots[ALLOW_TF32], func, "allow_tf32", &call->allow_tf32) < 0 ||
        lab_read_flag(slots[FAST_ACCUM], func, "fast_accum", &call->fast_accum) < 0) {
        return -1;
    }
    /* Arrays last: numbers above may run Python (__float__), which must not see half-read arrays. */
    if (lab_read_array_float8(state, slots[A], func, "a", &arrays->a) < 0 ||
        lab_read_array_float8(state, slots[B], func, "b", &arrays->b) < 0 ||
        lab_read_array(state, out_obj, func, "out", &arrays->out) < 0) {
        return -1;
    }
    call->a = &arrays->a;
    call->b = &arrays->b;
    call->out = &arrays->out;
    struct {
        int slot;
        const char *name;
        lab_array *array;
        lab_array **field;
    } optional[] = {{C, "c", &arrays->c, &call->c},
                    {BIAS, "bias", &arrays->bias, &call->bias},
                    {AUX_OUT, "aux_out", &arrays->aux_out, &call->aux_out},
                    {AUX, "aux", &arrays->aux, &call->aux},
                    {BIAS_GRAD_OUT, "bias_grad_out", &arrays->bias_grad_out, &call->bias_grad_out},
                    {SCALE_A, "scale_a", &arrays->scale_a, &call->scale_a},
                    {SCALE_B, "scale_b", &arrays->scale_b, &call->scale_b}};
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++) {
        PyObject *obj = slots[optional[i].slot];
        if (!obj) continue; /* left out, or None */
        if (lab_read_array(state, obj, func, optional[i].name, optional[i].array) < 0) return -1;
        *optional[i].field = optional[i].array;
    }
    return 0;
}

const lab_signature *lab_matmul_signature(void) { return &SIGNATURE; }

static PyObject *py_matmul(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    const char *func = "matmul";
    PyObject *slots[16];
    if (lab_parse_args(state, func, &SIGNATURE, args, nargs, kwnames, slots) < 0) return NULL;
    lab_matmul_arrays arrays;
    PyObject *out_obj = Py_XNewRef(slots[OUT]);
    if (!out_obj) { /* read a and b once to size the new array, then read the call as usual */
        if (lab_read_array_float8(state, slots[A], func, "a", &arrays.a) < 0 ||
            lab_read_array_float8(state, slots[B], func, "b", &arrays.b) < 0) {
            return NULL;
        }
        out_obj = allocate_out(module, state, &arrays.a, &arrays.b, slots[STREAM], func);
        if (!out_obj) return NULL;
    }
    lab_matmul_call description;
    lab_op_call call = {.func = func, .description = &description};
    PyObject *result = NULL;
    if (lab_matmul_read(state, func, slots, out_obj, &arrays, &description) < 0 ||
        lab_parse_stream_arg(state, slots[STREAM], func, &call.stream) < 0) {
        goto done;
    }
    const int work = lab_plan_matmul(&description, func);
    if (work < 0) {
        lab_raise_failure(&state->dispatch);
        goto done;
    }
    if (work > 0 && lab_ensure_cublaslt() < 0) goto done;
    description.planned = 1 + work; /* the kind's plan returns this instead of planning again */
    lab_op_call_add(&call, "out", description.out, 1, 0, 1);
    const lab_matmul_call *d = &description;
    lab_array *const others[] = {d->aux_out, d->bias_grad_out, d->a,       d->b,      d->c,
                                 d->bias,    d->aux,           d->scale_a, d->scale_b};
    const char *names[] = {"aux_out", "bias_grad_out", "a", "b", "c", "bias", "aux", "scale_a", "scale_b"};
    for (int i = 0; i < 9; i++) {
        if (others[i]) lab_op_call_add(&call, names[i], others[i], 1, 0, i < 2);
    }
    if (lab_run_op(&state->dispatch, &lab_matmul_kind, &call) == 0) {
        result = Py_NewRef(out_obj);
    } else {
        lab_raise_failure(&state->dispatch);
    }
done:
    Py_DECREF(out_obj);
    return result;
}

static PyObject *py_cublaslt_info(PyObject *module, PyObject *unused) {
    if (!lab_cublaslt.library) Py_RETURN_NONE;
    return Py_BuildValue("{s:s, s:n}", "path", lab_cublaslt.path, "version",
                         (Py_ssize_t)lab_cublaslt.version);
}

PyMethodDef lab_matmul_methods[] = {
    {"_cublaslt_info", py_cublaslt_info, METH_NOARGS,
     "_cublaslt_info()\n--\n\nThe loaded cuBLASLt's path and version, or None before the first product."},
    {"matmul", (PyCFunction)(void (*)(void))py_matmul, METH_FASTCALL | METH_KEYWORDS,
     "matmul(a, b, out=None, *, c=None, alpha=1.0, beta=None, bias=None, epilogue=None, aux_out=None, "
     "aux=None, bias_grad_out=None, allow_tf32=False, stream=None, scale_a=None, scale_b=None, "
     "fast_accum=False)\n--\n\n"
     "out = epilogue(alpha * a @ b + beta * c + bias) in one cuBLASLt call; returns out (a new lab.Array "
     "when out is None).\n\n"
     "a (..., m, k) and b (..., k, n) from any producer, float16, bfloat16, float32 or float64 (one dtype); "
     "leading dimensions broadcast as NumPy's. out (..., m, n) has their dtype, or float32 for half inputs. "
     "Accumulates in float32 (float64 for float64); allow_tf32=True lets float32 use TF32 tensor cores. Any "
     "view whose rows or columns are contiguous is read as it is (a transpose is a flag, not a copy).\n\n"
     "c: added, scaled by beta (default 1 with c, and c may be out itself). bias: n values added to every "
     "row. epilogue: None, 'relu', 'gelu_tanh' (aux_out= saves its input, for the backward), or 'dgelu' "
     "(out = (a @ b) * gelu'(aux), the backward of 'gelu_tanh'). bias_grad_out: with 'dgelu', out summed "
     "over its rows (n values); with no epilogue, a summed over its last dimension (m values) - the bias "
     "gradient of a linear layer when a is its output gradient transposed.\n\n"
     "float8 (float8_e4m3fn or float8_e5m2, not both e5m2; from producers that name them through DLPack, "
     "as torch does): a row-major, b column-major (b = w.T of a row-major w), scale_a and scale_b "
     "float32 device scalars (out = (scale_a * scale_b) * a @ b, as torch._scaled_mm), out bfloat16 (the "
     "default), float16 or float32, epilogue None, 'relu' or 'gelu_tanh' with or without bias. "
     "fast_accum=True lets the tensor cores keep their partial sums in their own reduced precision instead "
     "of promoting them to float32 along k (faster, less accurate: a forward's choice, not a gradient's).\n\n"
     "cuBLASLt is loaded at the first call (LAB_CUBLASLT, the nvidia-cublas wheel, CUDA_HOME or the "
     "loader's path); its failures are lab.CudaError naming the status."},
    {NULL, NULL, 0, NULL},
};

const lab_signed_function lab_matmul_signatures[] = {{"matmul", &SIGNATURE}, {NULL, NULL}};
