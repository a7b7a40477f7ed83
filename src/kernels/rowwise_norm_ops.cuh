// rowwise_norm_ops.cuh - layer_norm and rms_norm and their backwards, each written twice over one
// row, as the softmax in rowwise_ops.cuh: with the row in registers and streamed (or staged) for
// rows longer than the registers hold. rowwise_kernels.cuh runs them over the rows.
#pragma once

#include "rowwise_column_sums.cuh"
#include "rowwise_window.cuh"

namespace lab {

// layer_norm: y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) (the population
// variance); rms_norm: y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps). With a residual
// (rms_norm), h = x + residual rounded to T is written to RESIDUAL_OUT and normalized.
//
// The statistics come from one group reduction of two sums - of d = x - shift and of d^2 - with the
// row's first element as the shift (layer_norm; 0 for rms_norm): var = mean(d^2) - mean(d)^2 loses
// nothing to cancellation when the shift is near the mean, as one of the row's own values is.
//
// kCentered: layer_norm (the shift, the mean, a bias); else rms_norm (and its residual). Each is its
// own kernel: with both behind a runtime flag the staged bf16 kernels spilled 48 bytes a thread at
// their 32 registers; split, layer_norm's spills nothing and rms_norm's 36 bytes (ptxas). Splitting
// off the residual too moved those spills about (32-44 bytes each), so it stays a runtime flag.
// The forward's group sums of s1 and s2: both for layer_norm; rms_norm uses s2 alone (its s1 is 0), so
// it reduces one value - half the shuffles and shared-memory traffic of the pair. (The backward keeps
// the pair: reducing one value there took ptxas from 64 to 72 registers at one chunk, and from 113 to
// 128 with 8 bytes of spills at two, for bf16 rms_norm.)
template <bool kCentered, typename A> __device__ __forceinline__ Pair<A> norm_sums(A s1, A s2, int group) {
    if constexpr (kCentered) {
        return group_sums(s1, s2, group);
    } else {
        return Pair<A>{A(0), group_sum(s2, group)};
    }
}

template <bool kCentered> struct NormForward {
    // Four chunks a lane held as packets (row() below), one row a block of 128 lanes for a bf16 row of
    // 4096: bench/sweep_norms.cu's held<false,128x4,128,1> at 72 registers ran 0.073 ms against 0.090
    // for the staged layout (H200, 2026-12-02). Launch bounds of 512 threads let ptxas use 128
    // registers at four chunks; one and two keep the default 1024 (64).
    static constexpr int kMaxChunks = 4;
    struct RegisterShape { // (rowwise_kernels.cuh)
        static constexpr int most_lanes(int chunks) { return chunks >= 4 ? 512 : 1024; }
        static constexpr int min_blocks(int) { return 1; }
        static constexpr int fewest_threads = 128;
    };
    // rms_norm's rows up to 1024 vectors (8192 bf16) run faster in registers than staged:
    // bench/sweep_rowwise.py, bf16 16384 x 4096 3.46 TB/s against 3.22, with a residual 3.84 against
    // 3.38, 8192 x 8192 3.33 against 3.21; 4096 x 16384 (512 lanes) 2.52 against 3.12 (H200, 2026-12-02).
    // layer_norm's are staged from 256 vectors (in registers 16384 x 4096 ran 2.67 against 2.89) unless
    // they fill whole tiles (launch_rows): then 3.43 against 2.97, 8192 x 8192 3.12 against 2.89
    // (2026-12-03).
    static constexpr StagedShape kStaged{LAB_ROW_RESIDUAL, kCentered ? 256 : 1025}; // a residual beside X
    static constexpr bool kColumnSums = false;
    struct WholeTileShape { // row() takes WholeTiles (rowwise.cuh): 80 registers, six blocks of 128 an SM
        static constexpr int most_lanes = 256, min_blocks = 3;
    };

    // x (+ residual, rounded to T) at column 0 of the row starting at x_row: the shift. The streamed and
    // staged walks pass the row they read - a staged row's copy in shared memory, not a load from
    // device memory that the first pass would wait for.
    template <typename T>
    __device__ static compute_t<T> shift_of(const RowArgs &a, const char *x_row, bool valid) {
        using A = compute_t<T>;
        if (!kCentered || !valid || a.n == 0) return A(0);
        return load_as_compute(*reinterpret_cast<const T *>(x_row));
    }

    template <typename A>
    __device__ static void statistics(const RowArgs &a, Pair<A> sums, A shift, A &mean, A &rstd) {
        const A n = A(a.n), mean_shifted = sums.first / n;
        A var = sums.second / n - (kCentered ? mean_shifted * mean_shifted : A(0));
        var = var > A(0) || var != var ? var : A(0); // rounding may dip below 0; NaN (no elements) stays
        mean = kCentered ? shift + mean_shifted : A(0);
        rstd = row_rsqrt(var + A(a.eps));
    }

    // The row (x, or h = x + residual), the weight and the bias stay packets (Packet16) as stored,
    // converted where a pass uses them: a bf16 row of 4096 in 128 lanes of four chunks is 16
    // registers of x and 16 of weight, where converted on load it was 64 and spilled. The weight's and
    // bias's loads issue before the reduction, so they are in flight while it runs.
    template <typename T, int kChunks, class Tiles = PartialTiles>
    __device__ static void row(const RowArgs &a, int64_t row, int lane, bool valid,
                               ColumnSums<T, kChunks> &) {
        using A = compute_t<T>;
        constexpr int kVec = kRowVec<T>;
        const T zero = store_from_compute<T>(A(0));
        // The weight (and bias) as packets (1 and 0 where absent). With whole tiles they load first: there
        // ptxas put x's first conversion ahead of their loads, so they issued only once x had arrived.
        Packet16 x[kChunks], w[kChunks];
        Packet16 b[kCentered ? kChunks : 1]; // layer_norm's bias (0 where there is none)
        auto load_columns = [&] {
            load_packets<T, kChunks, int, Tiles>(w, a.col[LAB_COL_WEIGHT], a.col_data_stride[LAB_COL_WEIGHT],
                                                 a, lane, 0, a.col[LAB_COL_WEIGHT] != nullptr,
                                                 store_from_compute<T>(A(1)));
            if constexpr (kCentered) {
                load_packets<T, kChunks, int, Tiles>(b, a.col[LAB_COL_BIAS], a.col_data_stride[LAB_COL_BIAS],
                                                     a, lane, 0, a.col[LAB_COL_BIAS] != nullptr, zero);
            }
        };
        if constexpr (Tiles::kWhole) load_columns();
        load_packets<T, kChunks, int, Tiles>(x, row_at<Tiles>(a, row, LAB_ROW_X), a.col_stride[LAB_ROW_X], a,
                                             lane, 0, valid, zero);
        if (!kCentered && a.row[LAB_ROW_RESIDUAL]) { // rms_norm only: the shift stays 0
            Packet16 r[kChunks];
            load_packets<T, kChunks, int, Tiles>(r, row_at<Tiles>(a, row, LAB_ROW_RESIDUAL),
                                                 a.col_stride[LAB_ROW_RESIDUAL], a, lane, 0, valid, zero);
#pragma unroll
            for (int c = 0; c < kChunks; ++c) { // h = x + residual, rounded to T as torch's add would
                A h[kVec];
#pragma unroll
                for (int i = 0; i < kVec; ++i) h[i] = packet_compute<T>(x[c], i) + packet_compute<T>(r[c], i);
                x[c] = to_packet<T>(h);
                store_row<T, 1, int, Tiles>(h, row_at<Tiles>(a, row, LAB_ROW_RESIDUAL_OUT),
                                            a.col_stride[LAB_ROW_RESIDUAL_OUT], a, lane, c, valid);
            }
        }
        if constexpr (!Tiles::kWhole) load_columns();
        const A shift = kCentered ? shift_of<T>(a, row_at<Tiles>(a, row, LAB_ROW_X), valid) : A(0);
        A s1 = 0, s2 = 0;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
            if constexpr (kCentered) { // past the row's end x is 0, not the shift: mask those out
                const bool inside =
                    Tiles::kWhole || tile_column<T>(c, kVec - 1, lane, a.group) < int(a.n); // whole chunk
#pragma unroll
                for (int i = 0; i < kVec; ++i) {
                    const A v = packet_compute<T>(x[c], i);
                    const A d = inside || tile_column<T>(c, i, lane, a.group) < int(a.n) ? v - shift : A(0);
                    s1 += d;
                    s2 += d * d;
                }
            } else { // rms_norm: the fill (0) adds nothing to the sum of squares
#pragma unroll
                for (int i = 0; i < kVec; ++i) {
                    const A v = packet_compute<T>(x[c], i);
                    s2 += v * v;
                }
            }
        }
        A mean, rstd;
        statistics(a, norm_sums<kCentered>(s1, s2, a.group), shift, mean, rstd);
        store_chunks<T, kChunks, Tiles>(
            row_at<Tiles>(a, row, LAB_ROW_OUT), a.col_stride[LAB_ROW_OUT], a, lane, valid, [&](int c, int i) {
                const A y = (packet_compute<T>(x[c], i) - mean) * rstd * packet_compute<T>(w[c], i);
                return kCentered ? y + packet_compute<T>(b[c], i) : y;
            });
        if (valid && lane == 0) {
            if (kCentered && a.row[LAB_ROW_MEAN]) {
                store_statistic(a, row_at<Tiles>(a, row, LAB_ROW_MEAN), double(mean));
            }
            if (a.row[LAB_ROW_RSTD]) store_statistic(a, row_at<Tiles>(a, row, LAB_ROW_RSTD), double(rstd));
        }
    }

