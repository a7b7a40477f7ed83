// rowwise.cuh - what every row-wise kernel (softmax, the norms, cross-entropy, the backwards) shares: the
// arguments, where a row of each operand starts, how a group of threads holds a row in registers,
// and the reductions across that group.
//
// A row of n elements is cut into 16-byte chunks; a group of `group` threads (a power of two, from
// one thread to the whole block) shares the row, lane l holding chunks l, l + group, l + 2 * group,
// ... so neighbouring lanes read neighbouring 16 bytes (coalesced). Short rows: several groups per
// block, the group's reductions are warp shuffles. Long rows: one group per block, the reductions go
// through shared memory. Rows too long for registers are streamed: read once for the statistics and
// again for the output (rowwise_ops.cuh, rowwise_norm_ops.cuh).
#pragma once

#include <stdint.h>

#include "async_copy.cuh"
#include "casting.cuh"
#include "cluster.cuh"
#include "dtype_traits.cuh"
#include "fast_exp2.cuh"
#include "indexing.cuh"
#include "launch.h"
#include "reduce.cuh"

namespace lab {

struct RowArgs {
    int64_t rows, n;
    int group;       // threads sharing one row: a power of two, 1 .. blockDim.x
    bool vectorized; // every row and column operand contiguous and 16-byte aligned
    bool log;        // softmax ops: the log_softmax variant
    bool stats_double;
    bool gelu;     // GLU backwards: gelu's tanh approximation, else silu
    bool target64; // cross-entropy: int64 targets, else int32
    double eps;
    // cross-entropy
    lab_loss_reduction reduction;
    lab_dtype loss_dtype;
    int64_t ignore_index;
    double smoothing;
    double softcap, z_loss;
    lab_dtype upstream_dtype;
    void *row_losses;            // reduced: each row's loss in the compute type, summed by a second kernel
    const void *grad_scale;      // 'mean': 1 / (rows whose target counts), in the compute type, on the device
    char *row[LAB_ROW_OPERANDS]; // NULL: unused operand
    int64_t col_stride[LAB_ROW_OPERANDS];
    StridedLayout<LAB_ROW_OPERANDS> lead; // row index -> each operand's byte offset
    char *col[LAB_COL_OPERANDS];
    int64_t col_data_stride[LAB_COL_OPERANDS];
    void *partials;               // weight/bias gradient partial sums: [2][gridDim.x][n] accumulators
    bool streamed_sums_in_shared; // rows_streamed: the block's column sums in dynamic shared memory
    bool streamed_row_buffer;     // and, after them, its row's x and grad_out (BufferedRows)
};

// How an op's rows in registers are addressed. A row in registers is a tile of group x chunks 16-byte
// vectors. PartialTiles: each chunk's columns are tested against the row's end and the layout
// (strided or unaligned operands, a group past the last row given fills), and a row is found through
// its leading dimensions. WholeTiles, which the launcher picks where it holds: contiguous, 16-byte
// aligned rows that fill their tile exactly, at most one leading dimension - none of those tests. They were
// most of the difference between rms_norm's in-register kernel and a bare one of the same layout: 565
// instructions a warp a row against 368, the first load at the 89th instead of the 21st
// (bench/results/2026-12-03-h200-norm-forward-sass.txt).
struct PartialTiles {
    static constexpr bool kWhole = false, kLastUse = false;
};
struct WholeTiles {
    static constexpr bool kWhole = true, kLastUse = false;
};
// LastUseTiles: WholeTiles whose loads are the data's last use and whose stores are not read again
// soon (a row's second pass: cross-entropy's gradient), both with the evict-first hint, so that L2
// keeps the rows whose second pass is still to come.
struct LastUseTiles {
    static constexpr bool kWhole = true, kLastUse = true;
};

// Where operand k's row `row` starts. One leading dimension (any contiguous input) is one multiply;
// more go through indexing.cuh's divisions. Computed where used, not kept for every operand: seven
// live pointers cost the registers that decide how many rows an SM keeps in flight.
template <class Tiles = PartialTiles>
__device__ __forceinline__ char *row_at(const RowArgs &a, int64_t row, int k) {
    if (Tiles::kWhole || a.lead.dims.ndim <= 1) return a.row[k] + row * a.lead.strides[k][0];
    int64_t offsets[LAB_ROW_OPERANDS];
    byte_offsets(a.lead, row, offsets);
    return a.row[k] + offsets[k];
}

template <typename T> constexpr int kRowVec = Packed16<T>::kCount;

// Where this block's slice of a row cut across a cluster starts (rows_in_clusters, rowwise_clusters.cuh):
// its rank times the slice's length, a.n.
__device__ __forceinline__ int64_t slice_start(const RowArgs &a) {
    return int64_t(cluster_place().rank) * a.n;
}

// Where a streamed row's inputs are read from. GlobalRows: each operand's row in device memory.
// StagedRows: the block's shared-memory copies (rows_staged made them) of X and of one second input
// (GRAD for the backwards, RESIDUAL for rms_norm's residual path), contiguous like the operands they
// copy; every other operand from device memory. `k` is a constant at every call, so the choice folds.
struct GlobalRows {
    using Index = int64_t;                 // rows in device memory may pass 2^31 elements
    static constexpr bool kHeads = false;  // see HeadedRows
    static constexpr bool kWindow = false; // see WindowRows (rowwise_window.cuh)
    __device__ __forceinline__ const char *at(const RowArgs &a, int64_t row, int k) const {
        return row_at(a, row, k);
    }
};
// Rows in device memory that are not 16-byte aligned but whose operands are misaligned alike (the
// launcher's RowAlignment::kMisalignedAlike): each row's few columns before a 16-byte boundary are its
// head, the rest walked in 16-byte vectors. A kernel of its own (rows_streamed<Op, T, HeadedRows>), so
// that the aligned rows' walk keeps its registers.
struct HeadedRows : GlobalRows {
    static constexpr bool kHeads = true;
};
struct StagedRows {
    using Index = int; // a staged row is at most kStagedBytes long
    static constexpr bool kHeads = false, kWindow = false;
    const char *x, *second;
    __device__ __forceinline__ const char *at(const RowArgs &a, int64_t row, int k) const {
        if (k == LAB_ROW_X) return x;
        if (k == LAB_ROW_GRAD || k == LAB_ROW_RESIDUAL) return second;
        return row_at(a, row, k);
    }
};

// How an op's rows are staged, where it allows it (`static constexpr StagedShape kStaged`): `second`,
// the input copied beside X (LAB_ROW_X for none); `min_vectors`, the fewest 16-byte vectors a row
// needs - 256 unless the op says (shorter rows ran faster in registers); `vectors_per_thread`, the
// 16-byte vectors of a row each thread of a staged block takes - 4 unless the op says (the launcher
// picks blocks of 128 to 1024 threads).
struct StagedShape {
    int second;
    int64_t min_vectors = 256;
    int vectors_per_thread = 4;
};

// Copies `bytes` (a 16-byte aligned row) to shared memory in 16-byte pieces, thread t taking pieces
// t, t + blockDim.x, ... - the chunks the streamed walk gives lane t, so a thread reads back what its
// own copies wrote. A short last piece (a row whose bytes are not a multiple of 16) is copied byte by
// byte with plain loads: a 16-byte cp.async there, even its zero-filling form told to read fewer
// bytes, is an access past the row's allocation to compute-sanitizer's memcheck (2026-11-30).
// A staged row is under kStagedBytes: the offsets count in 32 bits, and the copy's shared-memory
// address is found once, not per piece (the loop had 30 instructions a piece, ncu source counters).
__device__ __forceinline__ void stage_row(char *shared, const char *global, int bytes) {
    const unsigned shared_base = shared_window_address(shared);
    for (int offset = int(threadIdx.x) * 16; offset < bytes; offset += int(blockDim.x) * 16) {
        if (offset + 16 <= bytes) {
            async_copy_16(shared_base + offset, global + offset);
        } else {
            for (int b = offset; b < bytes; ++b) shared[b] = global[b];
        }
    }
}
__device__ __forceinline__ void wait_staged_rows() {
    async_copy_commit();
    async_copy_wait<0>();
}

// The column of element i of chunk `chunk` held by `lane`. Rows in registers are under 2^31
// elements and count in 32 bits (Index = int: a third of the instructions of 64-bit index math, and
// these run for every element); streamed rows may be longer and count in 64.
template <typename T, typename Index = int>
__device__ __forceinline__ Index tile_column(Index chunk, int i, int lane, int group) {
    return (chunk * group + lane) * kRowVec<T> + i;
}

// A streamed or staged walk over steps 0 .. steps - 1 of a row. kWholeSteps: body(step, WholeTiles{})
// for the steps whose chunk lies wholly inside a vectorized row - loads and stores without a test
// each - then body(step, PartialTiles{}) for the rest (the chunk across the row's end, and every step
// of a strided row); else PartialTiles for every step (one copy of the body: fewer registers, where
// an op's kernel is at its bound). The group is a power of two: the whole steps cost a shift.
template <typename T, bool kWholeSteps, typename Index, class Body>
__device__ __forceinline__ void walk_steps(const RowArgs &a, int lane, Index steps, Body body) {
    Index whole = 0;
    if (kWholeSteps && a.vectorized) {
        const Index whole_vectors = Index(a.n) / kRowVec<T>; // kRowVec is a power of two: a shift
        const int group_shift = __ffs(a.group) - 1;
        whole = whole_vectors > lane ? (whole_vectors - lane + a.group - 1) >> group_shift : Index(0);
        whole = whole < steps ? whole : steps;
    }
    Index step = 0;
    for (; step < whole; ++step) body(step, WholeTiles{});
    for (; step < steps; ++step) body(step, PartialTiles{});
}

// A chunk's values rounded to T, as a packet.
template <typename T> __device__ __forceinline__ Packet16 to_packet(const compute_t<T> (&v)[kRowVec<T>]) {
    T elements[kRowVec<T>];
#pragma unroll
    for (int i = 0; i < kRowVec<T>; ++i) elements[i] = store_from_compute<T>(v[i]);
    Packet16 p;
    memcpy(&p.bits, elements, 16);
    return p;
}

// Loads this lane's kChunks chunks of a row (chunk indices chunk0, chunk0 + 1, ... in units of the
// group) as stored, one Packet16 a chunk; positions past the row's end, or of an invalid row (a
// group with no row left), get `fill`.
template <typename T, int kChunks, typename Index = int, class Tiles = PartialTiles>
__device__ __forceinline__ void load_packets(Packet16 (&p)[kChunks], const char *row, int64_t stride,
                                             const RowArgs &a, int lane, Index chunk0, bool valid, T fill) {
    constexpr int kVec = kRowVec<T>;
    if constexpr (Tiles::kWhole) { // every chunk inside the row: one test for all of them
        T fills[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) fills[i] = fill;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
            if (valid) {
                if constexpr (Tiles::kLastUse) {
                    p[c].bits = __ldcs(reinterpret_cast<const uint4 *>(row) + lane + (chunk0 + c) * a.group);
                } else {
                    p[c].bits = reinterpret_cast<const uint4 *>(row)[lane + (chunk0 + c) * a.group];
                }
            } else {
                memcpy(&p[c].bits, fills, 16);
            }
        }
        return;
    }
    const Index n = Index(a.n);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
        const Index first = tile_column<T, Index>(chunk0 + c, 0, lane, a.group);
        if (valid && a.vectorized && first + kVec <= n) {
            p[c].bits = *reinterpret_cast<const uint4 *>(row + int64_t(first) * int64_t(sizeof(T)));
        } else { // strided or unaligned: element by element, the address stepped (one live at a time)
            T elements[kVec];
            const char *at = row + int64_t(first) * stride;
#pragma unroll
            for (int i = 0; i < kVec; ++i, at += stride) {
                elements[i] = valid && first + i < n ? *reinterpret_cast<const T *>(at) : fill;
            }
            memcpy(&p[c].bits, elements, 16);
        }
    }
}

