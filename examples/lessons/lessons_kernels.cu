// lessons_kernels.cu - the lessons' kernels and their plain-C launchers (no Python here): the
// minimal extension's contiguous float32 add, and a strided add for float32 and float64 that
// lessons 3 and 4 need once they read strides and dtypes. src/kernels/ is where lab keeps its own.
#include <cuda_runtime_api.h>

__global__ void add_f32(float *out, const float *a, const float *b, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

// Strides in elements, any sign: a reversed view walks backwards from its first element.
template <typename T>
__global__ void add_strided(T *out, const T *a, const T *b, long long n, long long so, long long sa,
                            long long sb) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i * so] = a[i * sa] + b[i * sb];
}

static int finish(const char **error) {
    const cudaError_t err = cudaGetLastError(); // a launch error is reported now, not at some later call
    *error = cudaGetErrorString(err);
    return (int)err;
}

static unsigned blocks(long long n) { return (unsigned)((n + 255) / 256); }

extern "C" int lessons_launch_add_f32(float *out, const float *a, const float *b, long long n, void *stream,
                                      const char **error) {
    if (n > 0) add_f32<<<blocks(n), 256, 0, (cudaStream_t)stream>>>(out, a, b, n);
    return finish(error);
}

// is_double: float64 elements, else float32.
extern "C" int lessons_launch_add_strided(int is_double, void *out, const void *a, const void *b, long long n,
                                          long long so, long long sa, long long sb, void *stream,
                                          const char **error) {
    if (n > 0 && is_double) {
        add_strided<<<blocks(n), 256, 0, (cudaStream_t)stream>>>((double *)out, (const double *)a,
                                                                 (const double *)b, n, so, sa, sb);
    } else if (n > 0) {
        add_strided<<<blocks(n), 256, 0, (cudaStream_t)stream>>>((float *)out, (const float *)a,
                                                                 (const float *)b, n, so, sa, sb);
    }
    return finish(error);
}
