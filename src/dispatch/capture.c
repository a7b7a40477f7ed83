/* capture.c - the capture query of capture.h, written for CUDA 12's and CUDA 13's signatures (13
 * added the dependency edges' data among the optional outputs). */
#include "dispatch/capture.h"

cudaError_t lab_stream_capture_id(cudaStream_t stream, unsigned long long *id) {
    enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long capture = 0;
#if CUDART_VERSION >= 13000
    cudaError_t err = cudaStreamGetCaptureInfo(stream, &status, &capture, NULL, NULL, NULL, NULL);
#else
    cudaError_t err = cudaStreamGetCaptureInfo(stream, &status, &capture, NULL, NULL, NULL);
#endif
    if (err == cudaErrorStreamCaptureImplicit) {
        /* the legacy stream while another stream captures in global mode: not capturing itself (only
         * queuing work on it would be refused), and the answer is no error to leave behind */
        cudaGetLastError();
        *id = 0;
        return cudaSuccess;
    }
    /* an invalidated capture still holds the stream: report it, so that nothing treats it as free */
    *id = err == cudaSuccess && status != cudaStreamCaptureStatusNone ? capture : 0;
    return err;
}
