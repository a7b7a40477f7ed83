/* args.c - the FASTCALL argument parser described in args.h. */
#include "binding/args.h"

static int find_param(lab_state *state, const lab_signature *sig, PyObject *keyword) {
    for (int i = 0; i < sig->n_params; i++) /* call sites intern keyword names: usually a pointer hit */
        if (state->names[sig->params[i].name] == keyword) return i;
    for (int i = 0; i < sig->n_params; i++)
        if (PyUnicode_Compare(state->names[sig->params[i].name], keyword) == 0) return i;
    return -1;
}

const lab_signature LAB_NO_PARAMETERS = {0, 0, 0, {{0, 0}}};

/* What a parameter of each kind must be, for the message that refuses None. */
static const char *const KIND_EXPECTED[LAB_NUM_KINDS] = {
#define LAB_KIND(id, name, expected) [LAB_##id] = expected,
#include "binding/param_kinds.def"
#undef LAB_KIND
};

static const char *kind_expected(int spec) {
    const int kind = spec & LAB_KIND_MASK;
    return kind > 0 && kind < LAB_NUM_KINDS ? KIND_EXPECTED[kind] : "given";
}

int lab_parse_args(lab_state *state, const char *func, const lab_signature *sig, PyObject *const *args,
                   Py_ssize_t nargs, PyObject *kwnames, PyObject **slots) {
    LAB_ASSERT_NO_ERROR();
    nargs = PyVectorcall_NARGS(nargs);
    if (nargs > sig->n_positional) {
        PyErr_Format(PyExc_TypeError, "%s() takes %s%d positional arguments but %zd were given", func,
                     sig->n_required < sig->n_positional ? "at most " : "", sig->n_positional, nargs);
        return -1;
    }
    for (int i = 0; i < sig->n_params; i++) slots[i] = i < nargs ? args[i] : NULL;

    const Py_ssize_t n_keywords = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < n_keywords; k++) {
        PyObject *keyword = PyTuple_GET_ITEM(kwnames, k);
        int i = find_param(state, sig, keyword);
        if (i < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", func, keyword);
            return -1;
        }
        if (slots[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%U'", func, keyword);
            return -1;
        }
        slots[i] = args[nargs + k];
    }
    for (int i = 0; i < sig->n_params; i++) {
        const int spec = sig->params[i].spec;
        PyObject *name = state->names[sig->params[i].name];
        if (slots[i] == Py_None) {
            if (spec & LAB_OR_NONE) {
                slots[i] = NULL; /* None means "not given": one spelling for every reader */
                continue;
            }
            PyErr_Format(PyExc_TypeError, "%s(): argument '%U' must be %s, not None", func, name,
                         kind_expected(spec));
            return -1;
        }
        if (!slots[i] && i < sig->n_required) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%U' (pos %d)", func, name, i + 1);
            return -1;
        }
        if (!slots[i] && (spec & LAB_REQUIRED)) {
            PyErr_Format(PyExc_TypeError, "%s() missing required keyword argument '%U'", func, name);
            return -1;
        }
    }
    return 0;
}

/* A stream handle from a Python int: 0 is the legacy default stream when given as `stream=`. */
static int handle_from_int(PyObject *value, const char *func, const char *what, cudaStream_t *stream) {
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'stream'%s must be an int stream handle, got %s", func,
                     what, Py_TYPE(value)->tp_name);
        return -1;
    }
    unsigned long long handle = PyLong_AsUnsignedLongLong(value);
    if (handle == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument 'stream'%s = %R is not a valid stream handle (expected a "
                     "non-negative int that fits a pointer)",
                     func, what, value);
        return -1;
    }
    *stream = (cudaStream_t)(uintptr_t)handle;
    return 0;
}

/* Gets an optional attribute: 1 found, 0 absent, -1 error. */
static int optional_attr(PyObject *obj, PyObject *name, PyObject **value) {
    *value = PyObject_GetAttr(obj, name);
    if (*value) return 1;
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
    PyErr_Clear();
    return 0;
}

static int parse_stream_handle(lab_state *state, PyObject *obj, const char *func, cudaStream_t *stream);

int lab_parse_stream_arg(lab_state *state, PyObject *obj, const char *func, lab_stream_arg *stream) {
    LAB_ASSERT_NO_ERROR();
    stream->given = 0;
    stream->handle = 0;
    stream->owner = NULL;
    if (!obj || obj == Py_None) return 0;
    stream->given = 1;
    stream->owner = obj;
    return parse_stream_handle(state, obj, func, &stream->handle);
}

