// rowwise_column_sums.cuh - where the norms' backward keeps its per-column sums (the weight and bias
// gradients) while it walks its rows: sinks for streamed rows (a block's partial rows in device memory,
// or its shared memory) and ColumnSums for rows in registers. Every row-wise op's row() takes a
// ColumnSums; only the norms' backward adds to it.
#pragma once

#include <type_traits>

#include "rowwise.cuh"

namespace lab {

// Where a streamed row's column sums (the norms' weight and bias gradients) go: a sink the walk adds
// each element's terms to. No other block touches them: no atomics. A null pointer: that sum is not
// wanted (no bias gradient).
// - GlobalColumnSink: this block's own partial rows in device memory, each column in its place,
//   started afresh on the block's first row. Every element then reads and writes 8 or 16 bytes more
//   than the row itself moves: at rows of 16384 the backward ran at 0.5 TB/s (bench/sweep_rowwise.py,
//   2026-11-30).
// - SharedColumnSink, where the row's sums fit: the block's sums in shared memory, zeroed before its
//   first row and written to its partial rows once after its last (rows_streamed). They are laid out
//   by (step, element, lane), shared_slot below: in column order a lane's kRowVec columns are
//   neighbours, so a warp's 32 lanes would land on a few banks and wait on each other.
// Both take each element's terms, also past the row's end, where they are 0 (grad_out is).
template <typename T> struct GlobalColumnSink {
    using A = compute_t<T>;
    A *weight, *bias;
    bool first;
    template <typename Index>
    __device__ __forceinline__ void add(Index step, int i, int lane, const RowArgs &a, A to_weight,
                                        A to_bias) const {
        const Index column = tile_column<T, Index>(step, i, lane, a.group);
        if (column >= a.n) return;
        if (weight) weight[column] = (first ? A(0) : weight[column]) + to_weight;
        if (bias) bias[column] = (first ? A(0) : bias[column]) + to_bias;
    }
};
// kGroup: the streamed kernel's lanes a row (its block), a constant so that a lane's slots are one
// base address and constant offsets. The slots cover whole steps, past the row's end too.
__device__ __forceinline__ int shared_slot(int step, int vec, int i, int lane, int group) {
    return (step * vec + i) * group + lane;
}
template <typename T, int kGroup> struct SharedColumnSink {
    using A = compute_t<T>;
    A *weight, *bias;
    template <typename Index>
    __device__ __forceinline__ void add(Index step, int i, int lane, const RowArgs &, A to_weight,
                                        A to_bias) const {
        const int at = shared_slot(int(step), kRowVec<T>, i, lane, kGroup);
        if (weight) weight[at] += to_weight;
        if (bias) bias[at] += to_bias;
    }
};

// Per-column sums each thread carries across its rows (the norm backward's weight and bias gradients),
// kept in the block's shared memory, not registers: at four chunks of a half type they were 32
// registers a lane each, and held in registers they left the bf16 backward 3 or 4 blocks of 128 an
// SM - 41% and 73% of the copy with and without the bias (bench/bench_bandwidth.py, H200,
// 2026-12-03). Each thread owns its slots, so the adds need no barrier and no atomics: a slot is laid
// out by (16-byte piece, thread, element), so that a warp's 16-byte accesses fall on distinct banks
// (shared_slot's layout, one element an access, suits the streamed walk, which adds one element at a
// time; a lane here adds a chunk's kRowVec at once).
// `weight` and `bias` are the block's regions (bias null where no bias gradient is wanted), in the
// shared memory the launcher sizes (in_register_sums_bytes); rows_in_registers makes them, the other
// ops never touch them.
template <typename T, int kChunks> struct ColumnSums {
    using A = compute_t<T>;
    static constexpr int kSize = kChunks * kRowVec<T>; // sums a thread holds, in each region
    static constexpr int kPiece = 16 / int(sizeof(A)); // sums one 16-byte access moves
    using Piece = typename std::conditional<sizeof(A) == 4, float4, double2>::type;
    static_assert(kRowVec<T> % kPiece == 0, "a chunk's sums are whole pieces");
    A *weight, *bias;

    // Sum k of thread t in a region.
    __device__ __forceinline__ static int slot(int k, int t) {
        return ((k / kPiece) * int(blockDim.x) + t) * kPiece + k % kPiece;
    }
    __device__ __forceinline__ static void zero(A *region) {
#pragma unroll
        for (int k = 0; k < kSize; k += kPiece) {
            *reinterpret_cast<Piece *>(region + slot(k, threadIdx.x)) = Piece{};
        }
    }
    // Adds one chunk's kRowVec terms to this thread's sums of that chunk.
    __device__ __forceinline__ static void add(A *region, int chunk, const A (&terms)[kRowVec<T>]) {
#pragma unroll
        for (int j = 0; j < kRowVec<T>; j += kPiece) {
            A *at = region + slot(chunk * kRowVec<T> + j, threadIdx.x);
            A piece[kPiece];
            *reinterpret_cast<Piece *>(piece) = *reinterpret_cast<const Piece *>(at);
#pragma unroll
            for (int e = 0; e < kPiece; ++e) piece[e] += terms[j + e];
            *reinterpret_cast<Piece *>(at) = *reinterpret_cast<const Piece *>(piece);
        }
    }
};

} // namespace lab
