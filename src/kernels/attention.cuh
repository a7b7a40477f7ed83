// attention.cuh - what attention's forward and backward kernels share: where a sequence's rows are
// (a fixed batch or a packed one), which keys a query sees (lab_attention_launch in launch.h states
// the rule), the scores' scale and softcap, and the probability of a score given its row's maximum
// or log-sum-exp. The products themselves are tile_mma.cuh's.
#pragma once

#include <math.h>

#include <atomic>
#include <type_traits>

#include "dispatch.cuh"
#include "fast_exp2.cuh"
#include "launch.h"
#include "tile_mma.cuh"

namespace lab {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// One sequence of the batch: where its rows start in a packed batch (0 in a fixed one) and its lengths.
struct Sequence {
    int64_t q_start, k_start;
    int len_q, len_k;
};

// A packed batch's bounds come from the device; they are clamped into [0, total] and made
// non-decreasing here, so that lengths which lie cannot move a tile outside its operand.
__host__ __device__ __forceinline__ Sequence sequence_of(const lab_attention_launch &p, int batch) {
    if (!p.cu_seqlens_q) return {0, 0, int(p.seqlen_q), int(p.seqlen_k)};
    auto clamp = [](int64_t v, int64_t low, int64_t high) { return v < low ? low : v > high ? high : v; };
    auto bounds = [batch, clamp](const int32_t *cu, int64_t stride, int64_t total, int64_t &start) {
        const int64_t first = clamp(cu[batch * stride], 0, total);
        const int64_t last = clamp(cu[(batch + 1) * stride], first, total);
        start = first;
        return int(last - first);
    };
    Sequence s;
    s.len_q = bounds(p.cu_seqlens_q, p.cu_seqlens_q_stride, p.total_q, s.q_start);
    s.len_k = bounds(p.cu_seqlens_k, p.cu_seqlens_k_stride, p.total_k, s.k_start);
    return s;
}

// Position 0 of (batch, head) of an operand, for a sequence starting at row `start` of a packed batch.
template <typename T>
__device__ __forceinline__ T *rows_of(const lab_attention_tensor &t, int batch, int head, int64_t start,
                                      bool packed) {
    const int64_t offset = packed ? start * t.position_stride + head * t.head_stride
                                  : batch * t.batch_stride + head * t.head_stride;
    return reinterpret_cast<T *>(t.data) + offset;
}

// The log-sum-exp (or another per-row float of the same layout) of (batch, head)'s position 0.
__device__ __forceinline__ int64_t lse_offset(const lab_attention_launch &p, int batch, int head,
                                              int64_t start) {
    return p.cu_seqlens_q ? head * p.lse_head_stride + start * p.lse_position_stride
                          : batch * p.lse_batch_stride + head * p.lse_head_stride;
}

// Starts copying key block `block` of a sequence (len_k keys; k and v at its position 0) into stage
// `stage` of the two-stage k and v tiles - what the forward and grad_q's kernel walk.
template <int kBlockN, int D, int kThreads, typename Tile = SwizzledTile<kBlockN, D>, typename T>
__device__ __forceinline__ void load_key_block(T *k_tiles, T *v_tiles, int stage, const T *k, const T *v,
                                               const lab_attention_launch &p, int block, int len_k) {
    constexpr int kElements = Tile::kElements;
    const int k0 = block * kBlockN, rows = min(kBlockN, len_k - k0);
    load_tile_async<kBlockN, D, kThreads, Tile>(k_tiles + stage * kElements, k + k0 * p.k.position_stride,
                                                p.k.position_stride, rows);
    load_tile_async<kBlockN, D, kThreads, Tile>(v_tiles + stage * kElements, v + k0 * p.v.position_stride,
                                                p.v.position_stride, rows);
}

// Which keys a query sees, within one sequence (the rule in launch.h). Host code can run it too:
// tests/attention_ranges.cu checks the ranges below against the rule, pair by pair.
struct Visibility {
    static __host__ __device__ __forceinline__ int at_least(int low, int v) { return v < low ? low : v; }
    static __host__ __device__ __forceinline__ int at_most(int high, int v) { return v > high ? high : v; }

    int len_q, len_k, diagonal; // diagonal: len_k - len_q, where query i's own key lies
    int left, right;            // -1: unbounded

    __host__ __device__ __forceinline__ Visibility(const lab_attention_launch &p, const Sequence &s)
        : len_q(s.len_q), len_k(s.len_k), diagonal(s.len_k - s.len_q), left(int(p.window_left)),
          right(int(p.window_right)) {}

