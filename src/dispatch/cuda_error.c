/* cuda_error.c - lab.CudaError: creation of the type and raising it from a cudaError_t. */
#include "dispatch/cuda_error.h"

PyObject *lab_create_cuda_error_type(void) {
    return PyErr_NewExceptionWithDoc(
        "lab.CudaError",
        "A CUDA runtime call, kernel launch or vendor library call (cuBLASLt) made by lab failed.\n\n"
        "Attributes: code (the cudaError_t value, or the library's status, an int) and name (e.g. "
        "'cudaErrorNoDevice', 'CUBLAS_STATUS_NOT_SUPPORTED').",
        PyExc_RuntimeError, NULL);
}

int lab_is_no_device_error(cudaError_t err) {
    return err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver ||
           err == cudaErrorDevicesUnavailable;
}

/* Errors after which the context is corrupt and every later CUDA call fails the same way. */
static int is_sticky(cudaError_t err) {
    return err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure || err == cudaErrorAssert ||
           err == cudaErrorHardwareStackError || err == cudaErrorIllegalInstruction ||
           err == cudaErrorMisalignedAddress || err == cudaErrorInvalidAddressSpace ||
           err == cudaErrorInvalidPc;
}

/* Raises lab.CudaError(message) with .code and .name set. Returns NULL. */
static PyObject *raise_with(lab_dispatch_state *state, PyObject *message, int code_value, const char *name) {
    if (!message) return NULL;
    PyObject *exc = PyObject_CallOneArg(state->CudaError, message);
    Py_DECREF(message);
    if (!exc) return NULL;
    PyObject *code = PyLong_FromLong((long)code_value);
    PyObject *name_obj = PyUnicode_FromString(name);
    if (!code || !name_obj || PyObject_SetAttrString(exc, "code", code) < 0 ||
        PyObject_SetAttrString(exc, "name", name_obj) < 0) {
        Py_XDECREF(code);
        Py_XDECREF(name_obj);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(code);
    Py_DECREF(name_obj);
    PyErr_SetObject(state->CudaError, exc);
    Py_DECREF(exc);
    return NULL;
}

PyObject *lab_raise_library_error(lab_dispatch_state *state, const char *func, const char *library,
                                  const char *step, int status, const char *status_name) {
    PyObject *message = PyUnicode_FromFormat("%s(): %s error during %s: %s (code %d)", func, library, step,
                                             status_name, status);
    return raise_with(state, message, status, status_name);
}

PyObject *lab_raise_cuda_error(lab_dispatch_state *state, cudaError_t err, const char *func,
                               const char *during) {
    const char *name = cudaGetErrorName(err);
    const char *text = cudaGetErrorString(err);
    const char *hint = lab_is_no_device_error(err)
                           ? " - no CUDA driver/GPU was found, so lab cannot run kernels on this machine"
                       : is_sticky(err)
                           ? " - this error is sticky: the CUDA context is now unusable and the process "
                             "must be restarted to use the GPU again"
                           : "";
    PyObject *message = PyUnicode_FromFormat("%s(): CUDA error during %s: %s (%s, code %d)%s", func, during,
                                             text, name, (int)err, hint);
    return raise_with(state, message, (int)err, name);
}
