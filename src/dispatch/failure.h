/* failure.h - how levels 3 and below say what went wrong: a record per thread, in plain C.
 *
 * The driver and the op kinds never raise Python exceptions themselves. A check that fails fills the
 * calling thread's record (what kind of error, the message, and for CUDA and vendor-library errors the
 * code and its name) and returns -1; the face that called the driver says it in its own language - the
 * Python binding raises TypeError, ValueError or lab.CudaError (binding/errors.c), the XLA FFI
 * face hands XLA an error carrying the same message. Because nothing here needs the interpreter, XLA's
 * threads run lab's built-in ops without taking the GIL. Where a comment in dispatch/ says a function
 * fails "with ValueError", it names the kind of failure it records. */
#ifndef LAB_FAILURE_H
#define LAB_FAILURE_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    LAB_FAILURE_NONE,
    LAB_FAILURE_TYPE,     /* an argument of the wrong kind: TypeError */
    LAB_FAILURE_VALUE,    /* the right kind with a wrong value or shape: ValueError */
    LAB_FAILURE_OVERFLOW, /* a number lab cannot hold: OverflowError */
    LAB_FAILURE_MEMORY,   /* host memory ran out: MemoryError */
    LAB_FAILURE_IMPORT,   /* a vendor library could not be loaded: ImportError */
    LAB_FAILURE_RUNTIME,  /* a state lab cannot work in: RuntimeError */
    LAB_FAILURE_CUDA,     /* CUDA or a vendor library failed: lab.CudaError with .code and .name */
    LAB_FAILURE_PYTHON    /* a producer's Python callback raised: its exception is already set, and kept */
} lab_failure_kind;

typedef struct {
    lab_failure_kind kind;
    int code;           /* LAB_FAILURE_CUDA: the cudaError_t or the library's status */
    char name[64];      /* LAB_FAILURE_CUDA: "cudaErrorNoDevice", "CUBLAS_STATUS_NOT_SUPPORTED" */
    char message[1024]; /* the whole message, "add(): argument 'out' ..." */
} lab_failure;

/* Fills the thread's record with a printf-formatted message. Returns -1, so `return lab_fail(...)`. */
int lab_fail(lab_failure_kind kind, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* A CUDA runtime error: "func(): CUDA error during <during>: <text> (<name>, code N)", with a hint
 * when no driver or GPU is present and when the error is sticky. Returns -1. */
int lab_fail_cuda(cudaError_t err, const char *func, const char *during);

/* A vendor library's failure: "func(): cuBLASLt error during <step>: <status name> (code N)". */
int lab_fail_library(const char *func, const char *library, const char *step, int status,
                     const char *status_name);

/* The calling thread's record: what the last failure said (kind LAB_FAILURE_NONE before any). */
const lab_failure *lab_last_failure(void);

/* Writes a shape as Python prints a tuple: "(3, 4)", "(5,)", "()". Returns buf. */
const char *lab_shape_text(char *buf, size_t size, const int64_t *shape, int ndim);

/* True for the errors that mean "this machine has no usable CUDA driver or device". */
int lab_is_no_device_error(cudaError_t err);

#endif
