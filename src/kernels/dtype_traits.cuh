// dtype_traits.cuh - per-element-type facts the kernels need: the compute type (half types compute
// in float32), conversions between storage and compute, and the 16-byte packed vector.
#pragma once

// No host headers, so NVRTC compiles it as nvcc does (user kernels may include it).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace lab {

// Storage type -> the type arithmetic is done in. Half types widen to float so a chain of
// operations inside one functor rounds once, on the store, as PyTorch's half kernels do.
template <typename T> struct ComputeTypeOf {
    using type = T;
};
template <> struct ComputeTypeOf<__half> {
    using type = float;
};
template <> struct ComputeTypeOf<__nv_bfloat16> {
    using type = float;
};
template <typename T> using compute_t = typename ComputeTypeOf<T>::type;

template <typename T> __device__ __forceinline__ compute_t<T> load_as_compute(T v) { return v; }
template <> __device__ __forceinline__ float load_as_compute(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float load_as_compute(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T store_from_compute(compute_t<T> v) { return v; }
template <> __device__ __forceinline__ __half store_from_compute<__half>(float v) {
    return __float2half_rn(v);
}
template <> __device__ __forceinline__ __nv_bfloat16 store_from_compute<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

// A 16-byte bundle of elements, aligned so that one load or store instruction moves all of it
// (LDG.E.128 / STG.E.128). kCount is 8 for halves, 4 for float, 2 for double, 16 for int8.
template <typename T> struct alignas(16) Packed16 {
    static constexpr int kCount = 16 / sizeof(T);
    T v[kCount];
};

} // namespace lab
