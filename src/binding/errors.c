/* errors.c - lab.CudaError, and dispatch's failure records raised as Python exceptions. */
#include "binding/errors.h"

#include "dispatch/memory.h"

PyObject *lab_create_cuda_error_type(void) {
    return PyErr_NewExceptionWithDoc(
        "lab.CudaError",
        "A CUDA runtime call, kernel launch or vendor library call (cuBLASLt) made by lab failed.\n\n"
        "Attributes: code (the cudaError_t value, or the library's status, an int) and name (e.g. "
        "'cudaErrorNoDevice', 'CUBLAS_STATUS_NOT_SUPPORTED').",
        PyExc_RuntimeError, NULL);
}

PyObject *lab_create_out_of_memory_type(PyObject *cuda_error) {
    PyObject *bases = PyTuple_Pack(2, cuda_error, PyExc_MemoryError);
    if (!bases) return NULL;
    PyObject *type = PyErr_NewExceptionWithDoc(
        "lab.OutOfMemoryError",
        "lab could not get the device memory it asked for (cudaErrorMemoryAllocation). A lab.CudaError and "
        "a MemoryError; its message says what was asked for, what lab holds and what the device has free.",
        bases, NULL);
    Py_DECREF(bases);
    return type;
}

/* lab.CudaError(message) with .code and .name set; lab.OutOfMemoryError, with what lab holds added to
 * the message, where the device had no memory to give. */
static void raise_cuda_error(lab_dispatch_state *state, const lab_failure *failure) {
    PyObject *type = state->CudaError, *exc;
    if (failure->code == (int)cudaErrorMemoryAllocation && state->OutOfMemoryError) {
        char report[512];
        lab_memory_report(report, sizeof(report));
        type = state->OutOfMemoryError;
        exc = PyObject_CallFunction(type, "N", PyUnicode_FromFormat("%s%s", failure->message, report));
    } else {
        exc = PyObject_CallFunction(type, "s", failure->message);
    }
    if (!exc) return;
    PyObject *code = PyLong_FromLong((long)failure->code);
    PyObject *name = PyUnicode_FromString(failure->name);
    if (code && name && PyObject_SetAttrString(exc, "code", code) == 0 &&
        PyObject_SetAttrString(exc, "name", name) == 0) {
        PyErr_SetObject(type, exc);
    }
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_DECREF(exc);
}

PyObject *lab_raise_failure(lab_dispatch_state *state) {
    const lab_failure *failure = lab_last_failure();
    if (failure->kind == LAB_FAILURE_PYTHON) return NULL; /* the producer's exception is set already */
    if (failure->kind == LAB_FAILURE_CUDA && state) {
        raise_cuda_error(state, failure);
        return NULL;
    }
    PyObject *type = PyExc_SystemError; /* a -1 that recorded nothing: a bug in lab */
    switch (failure->kind) {
    case LAB_FAILURE_TYPE: type = PyExc_TypeError; break;
    case LAB_FAILURE_VALUE: type = PyExc_ValueError; break;
    case LAB_FAILURE_OVERFLOW: type = PyExc_OverflowError; break;
    case LAB_FAILURE_MEMORY: type = PyExc_MemoryError; break;
    case LAB_FAILURE_IMPORT: type = PyExc_ImportError; break;
    case LAB_FAILURE_RUNTIME:
    case LAB_FAILURE_CUDA: type = PyExc_RuntimeError; break;
    case LAB_FAILURE_NONE:
    case LAB_FAILURE_PYTHON: break;
    }
    PyErr_SetString(type,
                    failure->kind == LAB_FAILURE_NONE ? "lab failed without saying why" : failure->message);
    return NULL;
}

PyObject *lab_raise_cuda_error(lab_dispatch_state *state, cudaError_t err, const char *func,
                               const char *during) {
    lab_fail_cuda(err, func, during);
    return lab_raise_failure(state);
}

int lab_fail_from_python(void) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *message = text ? PyUnicode_AsUTF8(text) : NULL;
    const lab_failure_kind kind =
        type && PyErr_GivenExceptionMatches(type, PyExc_TypeError)    ? LAB_FAILURE_TYPE
        : type && PyErr_GivenExceptionMatches(type, PyExc_ValueError) ? LAB_FAILURE_VALUE
                                                                      : LAB_FAILURE_RUNTIME;
    lab_fail(kind, "%s", message ? message : "a Python error without a message");
    PyErr_Clear();
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return -1;
}
