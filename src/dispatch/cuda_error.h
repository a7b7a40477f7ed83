/* cuda_error.h - turning a cudaError_t into lab.CudaError, the only way CUDA failures reach Python. */
#ifndef LAB_CUDA_ERROR_H
#define LAB_CUDA_ERROR_H

#include <cuda_runtime_api.h>

#include "dispatch/dispatch_state.h"

/* Creates the lab.CudaError type (a RuntimeError subclass) for the module's exec slot. */
PyObject *lab_create_cuda_error_type(void);

/* Raises lab.CudaError for `err` with .code and .name set; `func` names the op ("add"), `during`
 * what lab was doing ("launch"). Says so plainly when no driver or GPU is present, and when the
 * error is sticky (the CUDA context is then unusable). Returns NULL, like PyErr_Format. */
PyObject *lab_raise_cuda_error(lab_dispatch_state *state, cudaError_t err, const char *func,
                               const char *during);

/* Raises lab.CudaError for a vendor library's failure: "func(): cuBLASLt error during <step>:
 * CUBLAS_STATUS_NOT_SUPPORTED (code 15)", with .code the status and .name its name. Returns NULL. */
PyObject *lab_raise_library_error(lab_dispatch_state *state, const char *func, const char *library,
                                  const char *step, int status, const char *status_name);

/* True for the errors that mean "this machine has no usable CUDA driver or device". */
int lab_is_no_device_error(cudaError_t err);

#endif
