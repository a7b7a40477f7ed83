// rowwise_kernels.cuh - the kernels that run the ops of rowwise_ops.cuh and rowwise_norm_ops.cuh
// over every row: rows in registers (several groups per block, grid-stride) and streamed rows (a
// block per row), both on a fixed grid so that the weight gradients' partial sums (one set per block) are the
// same on every run, and the kernel that adds those partials up in order.
#pragma once

#include <type_traits>

#include "rowwise_norm_ops.cuh"
#include "rowwise_ops.cuh"
#include "rowwise_window.cuh"

namespace lab {

// Writes a block's column sums (ColumnSums, in its shared memory) as its partial rows: [0][block][n]
// the weight's, [1][block][n] the bias's (where a bias gradient is wanted). Several groups per block
// add theirs in group order. Each thread writes 16-byte pieces of consecutive columns, whichever
// thread summed them, so that a warp's stores are one contiguous run. (Written by the thread that
// summed it, each column was a store of its own, and a warp's store spread 128 bytes over 32 sectors -
// at the end of every block at once.)
template <typename T, int kChunks, bool kBias>
__device__ void write_partials(const RowArgs &a, const ColumnSums<T, kChunks> &sums) {
    using A = compute_t<T>;
    using Sums = ColumnSums<T, kChunks>;
    constexpr int kVec = kRowVec<T>, kPiece = Sums::kPiece;
    A *partials = static_cast<A *>(a.partials);
    if (!partials) return;
    const int groups = blockDim.x / a.group, n = int(a.n);
    const bool whole_pieces = n % kPiece == 0; // every partial row starts 16-byte aligned
    __syncthreads();                           // every thread's sums are in before others read them
    for (int which = 0; which < (kBias ? 2 : 1); ++which) {
        const A *region = which == 0 ? sums.weight : sums.bias;
        A *out = partials + (int64_t(which) * gridDim.x + blockIdx.x) * a.n;
        for (int first = int(threadIdx.x) * kPiece; first < n; first += int(blockDim.x) * kPiece) {
            // columns first .. first + kPiece - 1: one piece of their owner lane's sums (slot's layout)
            const int vector = first / kVec, owner = vector & (a.group - 1);
            const int k = (vector / a.group) * kVec + first % kVec;
            A total[kPiece];
#pragma unroll
            for (int e = 0; e < kPiece; ++e) total[e] = A(0);
            for (int g = 0; g < groups; ++g) {
                A piece[kPiece];
                *reinterpret_cast<typename Sums::Piece *>(piece) =
                    *reinterpret_cast<const typename Sums::Piece *>(region +
                                                                    Sums::slot(k, g * a.group + owner));
#pragma unroll
                for (int e = 0; e < kPiece; ++e) total[e] += piece[e];
            }
            if (whole_pieces) {
                *reinterpret_cast<typename Sums::Piece *>(out + first) =
                    *reinterpret_cast<const typename Sums::Piece *>(total);
            } else {
#pragma unroll
                for (int e = 0; e < kPiece; ++e) {
                    if (first + e < n) out[first + e] = total[e];
                }
            }
        }
    }
}

// Rows in registers: kChunks chunks per lane, `a.group` lanes per row, blockDim.x / a.group rows
// per block at a time, grid-stride over the rows.
// How rows in registers are launched, per op (RegisterShape, the in-register twin of StreamShape
// below): the most lanes a block of `chunks` chunks takes, the blocks an SM its launch bounds ask
// for (which sets the registers ptxas may use), and the fewest threads a block. The default: four
// chunks a lane in groups of at most 256 lanes, four blocks per SM - 64 registers, as the 1024-lane
// kernels. Occupancy decides the bytes in flight: letting four chunks take 128 registers (two blocks
// per SM) halved softmax's speed (bench/sweep_rowwise.py, 2026-11-30). An op whose lanes need more
// (the norms' backward) sets Op::RegisterShape.
struct DefaultRegisterShape {
    static constexpr int most_lanes(int chunks) { return chunks >= 4 ? 256 : 1024; }
    static constexpr int min_blocks(int chunks) { return chunks >= 4 ? 4 : 1; }
    static constexpr int fewest_threads = 256;
};
template <class Op, typename = void> struct RegisterShape : DefaultRegisterShape {};
template <class Op> struct RegisterShape<Op, std::void_t<typename Op::RegisterShape>> : Op::RegisterShape {};
template <class Op, int kChunks> constexpr int kRowBlockLimit = RegisterShape<Op>::most_lanes(kChunks);

// The launch bounds of rows in registers: RegisterShape's, or for WholeTiles the op's
// WholeTileShape (four chunks a lane) - without the tests of partial tiles ptxas hoists more, and at
// PartialTiles' bound bf16 rms_norm took 98 registers where it took 80.
template <class Op, int kChunks, class Tiles> struct RowBounds {
    static constexpr int threads = kRowBlockLimit<Op, kChunks>,
                         blocks = RegisterShape<Op>::min_blocks(kChunks);
};
template <class Op, int kChunks> struct RowBounds<Op, kChunks, WholeTiles> {
    static constexpr int threads = Op::WholeTileShape::most_lanes, blocks = Op::WholeTileShape::min_blocks;
};

// Tiles: PartialTiles, or WholeTiles (rowwise.cuh) for an op that takes them (Op::WholeTileShape)
// where the launcher found the rows fill their tiles.
template <class Op, typename T, int kChunks, class Tiles = PartialTiles>
__global__ void __launch_bounds__(RowBounds<Op, kChunks, Tiles>::threads,
                                  RowBounds<Op, kChunks, Tiles>::blocks) rows_in_registers(RowArgs a) {
    // The group is a power of two: shifts, not divisions - the two divisions were about 35 of the 87
    // instructions before a warp's first load (ncu source counters, bf16 rms_norm, 2026-12-03).
    const int group_shift = __ffs(a.group) - 1;
    const int lane = threadIdx.x & (a.group - 1), slot = threadIdx.x >> group_shift;
    const int rows_per_block = blockDim.x >> group_shift;
    ColumnSums<T, kChunks> sums{nullptr, nullptr};
    if constexpr (Op::kColumnSums) { // in the dynamic shared memory the launcher gave
        extern __shared__ __align__(16) unsigned char column_sum_bytes[];
        sums.weight = reinterpret_cast<compute_t<T> *>(column_sum_bytes);
        sums.bias = Op::kBias ? sums.weight + blockDim.x * ColumnSums<T, kChunks>::kSize : nullptr;
        ColumnSums<T, kChunks>::zero(sums.weight);
        if (Op::kBias) ColumnSums<T, kChunks>::zero(sums.bias);
    }
    // every thread runs the same number of iterations (the group reductions need the whole warp or
    // block); a group past the last row computes on fills and stores nothing
    for (int64_t first = int64_t(blockIdx.x) * rows_per_block; first < a.rows;
         first += int64_t(gridDim.x) * rows_per_block) {
        const int64_t row = first + slot;
        const bool valid = row < a.rows;
        if constexpr (Tiles::kWhole) {
            Op::template row<T, kChunks, Tiles>(a, valid ? row : 0, lane, valid, sums);
        } else {
            Op::template row<T, kChunks>(a, valid ? row : 0, lane, valid, sums);
        }
    }
    if constexpr (Op::kColumnSums) write_partials<T, kChunks, Op::kBias>(a, sums);
}

// How a streamed row is walked: chunks a lane loads per step and threads per block, one block per
// row - Op::kStreamChunks and Op::kStreamThreads where the op sets them, else 1 and 1024. At 64
// registers an SM holds 1024 threads: blocks of 512 are two rows in flight, one streaming while the
// other reduces.
template <class Op, typename = void> struct StreamShape {
    static constexpr int chunks = 1, threads = 1024;
};
template <class Op> struct StreamShape<Op, std::void_t<decltype(Op::kStreamChunks)>> {
    static constexpr int chunks = Op::kStreamChunks, threads = Op::kStreamThreads;
};

// Whether an op's streamed walk takes BufferedRows (it sets Op::kBufferedRows).
template <class Op, typename = void> constexpr bool kWalksBufferedRows = false;
template <class Op>
constexpr bool kWalksBufferedRows<Op, std::void_t<decltype(Op::kBufferedRows)>> = Op::kBufferedRows;

// A streamed block's rows through BufferedRows (rowwise_window.cuh) in `buffer`, its dynamic shared
// memory past the column sums: the block's first row copied in before the loop, each later one by the
// row before it as that row's second pass finishes each step.
template <class Op, typename T, class Sink>
__device__ void buffered_rows(const RowArgs &a, int64_t steps, void *buffer, const Sink &sink) {
    BufferedRows rows{};
    rows.x_slots = shared_window_address(buffer);
    rows.grad_slots = rows.x_slots + unsigned(steps * a.group * 16);
    const int64_t whole_steps = a.n / (int64_t(a.group) * kRowVec<T>);
    const int lane = int(threadIdx.x);
    if (int64_t(blockIdx.x) < a.rows) {
        const char *x = row_at(a, blockIdx.x, LAB_ROW_X), *grad = row_at(a, blockIdx.x, LAB_ROW_GRAD);
        for (int64_t step = 0; step < steps; ++step) {
            copy_to_slot<T, 1>(rows.x_slots, int(step), x, a, lane, step, whole_steps);
            copy_to_slot<T, 1>(rows.grad_slots, int(step), grad, a, lane, step, whole_steps);
            async_copy_commit();
        }
    }
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        const int64_t next = row + gridDim.x;
        rows.next_x = next < a.rows ? row_at(a, next, LAB_ROW_X) : nullptr;
        rows.next_grad = next < a.rows ? row_at(a, next, LAB_ROW_GRAD) : nullptr;
        Op::template streamed_row<T>(a, row, steps, rows, sink);
    }
}

