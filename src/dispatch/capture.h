/* capture.h - whether a stream is being captured into a CUDA graph, and by which capture (level 3).
 *
 * A graph capture records launches instead of running them, so what a launch reads from the host
 * is frozen into every replay. The random kind asks this before drawing from the generator, and
 * lab.Graph before beginning a capture of its own. */
#ifndef LAB_CAPTURE_H
#define LAB_CAPTURE_H

#include <cuda_runtime_api.h>

/* *id: the id of the capture `stream` is part of, 0 when it is not capturing. */
cudaError_t lab_stream_capture_id(cudaStream_t stream, unsigned long long *id);

#endif
