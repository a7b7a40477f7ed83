// cluster.cuh - what the blocks of a thread-block cluster (Hopper, sm_90 and later) share: their
// barrier, their place in the cluster, each other's shared memory (distributed shared memory), and two
// reductions across them: one writes each block's total into the others with asynchronous stores
// counted on mbarriers, one reads the totals after a cluster barrier. rowwise_clusters.cuh cuts long
// rows across a cluster with them.
#pragma once

#include <stdint.h>
#include <string.h>

#include "async_copy.cuh"

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

// The most blocks a cluster may have on every GPU that has clusters (the portable cluster size): the
// launcher cuts rows across no more (rowwise_launcher.cuh), and cluster_reduce keeps a slot for each.
constexpr int kMostClusterBlocks = 8;

// What cluster_reduce keeps in each block's shared memory: two rounds' totals from every block of the
// cluster (a total of at most 16 bytes, as 32-bit words), and for each round the mbarrier that counts
// the other blocks' words in.
constexpr int kClusterTotalWords = 4;
struct ClusterTotals {
    uint64_t arrived[2];
    uint32_t words[2][kMostClusterBlocks][kClusterTotalWords];
};
__device__ __forceinline__ ClusterTotals &cluster_totals() {
    __shared__ __align__(16) ClusterTotals totals;
    return totals;
}

// Every block of the cluster calls this once, before its first cluster_reduce: it readies the block's
// two mbarriers and waits until every block's are ready (another block may write to them at once).
__device__ __forceinline__ void cluster_reduce_setup() {
#if LAB_CLUSTERS
    if (threadIdx.x == 0) {
        for (int i = 0; i < 2; ++i) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(
                             shared_window_address(&cluster_totals().arrived[i]))
                         : "memory");
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
#endif
    cluster_sync();
}

// Combines each block's `block_total` (the same value in all its threads: a group_reduce over the whole
// block) across the cluster; every thread of every block receives the result, combined in rank order, so
// each block - and each run - gets the same bits. `round` counts the calls before this one (0, 1, 2, ...).
// Thread 0 writes its block's total into every other block's shared memory with st.async, which counts
// its bytes on the receiver's mbarrier, and each block waits on its own mbarrier: no cluster barrier.
// (A cluster barrier a row, arrive.release and wait.acquire, compiled to MEMBAR.ALL.GPU - a wait for
// every global store in flight, the previous row's gradient among them - and an L1 invalidation:
// warps of the norms' backward waited 1.5 cycles on it per issued instruction.) Rounds alternate
// between two sets of slots and mbarriers: a block writes round r + 2 into another's slots only once it
// has that block's total of round r + 1, which that block sends after it has read round r.
// The blocks must not leave while another may still write to them: the kernel ends with a cluster_sync().
template <typename V, class Combine>
__device__ __forceinline__ V cluster_reduce(V block_total, Combine combine, unsigned round) {
    static_assert(sizeof(V) % 4 == 0 && sizeof(V) <= 4 * kClusterTotalWords, "a total of 4 to 16 bytes");
    ClusterTotals &totals = cluster_totals();
    const unsigned slot = round & 1u;
    const ClusterPlace place = cluster_place();
#if LAB_CLUSTERS
    constexpr int kWords = int(sizeof(V) / 4);
    const unsigned parity = (round >> 1) & 1u; // the mbarrier's phases: one per use of its slot
    const uint32_t arrived = shared_window_address(&totals.arrived[slot]);
    if (threadIdx.x == 0) {
        uint32_t words[kWords];
        memcpy(words, &block_total, sizeof(V));
        uint32_t *own = totals.words[slot][place.rank];
        for (int w = 0; w < kWords; ++w) own[w] = words[w];
        // The one arrival the mbarrier waits for (it orders the own total's stores before the
        // waiters' loads), and the bytes the other blocks will send.
        asm volatile("{\n .reg .b64 state;\n"
                     " mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}" ::"r"(arrived),
                     "r"(unsigned((place.blocks - 1) * sizeof(V)))
                     : "memory");
        for (unsigned rank = 0; rank < place.blocks; ++rank) {
            if (rank == place.rank) continue;
            uint32_t to_words, to_arrived;
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                         : "=r"(to_words)
                         : "r"(shared_window_address(own)), "r"(rank));
            asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(to_arrived) : "r"(arrived), "r"(rank));
            for (int w = 0; w < kWords; ++w) {
                asm volatile(
                    "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(
                        to_words + 4u * unsigned(w)),
                    "r"(words[w]), "r"(to_arrived)
                    : "memory");
            }
        }
    }
    uint32_t done = 0;
    do {
        asm volatile("{\n .reg .pred ready;\n"
                     " mbarrier.try_wait.parity.shared::cta.b64 ready, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, ready;\n}"
                     : "=r"(done)
                     : "r"(arrived), "r"(parity)
                     : "memory");
    } while (!done);
#endif
    V total;
    memcpy(&total, totals.words[slot][0], sizeof(V));
    for (unsigned rank = 1; rank < place.blocks; ++rank) {
        V other;
        memcpy(&other, totals.words[slot][rank], sizeof(V));
        total = combine(total, other);
    }
    return total;
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

// The same reduction with a cluster barrier a call, where the blocks read each other's totals: each
// block writes its total into slot `slot` of its shared memory, and the caller alternates 0 and 1 from
// one call to the next. A slot is written again two calls later, after the barrier of the call between,
// which every block reaches only once it has read the slots of the call before. The barrier's memory
// ordering is the cost cluster_reduce avoids; rms_norm's backward still ran faster with this one
// (rowwise_norm_ops.cuh says by how much). The kernel ends with a cluster_sync() here too.
template <typename V, class Combine>
__device__ __forceinline__ V cluster_reduce_at_barrier(V block_total, Combine combine, unsigned slot) {
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