// Streamed rows: a block per row, grid-stride; Rows is GlobalRows, or HeadedRows for an op that walks
// them (Op::kHeadedRows) where the launcher found the rows misaligned alike. Ops with column sums keep
// them in this block's partial rows, or, where a.streamed_sums_in_shared, in dynamic shared memory until
// the last row (GlobalColumnSink, SharedColumnSink).
template <class Op, typename T, class Rows = GlobalRows>
__global__ void __launch_bounds__(StreamShape<Op>::threads, 1024 / StreamShape<Op>::threads)
    rows_streamed(RowArgs a) {
    const int64_t steps = ceil_div(a.n, int64_t(a.group) * kRowVec<T> * StreamShape<Op>::chunks);
    if constexpr (Op::kColumnSums) {
        static_assert(StreamShape<Op>::chunks == 1, "column sums are slotted by one chunk a step");
        static_assert(!Rows::kHeads, "column sums walk GlobalRows");
        using A = compute_t<T>;
        A *partials = static_cast<A *>(a.partials);
        const bool bias = partials && a.col[LAB_COL_GRAD_BIAS];
        auto partial_row = [&](int which) {
            return partials + (int64_t(which) * gridDim.x + blockIdx.x) * a.n;
        };
        if (partials && a.streamed_sums_in_shared) {
            extern __shared__ __align__(16) unsigned char shared_sum_bytes[];
            A *weight = reinterpret_cast<A *>(shared_sum_bytes);
            const int slots = int(steps) * a.group * kRowVec<T>;
            A *bias_sums = bias ? weight + slots : nullptr;
            for (int slot = threadIdx.x; slot < slots * (bias ? 2 : 1); slot += blockDim.x) weight[slot] = 0;
            __syncthreads();
            const SharedColumnSink<T, StreamShape<Op>::threads> sink{weight, bias_sums};
            bool buffered = false;
            if constexpr (kWalksBufferedRows<Op>) {
                if (a.streamed_row_buffer) {
                    buffered_rows<Op, T>(a, steps, weight + int64_t(slots) * (bias ? 2 : 1), sink);
                    buffered = true;
                }
            }
            for (int64_t row = blockIdx.x; row < a.rows && !buffered; row += gridDim.x) {
                Op::template streamed_row<T>(a, row, steps, GlobalRows{}, sink);
            }
            __syncthreads();
            for (int64_t column = threadIdx.x; column < a.n; column += blockDim.x) {
                const int vector = int(column / kRowVec<T>), i = int(column % kRowVec<T>);
                const int slot = shared_slot(vector / a.group, kRowVec<T>, i, vector % a.group, a.group);
                partial_row(0)[column] = weight[slot];
                if (bias) partial_row(1)[column] = bias_sums[slot];
            }
            return;
        }
        for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
            const GlobalColumnSink<T> sums{partials ? partial_row(0) : nullptr,
                                           bias ? partial_row(1) : nullptr, row == blockIdx.x};
            Op::template streamed_row<T>(a, row, steps, GlobalRows{}, sums);
        }
        if (partials && blockIdx.x >= a.rows) { // a block with no row still owns partial rows: zero them
            for (int64_t column = threadIdx.x; column < a.n; column += blockDim.x) {
                partial_row(0)[column] = 0;
                partial_row(1)[column] = 0;
            }
        }
    } else {
        for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
            Op::template streamed_row<T>(a, row, steps, Rows{});
        }
    }
}

