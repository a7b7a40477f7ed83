// random.cu - lab_launch_random (launch.h): fills an array with numbers from a distribution, each
// element's number a function of (seed, offset, its index) alone (philox.cuh). The fill and dropout
// kernel is random_fill.cuh's, at the geometry bench/sweep_random.cu chose; a draw captured into a
// lab.Graph reads (seed, offset) from device memory, which each replay writes first
// (write_replay_state). randint writes integers of a range into an array of any lab dtype
// (randint_kernel).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "dispatch.cuh"
#include "launch.h"
#include "philox.cuh"
#include "random_fill.cuh"
#include "resident_blocks.cuh"

namespace lab {
namespace {

constexpr int kThreads = 256;

// The fills' geometry (random_fill.cuh), chosen by bench/sweep_random.cu (2^28 elements on an H200,
// docs/notebook/runtime-measurements.md): the fills, bound by Philox's instructions, run fastest as
// eight resident blocks a multiprocessor striding over the groups (a thread a group leaves the
// multiprocessors scheduling 2,000 short blocks each), normal numbers with four groups in flight a
// thread; dropout, which also reads one or two arrays, as a thread a group (more loads in flight).
template <lab_random_distribution kDistribution>
using ChosenFillTuning = std::conditional_t<
    kDistribution == LAB_RANDOM_DROPOUT, FillTuning<1, 0>,
    std::conditional_t<kDistribution == LAB_RANDOM_NORMAL, FillTuning<4, 8>, FillTuning<1, 8>>>;

template <typename T, lab_random_distribution kDistribution>
cudaError_t launch_chosen(const lab_random_launch &p, int multiprocessors, cudaStream_t stream) {
    return launch_distribution<T, kDistribution, ChosenFillTuning<kDistribution>>(p, multiprocessors, stream);
}

template <typename T> cudaError_t launch_fill(const lab_random_launch &p, cudaStream_t stream) {
    DeviceShape shape;
    const cudaError_t err = current_device_shape(&shape);
    if (err != cudaSuccess) return err;
    const int sms = shape.multiprocessors;
    switch (p.distribution) {
    case LAB_RANDOM_UNIFORM: return launch_chosen<T, LAB_RANDOM_UNIFORM>(p, sms, stream);
    case LAB_RANDOM_NORMAL: return launch_chosen<T, LAB_RANDOM_NORMAL>(p, sms, stream);
    case LAB_RANDOM_BERNOULLI: return launch_chosen<T, LAB_RANDOM_BERNOULLI>(p, sms, stream);
    case LAB_RANDOM_DROPOUT: return launch_chosen<T, LAB_RANDOM_DROPOUT>(p, sms, stream);
    default: return cudaErrorInvalidValue;
    }
}

// The integer `value` as a T: exact for the integer types (the plan checked the range fits), rounded
// to nearest for the float ones.
template <typename T> __device__ __forceinline__ T from_integer(int64_t value) {
    if constexpr (std::is_integral_v<T>) {
        return T(value);
    } else if constexpr (std::is_same_v<T, double>) {
        return double(value);
    } else {
        return T(double(value));
    }
}

// Integers uniform in [low, low + range): Lemire's multiply-shift, the high half of a random number
// times the range - one 32-bit word an element (kWide false, range <= 2^32), or two words as one
// 64-bit number (range up to 2^64 - 1). Its bias is at most range / 2^32 (2^64), as torch's modulo.
template <typename T, bool kWide>
__global__ void __launch_bounds__(kThreads) randint_kernel(const lab_random_launch p, int64_t groups) {
    constexpr int kPerGroup = kWide ? 2 : 4;
    T *out = static_cast<T *>(p.out);
    const uint64_t seed = p.replay_state ? p.replay_state[0] : p.seed;
    const uint64_t offset = p.replay_state ? p.replay_state[1] + p.offset : p.offset;
    for (int64_t group = blockIdx.x * int64_t(kThreads) + threadIdx.x; group < groups;
         group += int64_t(gridDim.x) * kThreads) {
        const Philox4 w = random_group(seed, offset + uint64_t(group));
        const int64_t first = group * kPerGroup;
#pragma unroll
        for (int e = 0; e < kPerGroup; e++) {
            if (first + e >= p.numel) break;
            uint64_t draw;
            if constexpr (kWide) {
                draw = __umul64hi((uint64_t(w.x[2 * e]) << 32) | w.x[2 * e + 1], p.range);
            } else {
                draw = (uint64_t(w.x[e]) * p.range) >> 32;
            }
            out[first + e] = from_integer<T>(int64_t(uint64_t(p.low) + draw)); // wraps as the range says
        }
    }
}

__global__ void write_replay_state(uint64_t *replay_state, uint64_t seed, uint64_t offset) {
    replay_state[0] = seed;
    replay_state[1] = offset;
}

template <typename T> cudaError_t launch_randint(const lab_random_launch &p, cudaStream_t stream) {
    using Tuning = FillTuning<1, 8>; // bound by Philox like the uniform fill: its geometry
    static_assert(Tuning::kThreads == kThreads, "randint_kernel's block is the tuning's");
    DeviceShape shape;
    const cudaError_t err = current_device_shape(&shape);
    if (err != cudaSuccess) return err;
    const int per_group = lab_random_per_group(&p);
    const int64_t groups = (p.numel + per_group - 1) / per_group;
    const int64_t blocks = fill_blocks<Tuning>(groups, shape.multiprocessors);
    if (blocks == 0) return cudaSuccess;
    const unsigned grid = unsigned(blocks);
    if (per_group == 2) {
        randint_kernel<T, true><<<grid, kThreads, 0, stream>>>(p, groups);
    } else {
        randint_kernel<T, false><<<grid, kThreads, 0, stream>>>(p, groups);
    }
    return cudaGetLastError();
}

} // namespace
} // namespace lab

extern "C" cudaError_t lab_launch_random(const lab_random_launch *launch, cudaStream_t stream) {
    using namespace lab;
    if (launch->distribution == LAB_RANDOM_RANDINT) {
        switch (launch->dtype) {
        case LAB_FLOAT16: return launch_randint<__half>(*launch, stream);
        case LAB_BFLOAT16: return launch_randint<__nv_bfloat16>(*launch, stream);
        case LAB_FLOAT32: return launch_randint<float>(*launch, stream);
        case LAB_FLOAT64: return launch_randint<double>(*launch, stream);
        case LAB_INT8: return launch_randint<int8_t>(*launch, stream);
        case LAB_INT16: return launch_randint<int16_t>(*launch, stream);
        case LAB_INT32: return launch_randint<int32_t>(*launch, stream);
        case LAB_INT64: return launch_randint<int64_t>(*launch, stream);
        case LAB_UINT8: return launch_randint<uint8_t>(*launch, stream);
        default: return cudaErrorInvalidValue;
        }
    }
    switch (launch->dtype) {
    case LAB_FLOAT16: return launch_fill<__half>(*launch, stream);
    case LAB_BFLOAT16: return launch_fill<__nv_bfloat16>(*launch, stream);
    case LAB_FLOAT32: return launch_fill<float>(*launch, stream);
    case LAB_FLOAT64: return launch_fill<double>(*launch, stream);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t lab_launch_random_replay_state(uint64_t *replay_state, uint64_t seed, uint64_t offset,
                                                      cudaStream_t stream) {
    lab::write_replay_state<<<1, 1, 0, stream>>>(replay_state, seed, offset);
    return cudaGetLastError();
}
