/* failure.c - the per-thread failure record of failure.h. */
#include "dispatch/failure.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static _Thread_local lab_failure last;

int lab_fail(lab_failure_kind kind, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(last.message, sizeof last.message, format, args);
    va_end(args);
    last.kind = kind;
    last.code = 0;
    last.name[0] = '\0';
    return -1;
}

static void name_the_code(int code, const char *name) {
    last.code = code;
    snprintf(last.name, sizeof last.name, "%s", name);
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

int lab_fail_cuda(cudaError_t err, const char *func, const char *during) {
    const char *name = cudaGetErrorName(err);
    const char *hint = lab_is_no_device_error(err)
                           ? " - no CUDA driver/GPU was found, so lab cannot run kernels on this machine"
                       : is_sticky(err)
                           ? " - this error is sticky: the CUDA context is now unusable and the process "
                             "must be restarted to use the GPU again"
                           : "";
    lab_fail(LAB_FAILURE_CUDA, "%s(): CUDA error during %s: %s (%s, code %d)%s", func, during,
             cudaGetErrorString(err), name, (int)err, hint);
    /* Reported now, so taken off the runtime's last-error record too: a failed cudaMallocAsync left
     * there would be read back by the next launch's check, and blamed on a kernel that ran fine.
     * (A sticky error stays in the record whatever is done here.) */
    if (!is_sticky(err)) (void)cudaGetLastError();
    name_the_code((int)err, name);
    return -1;
}

int lab_fail_library(const char *func, const char *library, const char *step, int status,
                     const char *status_name) {
    lab_fail(LAB_FAILURE_CUDA, "%s(): %s error during %s: %s (code %d)", func, library, step, status_name,
             status);
    name_the_code(status, status_name);
    return -1;
}

const lab_failure *lab_last_failure(void) { return &last; }

const char *lab_shape_text(char *buf, size_t size, const int64_t *shape, int ndim) {
    size_t n = (size_t)snprintf(buf, size, "(");
    for (int d = 0; d < ndim && n < size; d++) {
        n += (size_t)snprintf(buf + n, size - n, d ? ", %lld" : "%lld", (long long)shape[d]);
    }
    if (n < size) snprintf(buf + n, size - n, ndim == 1 ? ",)" : ")");
    return buf;
}
