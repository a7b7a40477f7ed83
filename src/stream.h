/* stream.h - which CUDA stream a launch goes on (DESIGN.md, "Streams").
 *
 * In order: the `stream=` keyword; the stream a producer declares for the output, then for the
 * inputs (torch's current stream through the DLPack exchange API, the CAI v3 'stream' key); else
 * the legacy default stream. Ordering operands that declare different streams comes later. */
#ifndef LAB_STREAM_H
#define LAB_STREAM_H

#include <cuda_runtime_api.h>

#include "array.h"

/* Reads the `stream=` argument: None (not given), an int handle, or an object with __cuda_stream__()
 * returning (version, handle), with .cuda_stream (torch) and .ptr (CuPy) as fallbacks.
 * Sets *given and *stream; returns 0, or -1 with TypeError/ValueError set. No CUDA call. */
int lab_parse_stream_arg(lab_state *state, PyObject *obj, const char *func, int *given, cudaStream_t *stream);

/* The producers' stream for a launch whose operands are arrays[0..n), the output first.
 * May call a producer's current_work_stream (no CUDA call of lab's own). Returns 0 or -1 (error set). */
int lab_producer_stream(const lab_array *arrays, int n, cudaStream_t *stream);

#endif
