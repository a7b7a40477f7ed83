// random.cu - lab_launch_random (launch.h): fills an array with numbers from a distribution, each
// element's number a function of (seed, offset, its index) alone (philox.cuh).
//
// One thread takes one Philox group: four float32 elements (two float64, which take 53 bits, two
// words, each; eight float16 or bfloat16 ones, 16 bits each, but for normal numbers four) - one
// generator call and one 16- or 8-byte store when the group is whole and aligned, element by element
// at the array's ragged end. Uniform numbers come from the top 24 bits of a word (53 of two for
// float64, 16 of a half word for the 16-bit types), in [0, 1); normal ones by Box-Muller from pairs of them,
// the log's argument taken in (0, 1] so that it is never log(0). Dropout keeps an element where its
// uniform number is at least p, so its backward is the same call on the gradient with the forward's
// generator state: the same elements kept, scaled by the same 1 / (1 - p). A draw captured into a
// lab.Graph reads (seed, offset) from device memory, which each replay writes first (write_replay_state).
// randint writes integers of a range into an array of any lab dtype (randint_kernel).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include "dispatch.cuh"
#include "launch.h"
#include "philox.cuh"

namespace lab {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float unit_float(uint32_t word) { return float(word >> 8) * (1.0f / 16777216.0f); }
__device__ __forceinline__ float unit_float_open_below(uint32_t word) {
    return float((word >> 8) + 1) * (1.0f / 16777216.0f); // (0, 1]
}
__device__ __forceinline__ float unit_half_word(uint32_t word, int half) { // 16 bits: [0, 1) in 2^-16 steps
    return float((word >> (16 * half)) & 0xFFFFu) * (1.0f / 65536.0f);
}
__device__ __forceinline__ double unit_double(uint32_t high, uint32_t low) {
    return double((uint64_t(high) << 21) ^ (low >> 11)) * (1.0 / 9007199254740992.0);
}

// The group's numbers, in float (float64: two numbers, in double). The distribution is a template
// argument: a fill is bound by Philox's integer multiplies, and a branch per group would add to them.
template <lab_random_distribution kDistribution, typename Accumulate, int kPerGroup>
__device__ __forceinline__ void group_numbers(const Philox4 &w, double a, double b,
                                              Accumulate (&v)[kPerGroup]) {
    if constexpr (kPerGroup == 8) { // 16-bit outputs: two uniform numbers a word, never normal ones
        static_assert(kDistribution != LAB_RANDOM_NORMAL, "normal numbers take a whole word each");
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const float u = unit_half_word(w.x[e / 2], e % 2);
            v[e] = kDistribution == LAB_RANDOM_UNIFORM ? float(a) + float(b - a) * u
                                                       : (u < float(a) ? 1.f : 0.f);
        }
    } else if constexpr (kPerGroup == 4) {
        if constexpr (kDistribution == LAB_RANDOM_NORMAL) {
#pragma unroll
            for (int pair = 0; pair < 2; pair++) {
                const float radius = sqrtf(-2.f * logf(unit_float_open_below(w.x[2 * pair])));
                float sine, cosine;
                sincospif(2.f * unit_float(w.x[2 * pair + 1]), &sine, &cosine);
                v[2 * pair] = float(a) + float(b) * radius * cosine;
                v[2 * pair + 1] = float(a) + float(b) * radius * sine;
            }
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float u = unit_float(w.x[e]);
                v[e] = kDistribution == LAB_RANDOM_UNIFORM ? float(a) + float(b - a) * u
                                                           : (u < float(a) ? 1.f : 0.f);
            }
        }
    } else {
        const double u0 = unit_double(w.x[0], w.x[1]), u1 = unit_double(w.x[2], w.x[3]);
        if constexpr (kDistribution == LAB_RANDOM_NORMAL) {
            const double radius = sqrt(-2.0 * log(1.0 - u0)); // 1 - u0 in (0, 1]
            double sine, cosine;
            sincospi(2.0 * u1, &sine, &cosine);
            v[0] = a + b * radius * cosine;
            v[1] = a + b * radius * sine;
        } else {
            v[0] = kDistribution == LAB_RANDOM_UNIFORM ? a + (b - a) * u0 : (u0 < a ? 1.0 : 0.0);
            v[1] = kDistribution == LAB_RANDOM_UNIFORM ? a + (b - a) * u1 : (u1 < a ? 1.0 : 0.0);
        }
    }
}

