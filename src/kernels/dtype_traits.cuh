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

// 16 bytes as loaded, kept as four 32-bit words whatever T is: four registers a packet (a
// Packed16<bf16> is eight, one an element, and a reduction over four of them in flight took 74
// registers against 48 - ptxas, 2026-12-03), and the same registers whether the 16-byte load or the
// element-by-element one filled them. The second matters most: where the two paths join on
// different layouts, ptxas unpacks right after the load, which waits for the data before the next
// chunk's load can issue - every chunk a round trip to DRAM (SASS of the norms' backward,
// 2026-11-30: 317 us against 118 for the same layout without the join).
struct Packet16 {
    uint4 bits;
};

// Element i of a packet of T.
template <typename T> __device__ __forceinline__ T packet_element(const Packet16 &p, int i) {
    static_assert(sizeof(T) <= 8 && 16 % sizeof(T) == 0, "an element is a whole part of 16 bytes");
    const unsigned words[4] = {p.bits.x, p.bits.y, p.bits.z, p.bits.w};
    T v;
    if constexpr (sizeof(T) == 8) {
        const unsigned long long both =
            words[2 * i] | (static_cast<unsigned long long>(words[2 * i + 1]) << 32);
        memcpy(&v, &both, 8);
    } else {
        constexpr int kPerWord = 4 / sizeof(T);
        const unsigned part = words[i / kPerWord] >> (8 * sizeof(T) * (i % kPerWord));
        memcpy(&v, &part, sizeof(T)); // the low bytes (little-endian)
    }
    return v;
}

// Element i of a packet of T, in the compute type.
template <typename T> __device__ __forceinline__ compute_t<T> packet_compute(const Packet16 &p, int i) {
    return load_as_compute(packet_element<T>(p, i));
}

} // namespace lab
