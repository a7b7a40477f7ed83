/* reduction.c - lab.sum / mean / prod / amax / amin / argmax / argmin / norm / var / std /
 * logsumexp / dot (level 2 for dispatch/reduction_kind.c).
 *
 * Each function parses (x, out, *, axis=None, keepdim=False, stream=None) - norm adds `ord`, var
 * and std `correction`; dot takes (a, b, out, *, stream=None) - reads the arrays,
 * turns `axis` into a mask of the input's reduced dimensions (negative axes count from the end;
 * out of range or repeated is a ValueError naming 'axis') and hands the call to the op driver as
 * the reduction kind, which checks shapes and dtypes and plans the launch. */
#include "binding/reduction.h"

#include "binding/args.h"
#include "binding/array_reader.h"
#include "binding/errors.h"
#include "dispatch/reduction_kind.h"

#define AXIS_ACCEPTED "None, an int or a tuple of ints"

/* `axis` -> bit d set for each reduced dimension d. None: every dimension. */
static int read_axes(PyObject *obj, int ndim, int single_only, const char *func, uint32_t *mask) {
    *mask = 0;
    if (!obj || obj == Py_None) {
        *mask = ndim ? (uint32_t)((1u << ndim) - 1) : 0;
        return 0;
    }
    if (PyTuple_Check(obj) || PyList_Check(obj)) {
        if (single_only) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument 'axis' must be None or an int (one dimension), got %s", func,
                         Py_TYPE(obj)->tp_name);
            return -1;
        }
        /* A tuple snapshot of a list: an item's __index__ may change the list while it is read. */
        PyObject *axes = PySequence_Tuple(obj);
        if (!axes) return -1;
        int rc = 0;
        for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(axes); i++) {
            int axis;
            rc = lab_read_axis(PyTuple_GET_ITEM(axes, i), ndim, AXIS_ACCEPTED, func, &axis);
            if (rc == 0 && ((*mask >> axis) & 1)) {
                PyErr_Format(PyExc_ValueError, "%s(): argument 'axis' names dimension %d twice", func, axis);
                rc = -1;
            }
            if (rc == 0) *mask |= 1u << axis;
        }
        Py_DECREF(axes);
        return rc;
    }
    int axis;
    if (lab_read_axis(obj, ndim, AXIS_ACCEPTED, func, &axis) < 0) return -1;
    *mask = 1u << axis;
    return 0;
}

/* What a reduction takes besides (x, out, *, axis, keepdim, stream): norm's `ord`, var's and std's
 * `correction`. */
typedef enum { EXTRA_NONE, EXTRA_ORD, EXTRA_CORRECTION } reduction_extra;

/* norm's ord -> the op: 1, 2 or inf (as torch.linalg.vector_norm's; other orders are not built). */
static int read_ord(PyObject *obj, const char *func, lab_reduce_op *op) {
    if (!obj) return 0;
    double ord = 2.0;
    if (PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'ord' must be 1, 2 or inf, got bool", func);
        return -1;
    }
    if (lab_read_real(obj, func, "ord", &ord) < 0) return -1;
    if (ord == 1.0 || ord == 2.0 || ord == Py_HUGE_VAL) {
        *op = ord == 1.0 ? LAB_REDUCE_NORM1 : ord == 2.0 ? LAB_REDUCE_NORM2 : LAB_REDUCE_NORMINF;
        return 0;
    }
    PyErr_Format(PyExc_ValueError, "%s(): argument 'ord' must be 1, 2 or inf (float('inf')), got %R", func,
                 obj);
    return -1;
}

/* Reads the arrays and hands the call to the op driver. in2 / in2_obj: dot's second input. */
static PyObject *run_reduction_call(lab_state *state, const char *func, lab_reduction_call *description,
                                    PyObject *x_obj, PyObject *in2_obj, PyObject *out_obj, PyObject *axis_obj,
                                    int single_axis, PyObject *stream_obj) {
    lab_array in, in2, out;
    if (lab_read_array(state, x_obj, func, description->in_names[0], &in) < 0) return NULL;
    if (in2_obj && lab_read_array(state, in2_obj, func, description->in_names[1], &in2) < 0) return NULL;
    if (lab_read_array(state, out_obj, func, "out", &out) < 0) return NULL;
    description->in = &in;
    description->in2 = in2_obj ? &in2 : NULL;
    description->out = &out;
    if (read_axes(axis_obj, in.ndim, single_axis, func, &description->reduced) < 0) return NULL;
    lab_op_call call = {.func = func, .description = description};
    if (lab_parse_stream_arg(state, stream_obj, func, &call.stream) < 0) return NULL;
    lab_op_call_add(&call, "out", &out, 1, 0, 1);
    lab_op_call_add(&call, description->in_names[0], &in, 1, 0, 0);
    if (in2_obj) lab_op_call_add(&call, description->in_names[1], &in2, 1, 0, 0);
    if (lab_run_op(&state->dispatch, &lab_reduction_kind, &call) < 0) {
        return lab_raise_failure(&state->dispatch);
    }
    return Py_NewRef(out_obj);
}

