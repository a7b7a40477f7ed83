/* stream.h - which CUDA stream a launch goes on, and ordering it with the producers' streams
 * (docs/design.md, "Streams").
 *
 * The launch stream, in order: the `stream=` keyword; this thread's `with lab.stream(s):`; the
 * stream a producer declares for the output, then for the inputs (torch's current stream through
 * the DLPack exchange API, the CAI v3 'stream' key, a lab.Array's last stream); else the legacy
 * default stream. Every other stream an operand declares is ordered with an event before the launch
 * (it waits for the producer's work) and after it (the producer's later work waits for lab's), never
 * with a host sync, so the launch path stays legal inside CUDA graph capture.
 * LAB_CUDA_ARRAY_INTERFACE_SYNC=0 turns the ordering off, as CUDA_ARRAY_INTERFACE_SYNC=0 does in
 * Numba and CuPy. */
#ifndef LAB_STREAM_H
#define LAB_STREAM_H

#include <cuda_runtime_api.h>

#include "dispatch/dispatch_state.h"
#include "dispatch/operand.h"

/* This thread's current lab stream (`with lab.stream(s):`): 1 and *stream set when one is active,
 * *owner (if not NULL) to the object given to lab.stream() (borrowed); else 0. */
int lab_thread_current_stream(cudaStream_t *stream, PyObject **owner);

/* Makes stream_obj (NULL: none) with `handle` this thread's current stream; returns the previous
 * object (a new reference, None when there was none). */
PyObject *lab_swap_thread_stream(PyObject *stream_obj, cudaStream_t handle);

/* The `stream=` argument as read by the binding (binding/args.h). */
typedef struct {
    int given; /* 0: not given, the policy decides */
    cudaStream_t handle;
    PyObject *owner; /* the object it came from (borrowed), kept alive by lab.Arrays that use it */
} lab_stream_arg;

typedef struct {
    cudaStream_t launch;
    PyObject *launch_owner; /* object keeping `launch` alive, if known (borrowed) */
    int n_foreign;          /* other streams operands declared: ordered by events */
    cudaStream_t foreign[LAB_MAX_GROUPS];
} lab_stream_plan;

/* Decides the launch stream for the representative arrays[0..n) of each operand (written ones first) and
 * which producer streams need ordering. May call a producer's current_work_stream; no CUDA call of lab's own.
 * Returns 0 or -1 (error set). */
int lab_plan_streams(lab_dispatch_state *state, const lab_array *const *arrays, int n,
                     const lab_stream_arg *given, lab_stream_plan *plan);

/* Event ordering on the current device (which must be `device`): before the launch, the launch
 * stream waits for each foreign stream; after it, each foreign stream waits for the launch stream.
 * Streams on the other side of a graph capture's boundary are not ordered (a replay is ordered on
 * its own stream): lab_order_before_launch takes them out of the plan. */
cudaError_t lab_order_before_launch(lab_dispatch_state *state, lab_stream_plan *plan, int device);
cudaError_t lab_order_after_launch(lab_dispatch_state *state, const lab_stream_plan *plan, int device);

/* `waiter` waits for the work queued on `waited` so far (through the device's ordering event). */
cudaError_t lab_stream_wait_stream(lab_dispatch_state *state, cudaStream_t waiter, cudaStream_t waited,
                                   int device);

#endif