/* The handle of a stream argument that is not None. */
static int parse_stream_handle(lab_state *state, PyObject *obj, const char *func, cudaStream_t *stream) {
    if (PyLong_Check(obj)) {
        if (PyBool_Check(obj)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument 'stream' must be an int handle or a stream object, got bool", func);
            return -1;
        }
        return handle_from_int(obj, func, "", stream);
    }

    PyObject *attr = NULL;
    int found = optional_attr(obj, LAB_NAME_OBJ(state, cuda_stream_protocol), &attr);
    if (found < 0) return -1;
    if (found) {
        if (!PyCallable_Check(attr)) {
            PyErr_Format(PyExc_TypeError,
                         "%s(): argument 'stream': its __cuda_stream__ must be a method returning (version, "
                         "handle), got %s",
                         func, Py_TYPE(attr)->tp_name);
            Py_DECREF(attr);
            return -1;
        }
        PyObject *result = PyObject_CallNoArgs(attr);
        Py_DECREF(attr);
        if (!result) return -1;
        int rc = -1;
        if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
            PyErr_Format(
                PyExc_TypeError,
                "%s(): argument 'stream': its __cuda_stream__() must return a tuple (version, handle), "
                "got %R",
                func, result);
        } else {
            rc = handle_from_int(PyTuple_GET_ITEM(result, 1), func, " (its __cuda_stream__()[1])", stream);
        }
        Py_DECREF(result);
        return rc;
    }
    const lab_name fallbacks[2] = {LAB_NAME_cuda_stream, LAB_NAME_ptr};
    for (int i = 0; i < 2; i++) {
        found = optional_attr(obj, state->names[fallbacks[i]], &attr);
        if (found < 0) return -1;
        if (found) {
            int rc = handle_from_int(attr, func, i == 0 ? " (its .cuda_stream)" : " (its .ptr)", stream);
            Py_DECREF(attr);
            return rc;
        }
    }
    PyErr_Format(PyExc_TypeError,
                 "%s(): argument 'stream' must be None, an int handle, or an object with __cuda_stream__() "
                 "(or .cuda_stream / .ptr), got %s",
                 func, Py_TYPE(obj)->tp_name);
    return -1;
}

/* An int too large for a double is an OverflowError that names the argument. */
static int raise_too_large(const char *func, const char *name) {
    PyErr_Clear();
    PyErr_Format(PyExc_OverflowError,
                 "%s(): argument '%s' is too large to convert to a float (beyond +-1.8e308)", func, name);
    return -1;
}

int lab_read_scalar(PyObject *obj, const char *func, const char *name, lab_scalar_arg *scalar) {
    LAB_ASSERT_NO_ERROR();
    scalar->name = name;
    scalar->type_name = Py_TYPE(obj)->tp_name;
    scalar->is_integer = 0;
    scalar->fits_int64 = 0;
    scalar->as_int = 0;
    if (!PyFloat_Check(obj) && PyIndex_Check(obj)) { /* int, bool, numpy integers */
        PyObject *index = PyNumber_Index(obj);
        if (!index) return -1;
        int overflow = 0;
        const long long value = PyLong_AsLongLongAndOverflow(index, &overflow);
        scalar->as_float = overflow ? PyLong_AsDouble(index) : (double)value;
        Py_DECREF(index);
        if (value == -1 && !overflow && PyErr_Occurred()) return -1;
        if (scalar->as_float == -1.0 && PyErr_Occurred()) return raise_too_large(func, name);
        scalar->is_integer = 1;
        scalar->fits_int64 = !overflow;
        scalar->as_int = overflow ? 0 : value;
        return 0;
    }
    return lab_read_real(obj, func, name, &scalar->as_float);
}

int lab_read_real(PyObject *obj, const char *func, const char *name, double *value) {
    LAB_ASSERT_NO_ERROR();
    if (!obj) return 0;
    const double read = PyFloat_AsDouble(obj);
    if (read == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) return raise_too_large(func, name);
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1; /* the object's own __float__ failed */
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be a real number, got %s", func, name,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *value = read;
    return 0;
}

const lab_real_range LAB_NONNEGATIVE = {0.0, Py_HUGE_VAL, 0, 1, "a finite number >= 0"};
const lab_real_range LAB_POSITIVE = {0.0, Py_HUGE_VAL, 1, 1, "a finite number > 0"};
const lab_real_range LAB_UNIT = {0.0, 1.0, 0, 0, "a number in [0, 1]"};
const lab_real_range LAB_UNIT_OPEN = {0.0, 1.0, 0, 1, "a number in [0, 1)"};

