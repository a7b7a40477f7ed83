/* launch_scope.h - the bracket every lab launch runs inside (level 3): locate the operands' memory,
 * pick the stream and the device, order with the producers' streams, then - after the caller's
 * launches - order back, restore the caller's device and turn the first CUDA error into
 * lab.CudaError. The driver (driver.c) opens and closes it around every op kind's launch, so the
 * stream and device policy lives once. */
#ifndef LAB_LAUNCH_SCOPE_H
#define LAB_LAUNCH_SCOPE_H

#include <cuda_runtime_api.h>

#include "dispatch/dispatch_state.h"
#include "dispatch/operand.h"
#include "dispatch/stream.h"

/* A vendor library's failure (cuBLASLt's status): not a cudaError_t, but raised the same way. */
typedef struct {
    const char *library; /* "cuBLASLt"; NULL while nothing failed */
    const char *step;
    int status;
    const char *status_name;
} lab_library_error;

typedef struct {
    lab_stream_plan streams; /* streams.launch: where the caller launches */
    int target, current;     /* the launch device, and the caller's current device to restore */
    cudaError_t err;         /* the first CUDA error, and the step it happened in */
    const char *step;
    lab_library_error library_error;
} lab_launch_scope;

/* Decides the stream from `decide[0..n_decide)` (output first: see stream.h), the device from the
 * same arrays, switches to it and orders the launch stream after the producers' streams. Returns -1
 * with a Python error set (a stream could not be planned); CUDA errors go to scope->err, which the
 * caller checks before launching (lab_launch_scope_ok) and lab_launch_scope_end raises. */
int lab_launch_scope_begin(lab_dispatch_state *state, lab_launch_scope *scope, const lab_array *const *decide,
                           int n_decide, const lab_stream_arg *stream);

/* Records a step's result: `err` becomes the scope's error unless an earlier one is already there. */
static inline int lab_launch_scope_step(lab_launch_scope *scope, const char *step, cudaError_t err) {
    if (scope->err == cudaSuccess && !scope->library_error.library && err != cudaSuccess) {
        scope->err = err;
        scope->step = step;
    }
    return scope->err == cudaSuccess && !scope->library_error.library;
}

static inline int lab_launch_scope_ok(const lab_launch_scope *scope) {
    return scope->err == cudaSuccess && !scope->library_error.library;
}

/* Records a vendor library's failure during `step` (the first failure wins, CUDA's or a library's):
 * lab_launch_scope_end raises it as lab.CudaError with .code the status and .name its name. */
static inline void lab_launch_scope_library_error(lab_launch_scope *scope, const char *library,
                                                  const char *step, int status, const char *status_name) {
    if (scope->err != cudaSuccess || scope->library_error.library) return;
    scope->library_error = (lab_library_error){library, step, status, status_name};
}

/* Orders the producers' streams after the launches, restores the caller's device, and raises
 * lab.CudaError naming `func` and the failed step. Returns 0 or -1. */
int lab_launch_scope_end(lab_dispatch_state *state, lab_launch_scope *scope, const char *func);

/* lab.Arrays remember the stream they were last used on (their next reader orders with it). */
void lab_launch_scope_note_stream(const lab_launch_scope *scope, const lab_array *arrays, int n);

#endif