    // (& rather than &&: three compares and no branch, for the masked tiles' every element)
    __host__ __device__ __forceinline__ bool visible(int i, int j) const {
        return (j < len_k) & ((left < 0) | (j >= i + diagonal - left)) &
               ((right < 0) | (j <= i + diagonal + right));
    }
    // The keys [*first, *last) any of queries [q0, q1) sees.
    __host__ __device__ __forceinline__ void keys_for(int q0, int q1, int *first, int *last) const {
        *first = left < 0 ? 0 : at_least(0, q0 + diagonal - left);
        *last = right < 0 ? len_k : at_most(len_k, q1 - 1 + diagonal + right + 1);
    }
    // The key blocks [*first, *last) of kBlockN keys each that queries [q0, q1) walk: an empty range
    // where they see no key.
    template <int kBlockN>
    __host__ __device__ __forceinline__ void key_blocks_for(int q0, int q1, int *first, int *last) const {
        int key_first, key_last;
        keys_for(q0, q1, &key_first, &key_last);
        *first = key_first / kBlockN;
        *last = key_last > key_first ? (key_last + kBlockN - 1) / kBlockN : *first;
    }
    // The queries [*first, *last) that see any of keys [k0, k1).
    __host__ __device__ __forceinline__ void queries_for(int k0, int k1, int *first, int *last) const {
        *first = right < 0 ? 0 : at_least(0, k0 - diagonal - right);
        *last = left < 0 ? len_q : at_most(len_q, k1 - 1 - diagonal + left + 1);
    }
    // Whether every query of [q0, q1) sees every key of [k0, k1): no element needs a mask.
    __host__ __device__ __forceinline__ bool all_visible(int q0, int q1, int k0, int k1) const {
        return k1 <= len_k && (left < 0 || k0 >= q1 - 1 + diagonal - left) &&
               (right < 0 || k1 - 1 <= q0 + diagonal + right);
    }
};

// Raw products q.k become scores: times scale, or softcap * tanh(q.k * scale / softcap). exp2 of
// `score * to_log2` is then e^score (the scale folded into the exponent when there is no softcap).
struct ScoreMap {
    float scale, softcap, over_softcap, to_log2;
    __device__ __forceinline__ explicit ScoreMap(const lab_attention_launch &p)
        : scale(p.scale), softcap(p.softcap), over_softcap(p.softcap > 0 ? p.scale / p.softcap : 0.f),
          to_log2(p.softcap > 0 ? kLog2e : p.scale * kLog2e) {}
    // What the softmax takes (scaled by to_log2 later): the softcapped score, or the raw product.
    __device__ __forceinline__ float operator()(float product) const {
        return softcap > 0 ? softcap * tanhf(product * over_softcap) : product;
    }
    // d score / d product, over scale: 1 - tanh^2 with softcap (given the mapped value), else 1.
    __device__ __forceinline__ float slope(float mapped) const {
        if (softcap <= 0) return 1.f;
        const float t = mapped / softcap;
        return 1.f - t * t;
    }
};

// The max and sum of a row held by the four lanes 4g .. 4g+3 of a warp.
__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
    return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Sets kTiles C tiles of products to mapped scores, -inf where the key is not visible (mask): the one
// place forward and backward agree on both. The tiles' 16 rows start at row0 and their columns (8
// each) at column0; rows are queries and columns keys, or the other way round when kKeyRows (the
// backward's k q^T). Both tests are asked once for all the tiles, not per element: per element, the
// compiler branched around each tanhf, and the branches kept the exponentials after them from being
// interleaved. Most tiles need neither (no softcap, every key visible) and leave here untouched.
template <bool kKeyRows, int kTiles>
__device__ __forceinline__ void map_scores(FragC (&s)[kTiles], const ScoreMap &map, const Visibility &vis,
                                           bool mask, int row0, int column0, int lane) {
    if (map.softcap > 0) {
#pragma unroll
        for (int j = 0; j < kTiles; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) s[j].x[e] = map(s[j].x[e]);
        }
    }
    if (!mask) return;
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < kTiles; j++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = row0 + g + (e >> 1) * 8, column = column0 + j * 8 + 2 * t + (e & 1);
            const bool seen = kKeyRows ? vis.visible(column, row) : vis.visible(row, column);
            if (!seen) s[j].x[e] = -INFINITY;
        }
    }
}

// fn(TypeTag<T>, integral_constant head_dim) for the launch's dtype and head dimension (256 only where
// kWidest: the backward does not take it). The plan checked both: anything else is a bug.
template <bool kWidest, typename Fn>
cudaError_t visit_attention_shape(const lab_attention_launch &p, Fn &&fn) {
    auto with_dim = [&](auto type) -> cudaError_t {
        switch (p.head_dim) {
        case 64: return fn(type, std::integral_constant<int, 64>{});
        case 96: return fn(type, std::integral_constant<int, 96>{});
        case 128: return fn(type, std::integral_constant<int, 128>{});
        case 256:
            if constexpr (kWidest) return fn(type, std::integral_constant<int, 256>{});
            return cudaErrorInvalidValue;
        default: return cudaErrorInvalidValue;
        }
    };
    if (p.dtype == LAB_FLOAT16) return with_dim(TypeTag<__half>{});
    if (p.dtype == LAB_BFLOAT16) return with_dim(TypeTag<__nv_bfloat16>{});
    return cudaErrorInvalidValue;
}

// Lets kKernel use `bytes` of dynamic shared memory (past 48 KiB a kernel must ask), once per device.
template <auto kKernel> cudaError_t allow_shared_bytes(int bytes) {
    if (bytes <= 48 * 1024) return cudaSuccess;
    static std::atomic<uint64_t> devices_allowed{0};
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    const uint64_t bit = device < 64 ? uint64_t(1) << device : 0;
    if (devices_allowed.load(std::memory_order_acquire) & bit) return cudaSuccess;
    err = cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (err == cudaSuccess) devices_allowed.fetch_or(bit, std::memory_order_acq_rel);
    return err;
}

// Launches kKernel(args) on a grid of (blocks of rows_per_block out of `positions`, heads, batch), with
// `bytes` of dynamic shared memory - how each of attention's three kernels is started.
template <auto kKernel, typename Args>
cudaError_t launch_over_blocks(const Args &args, int64_t positions, int rows_per_block, int64_t heads,
                               int64_t batch, int threads, int bytes, cudaStream_t stream) {
    cudaError_t err = allow_shared_bytes<kKernel>(bytes);
    if (err != cudaSuccess) return err;
    const dim3 grid(unsigned((positions + rows_per_block - 1) / rows_per_block), unsigned(heads),
                    unsigned(batch));
    kKernel<<<grid, threads, bytes, stream>>>(args);
    return cudaGetLastError();
}

} // namespace lab
