/* errors.h - what the Python face raises: dispatch's failure records (dispatch/failure.h) as Python
 * exceptions, lab.CudaError among them, the only way CUDA failures reach Python. */
#ifndef LAB_ERRORS_H
#define LAB_ERRORS_H

#include <cuda_runtime_api.h>

#include "dispatch/dispatch_state.h"
#include "dispatch/failure.h"

/* Creates the lab.CudaError type (a RuntimeError subclass) for the module's exec slot. */
PyObject *lab_create_cuda_error_type(void);

/* Creates lab.OutOfMemoryError, a subclass of lab.CudaError and MemoryError, for cudaErrorMemoryAllocation.
 */
PyObject *lab_create_out_of_memory_type(PyObject *cuda_error);

/* Raises the calling thread's last failure: TypeError, ValueError, ... or lab.CudaError with .code
 * and .name set. Call it where a level-3 function returned -1; `state` may be NULL where the failure
 * cannot be CUDA's (loading a library). Returns NULL, like PyErr_Format. */
PyObject *lab_raise_failure(lab_dispatch_state *state);

/* The Python exception set now, moved into the thread's failure record (its message, TypeError and
 * ValueError kept as such, others as RuntimeError): for the XLA face, whose users' kernels call into
 * Python while everything else it reports is a failure record. Returns -1. */
int lab_fail_from_python(void);

/* Raises lab.CudaError for `err`; `func` names the op ("add"), `during` what lab was doing
 * ("launch"). The message is lab_fail_cuda's. Returns NULL. */
PyObject *lab_raise_cuda_error(lab_dispatch_state *state, cudaError_t err, const char *func,
                               const char *during);

#endif