// Loads this lane's kChunks chunks of a row (chunk indices chunk0, chunk0 + 1, ... in units of the
// group) into v, converted to the compute type; positions past the row's end, or of an invalid row
// (a group with no row left), get `fill`. Several chunks go through load_packets, so that every load
// issues before any is converted. One chunk (the streamed and staged walks) keeps the direct form:
// through packets it shifted those kernels' registers (the staged bf16 NormForward's spills 48 -> 68
// bytes) and has no second load to overlap.
template <typename T, int kChunks, typename Index = int, class Tiles = PartialTiles>
__device__ __forceinline__ void load_row(compute_t<T> (&v)[kChunks * kRowVec<T>], const char *row,
                                         int64_t stride, const RowArgs &a, int lane, Index chunk0, bool valid,
                                         compute_t<T> fill) {
    constexpr int kVec = kRowVec<T>;
    if constexpr (kChunks > 1 ||
                  Tiles::kWhole) { // all chunks' loads issued before any is converted (Packet16)
        Packet16 packets[kChunks];
        load_packets<T, kChunks, Index, Tiles>(packets, row, stride, a, lane, chunk0, valid,
                                               store_from_compute<T>(fill));
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
#pragma unroll
            for (int i = 0; i < kVec; ++i) v[c * kVec + i] = packet_compute<T>(packets[c], i);
        }
        return;
    }
    const Index n = Index(a.n);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
        const Index first = tile_column<T, Index>(chunk0 + c, 0, lane, a.group);
        if (valid && a.vectorized && first + kVec <= n) {
            const Packed16<T> packet =
                *reinterpret_cast<const Packed16<T> *>(row + int64_t(first) * int64_t(sizeof(T)));
#pragma unroll
            for (int i = 0; i < kVec; ++i) v[c * kVec + i] = load_as_compute(packet.v[i]);
        } else {
#pragma unroll
            for (int i = 0; i < kVec; ++i) {
                const Index column = first + i;
                v[c * kVec + i] =
                    valid && column < n
                        ? load_as_compute(*reinterpret_cast<const T *>(row + int64_t(column) * stride))
                        : fill;
            }
        }
    }
}