// Window rows: streamed rows of an op that walks WindowRows (Op::kWindowRows), shaped as its streamed
// blocks, each thread keeping `depth` steps of cp.async copies in flight in a window of dynamic shared
// memory instead of the one step its registers hold. Where the launcher takes it: plan_window_rows.
template <class Op, typename T>
__global__ void __launch_bounds__(StreamShape<Op>::threads, 1024 / StreamShape<Op>::threads)
    rows_window(RowArgs a, int depth) {
    extern __shared__ __align__(16) unsigned char window_bytes[];
    const int64_t steps = ceil_div(a.n, int64_t(a.group) * kRowVec<T> * StreamShape<Op>::chunks);
    WindowRows window{};
    window.shared = shared_window_address(window_bytes);
    window.depth = depth;
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        Op::template streamed_row<T>(a, row, steps, window);
    }
}

// Which ops may be staged: those with a StagedShape kStaged (rowwise.cuh) - the forwards and softmax's
// backward. Not the norms' backward: staged with two buffers and its column sums in shared memory it ran
// slower than in registers (bf16 16384 x 4096, rms_norm forward + backward 0.413 ms against 0.341, `make
// gpu-check` 2026-11-30). Not cross-entropy's forward: its rows are longer than shared memory. Not the GLU
// backwards and cross-entropy's backward: they read each element once, so a copy in shared memory would save
// nothing (their streamed walks take a Rows they do not use).
template <class Op, typename = void> struct Staging {
    static constexpr bool allowed = false;
};
template <class Op> struct Staging<Op, std::void_t<decltype(Op::kStaged)>> {
    static constexpr bool allowed = true;
    static constexpr int second = Op::kStaged.second;
    static constexpr int64_t min_vectors = Op::kStaged.min_vectors;
    static constexpr int vectors_per_thread = Op::kStaged.vectors_per_thread;
};

