// random_fill.cuh - the fill and dropout kernel of random.cu, with its launch geometry a template
// argument (FillTuning) so that bench/sweep_random.cu can time other geometries of the same code.
//
// A Philox group (philox.cuh) serves kPerGroup elements: four float32 elements (two float64, which
// take 53 bits, two words, each; eight float16 or bfloat16 ones, 16 bits each, but for normal numbers
// four). Group g's counter is offset + g whatever thread computes it, so the geometry changes the
// speed, never the numbers. Uniform numbers come from the top 24 bits of a word (53 of two for
// float64, 16 of a half word for the 16-bit types), in [0, 1); normal ones by Box-Muller from pairs of
// them, the log's argument taken in (0, 1] so that it is never log(0). Dropout keeps an element where
// its uniform number is at least p, so its backward is the same call on the gradient with the
// forward's generator state: the same elements kept, scaled by the same 1 / (1 - p).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include <type_traits>

#include "launch.h"
#include "philox.cuh"

namespace lab {

// How a fill's groups are spread: kUnroll groups a thread in flight at once (their Philox rounds
// interleave: one group's ten dependent rounds leave the multiplier idle between them), and a grid of
// kBlocksPerMultiprocessor blocks per multiprocessor striding over the groups (0: a thread per group).
template <int kUnrollGroups, int kBlocksPerMultiprocessorCap> struct FillTuning {
    static constexpr int kThreads = 256;
    static constexpr int kUnroll = kUnrollGroups;
    static constexpr int kBlocksPerMultiprocessor = kBlocksPerMultiprocessorCap;
};

namespace fill {

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

// A distribution's parameters in the type numbers are made in: (low, high, high - low) for uniform,
// (mean, std) for normal, p for bernoulli, (p, 1 / (1 - p)) for dropout. The span is rounded from the
// double difference, not taken between the rounded bounds.
template <typename Accumulate> struct Parameters {
    Accumulate a, b, span;
};

// The group's numbers, in float (float64: two numbers, in double). The distribution is a template
// argument: a fill is bound by Philox's integer multiplies, and a branch per group would add to them.
template <lab_random_distribution kDistribution, typename Accumulate, int kPerGroup>
__device__ __forceinline__ void group_numbers(const Philox4 &w, Parameters<Accumulate> q,
                                              Accumulate (&v)[kPerGroup]) {
    const Accumulate a = q.a, b = q.b, span = q.span;
    if constexpr (kPerGroup == 8) { // 16-bit outputs: two uniform numbers a word, never normal ones
        static_assert(kDistribution != LAB_RANDOM_NORMAL, "normal numbers take a whole word each");
#pragma unroll
        for (int e = 0; e < 8; e++) {
            const float u = unit_half_word(w.x[e / 2], e % 2);
            v[e] = kDistribution == LAB_RANDOM_UNIFORM ? a + span * u : (u < a ? 1.f : 0.f);
        }
    } else if constexpr (kPerGroup == 4) {
        if constexpr (kDistribution == LAB_RANDOM_NORMAL) {
#pragma unroll
            for (int pair = 0; pair < 2; pair++) {
                const float radius = sqrtf(-2.f * logf(unit_float_open_below(w.x[2 * pair])));
                float sine, cosine;
                sincospif(2.f * unit_float(w.x[2 * pair + 1]), &sine, &cosine);
                v[2 * pair] = a + b * radius * cosine;
                v[2 * pair + 1] = a + b * radius * sine;
            }
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float u = unit_float(w.x[e]);
                v[e] = kDistribution == LAB_RANDOM_UNIFORM ? a + span * u : (u < a ? 1.f : 0.f);
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
            v[0] = kDistribution == LAB_RANDOM_UNIFORM ? a + span * u0 : (u0 < a ? 1.0 : 0.0);
            v[1] = kDistribution == LAB_RANDOM_UNIFORM ? a + span * u1 : (u1 < a ? 1.0 : 0.0);
        }
    }
}

// kCount elements of T as one load or store: 16, 8, 4 or 2 bytes.
template <int kBytes> struct Vector;
template <> struct Vector<16> {
    using type = uint4;
};
template <> struct Vector<8> {
    using type = uint2;
};
template <> struct Vector<4> {
    using type = uint32_t;
};
template <> struct Vector<2> {
    using type = uint16_t;
};

template <typename T, int kCount> __device__ __forceinline__ void load_group(const T *from, T (&to)[kCount]) {
    using V = typename Vector<int(sizeof(T)) * kCount>::type;
    *reinterpret_cast<V *>(to) = *reinterpret_cast<const V *>(from);
}
template <typename T, int kCount>
__device__ __forceinline__ void store_group(T *to, const T (&from)[kCount]) {
    using V = typename Vector<int(sizeof(T)) * kCount>::type;
    *reinterpret_cast<V *>(to) = *reinterpret_cast<const V *>(from);
}

// One group's elements written: the distribution's numbers, or dropout's residual + (u >= p ? x *
// scale : 0) with 1 in mask where the element was kept. `whole`: the group lies inside the array and
// every pointer is aligned to a group, so each array is one vector load or store; else element by
// element up to numel (the array's ragged end, or a view that starts mid-group).
template <typename T, lab_random_distribution kDistribution, int kPerGroup, typename Accumulate>
__device__ __forceinline__ void write_group(const lab_random_launch &p, const Philox4 &words, int64_t first,
                                            bool whole, Parameters<Accumulate> q) {
    Accumulate v[kPerGroup];
    if constexpr (kDistribution == LAB_RANDOM_DROPOUT) {
        group_numbers<LAB_RANDOM_UNIFORM, Accumulate, kPerGroup>(
            words, {Accumulate(0), Accumulate(1), Accumulate(1)}, v);
    } else {
        group_numbers<kDistribution, Accumulate, kPerGroup>(words, q, v);
    }
    T values[kPerGroup];
    T *out = static_cast<T *>(p.out) + first;
    if constexpr (kDistribution == LAB_RANDOM_DROPOUT) {
        const T *x = static_cast<const T *>(p.x) + first;
        const T *residual = p.residual ? static_cast<const T *>(p.residual) + first : nullptr;
        T xs[kPerGroup], rs[kPerGroup];
        uint8_t kept[kPerGroup];
        if (whole) {
            load_group(x, xs);
            if (residual) load_group(residual, rs);
        } else {
#pragma unroll
            for (int e = 0; e < kPerGroup; e++) {
                const bool inside = first + e < p.numel;
                xs[e] = inside ? x[e] : T(0.f);
                rs[e] = inside && residual ? residual[e] : T(0.f);
            }
        }
#pragma unroll
        for (int e = 0; e < kPerGroup; e++) {
            const bool keep = v[e] >= q.a; // a is p, b is 1 / (1 - p)
            kept[e] = keep;
            Accumulate value = keep ? Accumulate(xs[e]) * q.b : Accumulate(0);
            if (residual) value += Accumulate(rs[e]);
            values[e] = T(value);
        }
        if (p.mask) {
            if (whole) {
                store_group(p.mask + first, kept);
            } else {
#pragma unroll
                for (int e = 0; e < kPerGroup; e++) {
                    if (first + e < p.numel) p.mask[first + e] = kept[e];
                }
            }
        }
    } else {
#pragma unroll
        for (int e = 0; e < kPerGroup; e++) values[e] = T(v[e]);
    }
    if (whole) {
        store_group(out, values);
    } else {
#pragma unroll
        for (int e = 0; e < kPerGroup; e++) {
            if (first + e < p.numel) out[e] = values[e];
        }
    }
}

} // namespace fill

template <typename T, lab_random_distribution kDistribution, typename Tuning>
__global__ void __launch_bounds__(Tuning::kThreads) random_kernel(const lab_random_launch p, int64_t groups) {
    constexpr int kPerGroup = fill::elements_per_group<T, kDistribution>();
    constexpr int kUnroll = Tuning::kUnroll;
    using Accumulate = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const uint64_t seed = p.replay_state ? p.replay_state[0] : p.seed;
    const uint64_t offset = p.replay_state ? p.replay_state[1] + p.offset : p.offset;
    // Every array aligned to a group's bytes (the mask to its elements): then a group inside the array
    // is one vector per array. Asked once: first * sizeof(T) is a multiple of the group's bytes.
    constexpr uintptr_t kGroupBytes = sizeof(T) * kPerGroup;
    const bool aligned = (reinterpret_cast<uintptr_t>(p.out) | reinterpret_cast<uintptr_t>(p.x) |
                          reinterpret_cast<uintptr_t>(p.residual)) %
                                 kGroupBytes ==
                             0 &&
                         reinterpret_cast<uintptr_t>(p.mask) % kPerGroup == 0;
    const fill::Parameters<Accumulate> q{Accumulate(p.a), Accumulate(p.b), Accumulate(p.b - p.a)};
    const int64_t stride = int64_t(gridDim.x) * Tuning::kThreads;
    for (int64_t base = blockIdx.x * int64_t(Tuning::kThreads) + threadIdx.x; base < groups;
         base += stride * kUnroll) {
        Philox4 words[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) words[u] = random_group(seed, offset + uint64_t(base + u * stride));
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            const int64_t group = base + u * stride;
            if (group >= groups) break;
            const int64_t first = group * kPerGroup;
            fill::write_group<T, kDistribution, kPerGroup>(p, words[u], first,
                                                           aligned && first + kPerGroup <= p.numel, q);
        }
    }
}

