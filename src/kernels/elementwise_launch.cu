// elementwise_launch.cu - the extern "C" entry of launch.h for elementwise ops: hands a planned launch to
// the path's launcher.
#include "elementwise.cuh"

extern "C" cudaError_t lab_launch_elementwise(const lab_elementwise_launch *launch, cudaStream_t stream) {
    switch (launch->path) {
    case LAB_PATH_EMPTY: return cudaSuccess;
    case LAB_PATH_VECTORIZED:
    case LAB_PATH_CONTIGUOUS: return lab::launch_contiguous(*launch, stream);
    case LAB_PATH_STRIDED: return lab::launch_strided(*launch, stream);
    case LAB_PATH_STRIDED_VECTORIZED: return lab::launch_strided_vectorized(*launch, stream);
    case LAB_PATH_CASTING: return lab::launch_casting(*launch, stream);
    case LAB_PATH_CASTING_CONTIGUOUS: return lab::launch_casting_contiguous(*launch, stream);
    }
    return cudaErrorInvalidValue;
}

#ifndef LAB_ARCH_LIST
#define LAB_ARCH_LIST "unknown"
#endif
extern "C" const char *lab_compiled_architectures(void) { return LAB_ARCH_LIST; }
