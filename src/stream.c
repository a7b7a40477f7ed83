/* stream.c - the stream policy of stream.h. */
#include "stream.h"

/* A stream handle from a Python int: 0 is the legacy default stream when given as `stream=`. */
static int handle_from_int(PyObject *value, const char *func, const char *what, cudaStream_t *stream) {
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s(): %s must be an int stream handle, got %s", func, what, Py_TYPE(value)->tp_name);
        return -1;
    }
    unsigned long long handle = PyLong_AsUnsignedLongLong(value);
    if (handle == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s(): %s %R is not a valid stream handle (expected a non-negative int that fits "
                     "a pointer)", func, what, value);
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

int lab_parse_stream_arg(lab_state *state, PyObject *obj, const char *func, int *given, cudaStream_t *stream) {
    *given = 0;
    *stream = 0;
    if (!obj || obj == Py_None) return 0;
    *given = 1;
    if (PyLong_Check(obj)) {
        if (PyBool_Check(obj)) {
            PyErr_Format(PyExc_TypeError, "%s(): stream must be an int handle or a stream object, got bool", func);
            return -1;
        }
        return handle_from_int(obj, func, "stream", stream);
    }

    PyObject *attr = NULL;
    int found = optional_attr(obj, LAB_NAME_OBJ(state, cuda_stream_protocol), &attr);
    if (found < 0) return -1;
    if (found) {
        PyObject *result = PyObject_CallNoArgs(attr);
        Py_DECREF(attr);
        if (!result) return -1;
        int rc = -1;
        if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
            PyErr_Format(PyExc_TypeError, "%s(): stream.__cuda_stream__() must return a tuple (version, handle), got %R",
                         func, result);
        } else {
            rc = handle_from_int(PyTuple_GET_ITEM(result, 1), func, "stream.__cuda_stream__()[1]", stream);
        }
        Py_DECREF(result);
        return rc;
    }
    const lab_name fallbacks[2] = {LAB_NAME_cuda_stream, LAB_NAME_ptr};
    for (int i = 0; i < 2; i++) {
        found = optional_attr(obj, state->names[fallbacks[i]], &attr);
        if (found < 0) return -1;
        if (found) {
            int rc = handle_from_int(attr, func, i == 0 ? "stream.cuda_stream" : "stream.ptr", stream);
            Py_DECREF(attr);
            return rc;
        }
    }
    PyErr_Format(PyExc_TypeError, "%s(): stream must be None, an int handle, or an object with __cuda_stream__() "
                 "(or .cuda_stream / .ptr), got %s", func, Py_TYPE(obj)->tp_name);
    return -1;
}

int lab_producer_stream(const lab_array *arrays, int n, cudaStream_t *stream) {
    for (int i = 0; i < n; i++) {
        const lab_array *a = &arrays[i];
        if (a->source == LAB_SOURCE_DLPACK_EXCHANGE) {
            void *current = NULL;
            if (a->exchange_api->current_work_stream(kDLCUDA, a->device, &current) != 0) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_RuntimeError, "a producer's current_work_stream failed without saying why");
                return -1;
            }
            *stream = (cudaStream_t)current;
            return 0;
        }
        if (a->has_stream) {
            *stream = (cudaStream_t)a->stream; /* 1 and 2 are cudaStreamLegacy / cudaStreamPerThread */
            return 0;
        }
    }
    *stream = 0; /* the legacy default stream */
    return 0;
}