// A column operand (weight, bias) as a row, or `fill` everywhere when it is absent.
template <typename T, int kChunks, typename Index = int, class Tiles = PartialTiles>
__device__ __forceinline__ void load_columns(compute_t<T> (&v)[kChunks * kRowVec<T>], const RowArgs &a,
                                             lab_col_operand which, int lane, Index chunk0,
                                             compute_t<T> fill) {
    load_row<T, kChunks, Index, Tiles>(v, a.col[which], a.col_data_stride[which], a, lane, chunk0,
                                       a.col[which] != nullptr, fill);
}

template <typename T, int kChunks, typename Index = int, class Tiles = PartialTiles>
__device__ __forceinline__ void store_row(const compute_t<T> (&v)[kChunks * kRowVec<T>], char *row,
                                          int64_t stride, const RowArgs &a, int lane, Index chunk0,
                                          bool valid) {
    constexpr int kVec = kRowVec<T>;
    if (!valid) return;
    const Index n = Index(a.n);
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
        const Index first = tile_column<T, Index>(chunk0 + c, 0, lane, a.group);
        if (Tiles::kWhole || (a.vectorized && first + kVec <= n)) {
            Packed16<T> packet;
#pragma unroll
            for (int i = 0; i < kVec; ++i) packet.v[i] = store_from_compute<T>(v[c * kVec + i]);
            if constexpr (Tiles::kLastUse) {
                uint4 bits;
                memcpy(&bits, &packet, 16);
                __stcs(reinterpret_cast<uint4 *>(row + int64_t(first) * int64_t(sizeof(T))), bits);
            } else {
                *reinterpret_cast<Packed16<T> *>(row + int64_t(first) * int64_t(sizeof(T))) = packet;
            }
        } else {
#pragma unroll
            for (int i = 0; i < kVec; ++i) {
                const Index column = first + i;
                if (column < n) {
                    *reinterpret_cast<T *>(row + int64_t(column) * stride) =
                        store_from_compute<T>(v[c * kVec + i]);
                }
            }
        }
    }
}