    // Pass one: the sums (and h, where there is a residual); pass two: the output, reading the
    // normalized value back from where pass one left it (x, or h in RESIDUAL_OUT).
    template <typename T, class Rows>
    __device__ static void streamed_row(const RowArgs &a, int64_t row, typename Rows::Index steps,
                                        Rows rows) {
        using Index = typename Rows::Index; // int where the row is staged: cheaper index math
        using A = compute_t<T>;
        constexpr int kSize = kRowVec<T>;
        const int lane = threadIdx.x;
        const bool residual = !kCentered && a.row[LAB_ROW_RESIDUAL] != nullptr;
        // each row pointer found once (several leading dimensions cost divisions), outside the loops
        const char *x_row = rows.at(a, row, LAB_ROW_X);
        const A shift = shift_of<T>(a, x_row, true);
        const char *residual_row = residual ? rows.at(a, row, LAB_ROW_RESIDUAL) : nullptr;
        char *h_row = residual ? row_at(a, row, LAB_ROW_RESIDUAL_OUT) : nullptr;
        // layer_norm's whole steps walked without a test a load (walk_steps); rms_norm's staged bf16
        // kernel spilled 48 bytes that way at its 32 registers (the residual's loads and stores), and
        // layer_norm's float64 one 12, so those keep the one body.
        constexpr bool kWholeSteps = kCentered && sizeof(T) < 8;
        A s1 = 0, s2 = 0;
        walk_steps<T, kWholeSteps>(a, lane, steps, [&](Index step, auto tiles) {
            using Tiles = decltype(tiles);
            A x[kSize];
            load_row<T, 1, Index, Tiles>(x, x_row, a.col_stride[LAB_ROW_X], a, lane, step, true, A(0));
            if (residual) {
                A r[kSize];
                load_row<T, 1, Index, Tiles>(r, residual_row, a.col_stride[LAB_ROW_RESIDUAL], a, lane, step,
                                             true, A(0));
#pragma unroll
                for (int i = 0; i < kSize; ++i) x[i] = round_to<T>(x[i] + r[i]);
                store_row<T, 1, Index, Tiles>(x, h_row, a.col_stride[LAB_ROW_RESIDUAL_OUT], a, lane, step,
                                              true);
            }
            if constexpr (kCentered) { // past the row's end x is 0, not the shift: mask those positions out
                if (Tiles::kWhole || tile_column<T, Index>(step, kSize - 1, lane, a.group) < a.n) {
#pragma unroll
                    for (int i = 0; i < kSize; ++i) {
                        const A d = x[i] - shift;
                        s1 += d;
                        s2 += d * d;
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < kSize; ++i) {
                        const A d = tile_column<T, Index>(step, i, lane, a.group) < a.n ? x[i] - shift : A(0);
                        s1 += d;
                        s2 += d * d;
                    }
                }
            } else { // rms_norm: the fill (0) adds nothing to the sum of squares
#pragma unroll
                for (int i = 0; i < kSize; ++i) s2 += x[i] * x[i];
            }
        });
        A mean, rstd;
        statistics(a, norm_sums<kCentered>(s1, s2, a.group), shift, mean, rstd);
        char *out = row_at(a, row, LAB_ROW_OUT);
        walk_steps<T, kWholeSteps>(a, lane, steps, [&](Index step, auto tiles) {
            using Tiles = decltype(tiles);
            A x[kSize], w[kSize];
            // Two loads, not one through `residual ? h_row : x_row`: a staged x_row is in shared memory,
            // and the pointer chosen between it and h_row lost that - a generic load a step, 10% of the
            // staged kernel's time (bf16 4096 x 16384).
            if (residual) {
                load_row<T, 1, Index, Tiles>(x, h_row, a.col_stride[LAB_ROW_RESIDUAL_OUT], a, lane, step,
                                             true, A(0));
            } else {
                load_row<T, 1, Index, Tiles>(x, x_row, a.col_stride[LAB_ROW_X], a, lane, step, true, A(0));
            }
            load_columns<T, 1, Index, Tiles>(w, a, LAB_COL_WEIGHT, lane, step, A(1));
#pragma unroll
            for (int i = 0; i < kSize; ++i) x[i] = (x[i] - mean) * rstd * w[i];
            if (kCentered && a.col[LAB_COL_BIAS]) {
                load_columns<T, 1, Index, Tiles>(w, a, LAB_COL_BIAS, lane, step, A(0));
#pragma unroll
                for (int i = 0; i < kSize; ++i) x[i] += w[i];
            }
            store_row<T, 1, Index, Tiles>(x, out, a.col_stride[LAB_ROW_OUT], a, lane, step, true);
        });
        if (lane == 0) {
            if (kCentered && a.row[LAB_ROW_MEAN]) {
                store_statistic(a, row_at(a, row, LAB_ROW_MEAN), double(mean));
            }
            if (a.row[LAB_ROW_RSTD]) store_statistic(a, row_at(a, row, LAB_ROW_RSTD), double(rstd));
        }
    }
};

