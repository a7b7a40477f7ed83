/* reduction.c - lab.sum / mean / prod / amax / amin / argmax / argmin (level 2 for
 * dispatch/reduction_kind.c).
 *
 * Each function parses (x, out, *, axis=None, keepdim=False, stream=None), reads both arrays,
 * turns `axis` into a mask of the input's reduced dimensions (negative axes count from the end;
 * out of range or repeated is a ValueError naming 'axis') and hands the call to the op driver as
 * the reduction kind, which checks shapes and dtypes and plans the launch. */
#include "binding/reduction.h"

#include "binding/args.h"
#include "binding/array_reader.h"
#include "dispatch/reduction_kind.h"

/* One axis: an int (not bool), negative counting from the end, within the input's rank. */
static int read_axis(PyObject *obj, int ndim, const char *func, int *axis) {
    if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'axis' must be None, an int or a tuple of ints, got %s",
                     func, Py_TYPE(obj)->tp_name);
        return -1;
    }
    const Py_ssize_t value = PyNumber_AsSsize_t(obj, NULL);
    if (value == -1 && PyErr_Occurred()) return -1;
    if (value < -ndim || value >= ndim) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument 'axis' = %zd is out of range for a %d-dimensional input "
                     "(valid: %d .. %d)",
                     func, value, ndim, -ndim, ndim - 1);
        return -1;
    }
    *axis = (int)(value < 0 ? value + ndim : value);
    return 0;
}

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
        const Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
        for (Py_ssize_t i = 0; i < n; i++) {
            int axis;
            if (read_axis(PySequence_Fast_GET_ITEM(obj, i), ndim, func, &axis) < 0) return -1;
            if ((*mask >> axis) & 1) {
                PyErr_Format(PyExc_ValueError, "%s(): argument 'axis' names dimension %d twice", func, axis);
                return -1;
            }
            *mask |= 1u << axis;
        }
        return 0;
    }
    int axis;
    if (read_axis(obj, ndim, func, &axis) < 0) return -1;
    *mask = 1u << axis;
    return 0;
}

static PyObject *run_reduction(PyObject *module, const char *func, lab_reduce_op op, int single_axis,
                               PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    lab_state *state = lab_get_state(module);
#define N(id) LAB_NAME_##id
    static const lab_signature signature = {2, 2, 5, {N(x), N(out), N(axis), N(keepdim), N(stream)}};
#undef N
    PyObject *slots[5];
    if (lab_parse_args(state, func, &signature, args, nargs, kwnames, slots) < 0) return NULL;
    lab_array in, out;
    if (lab_read_array(state, slots[0], func, "x", &in) < 0) return NULL;
    if (lab_read_array(state, slots[1], func, "out", &out) < 0) return NULL;
    lab_reduction_call description = {.op = op, .in = &in, .out = &out};
    if (read_axes(slots[2], in.ndim, single_axis, func, &description.reduced) < 0) return NULL;
    description.keepdim = slots[3] ? PyObject_IsTrue(slots[3]) : 0;
    if (description.keepdim < 0) return NULL;
    lab_op_call call = {.func = func, .description = &description};
    if (lab_parse_stream_arg(state, slots[4], func, &call.stream) < 0) return NULL;
    lab_op_call_add(&call, "out", &out, 1, 0, 1);
    lab_op_call_add(&call, "x", &in, 1, 0, 0);
    if (lab_run_op(&state->dispatch, &lab_reduction_kind, &call) < 0) return NULL;
    return Py_NewRef(slots[1]);
}

#define LAB_REDUCTION_FUNCTION(name, op, single_axis)                                                        \
    static PyObject *py_##name(PyObject *module, PyObject *const *args, Py_ssize_t nargs,                    \
                               PyObject *kwnames) {                                                          \
        return run_reduction(module, #name, op, single_axis, args, nargs, kwnames);                          \
    }
LAB_REDUCTION_FUNCTION(sum, LAB_REDUCE_SUM, 0)
LAB_REDUCTION_FUNCTION(mean, LAB_REDUCE_MEAN, 0)
LAB_REDUCTION_FUNCTION(prod, LAB_REDUCE_PROD, 0)
LAB_REDUCTION_FUNCTION(amax, LAB_REDUCE_AMAX, 0)
LAB_REDUCTION_FUNCTION(amin, LAB_REDUCE_AMIN, 0)
LAB_REDUCTION_FUNCTION(argmax, LAB_REDUCE_ARGMAX, 1)
LAB_REDUCTION_FUNCTION(argmin, LAB_REDUCE_ARGMIN, 1)
#undef LAB_REDUCTION_FUNCTION

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
    {NULL, NULL, 0, NULL},
};
#undef LAB_METHOD
