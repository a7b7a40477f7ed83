// rowwise_launcher.cuh - the host side of the row-wise ops: the kernel rowwise_plan.cuh's planners (and
// plan_cluster_rows below) chose, launched on the caller's stream, then the weight-gradient partials
// added up in a fixed order. Included by the rowwise_<unit>.cu files, one per pair of ops.
#pragma once

#include "rowwise_clusters.cuh"
#include "rowwise_plan.cuh"

namespace lab {

// Per unit: the launch of one op family (softmax forward and backward; the norms'; cross-entropy;
// the GLU backwards), by dtype.
cudaError_t launch_softmax_rows(const lab_rowwise_launch &l, cudaStream_t stream);
cudaError_t launch_norm_rows(const lab_rowwise_launch &l, cudaStream_t stream);
cudaError_t launch_cross_entropy_rows(const lab_rowwise_launch &l, cudaStream_t stream);
cudaError_t launch_glu_rows(const lab_rowwise_launch &l, cudaStream_t stream);

// Device memory an op's launcher prepared for the row kernel (cross-entropy's reduced loss).
struct RowScratch {
    void *row_losses = nullptr;
    const void *grad_scale = nullptr;
};

namespace {

RowArgs make_row_args(const lab_rowwise_launch &l, int group, bool vectorized) {
    RowArgs a{};
    a.rows = l.rows;
    a.n = l.n;
    a.group = group;
    a.vectorized = vectorized;
    a.log = l.op == LAB_ROW_LOG_SOFTMAX || l.op == LAB_ROW_LOG_SOFTMAX_BACKWARD;
    a.stats_double = l.stats_dtype == LAB_FLOAT64;
    a.target64 = l.target_dtype == LAB_INT64;
    a.eps = l.eps;
    a.reduction = l.reduction;
    a.loss_dtype = l.loss_dtype;
    a.ignore_index = l.ignore_index;
    a.smoothing = l.label_smoothing;
    a.softcap = l.softcap;
    a.z_loss = l.z_loss;
    a.upstream_dtype = l.upstream_dtype;
    for (int k = 0; k < LAB_ROW_OPERANDS; ++k) {
        a.row[k] = l.row_data[k];
        a.col_stride[k] = l.col_strides[k];
    }
    lab_fill_layout(&a.lead.dims, a.lead.strides, LAB_ROW_OPERANDS, l.lead_ndim, l.lead_shape, l.lead_strides,
                    l.rows);
    for (int k = 0; k < LAB_COL_OPERANDS; ++k) {
        a.col[k] = l.col_data[k];
        a.col_data_stride[k] = l.col_data_strides[k];
    }
    return a;
}

// A launch of `grid` blocks of `threads` in clusters of `cluster_blocks` (one-dimensional), as the
// occupancy calculator and cudaLaunchKernelEx take it. Not copyable: the configuration points at the
// attribute beside it.
struct ClusterLaunch {
    cudaLaunchAttribute cluster{};
    cudaLaunchConfig_t config{};
    ClusterLaunch(int64_t grid, int threads, size_t shared_bytes, int cluster_blocks, cudaStream_t stream) {
        cluster.id = cudaLaunchAttributeClusterDimension;
        cluster.val.clusterDim.x = unsigned(cluster_blocks);
        cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
        config.gridDim = dim3(unsigned(grid));
        config.blockDim = dim3(unsigned(threads));
        config.dynamicSmemBytes = shared_bytes;
        config.stream = stream;
        config.attrs = &cluster;
        config.numAttrs = 1;
    }
    ClusterLaunch(const ClusterLaunch &) = delete;
    ClusterLaunch &operator=(const ClusterLaunch &) = delete;
};

// The rows_in_clusters kernel a plan launches: on WholeTiles where the op takes them and the slices
// fill them.
template <class Op, typename T> auto cluster_kernel(bool whole) -> void (*)(RowArgs) {
    if constexpr (kTakesWholeTiles<Op>) {
        if (whole) return rows_in_clusters<Op, T, WholeTiles>;
    }
    return rows_in_clusters<Op, T>;
}

// The clusters of `blocks` blocks running cluster_kernel<Op, T>(whole) that the device holds at once,
// asked once per cluster size (2, 4, 8) and kernel and kept, as resident_blocks keeps its occupancy.
template <class Op, typename T>
cudaError_t resident_clusters(int blocks, bool whole, size_t shared_bytes, int64_t *clusters) {
    static std::atomic<int> cached[3][2];
    std::atomic<int> &kept = cached[blocks == 2 ? 0 : blocks == 4 ? 1 : 2][whole ? 1 : 0];
    int count = kept.load(std::memory_order_relaxed);
    if (count == 0) {
        const ClusterLaunch launch(blocks, Clustering<Op>::lanes, shared_bytes, blocks, nullptr);
        const cudaError_t err =
            cudaOccupancyMaxActiveClusters(&count, cluster_kernel<Op, T>(whole), &launch.config);
        if (err != cudaSuccess) return err;
        kept.store(count, std::memory_order_relaxed);
    }
    *clusters = count;
    return cudaSuccess;
}

// Rows cut across a cluster (rows_in_clusters), for an op that cuts them (Op::ClusterShape): by default
// rows of at least its min_vectors that are not staged (rowwise_cluster_blocks may ask for any row), every
// operand contiguous and aligned, one leading dimension, on a GPU with clusters whose build of the kernel
// has them. The fewest blocks, 2, 4 or 8, whose slices - the row's columns shared out evenly, each a whole
// number of 16-byte vectors - fit the op's block (lanes x chunks vectors). The norms' backward on bf16
// 4096 x 16384, streamed and buffered, ran at 1.82 TB/s (rms_norm) and 1.54 (layer_norm with the bias);
// cut across four blocks of 128 lanes, 2.48 and 2.01; 4096 x 12288 1.26 -> 1.94 and 1.18 -> 1.60. Rows
// its registers hold at two chunks a lane mostly stay there (the op's min_vectors says which do not):
// bf16 8192 x 8192 ran 2.73 TB/s in registers against 2.59 in two blocks, float32 8192 x 4096 3.28
// against 3.05 (bench/sweep_rowwise.py clusters, H200, 2026-12-04, before layer_norm's totals went by
// st.async). The grid: the clusters the device holds at once, at most one per four rows (fewer
// partial rows to add).
template <class Op, typename T>
cudaError_t plan_cluster_rows(const lab_rowwise_launch &l, int64_t vectors, bool vectorized, RowPlan *plan) {
    if constexpr (Clustering<Op>::allowed) {
        constexpr int64_t kSliceVectors = int64_t(Clustering<Op>::lanes) * Clustering<Op>::chunks;
        const int asked = rowwise_cluster_blocks;
        const bool by_default =
            vectors >= Clustering<Op>::min_vectors(int(sizeof(T))) && plan->layout != RowLayout::staged;
        if (asked == 0 || (asked < 0 && !by_default) || !vectorized || l.lead_ndim > 1 || l.rows == 0) {
            return cudaSuccess;
        }
        auto fits = [&](int blocks) {
            return l.n % (int64_t(blocks) * kRowVec<T>) == 0 && l.n / blocks / kRowVec<T> <= kSliceVectors;
        };
        int blocks = asked > 0 ? asked : 2;
        while (asked < 0 && blocks < kMostClusterBlocks && !fits(blocks)) blocks *= 2;
        if (!fits(blocks)) return cudaSuccess;
        DeviceShape device{};
        cudaError_t err = current_device_shape(&device);
        if (err != cudaSuccess || device.major < 9) return err;
        static std::atomic<int> ptx_version_plus_one; // the kernel's as built: sm_90 PTX has the clusters
        int ptx_version = ptx_version_plus_one.load(std::memory_order_relaxed) - 1;
        if (ptx_version < 0) {
            cudaFuncAttributes attributes{};
            err = cudaFuncGetAttributes(&attributes, rows_in_clusters<Op, T>);
            if (err != cudaSuccess) return err;
            ptx_version = attributes.ptxVersion;
            ptx_version_plus_one.store(ptx_version + 1, std::memory_order_relaxed);
        }
        if (ptx_version < 90) return cudaSuccess;
        constexpr int kLanes = Clustering<Op>::lanes;
        const size_t shared_bytes = in_register_sums_bytes<Op, T>(kLanes, Clustering<Op>::chunks);
        // Slices that fill the op's whole tiles (bf16 rows of 16384 in four blocks) skip the tests of
        // partial tiles, as rows held by one block do.
        const bool whole =
            rows_fill_tiles<Op, T>(l, vectorized, kLanes, Clustering<Op>::chunks, l.n / blocks);
        int64_t clusters = 0;
        err = resident_clusters<Op, T>(blocks, whole, shared_bytes, &clusters);
        if (err != cudaSuccess || clusters < 1) return err;
        clusters = std::min<int64_t>(clusters, ceil_div(l.rows, int64_t(4)));
        *plan = RowPlan{RowLayout::clustered, kLanes,       kLanes, Clustering<Op>::chunks,
                        clusters * blocks,    shared_bytes, 0,      false};
        plan->cluster_blocks = blocks;
        plan->whole_tiles = whole;
    }
    return cudaSuccess;
}

// Launches rows_in_clusters<Op, T> as planned: clusters of plan.cluster_blocks blocks.
template <class Op, typename T>
cudaError_t launch_cluster_rows(const RowPlan &plan, const RowArgs &a, cudaStream_t stream) {
    const ClusterLaunch launch(plan.grid, plan.threads, plan.shared_bytes, plan.cluster_blocks, stream);
    return cudaLaunchKernelEx(&launch.config, cluster_kernel<Op, T>(plan.whole_tiles), a);
}

// Launches Op for storage type T as planned: staged where plan_staged_rows takes it, else rows in
// registers or streamed. Ops with column sums get partials from the scratch pool, combined by
// sum_partial_columns in a fixed order, and freed on the stream.
template <class Op, typename T>
cudaError_t launch_rows(const lab_rowwise_launch &l, cudaStream_t stream, const RowScratch &scratch = {}) {
    using A = compute_t<T>;
    const int64_t vectors =
        std::max<int64_t>(ceil_div(l.n, kRowVec<T>), 1); // an empty row still has its statistics
    const RowAlignment alignment = row_alignment<T>(l);
    const bool vectorized = alignment == RowAlignment::kAligned;
    RowPlan plan{};
    cudaError_t err = cudaSuccess;
    // Staged where the op allows it - except that rows filling whole tiles stay in registers (unless a
    // sweep sets the staged minimum): layer_norm bf16 16384 x 4096 3.43 TB/s against 3.0 staged. An op
    // without whole tiles is planned unstaged only where staging does not take its rows. Staged rows past
    // kStagedBytes (opting in) beat the registers and the streamed walk for softmax's forward and backward
    // (bf16 4096 x 16384 backward 3.74 TB/s against 2.65 in registers, 2048 x 32768 forward 3.01 against
    // 1.64 streamed) and the norms' forwards on rows they stream (rms_norm bf16 2048 x 32768 2.71 against
    // 1.92), but not rows the norms' forwards hold in registers (rms_norm with a residual, bf16 4096 x
    // 16384: 3.08 staged, 3.40 in registers; bench/sweep_rowwise.py long_staged, H200, 2026-12-04).
    bool whole = false, staged = false;
    if (!kTakesWholeTiles<Op>) err = plan_staged_rows<Op, T>(l, vectors, vectorized, &plan, &staged);
    if (err == cudaSuccess && !staged) {
        err = plan_unstaged_rows<Op, T>(l, vectors, vectorized, &plan);
        if (err != cudaSuccess) return err;
        whole = plan.whole_tiles;
        if (kTakesWholeTiles<Op> && (!whole || rowwise_staged_min_vectors > 0)) {
            err = plan_staged_rows<Op, T>(l, vectors, vectorized, &plan, &staged,
                                          plan.layout != RowLayout::in_registers);
        }
    }
    if (err != cudaSuccess) return err;
    err = plan_window_rows<Op, T>(l, vectorized, &plan);
    if (err != cudaSuccess) return err;
    plan_buffered_rows<Op, T>(l, vectorized, &plan);
    err = plan_cluster_rows<Op, T>(l, vectors, vectorized, &plan);
    if (err != cudaSuccess) return err;
    const bool want_sums =
        Op::kColumnSums && (l.col_data[LAB_COL_GRAD_WEIGHT] || l.col_data[LAB_COL_GRAD_BIAS]);

    RowArgs a = make_row_args(l, plan.group, vectorized);
    a.n = l.n / plan.cluster_blocks; // clustered: each block's slice of the row
    a.row_losses = scratch.row_losses;
    a.grad_scale = scratch.grad_scale;
    a.streamed_sums_in_shared = plan.sums_in_shared;
    a.streamed_row_buffer = plan.row_buffer;
    const int64_t partial_rows = plan.grid / plan.cluster_blocks; // a cluster's blocks make one together
    if (want_sums && l.rows > 0 && l.n > 0) {
        err = lab_scratch_alloc(&a.partials, sizeof(A) * 2 * size_t(partial_rows) * size_t(l.n), stream);
        if (err != cudaSuccess) return err;
    }
    if (l.rows > 0) {
        auto launch = [&](auto kernel, auto... extra) {
            kernel<<<unsigned(plan.grid), plan.threads, plan.shared_bytes, stream>>>(a, extra...);
        };
        if (plan.layout == RowLayout::clustered) {
            if constexpr (Clustering<Op>::allowed) err = launch_cluster_rows<Op, T>(plan, a, stream);
        } else if (plan.layout == RowLayout::window) {
            if constexpr (kWalksWindow<Op>) launch(rows_window<Op, T>, plan.window_depth);
        } else if (plan.layout == RowLayout::staged) {
            if constexpr (Staging<Op>::allowed) {
                launch(rows_staged<Op, T>, int(plan.padded),
                       int(ceil_div(l.n, int64_t(plan.threads) * kRowVec<T>)));
            }
        } else {
            launch(row_kernel<Op, T>(plan.layout == RowLayout::streamed, plan.chunks, whole,
                                     alignment == RowAlignment::kMisalignedAlike));
        }
        const cudaError_t launched = cudaGetLastError();
        if (err == cudaSuccess) err = launched;
    }
    if (err == cudaSuccess && want_sums && l.n > 0) {
        const dim3 blocks(unsigned(ceil_div(l.n, 32)), 2), threads_per_block(32, kPartialSlices);
        sum_partial_columns<T><<<blocks, threads_per_block, 0, stream>>>(
            static_cast<const A *>(a.partials), l.rows > 0 ? partial_rows : 0, l.n,
            l.col_data[LAB_COL_GRAD_WEIGHT], l.col_data_strides[LAB_COL_GRAD_WEIGHT],
            l.col_data[LAB_COL_GRAD_BIAS], l.col_data_strides[LAB_COL_GRAD_BIAS]);
        err = cudaGetLastError();
    }
    if (a.partials) {
        const cudaError_t freed = cudaFreeAsync(a.partials, stream);
        if (err == cudaSuccess) err = freed;
    }
    return err;
}

// fn(TypeTag<T>) for the float dtypes the row-wise ops take.
template <typename Fn> cudaError_t visit_row_type(lab_dtype dtype, Fn &&fn) {
    return visit_storage_type<false>(dtype, fn);
}

} // namespace

} // namespace lab