// Stores this lane's kChunks chunks of a row chunk by chunk, element i of chunk c being value(c, i):
// one chunk's results live in registers at a time.
template <typename T, int kChunks, class Tiles = PartialTiles, typename Value>
__device__ __forceinline__ void store_chunks(char *row, int64_t stride, const RowArgs &a, int lane,
                                             bool valid, Value value) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
        compute_t<T> v[kRowVec<T>];
#pragma unroll
        for (int i = 0; i < kRowVec<T>; ++i) v[i] = value(c, i);
        store_row<T, 1, int, Tiles>(v, row, stride, a, lane, c, valid);
    }
}

// A value rounded through the storage type, as the framework computing x + residual in T would.
template <typename T> __device__ __forceinline__ compute_t<T> round_to(compute_t<T> v) {
    return load_as_compute(store_from_compute<T>(v));
}

struct MaxCombine {
    template <typename A> __device__ __forceinline__ A operator()(A a, A b) const { return a > b ? a : b; }
};

// Two values reduced together (one pass through shared memory for both), e.g. a sum and a sum of
// squares; shuffled member by member (reduce.cuh's warp_reduce finds this overload).
template <typename A> struct Pair {
    A first, second;
};
template <typename A> __device__ __forceinline__ Pair<A> shuffle_xor(Pair<A> v, int lane_mask) {
    return {__shfl_xor_sync(0xffffffffu, v.first, lane_mask),
            __shfl_xor_sync(0xffffffffu, v.second, lane_mask)};
}
struct PairSum {
    template <typename A> __device__ __forceinline__ Pair<A> operator()(Pair<A> a, Pair<A> b) const {
        return {a.first + b.first, a.second + b.second};
    }
};