// grad_x = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = grad_out * weight, xhat = (x - mean)
// * rstd (layer_norm; rms_norm: mean 0 and no mean(g) term), the two means from one group
// reduction. grad_weight = sum over rows of grad_out * xhat, grad_bias = sum of grad_out: per-column
// sums each thread carries across its rows (in shared memory, ColumnSums).
// kCentered: layer_norm (x has a mean, and g one); rms_norm's backward, without, reads no mean and
// subtracts none: 8% fewer instructions (ncu, bf16 16384 x 4096). Its pair reduction stays: with one
// sum ptxas spilled the float32 lanes. kBiasSums: the bias gradient is wanted (layer_norm with a bias).
// Otherwise its column sums are never made (half the shared memory, no adds).
// Both backwards take WholeTiles (rowwise.cuh): rows that fill four chunks of up to 128 lanes exactly
// (bf16 rows of 32 to 4096, float32 of 16 to 2048) skip the tests of partial tiles, as the forwards do.
// rms_norm's then fits six blocks of 128 an SM in 80 registers without spilling, where partial tiles fit
// five (96 registers, 31% of the warps: ncu, H100, 2026-12-06): bf16 rows of 1024 93.8% of the copy
// against 86.1, of 4096 89.8 against 86.4 (bench_bandwidth, H100, alternated in one run). layer_norm's
// stays at five blocks and gains only with its loads held ahead of the arithmetic (row()'s __syncwarp):
// without, whole tiles lost to partial ones (81 against 85% at rows of 4096), with, rows of 1024 92%
// against 88.6, of 4096 88.5 against 84.7. Slices of rows cut across a cluster take them too where they
// fill them (bf16 rows of 16384 in four blocks): rms_norm 87% against 84.4, layer_norm 79% against 73.5.
template <bool kCentered, bool kBiasSums> struct NormBackward {
    static_assert(kCentered || !kBiasSums, "rms_norm has no bias");
    struct WholeTileShape {
        static constexpr int most_lanes = 128, min_blocks = kCentered ? 5 : 6;
    };
    static constexpr bool kBias = kBiasSums;
    // Four chunks a lane, held as packets (load_packets): x, grad_out and the weight of a 4096-long
    // bf16 row in 48 registers of 128 lanes, one row a block of 128, their loads in flight; the column
    // sums in shared memory (ColumnSums). Launch bounds of five blocks an SM (96 registers, no spills;
    // at six ptxas spilled 40-72 bytes). One or two chunks: up to 512 lanes, 64 registers.
    static constexpr int kMaxChunks = 4;
    struct RegisterShape { // (rowwise_kernels.cuh)
        static constexpr int most_lanes(int chunks) { return chunks >= 4 ? 128 : 512; }
        static constexpr int min_blocks(int chunks) { return chunks >= 4 ? 5 : 2; }
        static constexpr int fewest_threads = 128; // five blocks of 128 fit where two of 256 would
    };
    static constexpr bool kColumnSums = true;
    // Rows too long for the registers (more than 1024 vectors: bf16 past 8192) are cut across a cluster
    // where the GPU has them (rows_in_clusters, rowwise_clusters.cuh; plan_cluster_rows), each block's
    // slice held as a row of 4096 bf16 is: 128 lanes of four chunks. So are layer_norm's rows of 1024
    // vectors in a half type, which its registers hold only at two chunks of 512 lanes: with the totals
    // sent by st.async (below), bf16 8192 x 8192 ran 2.49 TB/s in two blocks against 2.27 in registers.
    // rms_norm's lost there (2.34 against 2.57), layer_norm's float32 8192 x 4096 tied (2.45 against
    // 2.47) (bench/sweep_rowwise.py clusters, H100, 2026-12-06).
    struct ClusterShape {
        static constexpr int lanes = 128, chunks = 4;
        static constexpr int64_t min_vectors(int element_bytes) {
            return kCentered && element_bytes == 2 ? 1024 : 1025;
        }
    };
    // How a row's sums are finished across its cluster (cluster.cuh). layer_norm's take cluster_reduce,
    // the blocks' totals sent with st.async and no cluster barrier: bf16 4096 x 16384 with the bias
    // 84.2-84.3% of the copy against 78.9-79.1 at the barrier. rms_norm's keep cluster_reduce_at_barrier:
    // 86.4-87.5% against 83.3-84.0 with st.async back to back (H100, 2026-12-06), though alone under ncu
    // a st.async version ran 1% faster - with 39% L2 hits against the barrier's 50%.
    static constexpr bool kClusterTotalsAsync = kCentered;
    // rms_norm's streamed walk takes BufferedRows (rowwise_window.cuh): 8-10% faster on 4096 x 16384 and
    // x 20000 (sweep_rowwise.py buffered, 2026-12-04); layer_norm's ran 1-2% slower buffered (ptxas
    // spilled 40 bytes there), so it streams as before.
    static constexpr bool kBufferedRows = !kCentered;

    // The row's mean (0 for rms_norm) and rstd, from the forward's statistics.
    template <class Tiles = PartialTiles, typename A>
    __device__ static void statistics(const RowArgs &a, int64_t row, bool valid, A &mean, A &rstd) {
        mean = kCentered && valid ? A(load_statistic(a, row_at<Tiles>(a, row, LAB_ROW_MEAN))) : A(0);
        rstd = valid ? A(load_statistic(a, row_at<Tiles>(a, row, LAB_ROW_RSTD))) : A(0);
    }

    // kClustered (rows_in_clusters): `a` is the block's slice of the row, the row is the cluster's
    // slices together - its sums finished across the cluster (cluster_reduce's `round`), its length the
    // slices'.
    template <bool kClustered = false, typename A>
    __device__ static void means(const RowArgs &a, A s1, A s2, A &mean_g, A &mean_gx, unsigned round = 0) {
        Pair<A> sums = group_sums(s1, s2, a.group);
        A n = A(a.n);
        if constexpr (kClustered) {
            if constexpr (kClusterTotalsAsync) {
                sums = cluster_reduce(sums, PairSum{}, round);
            } else {
                sums = cluster_reduce_at_barrier(sums, PairSum{}, round);
            }
            n *= A(cluster_place().blocks);
        }
        mean_g = kCentered ? sums.first / n : A(0);
        mean_gx = sums.second / n;
    }

    // x, grad_out and the weight stay packets (Packet16) in storage type; each pass converts what it uses.
    // kClustered: `a` is this block's slice of a row cut across a cluster (rows_in_clusters), whose
    // reduction takes cluster_round. Tiles: WholeTiles where the launcher found the rows fill them
    // (WholeTileShape).
    template <typename T, int kChunks, class Tiles = PartialTiles, bool kClustered = false>
    __device__ static void row(const RowArgs &a, int64_t row, int lane, bool valid,
                               ColumnSums<T, kChunks> &sums, unsigned cluster_round = 0) {
        using A = compute_t<T>;
        constexpr int kVec = kRowVec<T>;
        A mean, rstd;
        statistics<Tiles>(a, row, valid, mean, rstd);
        // kClustered: this block's slice of a.n columns starts `first` columns into the row
        const int64_t first = kClustered ? slice_start(a) : 0;
        Packet16 x[kChunks], g[kChunks], w[kChunks];
        const T zero = store_from_compute<T>(A(0));
        load_packets<T, kChunks, int, Tiles>(
            x, row_at<Tiles>(a, row, LAB_ROW_X) + first * a.col_stride[LAB_ROW_X], a.col_stride[LAB_ROW_X], a,
            lane, 0, valid, zero);
        load_packets<T, kChunks, int, Tiles>(
            g, row_at<Tiles>(a, row, LAB_ROW_GRAD) + first * a.col_stride[LAB_ROW_GRAD],
            a.col_stride[LAB_ROW_GRAD], a, lane, 0, valid, zero);
        const char *weight = a.col[LAB_COL_WEIGHT];
        auto load_weight = [&] {
            load_packets<T, kChunks, int, Tiles>(
                w, weight ? weight + first * a.col_data_stride[LAB_COL_WEIGHT] : nullptr,
                a.col_data_stride[LAB_COL_WEIGHT], a, lane, 0, weight != nullptr,
                store_from_compute<T>(A(1)));
        };
        load_weight();
        // On whole tiles, with no test between them, ptxas otherwise moves loads down to their first
        // use: fewer in flight, each warp waiting longer on them. The warp barrier keeps every load
        // of the row ahead of the arithmetic - for layer_norm's rows and every cluster's slices.
        // rms_norm's rows in registers ran 6-8% slower with it (at six blocks an SM), so they go without.
        if constexpr (Tiles::kWhole && (kCentered || kClustered)) __syncwarp();
        // No mask past the row's end, where x is 0 and xhat is not: grad_out is 0 there, and each
        // term with xhat has it as a factor (a branch per element had doubled the instructions).
        auto xhat_at = [&](int c, int i) { return (packet_compute<T>(x[c], i) - mean) * rstd; };
        A s1 = 0, s2 = 0;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
            A to_weight[kVec], to_bias[kVec];
#pragma unroll
            for (int i = 0; i < kVec; ++i) {
                const A xhat = xhat_at(c, i), grad = packet_compute<T>(g[c], i);
                to_weight[i] = grad * xhat;
                to_bias[i] = grad;
                const A gw = grad * packet_compute<T>(w[c], i);
                s1 += gw;
                s2 += gw * xhat;
            }
            ColumnSums<T, kChunks>::add(sums.weight, c, to_weight);
            if constexpr (kBiasSums) ColumnSums<T, kChunks>::add(sums.bias, c, to_bias);
        }
        A mean_g, mean_gx;
        means<kClustered>(a, s1, s2, mean_g, mean_gx, cluster_round);
        // Slices on whole tiles read the weight again (from L1, where the first read left it) rather
        // than hold it across the cluster's reduction: 16 registers freed where ptxas spilled.
        if constexpr (kClustered && Tiles::kWhole) load_weight();
        store_chunks<T, kChunks, Tiles>(
            row_at<Tiles>(a, row, LAB_ROW_OUT) + first * a.col_stride[LAB_ROW_OUT], a.col_stride[LAB_ROW_OUT],
            a, lane, valid, [&](int c, int i) {
                const A gw = packet_compute<T>(g[c], i) * packet_compute<T>(w[c], i);
                return rstd * (gw - mean_g - xhat_at(c, i) * mean_gx);
            });
    }

    // x, grad_out (from BufferedRows' slots) and the weight (from device memory) at one step of a row.
    template <typename T>
    __device__ static void buffered_step(const RowArgs &a, const BufferedRows &rows, const char *x_row,
                                         const char *g_row, int lane, int64_t step, int64_t whole_steps,
                                         compute_t<T> (&x)[kRowVec<T>], compute_t<T> (&g)[kRowVec<T>],
                                         compute_t<T> (&w)[kRowVec<T>]) {
        using A = compute_t<T>;
        load_slot<T, 1>(x, rows.x_slots, int(step), x_row, a, lane, step, whole_steps, A(0));
        load_slot<T, 1>(g, rows.grad_slots, int(step), g_row, a, lane, step, whole_steps, A(0));
        load_columns<T, 1, int64_t>(w, a, LAB_COL_WEIGHT, lane, step, A(1));
    }

    // Streamed rows add their column sums into the block's own (a Global- or SharedColumnSink).
    template <typename T, class Rows, class Sink>
    __device__ static void streamed_row(const RowArgs &a, int64_t row, typename Rows::Index steps, Rows rows,
                                        const Sink &sums) {
        using Index = typename Rows::Index; // int where the row is staged: cheaper index math
        using A = compute_t<T>;
        constexpr int kSize = kRowVec<T>;
        const int lane = threadIdx.x;
        const char *x_row = rows.at(a, row, LAB_ROW_X), *g_row = rows.at(a, row, LAB_ROW_GRAD);
        A mean, rstd;
        statistics(a, row, true, mean, rstd);
        // x, grad_out and weight at one step along the row: both passes read the same three
        auto load_step = [&](Index step, A(&x)[kSize], A(&g)[kSize], A(&w)[kSize]) {
            load_row<T, 1, Index>(x, x_row, a.col_stride[LAB_ROW_X], a, lane, step, true, A(0));
            load_row<T, 1, Index>(g, g_row, a.col_stride[LAB_ROW_GRAD], a, lane, step, true, A(0));
            load_columns<T, 1, Index>(w, a, LAB_COL_WEIGHT, lane, step, A(1));
        };
        // BufferedRows: x and grad_out from the block's shared memory, each step waited for in the
        // order its copies were started; the weight from device memory.
        const int64_t whole_steps = a.n / (int64_t(a.group) * kSize);
        A s1 = 0, s2 = 0;
        for (Index step = 0; step < steps; ++step) {
            A x[kSize], g[kSize], w[kSize];
            if constexpr (kRowsBuffered<Rows>) {
                async_copy_wait_pending(int(steps - 1 - step));
                buffered_step<T>(a, rows, x_row, g_row, lane, step, whole_steps, x, g, w);
            } else {
                load_step(step, x, g, w);
            }
            // No mask past the row's end, as in row(): grad_out is 0 there, a factor of every term.
#pragma unroll
            for (int i = 0; i < kSize; ++i) {
                const A gw = g[i] * w[i];
                s1 += gw;
                s2 += gw * ((x[i] - mean) * rstd);
            }
        }
        A mean_g, mean_gx;
        means(a, s1, s2, mean_g, mean_gx);
        char *out = row_at(a, row, LAB_ROW_OUT);
        for (Index step = 0; step < steps; ++step) {
            A x[kSize], g[kSize], w[kSize];
            if constexpr (kRowsBuffered<Rows>) {
                buffered_step<T>(a, rows, x_row, g_row, lane, step, whole_steps, x, g, w);
            } else {
                load_step(step, x, g, w);
            }
#pragma unroll
            for (int i = 0; i < kSize; ++i) {
                const A xhat = (x[i] - mean) * rstd;
                sums.add(step, i, lane, a, g[i] * xhat, g[i]);
                x[i] = rstd * (g[i] * w[i] - mean_g - xhat * mean_gx);
            }
            store_row<T, 1, Index>(x, out, a.col_stride[LAB_ROW_OUT], a, lane, step, true);
            if constexpr (kRowsBuffered<Rows>) { // this step's slots now take the next row's
                if (rows.next_x) {
                    copy_to_slot<T, 1>(rows.x_slots, int(step), rows.next_x, a, lane, step, whole_steps);
                    copy_to_slot<T, 1>(rows.grad_slots, int(step), rows.next_grad, a, lane, step,
                                       whole_steps);
                }
                async_copy_commit();
            }
        }
    }
};

} // namespace lab