#define P LAB_PARAM
#define COMMON P(x, ARRAY), P(out, ARRAY), P(axis, AXIS | LAB_OR_NONE), P(keepdim, FLAG)
#define STREAM P(stream, STREAM | LAB_OR_NONE)
/* (x, out, *, axis, keepdim), the extra keyword where there is one (slot 4), then stream (the last) */
static const lab_signature SIGNATURES[3] = {
    [EXTRA_NONE] = {2, 2, 5, {COMMON, STREAM}},
    [EXTRA_ORD] = {2, 2, 6, {COMMON, P(ord, REAL), STREAM}},
    [EXTRA_CORRECTION] = {2, 2, 6, {COMMON, P(correction, REAL), STREAM}},
};
static const lab_signature DOT = {3, 3, 4, {P(a, ARRAY), P(b, ARRAY), P(out, ARRAY), STREAM}};
#undef STREAM
#undef COMMON
#undef P

static PyObject *run_reduction(PyObject *module, const char *func, lab_reduce_op op, int single_axis,
                               reduction_extra extra, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    PyObject *slots[6] = {NULL};
    if (lab_parse_args(state, func, &SIGNATURES[extra], args, nargs, kwnames, slots) < 0) return NULL;
    lab_reduction_call description = {.op = op, .in_names = {"x", NULL}, .correction = 1.0};
    const int bad_extra =
        extra == EXTRA_ORD ? read_ord(slots[4], func, &description.op) < 0
        : extra == EXTRA_CORRECTION
            ? lab_read_real_in(slots[4], func, "correction", &LAB_NONNEGATIVE, &description.correction) < 0
            : 0;
    if (bad_extra || lab_read_flag(slots[3], func, "keepdim", &description.keepdim) < 0) return NULL;
    PyObject *stream = slots[SIGNATURES[extra].n_params - 1];
    return run_reduction_call(state, func, &description, slots[0], NULL, slots[1], slots[2], single_axis,
                              stream);
}