// The grid of a fill of `groups` groups under Tuning: a thread per group, or at most
// kBlocksPerMultiprocessor blocks per multiprocessor striding over them.
template <typename Tuning> int64_t fill_blocks(int64_t groups, int multiprocessors) {
    const int64_t per_block = int64_t(Tuning::kThreads) * Tuning::kUnroll;
    int64_t blocks = (groups + per_block - 1) / per_block;
    if (Tuning::kBlocksPerMultiprocessor > 0) {
        const int64_t cap = int64_t(multiprocessors) * Tuning::kBlocksPerMultiprocessor;
        if (blocks > cap) blocks = cap;
    }
    return blocks < 65536 * 8 ? blocks : 65536 * 8;
}

template <typename T, lab_random_distribution kDistribution, typename Tuning>
cudaError_t launch_distribution(const lab_random_launch &p, int multiprocessors, cudaStream_t stream) {
    constexpr int kPerGroup = fill::elements_per_group<T, kDistribution>();
    const int64_t groups = (p.numel + kPerGroup - 1) / kPerGroup;
    const int64_t blocks = fill_blocks<Tuning>(groups, multiprocessors);
    if (blocks == 0) return cudaSuccess;
    random_kernel<T, kDistribution, Tuning><<<unsigned(blocks), Tuning::kThreads, 0, stream>>>(p, groups);
    return cudaGetLastError();
}

} // namespace lab
