// cluster.cuh - what the blocks of a thread-block cluster (Hopper, sm_90 and later) share: their
// barrier, their place in the cluster, each other's shared memory (distributed shared memory), and a
// reduction across them built from the three. rowwise_clusters.cuh cuts long rows across a cluster with it.
#pragma once

#include <stdint.h>

namespace lab {

// Built for sm_90 and later only - the one kernel header that asks which architecture it is built for
// (tests/test_source_layout.py compiles it for sm_80 and sm_90). Elsewhere cluster_place() traps: the
// launcher checks the device and the kernel's PTX version before it launches a cluster kernel (a build
// for sm_80 alone, run on a Hopper GPU, JIT-compiles PTX without these instructions).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define LAB_CLUSTERS 1
#else
#define LAB_CLUSTERS 0
#endif

// The cluster's barrier: returns once every thread of every block in the cluster has arrived. Arriving
// with release and waiting with acquire make each block's shared-memory accesses before it - writes and
// reads - happen before the other blocks' accesses after it.
__device__ __forceinline__ void cluster_sync() {
#if LAB_CLUSTERS
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::
                     : "memory");
#endif
}

// This block's rank in its cluster, the blocks of a cluster, this cluster's index in the grid and the
// clusters in the grid (one-dimensional grids and clusters).
struct ClusterPlace {
    unsigned rank, blocks, index, count;
};
__device__ __forceinline__ ClusterPlace cluster_place() {
    ClusterPlace p{0, 1, blockIdx.x, gridDim.x};
#if LAB_CLUSTERS
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(p.rank));
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(p.blocks));
    asm("mov.u32 %0, %%clusterid.x;" : "=r"(p.index));
    asm("mov.u32 %0, %%nclusterid.x;" : "=r"(p.count));
#else
    __trap(); // no clusters on this architecture: a cluster kernel must never run here
#endif
    return p;
}

// The address of `local` (a variable in this block's shared memory) in block `rank` of the cluster:
// an ordinary pointer, read with ordinary loads, that reaches that block's shared memory.
template <typename V> __device__ __forceinline__ const V *in_cluster_block(const V *local, unsigned rank) {
#if LAB_CLUSTERS
    uint64_t remote;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(remote) : "l"(local), "r"(rank));
    return reinterpret_cast<const V *>(remote);
#else
    return local;
#endif
}

// Combines each block's `block_total` (the same value in all its threads: a group_reduce over the whole
// block) across the cluster; every thread of every block receives the result, combined in rank order, so
// each block - and each run - gets the same bits. One barrier a call: each block writes its total into
// slot `slot` of its shared memory, and the caller alternates 0 and 1 from one call to the next. A slot
// is written again two calls later, after the barrier of the call between, which every block reaches
// only once it has read the slots of the call before. The blocks must not leave until every other has
// read their last slot: the kernel ends with a cluster_sync().
template <typename V, class Combine>
__device__ __forceinline__ V cluster_reduce(V block_total, Combine combine, unsigned slot) {
    __shared__ V slots[2];
    if (threadIdx.x == 0) slots[slot] = block_total;
    cluster_sync(); // every block's slot holds its total
    const unsigned blocks = cluster_place().blocks;
    V total = *in_cluster_block(&slots[slot], 0);
    for (unsigned rank = 1; rank < blocks; ++rank)
        total = combine(total, *in_cluster_block(&slots[slot], rank));
    return total;
}

} // namespace lab