#define LAB_REDUCTION_FUNCTION(name, op, single_axis, extra)                                                 \
    static PyObject *py_##name(PyObject *module, PyObject *const *args, Py_ssize_t nargs,                    \
                               PyObject *kwnames) {                                                          \
        return run_reduction(module, #name, op, single_axis, extra, args, nargs, kwnames);                   \
    }
LAB_REDUCTION_FUNCTION(sum, LAB_REDUCE_SUM, 0, EXTRA_NONE)
LAB_REDUCTION_FUNCTION(mean, LAB_REDUCE_MEAN, 0, EXTRA_NONE)
LAB_REDUCTION_FUNCTION(prod, LAB_REDUCE_PROD, 0, EXTRA_NONE)
LAB_REDUCTION_FUNCTION(amax, LAB_REDUCE_AMAX, 0, EXTRA_NONE)
LAB_REDUCTION_FUNCTION(amin, LAB_REDUCE_AMIN, 0, EXTRA_NONE)
LAB_REDUCTION_FUNCTION(argmax, LAB_REDUCE_ARGMAX, 1, EXTRA_NONE)
LAB_REDUCTION_FUNCTION(argmin, LAB_REDUCE_ARGMIN, 1, EXTRA_NONE)
LAB_REDUCTION_FUNCTION(logsumexp, LAB_REDUCE_LOGSUMEXP, 0, EXTRA_NONE)
LAB_REDUCTION_FUNCTION(norm, LAB_REDUCE_NORM2, 0, EXTRA_ORD)
LAB_REDUCTION_FUNCTION(var, LAB_REDUCE_VAR, 0, EXTRA_CORRECTION)
LAB_REDUCTION_FUNCTION(std, LAB_REDUCE_STD, 0, EXTRA_CORRECTION)
#undef LAB_REDUCTION_FUNCTION

/* dot(a, b, out, *, stream=None): the reduction of a * b over their one dimension. */
static PyObject *py_dot(PyObject *module, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
    PyObject *slots[4];
    if (lab_parse_args(state, "dot", &DOT, args, nargs, kwnames, slots) < 0) return NULL;
    lab_reduction_call description = {.op = LAB_REDUCE_DOT, .in_names = {"a", "b"}};
    return run_reduction_call(state, "dot", &description, slots[0], slots[1], slots[2], NULL, 0, slots[3]);
}

#define LAB_REDUCTION_DOC_TAIL                                                                               \
    "\n\nWrites into `out` and returns it. axis: None (every dimension), an int or a tuple of ints, "        \
    "negative counting from the end; `out` has the input's shape without the reduced dimensions (with "      \
    "them as size 1 when keepdim=True), any layout and dtype (the result is cast to it). x: any "            \
    "producer, any strides. Deterministic: the same input gives bitwise the same result on every run."
#define LAB_ACCUMULATE_DOC                                                                                   \
    " Accumulates in float32 for float16/bfloat16/float32, float64 for float64, int64 for integers."
#define LAB_METHOD(name, sig, doc)                                                                           \
    {#name, (PyCFunction)(void (*)(void))py_##name, METH_FASTCALL | METH_KEYWORDS,                           \
     #name "(x, out, *, " sig ", stream=None)\n--\n\n" doc}

PyMethodDef lab_reduction_methods[] = {
    LAB_METHOD(
        sum, "axis=None, keepdim=False",
        "out = the sum of x over axis; 0 for an empty reduction." LAB_ACCUMULATE_DOC LAB_REDUCTION_DOC_TAIL),
    LAB_METHOD(
        mean, "axis=None, keepdim=False",
        "out = the mean of x over axis; NaN for an empty reduction. Floating-point x only." LAB_ACCUMULATE_DOC
            LAB_REDUCTION_DOC_TAIL),
    LAB_METHOD(prod, "axis=None, keepdim=False",
               "out = the product of x over axis; 1 for an empty reduction." LAB_ACCUMULATE_DOC
                   LAB_REDUCTION_DOC_TAIL),
    LAB_METHOD(amax, "axis=None, keepdim=False",
               "out = the largest element of x over axis; NaN propagates. An empty reduction is a "
               "ValueError." LAB_REDUCTION_DOC_TAIL),
    LAB_METHOD(amin, "axis=None, keepdim=False",
               "out = the smallest element of x over axis; NaN propagates. An empty reduction is a "
               "ValueError." LAB_REDUCTION_DOC_TAIL),
    LAB_METHOD(argmax, "axis=None, keepdim=False",
               "out = the index of the largest element of x along axis (an int), or into x flattened "
               "(axis=None); the first on ties, a NaN wins (as torch.argmax). `out` is int64 or "
               "int32." LAB_REDUCTION_DOC_TAIL),
    LAB_METHOD(argmin, "axis=None, keepdim=False",
               "out = the index of the smallest element of x along axis (an int), or into x flattened "
               "(axis=None); the first on ties, a NaN wins (as torch.argmin). `out` is int64 or "
               "int32." LAB_REDUCTION_DOC_TAIL),
    LAB_METHOD(
        norm, "axis=None, keepdim=False, ord=2",
        "out = the vector norm of x over axis: ord=2 sqrt(sum(x**2)), ord=1 sum(|x|), ord=inf "
        "max(|x|) (NaN propagates; an empty inf-norm is a ValueError). Floating-point x only; "
        "accumulates in float32 for float16/bfloat16/float32, float64 for float64." LAB_REDUCTION_DOC_TAIL),
    LAB_METHOD(var, "axis=None, keepdim=False, correction=1",
               "out = the variance of x over axis: sum((x - mean)**2) / (n - correction). correction=1 (the "
               "default, as torch.var) is the unbiased sample variance, 0 the population variance; n <= "
               "correction gives inf or NaN, as torch. One pass over x (shifted sums). Floating-point x "
               "only." LAB_ACCUMULATE_DOC LAB_REDUCTION_DOC_TAIL),
    LAB_METHOD(std, "axis=None, keepdim=False, correction=1",
               "out = the standard deviation of x over axis: sqrt(lab.var(x, correction=correction)); "
               "correction=1 by default, as torch.std. Floating-point x only." LAB_ACCUMULATE_DOC
                   LAB_REDUCTION_DOC_TAIL),
    LAB_METHOD(logsumexp, "axis=None, keepdim=False",
               "out = log(sum(exp(x))) over axis, computed as max + log(sum(exp(x - max))) so it never "
               "overflows; -inf for an empty reduction, +inf where x holds +inf, NaN propagates. "
               "Floating-point x only." LAB_ACCUMULATE_DOC LAB_REDUCTION_DOC_TAIL),
    {"dot", (PyCFunction)(void (*)(void))py_dot, METH_FASTCALL | METH_KEYWORDS,
     "dot(a, b, out, *, stream=None)\n--\n\nout = sum(a * b) for two 1-dimensional arrays of one length and "
     "one floating-point dtype (as torch.dot); `out` is 0-dimensional, any dtype (the result is cast to it). "
     "Accumulates with fused multiply-adds in float32 for float16/bfloat16/float32, float64 for float64. "
     "Writes into `out` and returns it. Any producer, any strides. Deterministic: the same input gives "
     "bitwise the same result on every run."},
    {NULL, NULL, 0, NULL},
};
#undef LAB_METHOD

const lab_signed_function lab_reduction_signatures[] = {
    {"sum", &SIGNATURES[EXTRA_NONE]},
    {"mean", &SIGNATURES[EXTRA_NONE]},
    {"prod", &SIGNATURES[EXTRA_NONE]},
    {"amax", &SIGNATURES[EXTRA_NONE]},
    {"amin", &SIGNATURES[EXTRA_NONE]},
    {"argmax", &SIGNATURES[EXTRA_NONE]},
    {"argmin", &SIGNATURES[EXTRA_NONE]},
    {"logsumexp", &SIGNATURES[EXTRA_NONE]},
    {"norm", &SIGNATURES[EXTRA_ORD]},
    {"var", &SIGNATURES[EXTRA_CORRECTION]},
    {"std", &SIGNATURES[EXTRA_CORRECTION]},
    {"dot", &DOT},
    {NULL, NULL},
};
