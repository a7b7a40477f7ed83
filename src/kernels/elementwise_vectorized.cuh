// elementwise_vectorized.cuh - the fastest elementwise kernel (every operand contiguous, one dtype,
// 16-byte aligned), written once as a template over its tuning so that the library
// (elementwise_contiguous.cu) and the tuning sweep (bench/sweep_vectorized.cu) run the same code.
//
// Each thread moves Tuning::kPackets 16-byte packets per input, all loads issued before the first
// use: bytes in flight are what hide HBM latency. The last n % lanes elements go through a scalar
// tail in block 0.
#pragma once

#include "elementwise.cuh"

namespace lab {

// kThreads: threads per block. kPackets: 16-byte packets per input per thread. kPairedConversions:
// half types convert two lanes per instruction (half2 <-> float2) instead of one.
// kStreamingStores: the output is stored with the evict-first hint (st.global.cs).
template <int kThreadsPerBlock, int kPacketsPerThread, bool kPaired, bool kStreaming>
struct VectorizedTuning {
    static constexpr int kThreads = kThreadsPerBlock;
    static constexpr int kPackets = kPacketsPerThread;
    static constexpr bool kPairedConversions = kPaired;
    static constexpr bool kStreamingStores = kStreaming;
};

// The tuning each (dtype, op) ships with, from bench/sweep_vectorized.cu on the H200 (2026-11-29, 2^28
// elements, ms; two runs within 1% of each other): two packets per thread beat four for memory-
// bound ops - relu float32 0.514 vs 0.539, gelu float32 0.512 vs 0.534, relu bfloat16 0.260 vs
// 0.269, add within 1% - while erf-based gelu in half precision wants eight (bfloat16 0.301 vs
// 0.311 at four and 0.314 at two; float16 0.296 vs 0.302 and 0.311). For exp-based silu in bfloat16
// the packet count moved the time by 1% either way (0.269 at eight, 0.271 at two: one run), so
// every transcendental op takes gelu's rule. Paired conversions moved nothing beyond noise and stay
// off. Streaming stores moved nothing at 2^28 and sped up repeated adds on 2^22 elements (L2-
// resident) by 15%, but only because the benchmark rewrites an output nobody reads: in a chain of
// ops the next op reads it from L2, which evict-first would throw away. They stay off.
// The gated linear units (two inputs, a transcendental activation) take two packets: eight of each
// input took 92 registers a thread (29% of an SM's warps). `./sweep glu` (2026-12-02, 16384 x 4096
// bfloat16, ten launches back to back): swiglu 0.0957 ms at two packets (100% of the copy), 0.0971 at
// four, 0.0983 at eight; geglu 0.0954 / 0.0964 / 0.0974. Inside jax.jit the swiglu chain went from
// 0.143 to 0.121 ms an application (docs/notebook/jax-measurements.md).
template <typename T, typename Op, int kInputs>
using VectorizedTuningFor =
    std::conditional_t<IsTranscendental<Op>::value && sizeof(T) == 2 && kInputs == 1,
                       VectorizedTuning<128, 8, false, false>, VectorizedTuning<128, 2, false, false>>;

template <typename T> struct InputPtrs {
    const T *p[3];
};

// A packet's lanes in the compute type, and back.
template <bool kPaired, typename T>
__device__ __forceinline__ void unpack(const Packed16<T> &packet,
                                       compute_t<T> (&lanes)[Packed16<T>::kCount]) {
    if constexpr (kPaired && std::is_same_v<T, __half>) {
#pragma unroll
        for (int i = 0; i < Packed16<T>::kCount; i += 2) {
            const float2 pair = __half22float2(__halves2half2(packet.v[i], packet.v[i + 1]));
            lanes[i] = pair.x, lanes[i + 1] = pair.y;
        }
    } else if constexpr (kPaired && std::is_same_v<T, __nv_bfloat16>) {
#pragma unroll
        for (int i = 0; i < Packed16<T>::kCount; i += 2) {
            const float2 pair = __bfloat1622float2(__halves2bfloat162(packet.v[i], packet.v[i + 1]));
            lanes[i] = pair.x, lanes[i + 1] = pair.y;
        }
    } else {
#pragma unroll
        for (int i = 0; i < Packed16<T>::kCount; ++i) lanes[i] = load_as_compute(packet.v[i]);
    }
}

template <bool kPaired, typename T>
__device__ __forceinline__ void pack(const compute_t<T> (&lanes)[Packed16<T>::kCount], Packed16<T> &packet) {
    if constexpr (kPaired && std::is_same_v<T, __half>) {
#pragma unroll
        for (int i = 0; i < Packed16<T>::kCount; i += 2) {
            const __half2 pair = __floats2half2_rn(lanes[i], lanes[i + 1]);
            packet.v[i] = __low2half(pair), packet.v[i + 1] = __high2half(pair);
        }
    } else if constexpr (kPaired && std::is_same_v<T, __nv_bfloat16>) {
#pragma unroll
        for (int i = 0; i < Packed16<T>::kCount; i += 2) {
            const __nv_bfloat162 pair = __floats2bfloat162_rn(lanes[i], lanes[i + 1]);
            packet.v[i] = __low2bfloat16(pair), packet.v[i + 1] = __high2bfloat16(pair);
        }
    } else {
#pragma unroll
        for (int i = 0; i < Packed16<T>::kCount; ++i) packet.v[i] = store_from_compute<T>(lanes[i]);
    }
}

template <bool kStreaming, typename T>
__device__ __forceinline__ void store_packet(Packed16<T> *at, const Packed16<T> &packet) {
    if constexpr (kStreaming) {
        __stcs(reinterpret_cast<int4 *>(at), *reinterpret_cast<const int4 *>(&packet));
    } else {
        *at = packet;
    }
}

template <typename T, typename Op, int kInputs, typename Tuning>
__global__ void __launch_bounds__(Tuning::kThreads)
    elementwise_vectorized(T *out, InputPtrs<T> in, int64_t n, OpParams<compute_t<T>> params) {
    using C = compute_t<T>;
    using Packet = Packed16<T>;
    constexpr int kLanes = Packet::kCount;
    constexpr int kBlock = Tuning::kThreads;
    const Op op;
    const int64_t n_packets = n / kLanes;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kBlock * Tuning::kPackets + threadIdx.x;

    Packet loaded[kInputs][Tuning::kPackets];
#pragma unroll
    for (int u = 0; u < Tuning::kPackets; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kBlock;
        if (i < n_packets) {
#pragma unroll
            for (int k = 0; k < kInputs; ++k) loaded[k][u] = reinterpret_cast<const Packet *>(in.p[k])[i];
        }
    }
#pragma unroll
    for (int u = 0; u < Tuning::kPackets; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kBlock;
        if (i < n_packets) {
            C lanes[kInputs][kLanes];
#pragma unroll
            for (int k = 0; k < kInputs; ++k) unpack<Tuning::kPairedConversions>(loaded[k][u], lanes[k]);
            C results[kLanes];
#pragma unroll
            for (int lane = 0; lane < kLanes; ++lane) {
                C v[3];
#pragma unroll
                for (int k = 0; k < kInputs; ++k) v[k] = lanes[k][lane];
                results[lane] = apply<C, Op, kInputs>(op, v, params);
            }
            Packet result;
            pack<Tuning::kPairedConversions>(results, result);
            store_packet<Tuning::kStreamingStores>(reinterpret_cast<Packet *>(out) + i, result);
        }
    }

    const int64_t tail_start = n_packets * kLanes; // fewer than 16 elements after the last packet
    if (blockIdx.x == 0 && tail_start + threadIdx.x < n) {
        const int64_t i = tail_start + threadIdx.x;
        C v[3];
#pragma unroll
        for (int k = 0; k < kInputs; ++k) v[k] = load_as_compute(in.p[k][i]);
        out[i] = store_from_compute<T>(apply<C, Op, kInputs>(op, v, params));
    }
}

template <typename T, typename Op, int kInputs, typename Tuning = VectorizedTuningFor<T, Op, kInputs>>
cudaError_t launch_vectorized(T *out, const InputPtrs<T> &in, int64_t n, const OpParams<compute_t<T>> &params,
                              cudaStream_t stream) {
    const int64_t per_block = static_cast<int64_t>(Tuning::kThreads) * Tuning::kPackets * Packed16<T>::kCount;
    const int64_t blocks = (n + per_block - 1) / per_block;
    elementwise_vectorized<T, Op, kInputs, Tuning>
        <<<static_cast<unsigned int>(blocks < 1 ? 1 : blocks), Tuning::kThreads, 0, stream>>>(out, in, n,
                                                                                              params);
    return cudaGetLastError();
}

} // namespace lab