// Staged rows: a block per row (grid-stride past the grid), the row's inputs copied into shared
// memory by cp.async, then the streamed walk reading them from there - one read of device memory,
// like rows in registers, at the registers of the streamed kernel. Capped at 32 registers (two
// blocks of 1024 an SM): at 128 threads a block, an SM then holds 16 rows' copies in flight, which
// is what lifts these ops from the register-held layout's half occupancy (bench/sweep_norms.cu).
// `padded` is one staged row's bytes rounded up to 16; the second input's copy follows X's. `steps`,
// the 16-byte chunks a thread walks along the row, comes from the host: a block holds one row, and a
// division here was 30 of a warp's 1073 instructions a row (ncu source counters, staged softmax).
template <class Op, typename T>
__global__ void __launch_bounds__(1024, 2) rows_staged(RowArgs a, int padded, int steps) {
    extern __shared__ __align__(16) unsigned char staged_bytes[];
    char *x = reinterpret_cast<char *>(staged_bytes), *second = x + padded;
    const int bytes = int(a.n) * int(sizeof(T));
    for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
        if (row != blockIdx.x) __syncthreads(); // every thread is done with the previous row's copies
        stage_row(x, row_at(a, row, LAB_ROW_X), bytes);
        constexpr int kSecond = Staging<Op>::second;
        const bool has_second = kSecond != LAB_ROW_X && a.row[kSecond] != nullptr;
        if (has_second) stage_row(second, row_at(a, row, kSecond), bytes);
        wait_staged_rows();
        __syncthreads(); // the copies visible to the whole block (layer_norm's shift reads column 0)
        Op::template streamed_row<T>(a, row, steps, StagedRows{x, has_second ? second : nullptr});
    }
}

// out[column] = the sum over the partial rows, in order: blockDim (32, kSlices); each thread adds
// every kSlices-th partial row of its column, then the slices add up in slice order. (Eight columns a
// block and 64 slices - four times the blocks, a quarter of the partial rows a thread - were slower:
// 6.7 -> 7.0 us for bf16 rows of 4096 and 660 partial rows, 8.4 -> 11.7 with the bias's; ncu, H200,
// 2026-12-04.)
constexpr int kPartialSlices = 16;
template <typename T>
__global__ void __launch_bounds__(32 * kPartialSlices)
    sum_partial_columns(const compute_t<T> *partials, int64_t partial_rows, int64_t n, char *weight_out,
                        int64_t weight_stride, char *bias_out, int64_t bias_stride) {
    using A = compute_t<T>;
    const int which = blockIdx.y;
    char *out = which == 0 ? weight_out : bias_out;
    if (!out) return;
    const int64_t column = int64_t(blockIdx.x) * 32 + threadIdx.x;
    A total = 0;
    if (column < n) {
        const A *from = partials + int64_t(which) * partial_rows * n + column;
        for (int64_t p = threadIdx.y; p < partial_rows; p += kPartialSlices) total += from[p * n];
    }
    __shared__ A slices[kPartialSlices][33];
    slices[threadIdx.y][threadIdx.x] = total;
    __syncthreads();
    if (threadIdx.y == 0 && column < n) {
        A sum = 0;
#pragma unroll
        for (int s = 0; s < kPartialSlices; ++s) sum += slices[s][threadIdx.x];
        *reinterpret_cast<T *>(out + column * (which == 0 ? weight_stride : bias_stride)) =
            store_from_compute<T>(sum);
    }
}

} // namespace lab
