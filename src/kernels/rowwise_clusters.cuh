// rowwise_clusters.cuh - rows too long for one block's registers, cut across the blocks of a thread-block
// cluster (Hopper, sm_90 and later): each block holds its slice of every row in registers, as it would
// hold a shorter row whole, and the row's reduction is finished across the cluster through distributed
// shared memory. The norms' backward takes it (Op::ClusterShape); rowwise_launcher.cuh plans and
// launches it (plan_cluster_rows).
#pragma once

#include <type_traits>

#include "rowwise_kernels.cuh"

namespace lab {

// How an op's rows are cut across a cluster, where it cuts them (`struct ClusterShape`): a block's lanes
// and the chunks each holds - a slice is at most lanes x chunks 16-byte vectors - and the fewest vectors
// a row of elements of so many bytes needs to be cut by default.
template <class Op, typename = void> struct Clustering {
    static constexpr bool allowed = false;
    static constexpr int lanes = 0, chunks = 1;
};
template <class Op> struct Clustering<Op, std::void_t<typename Op::ClusterShape>> {
    static constexpr bool allowed = true;
    static constexpr int lanes = Op::ClusterShape::lanes, chunks = Op::ClusterShape::chunks;
    static constexpr int64_t min_vectors(int element_bytes) {
        return Op::ClusterShape::min_vectors(element_bytes);
    }
};

// Rows cut across a cluster: block `rank` of each cluster takes columns [rank * n, (rank + 1) * n) of
// every row its cluster walks, where `a.n` is the slice's length (the launcher made it the row's / the
// cluster's blocks, a whole number of 16-byte vectors). Op::row, told by kClustered, moves the rows' (and
// the weight's) pointers to the slice and finishes its reduction across the cluster; otherwise it runs as
// on a row of a.n in registers, one row a block. Built for every architecture, it runs only on Hopper
// and later (plan_cluster_rows; cluster_place() traps elsewhere). (A copy of `a` with the pointers moved
// instead took ptxas a 1152-byte stack frame: the arguments copied to local memory.) Column sums land in the
// block's own partial row at its slice's place: a cluster's partial rows are one full row,
// [which][cluster][whole row], what sum_partial_columns adds up.
// Tiles: WholeTiles where the op takes them and each slice fills its tile (plan_cluster_rows).
template <class Op, typename T, class Tiles = PartialTiles, int kChunks = Clustering<Op>::chunks>
__global__ void __launch_bounds__(RowBounds<Op, kChunks, Tiles>::threads,
                                  RowBounds<Op, kChunks, Tiles>::blocks) rows_in_clusters(RowArgs a) {
    static_assert(Op::kColumnSums, "the norms' backward: the slices' partial rows are their column sums");
    const ClusterPlace cluster = cluster_place();                     // (traps where there are no clusters)
    extern __shared__ __align__(16) unsigned char column_sum_bytes[]; // the size the launcher gave
    ColumnSums<T, kChunks> sums{reinterpret_cast<compute_t<T> *>(column_sum_bytes), nullptr};
    sums.bias = Op::kBias ? sums.weight + blockDim.x * ColumnSums<T, kChunks>::kSize : nullptr;
    ColumnSums<T, kChunks>::zero(sums.weight);
    if (Op::kBias) ColumnSums<T, kChunks>::zero(sums.bias);
    const int lane = int(threadIdx.x);
    if constexpr (Op::kClusterTotalsAsync) cluster_reduce_setup();
    // The reduction's round: cluster_reduce counts the rows (0, 1, 2, ...); cluster_reduce_at_barrier
    // takes its slot, 0 and 1 in turn.
    unsigned round = 0;
    for (int64_t row = cluster.index; row < a.rows;
         row += cluster.count, round = Op::kClusterTotalsAsync ? round + 1 : round ^ 1u) {
        Op::template row<T, kChunks, Tiles, true>(a, row, lane, true, sums, round);
    }
    cluster_sync(); // no block leaves while another may still write to it
    write_partials<T, kChunks, Op::kBias>(a, sums);
}

} // namespace lab