// Combines v across the lanes of a row's group; every lane receives the result, combined in a fixed
// order (deterministic). Groups of up to 32 lanes are aligned parts of a warp and combine by
// shuffles. Larger groups (whole warps, one or several groups per block) put one partial per warp
// in shared memory, and each lane adds its group's partials in warp order; every thread of the
// block must call it then.
template <typename A, typename Combine>
__device__ __forceinline__ A group_reduce(A v, Combine combine, int group) {
    if (group <= 32) {
        for (int offset = group / 2; offset > 0; offset >>= 1) v = combine(v, shuffle_xor(v, offset));
        return v;
    }
    __shared__ A partials[32];
    v = warp_reduce(v, combine);
    if ((threadIdx.x & 31) == 0) partials[threadIdx.x >> 5] = v;
    __syncthreads();
    const int first = (threadIdx.x & ~(group - 1)) >> 5;
    A total = partials[first];
    for (int w = 1; w < (group >> 5); ++w) total = combine(total, partials[first + w]);
    __syncthreads(); // the next call may overwrite `partials` only after everyone read
    return total;
}

template <typename A> __device__ __forceinline__ A group_sum(A v, int group) {
    return group_reduce(v, SumCombine{}, group);
}
template <typename A> __device__ __forceinline__ A group_max(A v, int group) {
    return group_reduce(v, MaxCombine{}, group);
}
template <typename A> __device__ __forceinline__ Pair<A> group_sums(A first, A second, int group) {
    return group_reduce(Pair<A>{first, second}, PairSum{}, group);
}

// The statistics (mean, rstd) are float32 or float64, one per row.
__device__ __forceinline__ void store_statistic(const RowArgs &a, char *at, double value) {
    if (!at) return;
    if (a.stats_double) {
        *reinterpret_cast<double *>(at) = value;
    } else {
        *reinterpret_cast<float *>(at) = static_cast<float>(value);
    }
}
__device__ __forceinline__ double load_statistic(const RowArgs &a, const char *at) {
    return a.stats_double ? *reinterpret_cast<const double *>(at)
                          : double(*reinterpret_cast<const float *>(at));
}

// float: ex2.approx after a multiply (__expf), two instructions instead of expf's ten - the kernels
// were issue-bound (ncu: softmax issuing 76% of cycles at 46% of DRAM). Relative error ~2^-21 for
// the arguments a softmax sees (<= 0 after the max is subtracted, and the max is a few dozen at most).
__device__ __forceinline__ float row_exp(float v) { return __expf(v); }
__device__ __forceinline__ double row_exp(double v) { return exp(v); }
__device__ __forceinline__ float row_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double row_max(double a, double b) { return fmax(a, b); }

// exp(v), v <= 0, as the factor that rescales a softmax sum: such a sum holds its own maximum's term
// exp(0) = 1, so a subnormal factor times it is lost when added to a sum of at least 1 - ex2 with
// subnormals flushed (two instructions) is exact enough where __expf spends five.
__device__ __forceinline__ float row_exp_rescale(float v) { return fast_exp2(v * 1.4426950408889634f); }
__device__ __forceinline__ double row_exp_rescale(double v) { return exp(v); }

// exp(x - max) for many x: float as one fused multiply-add and ex2 (exp2(x log2e - max log2e)); the
// scaled maximum is computed once. double keeps exp. divided(max, sum): exp(x - max) / sum, the
// division folded into the exponent (exp2(x log2e - (max log2e + log2(sum)))), one rounding more
// than the shift alone and no multiply an element.
template <typename A> struct ShiftedExp;
template <> struct ShiftedExp<float> {
    float scaled_max;
    __device__ __forceinline__ explicit ShiftedExp(float max) : scaled_max(max * 1.4426950408889634f) {}
    __device__ __forceinline__ static ShiftedExp divided(float max, float sum) {
        ShiftedExp e(0.0f);
        e.scaled_max = fmaf(max, 1.4426950408889634f, log2f(sum));
        return e;
    }
    __device__ __forceinline__ float operator()(float x) const {
        return fast_exp2(fmaf(x, 1.4426950408889634f, -scaled_max));
    }
};
template <> struct ShiftedExp<double> {
    double max;
    __device__ __forceinline__ explicit ShiftedExp(double m) : max(m) {}
    __device__ __forceinline__ static ShiftedExp divided(double max, double sum) {
        return ShiftedExp(max + log(sum));
    }
    __device__ __forceinline__ double operator()(double x) const { return exp(x - max); }
};
__device__ __forceinline__ float row_log(float v) { return logf(v); }
__device__ __forceinline__ double row_log(double v) { return log(v); }
__device__ __forceinline__ float row_rsqrt(float v) { return rsqrtf(v); }
__device__ __forceinline__ double row_rsqrt(double v) { return 1.0 / sqrt(v); }

} // namespace lab
