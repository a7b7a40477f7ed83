/* stream.h - which CUDA stream a launch goes on, and ordering it with the producers' streams
 * (DESIGN.md, "Streams").
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

#include "array.h"

/* Reads the `stream=` argument: None (not given), an int handle, or an object with __cuda_stream__()
 * returning (version, handle), with .cuda_stream (torch) and .ptr (CuPy) as fallbacks.
 * Sets *given and *stream; returns 0, or -1 with TypeError/ValueError set. No CUDA call. */
int lab_parse_stream_arg(lab_state *state, PyObject *obj, const char *func, int *given, cudaStream_t *stream);

typedef struct {
    cudaStream_t launch;
    PyObject *launch_owner;                      /* object keeping `launch` alive, if known (borrowed) */
    int n_foreign;                               /* other streams operands declared: ordered by events */
    cudaStream_t foreign[LAB_MAX_OPERANDS];
} lab_stream_plan;

/* Decides the launch stream for operands arrays[0..n) (the output first) and which producer streams
 * need ordering. May call a producer's current_work_stream; no CUDA call of lab's own.
 * Returns 0 or -1 (error set). */
int lab_plan_streams(lab_state *state, const lab_array *arrays, int n, PyObject *given_owner, int stream_given,
                     cudaStream_t given, lab_stream_plan *plan);

/* Event ordering on the current device (which must be `device`): before the launch, the launch
 * stream waits for each foreign stream; after it, each foreign stream waits for the launch stream. */
cudaError_t lab_order_before_launch(lab_state *state, const lab_stream_plan *plan, int device);
cudaError_t lab_order_after_launch(lab_state *state, const lab_stream_plan *plan, int device);

/* `waiter` waits for the work queued on `waited` so far (through the device's ordering event). */
cudaError_t lab_stream_wait_stream(lab_state *state, cudaStream_t waiter, cudaStream_t waited, int device);

#endif