int lab_read_real_in(PyObject *obj, const char *func, const char *name, const lab_real_range *range,
                     double *value) {
    LAB_ASSERT_NO_ERROR();
    if (!obj) return 0;
    if (PyBool_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be %s, got bool", func, name,
                     range->expected);
        return -1;
    }
    double read;
    if (lab_read_real(obj, func, name, &read) < 0) return -1;
    const int above_low = range->low_open ? read > range->low : read >= range->low;
    const int below_high = range->high_open ? read < range->high : read <= range->high;
    if (!(above_low && below_high)) { /* NaN fails both */
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' must be %s, got %R", func, name, range->expected,
                     obj);
        return -1;
    }
    *value = read;
    return 0;
}

int lab_read_flag(PyObject *obj, const char *func, const char *name, int *value) {
    LAB_ASSERT_NO_ERROR();
    if (!obj) return 0;
    const int truth = PyObject_IsTrue(obj);
    if (truth < 0) return -1; /* the object's own __bool__ failed: its error, as Python's `if` gives it */
    *value = truth;
    return 0;
}

/* An int argument (not bool) as int64: 0 with *value, or with *overflow set and *index holding the
 * int for the message (a new reference) when it does not fit; -1 with TypeError (`accepted` says
 * what the function takes) or the object's own __index__ error. */
static int read_index(PyObject *obj, const char *func, const char *name, const char *accepted, int64_t *value,
                      int *overflow, PyObject **index) {
    LAB_ASSERT_NO_ERROR();
    if (PyBool_Check(obj) || !PyIndex_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be %s, got %s", func, name, accepted,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    *index = PyNumber_Index(obj);
    if (!*index) return -1;
    *overflow = 0;
    *value = PyLong_AsLongLongAndOverflow(*index, overflow);
    return 0; /* an int from __index__ converts without error, or overflows */
}

int lab_read_int64(PyObject *obj, const char *func, const char *name, int64_t *value) {
    if (!obj) return 0;
    int overflow;
    int64_t read;
    PyObject *index;
    if (read_index(obj, func, name, "an int", &read, &overflow, &index) < 0) return -1;
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "%s(): argument '%s' = %R does not fit in int64", func, name,
                     index);
    }
    Py_DECREF(index);
    if (overflow) return -1;
    *value = read;
    return 0;
}

const lab_int_range LAB_COUNT = {0, INT64_MAX, "an int >= 0"};
const lab_int_range LAB_POSITIVE_INT = {1, INT64_MAX, "an int >= 1"};

int lab_read_int_in(PyObject *obj, const char *func, const char *name, const lab_int_range *range,
                    int64_t *value) {
    if (!obj) return 0;
    int64_t read;
    if (lab_read_int64(obj, func, name, &read) < 0) return -1;
    if (read < range->low || read > range->high) {
        PyErr_Format(PyExc_ValueError, "%s(): argument '%s' must be %s, got %lld", func, name,
                     range->expected, (long long)read);
        return -1;
    }
    *value = read;
    return 0;
}

int lab_read_device(PyObject *obj, const char *func, int *device) {
    if (!obj) return 0;
    int64_t value = 0;
    if (lab_read_int64(obj, func, "device", &value) < 0) return -1;
    if (value < 0 || value >= LAB_MAX_DEVICES) {
        PyErr_Format(PyExc_ValueError,
                     "%s(): argument 'device' must be a CUDA device ordinal (0 .. %d), got %lld", func,
                     LAB_MAX_DEVICES - 1, (long long)value);
        return -1;
    }
    *device = (int)value;
    return 0;
}

/* One axis: an int (not bool), negative counting from the end, within the input's rank. */
int lab_read_axis(PyObject *obj, int ndim, const char *accepted, const char *func, int *axis) {
    int overflow;
    int64_t value;
    PyObject *index;
    if (read_index(obj, func, "axis", accepted, &value, &overflow, &index) < 0) return -1;
    const int in_range = !overflow && value >= -ndim && value < ndim;
    if (!in_range) {
        PyErr_Format(
            PyExc_ValueError,
            "%s(): argument 'axis' = %R is out of range for a %d-dimensional input (valid: %d .. %d)", func,
            index, ndim, -ndim, ndim - 1);
    }
    Py_DECREF(index);
    if (!in_range) return -1;
    *axis = (int)(value < 0 ? value + ndim : value);
    return 0;
}

PyObject *lab_shape_tuple(const int64_t *values, int n) {
    PyObject *tuple = PyTuple_New(n);
    for (int d = 0; tuple && d < n; d++) {
        PyObject *item = PyLong_FromLongLong(values[d]);
        if (!item) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, d, item);
    }
    return tuple;
}
