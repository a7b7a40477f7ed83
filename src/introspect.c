/* introspect.c - private helpers that show what the binding decided, for tests and teaching:
 * lab.lab._array_info(obj) returns the lab_array that lab_read_array() filled, and
 * lab.lab._plan(out, *inputs) the launch plan.c makes for them, as dicts. Neither calls CUDA. */
#include "introspect.h"

#include "array.h"
#include "dtype.h"
#include "plan.h"

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

static PyObject *py_plan(PyObject *module, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"integers", NULL};
    int integers = 1;
    PyObject *empty = PyTuple_New(0);
    if (!empty) return NULL;
    int ok = PyArg_ParseTupleAndKeywords(empty, kwargs, "|p:_plan", keywords, &integers);
    Py_DECREF(empty);
    if (!ok) return NULL;
    const Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 2 || n > LAB_MAX_OPERANDS)
        return PyErr_Format(PyExc_TypeError, "_plan(out, *inputs) takes an output and 1 to %d inputs", LAB_MAX_OPERANDS - 1);
    static const char *const names[LAB_MAX_OPERANDS] = {"out", "in0", "in1", "in2"};
    lab_operands ops;
    ops.count = (int)n;
    for (int i = 0; i < ops.count; i++) {
        ops.names[i] = names[i];
        if (lab_read_array(lab_get_state(module), PyTuple_GET_ITEM(args, i), "_plan", names[i], &ops.arrays[i]) < 0)
            return NULL;
    }
    lab_elementwise_launch plan;
    if (lab_plan_elementwise(&ops, integers, "_plan", &plan) < 0) return NULL;
    PyObject *shape = int64_tuple(plan.shape, plan.ndim);
    PyObject *strides = PyTuple_New(ops.count), *data = PyTuple_New(ops.count);
    PyObject *result = NULL;
    for (int i = 0; strides && data && shape && i < ops.count; i++) {
        PyObject *s = int64_tuple(plan.byte_strides[i], plan.ndim);
        PyObject *d = PyLong_FromSize_t((size_t)(uintptr_t)plan.data[i]);
        if (!s || !d) {
            Py_XDECREF(s);
            Py_XDECREF(d);
            Py_CLEAR(strides);
            break;
        }
        PyTuple_SET_ITEM(strides, i, s);
        PyTuple_SET_ITEM(data, i, d);
    }
    if (shape && strides && data)
        result = Py_BuildValue("{s:s, s:s, s:O, s:O, s:O, s:L}", "path", lab_path_names[plan.path], "compute_dtype",
                               lab_dtype_names[plan.compute], "shape", shape, "byte_strides", strides, "data", data,
                               "numel", (long long)plan.numel);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(data);
    return result;
}

PyMethodDef lab_introspect_methods[] = {
    {"_plan", (PyCFunction)(void (*)(void))py_plan, METH_VARARGS | METH_KEYWORDS,
     "_plan(out, *inputs, integers=True)\n--\n\nPrivate: the launch plan lab makes for these operands (path, "
     "compute_dtype, merged shape, byte_strides per operand, data pointers after flipping, numel). No CUDA call."},
    {"_array_info", py_array_info, METH_O,
     "_array_info(obj, /)\n--\n\nPrivate: what lab reads from a CUDA array (source protocol, dtype, shape, strides in "
     "elements, numel, data pointer, readonly, device or -1, declared stream or None, contiguous). No CUDA call."},
    {NULL, NULL, 0, NULL},
};
