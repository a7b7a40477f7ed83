/* introspect.c - private helpers that show what the binding decided, for tests and teaching:
 * lab.lab._array_info(obj) returns the lab_array that lab_read_array() filled, as a dict. */
#include "introspect.h"

#include "array.h"
#include "dtype.h"

static PyObject *int64_tuple(const int64_t *values, int n) {
    PyObject *tuple = PyTuple_New(n);
    if (!tuple) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *item = PyLong_FromLongLong(values[i]);
        if (!item) {
            Py_DECREF(tuple);
            return NULL;
        }
        PyTuple_SET_ITEM(tuple, i, item);
    }
    return tuple;
}

static PyObject *py_array_info(PyObject *module, PyObject *obj) {
    lab_array array;
    if (lab_read_array(lab_get_state(module), obj, "_array_info", "obj", &array) < 0) return NULL;
    PyObject *shape = int64_tuple(array.shape, array.ndim);
    PyObject *strides = int64_tuple(array.strides, array.ndim);
    PyObject *stream = array.has_stream ? PyLong_FromSize_t((size_t)array.stream) : Py_NewRef(Py_None);
    PyObject *info = NULL;
    if (shape && strides && stream)
        info = Py_BuildValue("{s:s, s:s, s:O, s:O, s:L, s:K, s:O, s:i, s:O, s:O}", "source",
                             array.source == LAB_SOURCE_CAI ? "cuda_array_interface" : "dlpack_exchange", "dtype",
                             lab_dtype_names[array.dtype], "shape", shape, "strides", strides, "numel",
                             (long long)array.numel, "data", (unsigned long long)(uintptr_t)array.data, "readonly",
                             array.readonly ? Py_True : Py_False, "device", array.device, "stream", stream,
                             "contiguous", lab_array_is_contiguous(&array) ? Py_True : Py_False);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(stream);
    return info;
}

PyMethodDef lab_introspect_methods[] = {
    {"_array_info", py_array_info, METH_O,
     "_array_info(obj, /)\n--\n\nPrivate: what lab reads from a CUDA array (source protocol, dtype, shape, strides in "
     "elements, numel, data pointer, readonly, device or -1, declared stream or None, contiguous). No CUDA call."},
    {NULL, NULL, 0, NULL},
};
