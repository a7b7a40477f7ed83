// rowwise_plan.cuh - how a row-wise op's rows are laid out on the GPU: how many threads share a row (so
// the row fits this op's registers, else it is staged, streamed, walked through a window or buffered),
// the fixed grid the weight-gradient partials are made on, and the shared memory each layout takes.
// rowwise_launcher.cuh launches what these planners choose.
#pragma once

#include <algorithm>
#include <atomic>
#include <stdint.h>

#include "dispatch.cuh"
#include "resident_blocks.cuh"
#include "rowwise_kernels.cuh"

namespace lab {

// The cap lab_rowwise_set_max_chunks sets (rowwise_launch.cu); 4 unless a tuning sweep lowers it.
extern int rowwise_max_chunks;
// The fewest 16-byte vectors a row needs to be staged, for every op (lab_rowwise_set_staged_min_vectors,
// for the tuning sweep and the tests that force a layout); 0, the default, leaves each op its own
// (Staging<Op>::min_vectors in rowwise_kernels.cuh).
extern int64_t rowwise_staged_min_vectors;
// The 16-byte vectors each thread of a staged block takes, for every op
// (lab_rowwise_set_staged_vectors_per_thread, for the sweep and tests); 0, the default, leaves each op
// its own (Staging<Op>::vectors_per_thread).
extern int rowwise_staged_vectors_per_thread;
// The steps a window-rows kernel keeps in flight (lab_rowwise_set_window_depth, for the sweep and the
// tests): -1, the default (default_window_depth: kDefaultWindowDepth where the SM keeps its streamed
// blocks, deeper for long rows with a gradient on slower memory); 0 turns window
// rows off, and buffered rows (plan_buffered_rows).
extern int rowwise_window_depth;
// The blocks of a cluster that rows are cut across (lab_rowwise_set_cluster_blocks, for the sweep and the
// tests): -1, the default, the fewest whose slices fit a block, for rows that would be streamed; 0 never;
// 2, 4 or 8 that many, wherever the rows cut into slices of whole vectors that fit.
extern int rowwise_cluster_blocks;

// The most bytes a staged row's copies take past kStagedBytes (lab_rowwise_set_staged_most_bytes, for the
// sweep and the tests): -1, the default, half of what a block may have where it opts in (plan_staged_rows).
extern int64_t rowwise_staged_most_bytes;

// A staged block's copies within the 48 KB of shared memory a kernel gets without opting in, less 1 KB
// for the reductions' own, need no opting in.
constexpr int64_t kStagedBytes = 47 * 1024;

namespace {

// The row operands that hold one value a row (statistics, targets, losses), not a row of n.
inline bool one_per_row(int k) {
    return k == LAB_ROW_MEAN || k == LAB_ROW_RSTD || k == LAB_ROW_TARGET || k == LAB_ROW_LOSS;
}

// How a launch's rows lie against 16-byte boundaries. kAligned: every row and column operand walks
// its elements contiguously and every row (and the column operands) starts 16-byte aligned - 16-byte
// packets work. kMisalignedAlike: not aligned, but every row operand contiguous, each row of each
// operand as far from a 16-byte boundary as the first row operand's same row, and no column operand
// (cross-entropy's logits and gradient for a vocabulary like 50257) - a streamed walk takes each row's
// few leading elements one a lane and the rest in packets (HeadedRows). kUnaligned: element by element.
enum class RowAlignment { kAligned, kMisalignedAlike, kUnaligned };
template <typename T> RowAlignment row_alignment(const lab_rowwise_launch &l) {
    int first = -1; // the operand the others' misalignment is compared with
    bool aligned = true;
    for (int k = 0; k < LAB_ROW_OPERANDS; ++k) {
        if (!l.row_data[k] || one_per_row(k)) continue;
        if (l.col_strides[k] != int64_t(sizeof(T))) return RowAlignment::kUnaligned;
        first = first < 0 ? k : first;
        const uintptr_t start = reinterpret_cast<uintptr_t>(l.row_data[k]),
                        reference = reinterpret_cast<uintptr_t>(l.row_data[first]);
        aligned = aligned && start % 16 == 0;
        if ((start - reference) % 16 != 0) return RowAlignment::kUnaligned;
        for (int d = 0; d < l.lead_ndim; ++d) {
            aligned = aligned && l.lead_strides[k][d] % 16 == 0;
            if ((l.lead_strides[k][d] - l.lead_strides[first][d]) % 16 != 0) return RowAlignment::kUnaligned;
        }
    }
    bool columns = false;
    for (int k = 0; k < LAB_COL_OPERANDS; ++k) {
        if (!l.col_data[k]) continue;
        columns = true;
        aligned = aligned && reinterpret_cast<uintptr_t>(l.col_data[k]) % 16 == 0 &&
                  l.col_data_strides[k] == int64_t(sizeof(T));
    }
    return aligned   ? RowAlignment::kAligned
           : columns ? RowAlignment::kUnaligned
                     : RowAlignment::kMisalignedAlike;
}
template <typename T> bool rows_vectorizable(const lab_rowwise_launch &l) {
    return row_alignment<T>(l) == RowAlignment::kAligned;
}

// Whether an op's streamed walk takes HeadedRows (it sets Op::kHeadedRows).
template <class Op, typename = void> constexpr bool kWalksHeads = false;
template <class Op> constexpr bool kWalksHeads<Op, std::void_t<decltype(Op::kHeadedRows)>> = Op::kHeadedRows;

// Whether an op's row() takes WholeTiles (it sets Op::WholeTileShape).
template <class Op, typename = void> constexpr bool kTakesWholeTiles = false;
template <class Op> constexpr bool kTakesWholeTiles<Op, std::void_t<typename Op::WholeTileShape>> = true;

// Rows in registers at four chunks a lane that fill their tile of `group` x 4 vectors exactly, for an
// op that takes WholeTiles: every operand vectorized, the row's `n` columns (a cluster's slice of them:
// plan_cluster_rows) a whole number of vectors and of tiles, one leading dimension, and a group within
// the whole-tile kernel's launch bounds.
template <class Op, typename T>
bool rows_fill_tiles(const lab_rowwise_launch &l, bool vectorized, int group, int64_t chunks, int64_t n) {
    if constexpr (kTakesWholeTiles<Op>) {
        return vectorized && chunks == 4 && group <= Op::WholeTileShape::most_lanes && l.lead_ndim <= 1 &&
               n > 0 && n % kRowVec<T> == 0 && n / kRowVec<T> == int64_t(group) * chunks;
    }
    return false;
}

// The unstaged kernel an op runs: streamed (over HeadedRows where the op walks them and the rows are
// `headed`, misaligned alike), or in registers with `chunks` chunks a lane (1, 2 or 4, within
// Op::kMaxChunks) - at four, WholeTiles where the op takes them and the rows fill their tiles.
template <class Op, typename T>
auto row_kernel(bool streamed, int64_t chunks, bool whole = false, bool headed = false) -> void (*)(RowArgs) {
    if constexpr (kWalksHeads<Op>) {
        if (streamed && headed) return rows_streamed<Op, T, HeadedRows>;
    }
    if (streamed) return rows_streamed<Op, T>;
    if constexpr (Op::kMaxChunks >= 4) {
        if constexpr (kTakesWholeTiles<Op>) {
            if (chunks == 4 && whole) return rows_in_registers<Op, T, 4, WholeTiles>;
        }
        if (chunks == 4) return rows_in_registers<Op, T, 4>;
    }
    if constexpr (Op::kMaxChunks >= 2) {
        if (chunks == 2) return rows_in_registers<Op, T, 2>;
    }
    return rows_in_registers<Op, T, 1>;
}

// The unstaged kernels row_kernel chooses among (streamed; 1, 2 or 4 chunks), numbered for the caches
// of their properties below.
constexpr int kRowKernels = 4;
inline int row_kernel_slot(bool streamed, int64_t chunks) {
    return streamed ? 0 : chunks == 4 ? 3 : int(chunks);
}

// The blocks of `threads` the device's SMs hold at once, counted by thread slots alone: the grid of
// the ops without partials. Their kernels take up to 64 registers a thread, so an SM really holds
// half that many, and the grid is about two waves.
cudaError_t thread_slot_blocks(int threads, int64_t *blocks) {
    DeviceShape device{};
    const cudaError_t err = current_device_shape(&device);
    const int per_multiprocessor = device.threads_per_multiprocessor / threads;
    *blocks = int64_t(device.multiprocessors) * (per_multiprocessor > 0 ? per_multiprocessor : 1);
    return err;
}

// The blocks of an op with partials the device holds at once, from its kernel's occupancy
// (resident_blocks.cuh): one wave, each block a set of partial rows. It depends only on the device
// and the kernel, so the grid - and the weight-gradient partials made on it - is the same on every
// run. The occupancy is kept per kernel (streamed, or 1, 2 or 4 chunks; at four, whole tiles or not:
// rms_norm's backward on whole tiles holds six blocks an SM where partial tiles hold five) and block
// shape (threads, a power of two up to 1024, and whether the partials take shared memory).
template <class Op, typename T>
cudaError_t partial_row_blocks(bool streamed, int64_t chunks, bool whole, int threads, size_t shared_bytes,
                               int64_t *blocks) {
    static std::atomic<int> per_multiprocessor[kRowKernels][2][11][2];
    int threads_slot = 0;
    while ((2 << threads_slot) <= threads && threads_slot < 10) ++threads_slot;
    return resident_blocks(
        row_kernel<Op, T>(streamed, chunks, whole), threads, shared_bytes,
        per_multiprocessor[row_kernel_slot(streamed, chunks)][whole][threads_slot][shared_bytes > 0], blocks);
}

// The dynamic shared memory a column-sum kernel (streamed, or in registers at `chunks` chunks) may
// give its sums.
template <class Op, typename T> cudaError_t column_sums_limit(bool streamed, int64_t chunks, size_t *bytes) {
    static std::atomic<int> static_bytes_plus_one[kRowKernels];
    static std::atomic<uint64_t> raised_on[kRowKernels];
    const int slot = row_kernel_slot(streamed, chunks);
    return opt_in_shared_limit(row_kernel<Op, T>(streamed, chunks), static_bytes_plus_one[slot],
                               raised_on[slot], bytes);
}

// The shared memory rows in registers give their column sums (ColumnSums): each thread's chunks of
// sums, one region for the weight's and one for the bias's where the op makes them.
template <class Op, typename T> size_t in_register_sums_bytes(int threads, int64_t chunks) {
    if constexpr (Op::kColumnSums) {
        return sizeof(compute_t<T>) * size_t(threads) * size_t(chunks) * kRowVec<T> * (Op::kBias ? 2 : 1);
    }
    return 0;
}

// How launch_rows runs an op: its kernel, block and grid, and the dynamic shared memory it takes.
enum class RowLayout { staged, in_registers, streamed, window, clustered };
struct RowPlan {
    RowLayout layout;
    int group, threads;
    int64_t chunks, grid;
    size_t shared_bytes;
    int64_t padded;           // staged: one row's copy, rounded up to 16 bytes
    bool sums_in_shared;      // streamed with column sums: the block's sums in its shared memory
    int window_depth = 0;     // window: the steps of copies a thread keeps in flight
    bool row_buffer = false;  // streamed with sums in shared memory: the row's x and grad_out there too
    size_t sums_limit = 0;    // streamed with column sums: the shared memory its kernel may take
    int cluster_blocks = 1;   // clustered: the blocks a row is cut across (the grid is whole clusters)
    bool whole_tiles = false; // in registers or clustered: the rows (slices) fill WholeTiles
};

// Staged (rows_staged), where the op allows it: every operand contiguous and aligned (cp.async copies
// 16 bytes), a row of at least the op's staged minimum (or rowwise_staged_min_vectors where a sweep
// set it), its copies within kStagedBytes - or, where `opt_in` allows, opting in to more shared memory,
// within half of what a block may have (two blocks an SM; rowwise_staged_most_bytes where a sweep set
// it). A block
// per row, of 128 threads (bench/sweep_norms.cu: 128 beat 256 and 512 for softmax and layer_norm and
// tied for rms_norm), more for longer rows, so that a thread walks at most the op's vectors_per_thread.
// Sets *staged to whether it took the rows.
template <class Op, typename T>
cudaError_t plan_staged_rows(const lab_rowwise_launch &l, int64_t vectors, bool vectorized, RowPlan *plan,
                             bool *staged, bool opt_in = true) {
    *staged = false;
    if constexpr (Staging<Op>::allowed) { // the others never instantiate the staged kernels
        constexpr int kSecond = Staging<Op>::second;
        const int64_t padded = ceil_div(l.n * int64_t(sizeof(T)), int64_t(16)) * 16;
        const int64_t inputs = kSecond != LAB_ROW_X && l.row_data[kSecond] ? 2 : 1;
        int threads = 128;
        const int per_thread = rowwise_staged_vectors_per_thread > 0 ? rowwise_staged_vectors_per_thread
                                                                     : Staging<Op>::vectors_per_thread;
        while (threads < 1024 && int64_t(threads) * per_thread < vectors) threads *= 2;
        const int64_t bytes = padded * inputs;
        const int64_t min_vectors =
            rowwise_staged_min_vectors > 0 ? rowwise_staged_min_vectors : Staging<Op>::min_vectors;
        if (!vectorized || vectors < min_vectors || (bytes > kStagedBytes && !opt_in)) return cudaSuccess;
        if (bytes > kStagedBytes) { // past what every kernel has: opt in, if the device has it
            static std::atomic<int> static_bytes_plus_one;
            static std::atomic<uint64_t> raised_on;
            size_t limit = 0;
            const cudaError_t err =
                opt_in_shared_limit(rows_staged<Op, T>, static_bytes_plus_one, raised_on, &limit);
            const int64_t most = rowwise_staged_most_bytes >= 0
                                     ? std::min<int64_t>(rowwise_staged_most_bytes, int64_t(limit))
                                     : int64_t(limit / 2);
            if (err != cudaSuccess || bytes > most) return err;
        }
        *plan = RowPlan{RowLayout::staged, threads, threads, 0, std::min<int64_t>(l.rows, int64_t(1) << 30),
                        size_t(bytes),     padded,  false};
        *staged = true;
    }
    return cudaSuccess;
}

// Rows in registers when they fit kMaxChunks chunks a lane with at most 1024 lanes a row, else
// streamed; the grid fixed by the device and the kernel.
template <class Op, typename T>
cudaError_t plan_unstaged_rows(const lab_rowwise_launch &l, int64_t vectors, bool vectorized, RowPlan *plan) {
    // The most chunks a lane that fit: more 16-byte loads in flight per lane and smaller groups
    // (cheaper reductions), within the lanes each chunk count is built for.
    int group = 1;
    int64_t chunks = 0;
    for (int k = 4; k >= 1 && chunks == 0; k /= 2) {
        const int most_lanes = k == 4   ? kRowBlockLimit<Op, 4>
                               : k == 2 ? kRowBlockLimit<Op, 2>
                                        : kRowBlockLimit<Op, 1>;
        if (k > Op::kMaxChunks || k > rowwise_max_chunks || vectors > int64_t(most_lanes) * k) continue;
        while (int64_t(group) * k < vectors) group *= 2;
        chunks = ceil_div(vectors, group);
        chunks = chunks == 3 ? 4 : chunks;
    }
    // Rows in registers keep their column sums in shared memory - 64 KB a block at most (bf16 rows of
    // 8192 with a bias). Within kStagedBytes every kernel has them without opting in; past it the
    // kernel opts in, and on a GPU whose blocks cannot have that much the row is streamed.
    if constexpr (Op::kColumnSums) {
        const size_t bytes =
            chunks > 0
                ? in_register_sums_bytes<Op, T>(std::max(group, RegisterShape<Op>::fewest_threads), chunks)
                : 0;
        if (bytes > size_t(kStagedBytes)) {
            size_t limit = 0;
            const cudaError_t err = column_sums_limit<Op, T>(false, chunks, &limit);
            if (err != cudaSuccess) return err;
            if (bytes > limit) chunks = 0, group = 1;
        }
    }
    const bool streamed = chunks == 0;
    if (streamed) group = StreamShape<Op>::threads;
    // Blocks of at least RegisterShape's fewest threads, several rows each where rows are short.
    const int fewest_threads = RegisterShape<Op>::fewest_threads;
    const int threads = group > fewest_threads ? group : fewest_threads;
    const int64_t rows_per_block = threads / group;
    const size_t sums_bytes = streamed ? 0 : in_register_sums_bytes<Op, T>(threads, chunks);
    // Streamed with column sums: the block's sums in shared memory where the row's fit. The grid is
    // asked with the most the kernel may take, so it does not depend on the row's length.
    size_t streamed_limit = 0, streamed_sums_bytes = 0;
    if constexpr (Op::kColumnSums) {
        if (streamed) {
            const cudaError_t err = column_sums_limit<Op, T>(true, 0, &streamed_limit);
            if (err != cudaSuccess) return err;
            const int64_t slots = ceil_div(l.n, int64_t(group) * kRowVec<T>) * group * kRowVec<T>;
            const int64_t sums = l.col_data[LAB_COL_GRAD_BIAS] ? 2 : 1;
            streamed_sums_bytes = sizeof(compute_t<T>) * size_t(slots * sums);
        }
    }
    const bool sums_in_shared = streamed_sums_bytes > 0 && streamed_sums_bytes <= streamed_limit;
    // the grid of an op with partials is its kernel's occupancy: WholeTiles' may differ
    const bool whole = !streamed && rows_fill_tiles<Op, T>(l, vectorized, group, chunks, l.n);
    int64_t resident = 0;
    const cudaError_t err = Op::kColumnSums
                                ? partial_row_blocks<Op, T>(streamed, chunks, whole, threads,
                                                            streamed ? streamed_limit : sums_bytes, &resident)
                                : thread_slot_blocks(threads, &resident);
    if (err != cudaSuccess) return err;
    // With column sums every block is a set of partial rows: give each group several rows (fewer
    // partials to combine), at most the blocks the SMs hold at once. Without, more waves of a fixed grid.
    const int64_t rows_per_group = Op::kColumnSums ? 4 : 1;
    int64_t grid = ceil_div(l.rows, rows_per_block * rows_per_group);
    const int64_t most = Op::kColumnSums ? resident : resident * 8;
    grid = grid < 1 ? 1 : grid > most ? most : grid;
    *plan = RowPlan{streamed ? RowLayout::streamed : RowLayout::in_registers,
                    group,
                    threads,
                    chunks,
                    grid,
                    streamed ? (sums_in_shared ? streamed_sums_bytes : 0) : sums_bytes,
                    0,
                    sums_in_shared};
    plan->sums_limit = streamed_limit;
    plan->whole_tiles = whole;
    return cudaSuccess;
}

// Whether an op's streamed walk takes WindowRows (it sets Op::kWindowRows).
template <class Op, typename = void> constexpr bool kWalksWindow = false;
template <class Op> constexpr bool kWalksWindow<Op, std::void_t<decltype(Op::kWindowRows)>> = Op::kWindowRows;

// Window rows (rows_window) instead of streamed ones, for an op that walks them, where every operand is
// aligned and contiguous (cp.async copies 16 bytes): streamed, a thread has the one step its registers
// hold in flight, and bfloat16 cross-entropy waited on memory at 72% of DRAM's peak; through a window
// of six steps it ran at 84%, 12% faster (ncu, H200, 2026-12-04; docs/notebook/rowwise-measurements.md). By
// default the window is kDefaultWindowDepth steps deep - less where the SM would otherwise hold fewer
// of these blocks than of the streamed ones, kMaxWindowDepth for the long rows with a gradient that
// rows_take_deepest_window takes - and takes only rows of more steps than kDefaultWindowDepth (a
// shorter row's second read comes from L2 anyway: bf16 8192 x 32000, four steps, ran 5% slower
// through it). rowwise_window_depth, where a sweep or a test sets it, is the depth for every row (0:
// never). The grid is the streamed one's.
constexpr int kDefaultWindowDepth = 6;
// Whether a row of `row_bytes`, read again for its gradient, takes the deepest window by default:
// kMaxWindowDepth steps, one block an SM, half the rows in flight, so that more of the second read
// hits L2 - where two blocks an SM of the streamed rows would keep more than three quarters of the L2
// in flight (it also passes the gradient's writes), on memory slower than 4 TB/s. On an H100 (3.35
// TB/s) bf16 4096 x 128256 ran 2.30 TB/s against 2.07 six steps deep, 4096 x 98304 2.45 against 2.25,
// float32 4096 x 50000 2.51 against 2.17, and rows whose two blocks an SM fit the L2 ran slower (bf16
// 4096 x 65536, 2 x 132 x 128 KB = 34 MB of 50: 2.19 against 2.46), as do rows read once, for the loss
// alone (bench/sweep_rowwise.py cross_entropy, 2026-12-05). On an H200 (4.8 TB/s) the eight steps lost
// on every row (bf16 4096 x 128256 2.64 against 3.00, 2026-12-04): its faster memory idles while the
// one block reduces.
inline cudaError_t rows_take_deepest_window(int64_t row_bytes, int blocks_per_multiprocessor, bool *deepest) {
    DeviceShape device{};
    const cudaError_t err = current_device_shape(&device);
    const double dram = device.peak_dram_bytes_per_second();
    *deepest = err == cudaSuccess && dram > 0 && dram < 4e12 &&
               int64_t(device.multiprocessors) * blocks_per_multiprocessor * row_bytes >
                   int64_t(device.l2_bytes) / 4 * 3;
    return err;
}
// The window's depth by default for rows of `row_bytes`, read again where `rereads` (the gradient
// written): the deepest, at most kDefaultWindowDepth, whose blocks an SM holds as many of as the
// streamed blocks (1024 / threads) - asked of the occupancy calculator once per kernel and kept, as
// resident_blocks keeps its occupancy (per kernel, not per device); 0: none does - or kMaxWindowDepth
// where rows_take_deepest_window takes the rows. `kernel`'s shared memory limit must already be raised
// (opt_in_shared_limit).
template <class Op, typename T>
cudaError_t default_window_depth(int64_t row_bytes, bool rereads, int *depth) {
    constexpr int kThreads = StreamShape<Op>::threads, kBlocksPerSM = 1024 / kThreads;
    constexpr size_t kStepBytes = size_t(kThreads) * StreamShape<Op>::chunks * 16;
    static std::atomic<int> chosen_plus_one; // 0: not chosen yet
    int chosen = chosen_plus_one.load(std::memory_order_relaxed) - 1;
    for (int d = kDefaultWindowDepth; chosen < 0; --d) {
        int per_multiprocessor = 0;
        if (d > 0) {
            const cudaError_t err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                &per_multiprocessor, rows_window<Op, T>, kThreads, d * kStepBytes);
            if (err != cudaSuccess) return err;
        }
        if (d == 0 || per_multiprocessor >= kBlocksPerSM) {
            chosen = d;
            chosen_plus_one.store(d + 1, std::memory_order_relaxed);
        }
    }
    bool deepest = false;
    if (rereads && chosen > 0) {
        const cudaError_t err = rows_take_deepest_window(row_bytes, kBlocksPerSM, &deepest);
        if (err != cudaSuccess) return err;
    }
    *depth = deepest ? kMaxWindowDepth : chosen;
    return cudaSuccess;
}
template <class Op, typename T>
cudaError_t plan_window_rows(const lab_rowwise_launch &l, bool vectorized, RowPlan *plan) {
    if constexpr (kWalksWindow<Op>) {
        constexpr int64_t kStepBytes = int64_t(StreamShape<Op>::threads) * StreamShape<Op>::chunks * 16;
        const bool by_default = rowwise_window_depth < 0;
        const int64_t steps = ceil_div(l.n, kStepBytes / int64_t(sizeof(T)));
        if (plan->layout != RowLayout::streamed || !vectorized || rowwise_window_depth == 0 ||
            (by_default && steps <= kDefaultWindowDepth)) {
            return cudaSuccess;
        }
        static std::atomic<int> static_bytes_plus_one;
        static std::atomic<uint64_t> raised_on;
        size_t limit = 0;
        cudaError_t err = opt_in_shared_limit(rows_window<Op, T>, static_bytes_plus_one, raised_on, &limit);
        int depth = rowwise_window_depth;
        if (err == cudaSuccess && by_default) {
            err = default_window_depth<Op, T>(l.n * int64_t(sizeof(T)), l.row_data[LAB_ROW_OUT] != nullptr,
                                              &depth);
        }
        depth = int(std::min<int64_t>({depth, int64_t(limit) / kStepBytes, kMaxWindowDepth}));
        if (err != cudaSuccess || depth < 1) return err;
        plan->layout = RowLayout::window;
        plan->shared_bytes = size_t(depth) * size_t(kStepBytes);
        plan->window_depth = depth;
    }
    return cudaSuccess;
}

// Buffered rows (BufferedRows, rows_streamed) for an op that walks them, where its streamed rows keep
// their column sums in shared memory, every operand is aligned and contiguous, a row is at most
// kMaxWindowDepth steps and its x and grad_out fit beside the sums: streamed, rms_norm's backward on
// rows of 16384 (two steps, one block of 1024 an SM) had nothing in flight while it reduced a row -
// 42% of the copy; buffered, 47%. (layer_norm's ran slower: NormBackward::kBufferedRows.)
// rowwise_window_depth 0 turns them off with the window.
template <class Op, typename T>
void plan_buffered_rows(const lab_rowwise_launch &l, bool vectorized, RowPlan *plan) {
    if constexpr (kWalksBufferedRows<Op>) {
        const bool sums_wanted = l.col_data[LAB_COL_GRAD_WEIGHT] || l.col_data[LAB_COL_GRAD_BIAS];
        const int64_t steps = ceil_div(l.n, int64_t(plan->threads) * kRowVec<T>);
        const size_t buffer_bytes = size_t(2 * steps * plan->threads * 16);
        if (plan->layout != RowLayout::streamed || !plan->sums_in_shared || !sums_wanted || !vectorized ||
            rowwise_window_depth == 0 || steps > kMaxWindowDepth ||
            plan->shared_bytes + buffer_bytes > plan->sums_limit) {
            return;
        }
        plan->shared_bytes += buffer_bytes;
        plan->row_buffer = true;
    }
}

} // namespace

} // namespace lab