// Dropout of the group's elements: residual + (u >= p ? x * scale : 0), u the group's uniform numbers;
// 1 in mask where the element was kept.
template <typename T, typename Accumulate, int kPerGroup>
__device__ __forceinline__ void drop_group(const lab_random_launch &p, const Philox4 &w, int64_t first,
                                           Accumulate (&v)[kPerGroup]) {
    Accumulate u[kPerGroup];
    group_numbers<LAB_RANDOM_UNIFORM, Accumulate, kPerGroup>(w, 0.0, 1.0, u);
    const T *x = static_cast<const T *>(p.x), *residual = static_cast<const T *>(p.residual);
#pragma unroll
    for (int e = 0; e < kPerGroup; e++) {
        if (first + e >= p.numel) break;
        const bool keep = u[e] >= Accumulate(p.a);
        v[e] = keep ? Accumulate(x[first + e]) * Accumulate(p.b) : Accumulate(0);
        if (residual) v[e] += Accumulate(residual[first + e]);
        if (p.mask) p.mask[first + e] = keep;
    }
}

// Elements a Philox group serves (lab_random_per_group says the same on the host): two float64
// numbers of two words each; for the 16-bit types eight numbers of 16 bits, two a word, except normal
// ones (Box-Muller's tail needs more bits); else four, a word each. Fewer generator rounds per byte
// written: a fill is bound by them, not by memory.
template <typename T, lab_random_distribution kDistribution>
__host__ __device__ constexpr int elements_per_group() {
    if constexpr (std::is_same_v<T, double>) {
        return 2;
    } else if constexpr (sizeof(T) == 2 && kDistribution != LAB_RANDOM_NORMAL) {
        return 8;
    } else {
        return 4;
    }
}

template <typename T, lab_random_distribution kDistribution>
__global__ void __launch_bounds__(kThreads) random_kernel(const lab_random_launch p, int64_t groups) {
    constexpr int kPerGroup = elements_per_group<T, kDistribution>();
    using Accumulate = std::conditional_t<std::is_same_v<T, double>, double, float>;
    T *out = static_cast<T *>(p.out);
    const uint64_t seed = p.replay_state ? p.replay_state[0] : p.seed;
    const uint64_t offset = p.replay_state ? p.replay_state[1] + p.offset : p.offset;
    for (int64_t group = blockIdx.x * int64_t(kThreads) + threadIdx.x; group < groups;
         group += int64_t(gridDim.x) * kThreads) {
        const int64_t first = group * kPerGroup;
        const Philox4 words = random_group(seed, offset + uint64_t(group));
        Accumulate v[kPerGroup] = {};
        if constexpr (kDistribution == LAB_RANDOM_DROPOUT) {
            drop_group<T, Accumulate, kPerGroup>(p, words, first, v);
        } else {
            group_numbers<kDistribution, Accumulate, kPerGroup>(words, p.a, p.b, v);
        }
        T values[kPerGroup];
#pragma unroll
        for (int e = 0; e < kPerGroup; e++) values[e] = T(v[e]);
        constexpr int kBytes = int(sizeof(T)) * kPerGroup;
        using Vector = std::conditional_t<kBytes == 16, uint4, uint2>;
        if (first + kPerGroup <= p.numel && reinterpret_cast<uintptr_t>(out + first) % kBytes == 0) {
            *reinterpret_cast<Vector *>(out + first) = *reinterpret_cast<const Vector *>(values);
        } else {
#pragma unroll
            for (int e = 0; e < kPerGroup; e++) {
                if (first + e < p.numel) out[first + e] = values[e];
            }
        }
    }
}

template <typename T, lab_random_distribution kDistribution>
cudaError_t launch_distribution(const lab_random_launch &p, cudaStream_t stream) {
    constexpr int kPerGroup = elements_per_group<T, kDistribution>();
    const int64_t groups = (p.numel + kPerGroup - 1) / kPerGroup;
    const int64_t blocks = (groups + kThreads - 1) / kThreads;
    random_kernel<T, kDistribution>
        <<<unsigned(blocks < 65536 * 8 ? blocks : 65536 * 8), kThreads, 0, stream>>>(p, groups);
    return cudaGetLastError();
}

template <typename T> cudaError_t launch_fill(const lab_random_launch &p, cudaStream_t stream) {
    switch (p.distribution) {
    case LAB_RANDOM_UNIFORM: return launch_distribution<T, LAB_RANDOM_UNIFORM>(p, stream);
    case LAB_RANDOM_NORMAL: return launch_distribution<T, LAB_RANDOM_NORMAL>(p, stream);
    case LAB_RANDOM_BERNOULLI: return launch_distribution<T, LAB_RANDOM_BERNOULLI>(p, stream);
    case LAB_RANDOM_DROPOUT: return launch_distribution<T, LAB_RANDOM_DROPOUT>(p, stream);
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
    const int per_group = lab_random_per_group(&p);
    const int64_t groups = (p.numel + per_group - 1) / per_group;
    const int64_t blocks = (groups + kThreads - 1) / kThreads;
    const unsigned grid = unsigned(blocks < 65536 * 8 ? blocks : 65536 * 8);
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
