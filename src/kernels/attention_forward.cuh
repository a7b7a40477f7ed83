// attention_forward.cuh - the attention forward kernel: out = softmax(scores) v, the scores never
// written to memory (FlashAttention-2's forward), in two builds that differ only in their products:
// attention_forward.cu instantiates it on mma.sync (any GPU from sm_80), attention_forward_wgmma.cu
// on Hopper's wgmma (sm_90a). Each chooses its tile shapes.
//
// A block takes kBlockM queries of one (sequence, head) and walks the keys they see kBlockN at a
// time. Each warp owns kBlockM / kWarps query rows: it multiplies them by the key tile (s = q k^T in
// registers), folds the tile into its rows' running maximum and sum (the online softmax: earlier
// partial outputs are rescaled when the maximum grows), rounds the probabilities to 16 bits where
// they lie - the accumulator registers of one product are the A operand of the next - and adds p v
// into its output accumulators. The next key and value tiles are copied into shared memory while
// this one is used (two stages). At the end each row is divided by its sum, and the log-sum-exp kept
// for the backward.
//
// What the warpgroup build changes is only the two products (scores_of_tile, add_values): four warps
// issue each product together, 64 rows by the whole key tile, and the tensor cores read q, k and v
// from shared memory themselves, so no warp loads a fragment (no ldmatrix). The tiles take wgmma's
// layout, and the products run asynchronously, waited for before their results are read.
#pragma once

#include "attention.cuh"
#include "warpgroup_mma.cuh"

namespace lab {

// The forward on wgmma (attention_forward_wgmma.cu) where this build and this GPU have it and the
// launch's head dimension is one its tiles take; cudaErrorNotSupported, having launched nothing, where
// not (LAB_ATTENTION_PRODUCTS=mma.sync in the environment asks for that too, to compare them).
cudaError_t launch_attention_forward_wgmma(const lab_attention_launch &launch, cudaStream_t stream);

namespace {

// kWarpgroup: the products are wgmma's (16 rows a warp, 64 a warpgroup) rather than mma.sync's.
// kOverlap (wgmma only): each step issues the next tile's scores before this tile's softmax, so the
// tensor cores work while the warpgroup computes exponentials (below).
template <int D, int kBlockM, int kBlockN, int kWarps, bool kWarpgroup, bool kOverlap = false>
struct ForwardShape {
    static constexpr int kHeadDim = D, kQueries = kBlockM, kKeys = kBlockN, kThreads = kWarps * 32;
    static constexpr bool kWarpgroupProducts = kWarpgroup, kOverlapped = kOverlap;
    static constexpr int kRowsPerWarp = kBlockM / kWarps;
    static constexpr int kRowTiles = kRowsPerWarp / 16; // 16-row tiles a warp owns
    static constexpr int kKeyTiles = kBlockN / 8;       // 8-key column tiles of s
    static constexpr int kDimTiles = D / 8;             // 8-column tiles of the output
    using QTile = std::conditional_t<kWarpgroup, WarpgroupTile<kBlockM, D>, SwizzledTile<kBlockM, D>>;
    using KvTile = std::conditional_t<kWarpgroup, WarpgroupTile<kBlockN, D>, SwizzledTile<kBlockN, D>>;
    // wgmma's swizzle atoms start on 1024-byte boundaries: room to round the window's start up to one
    static constexpr int kAlignment = kWarpgroup ? 1024 : 128;
    static constexpr int kSharedBytes = (QTile::kElements + 4 * KvTile::kElements) * 2 + kAlignment - 128;
    static_assert(kRowsPerWarp % 16 == 0 && kBlockN % 16 == 0 && D % 16 == 0, "tiles are 16 wide");
    static_assert(!kWarpgroup || (kRowTiles == 1 && kWarps % 4 == 0), "a warpgroup's warps own 16 rows each");
    static_assert(kWarpgroup || !kOverlap, "only asynchronous products overlap");
};

// Starts s = q k^T for the warpgroup's 64 rows (this warp's from row0) and the key tile, on wgmma:
// committed, not waited for. 1024 bytes from one 8-row swizzle atom to the next, in q and in k.
template <typename T, typename Shape>
__device__ __forceinline__ void issue_scores(FragC (&s)[Shape::kKeyTiles], uint32_t q_address,
                                             uint32_t k_address, int row0) {
    using QTile = typename Shape::QTile;
    using KvTile = typename Shape::KvTile;
    const int group_row0 = row0 - (threadIdx.x / 32 % 4) * 16;
    warpgroup_fence();
#pragma unroll
    for (int kk = 0; kk < Shape::kHeadDim; kk += 16) {
        const uint64_t a =
            matrix_descriptor(q_address + QTile::chunk_offset(group_row0, kk / 8) * 2, 16, 1024);
        const uint64_t b = matrix_descriptor(k_address + KvTile::chunk_offset(0, kk / 8) * 2, 16, 1024);
        warpgroup_mma_shared<T, Shape::kKeys>(s, a, b, kk > 0);
    }
    warpgroup_commit();
}

// Starts out += p v on wgmma: v read MN-major (the head dimension contiguous, 64-column slabs
// kSlabElements apart, 1024 bytes from one group of eight keys to the next). Committed, not waited for.
template <typename T, typename Shape>
__device__ __forceinline__ void issue_values(FragC (&out)[Shape::kDimTiles],
                                             const FragA (&probabilities)[Shape::kKeyTiles / 2],
                                             uint32_t v_address) {
    using KvTile = typename Shape::KvTile;
    warpgroup_fence(); // the probabilities and the rescaled outputs were written by ordinary code
#pragma unroll
    for (int kk = 0; kk < Shape::kKeys; kk += 16) {
        const uint64_t b =
            matrix_descriptor(v_address + KvTile::chunk_offset(kk, 0) * 2, KvTile::kSlabElements * 2, 1024);
        warpgroup_mma_registers<T, Shape::kHeadDim>(out, probabilities[kk / 16], b, 1);
    }
    warpgroup_commit();
}

// s = q k^T for the warp's rows (row0 within the block) and the key tile.
template <typename T, typename Shape>
__device__ __forceinline__ void scores_of_tile(FragC (&s)[Shape::kRowTiles][Shape::kKeyTiles],
                                               uint32_t q_address, uint32_t k_address, int row0, int lane) {
    constexpr int D = Shape::kHeadDim, kBlockM = Shape::kQueries, kBlockN = Shape::kKeys;
    if constexpr (Shape::kWarpgroupProducts) {
        issue_scores<T, Shape>(s[0], q_address, k_address, row0);
        warpgroup_wait<0>();
        fence_registers(s[0]);
    } else {
#pragma unroll
        for (int r = 0; r < Shape::kRowTiles; r++)
#pragma unroll
            for (int j = 0; j < Shape::kKeyTiles; j++) zero(s[r][j]);
#pragma unroll
        for (int kk = 0; kk < D; kk += 16) {
            FragA a[Shape::kRowTiles];
#pragma unroll
            for (int r = 0; r < Shape::kRowTiles; r++)
                a[r] = load_a<kBlockM, D>(q_address, row0 + r * 16, kk, lane);
#pragma unroll
            for (int j = 0; j < Shape::kKeyTiles; j += 2) {
                FragB b0, b1;
                load_b_pair<kBlockN, D>(k_address, j * 8, kk, lane, b0, b1);
#pragma unroll
                for (int r = 0; r < Shape::kRowTiles; r++) {
                    mma_16816<T>(s[r][j], a[r], b0);
                    mma_16816<T>(s[r][j + 1], a[r], b1);
                }
            }
        }
    }
}

// out += p v for the warp's rows, p the tile's probabilities as A fragments.
template <typename T, typename Shape>
__device__ __forceinline__ void
add_values(FragC (&out)[Shape::kRowTiles][Shape::kDimTiles],
           const FragA (&probabilities)[Shape::kRowTiles][Shape::kKeyTiles / 2], uint32_t v_address,
           int lane) {
    constexpr int D = Shape::kHeadDim, kBlockN = Shape::kKeys;
    if constexpr (Shape::kWarpgroupProducts) {
        issue_values<T, Shape>(out[0], probabilities[0], v_address);
        warpgroup_wait<0>();
        fence_registers(out[0]);
    } else {
#pragma unroll
        for (int kk = 0; kk < kBlockN; kk += 16) {
#pragma unroll
            for (int d = 0; d < Shape::kDimTiles; d += 2) {
                FragB b0, b1;
                load_b_pair<kBlockN, D, true>(v_address, d * 8, kk, lane, b0, b1);
#pragma unroll
                for (int r = 0; r < Shape::kRowTiles; r++) {
                    mma_16816<T>(out[r][d], probabilities[r][kk / 16], b0);
                    mma_16816<T>(out[r][d + 1], probabilities[r][kk / 16], b1);
                }
            }
        }
    }
}

// The online softmax of one 16-row tile of scores (already mapped and masked): folds the tile into
// its rows' running maximum and this lane's share of their sums, turns the scores into probabilities
// in place, and leaves in `rescale` what the rows' earlier outputs must be multiplied by.
template <int kKeyTiles>
__device__ __forceinline__ void softmax_tile(FragC (&s)[kKeyTiles], float (&row_max)[2], float (&row_sum)[2],
                                             float (&rescale)[2], const ScoreMap &map) {
#pragma unroll
    for (int half = 0; half < 2; half++) {
        float tile_max = -INFINITY;
#pragma unroll
        for (int j = 0; j < kKeyTiles; j++)
            tile_max = fmaxf(tile_max, fmaxf(s[j].x[2 * half], s[j].x[2 * half + 1]));
        const float new_max = fmaxf(row_max[half], quad_max(tile_max));
        // a row that has seen no key yet keeps max -inf; subtract 0 then, never -inf - -inf
        const float subtract = new_max == -INFINITY ? 0.f : new_max * map.to_log2;
        rescale[half] = fast_exp2(row_max[half] * map.to_log2 - subtract);
        row_max[half] = new_max;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < kKeyTiles; j++) {
#pragma unroll
            for (int e = 2 * half; e < 2 * half + 2; e++) {
                s[j].x[e] = fast_exp2(fmaf(s[j].x[e], map.to_log2, -subtract));
                sum += s[j].x[e];
            }
        }
        row_sum[half] = row_sum[half] * rescale[half] + sum;
    }
}

// The probabilities rounded to T, as the A fragments of the values' product.
template <typename T, int kKeyTiles>
__device__ __forceinline__ void round_probabilities(const FragC (&s)[kKeyTiles],
                                                    FragA (&probabilities)[kKeyTiles / 2]) {
#pragma unroll
    for (int j = 0; j < kKeyTiles; j += 2) probabilities[j / 2] = accumulators_as_a<T>(s[j], s[j + 1]);
}

template <int kDimTiles>
__device__ __forceinline__ void rescale_rows(FragC (&out)[kDimTiles], const float (&rescale)[2]) {
#pragma unroll
    for (int d = 0; d < kDimTiles; d++) {
#pragma unroll
        for (int e = 0; e < 4; e++) out[d].x[e] *= rescale[e >> 1];
    }
}

template <typename T, int D, int kBlockM, int kBlockN, int kWarps, bool kWarpgroup, bool kOverlap>
__global__ void __launch_bounds__(kWarps * 32) attention_forward_kernel(const lab_attention_launch p) {
    using Shape = ForwardShape<D, kBlockM, kBlockN, kWarps, kWarpgroup, kOverlap>;
    using QTile = typename Shape::QTile;
    using KvTile = typename Shape::KvTile;
    constexpr int kRowTiles = Shape::kRowTiles, kKeyTiles = Shape::kKeyTiles, kDimTiles = Shape::kDimTiles;
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    T *q_tile = reinterpret_cast<T *>(aligned_shared<Shape::kAlignment>(shared_bytes));
    T *k_tiles = q_tile + QTile::kElements; // two stages
    T *v_tiles = k_tiles + 2 * KvTile::kElements;

    const int batch = blockIdx.z, head = blockIdx.y, q0 = blockIdx.x * kBlockM;
    const Sequence seq = sequence_of(p, batch);
    if (q0 >= seq.len_q) return;
    const bool packed = p.cu_seqlens_q != nullptr;
    const int head_k = head / int(p.heads_q / p.heads_k);
    const T *q = rows_of<T>(p.q, batch, head, seq.q_start, packed) + q0 * p.q.position_stride;
    const T *k = rows_of<T>(p.k, batch, head_k, seq.k_start, packed);
    const T *v = rows_of<T>(p.v, batch, head_k, seq.k_start, packed);
    const Visibility vis(p, seq);
    const ScoreMap map(p);
    const int valid_rows = min(kBlockM, seq.len_q - q0);

    int block_first, block_last;
    vis.key_blocks_for<kBlockN>(q0, q0 + kBlockM, &block_first, &block_last);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = warp * Shape::kRowsPerWarp; // within the block
    const uint32_t q_address = shared_window_address(q_tile);

    float row_max[kRowTiles][2], row_sum[kRowTiles][2];
    FragC out[kRowTiles][kDimTiles];
#pragma unroll
    for (int r = 0; r < kRowTiles; r++) {
        row_max[r][0] = row_max[r][1] = -INFINITY;
        row_sum[r][0] = row_sum[r][1] = 0.f;
#pragma unroll
        for (int d = 0; d < kDimTiles; d++) zero(out[r][d]);
    }
    // the scores of key block `block`, in place: softcap, mask where the tile crosses the visible edge
    auto map_tile = [&](FragC(&s)[kRowTiles][kKeyTiles], int block) {
        const int k0 = block * kBlockN;
        const bool mask = !vis.all_visible(q0 + row0, q0 + row0 + Shape::kRowsPerWarp, k0, k0 + kBlockN);
#pragma unroll
        for (int r = 0; r < kRowTiles; r++)
            map_scores<false>(s[r], map, vis, mask, q0 + row0 + r * 16, k0, lane);
    };
    auto load_rows = [&](T *tiles, const T *base, int64_t stride, int block, int stage) {
        const int k0 = block * kBlockN;
        load_tile_async<kBlockN, D, Shape::kThreads, KvTile>(
            tiles + stage * KvTile::kElements, base + k0 * stride, stride, min(kBlockN, seq.len_k - k0));
    };
    load_tile_async<kBlockM, D, Shape::kThreads, QTile>(q_tile, q, p.q.position_stride, valid_rows);

    if constexpr (!kOverlap) {
        if (block_first < block_last) {
            load_rows(k_tiles, k, p.k.position_stride, block_first, 0);
            load_rows(v_tiles, v, p.v.position_stride, block_first, 0);
        }
        async_copy_commit();
        for (int block = block_first; block < block_last; block++) {
            const int stage = (block - block_first) & 1;
            stage_ready<kWarpgroup>(block + 1 < block_last, [&] {
                load_rows(k_tiles, k, p.k.position_stride, block + 1, stage ^ 1);
                load_rows(v_tiles, v, p.v.position_stride, block + 1, stage ^ 1);
            });
            FragC s[kRowTiles][kKeyTiles];
            scores_of_tile<T, Shape>(s, q_address, shared_window_address(k_tiles + stage * KvTile::kElements),
                                     row0, lane);
            map_tile(s, block);
            FragA probabilities[kRowTiles][kKeyTiles / 2];
#pragma unroll
            for (int r = 0; r < kRowTiles; r++) {
                float rescale[2];
                softmax_tile(s[r], row_max[r], row_sum[r], rescale, map);
                round_probabilities<T>(s[r], probabilities[r]);
                rescale_rows(out[r], rescale);
            }
            add_values<T, Shape>(out, probabilities,
                                 shared_window_address(v_tiles + stage * KvTile::kElements), lane);
            __syncthreads(); // every warp is done with this stage before it is loaded again
        }
        if (block_first >= block_last) copies_landed(); // the q tile's copies land before it is written
    } else {
        // Step i issues tile i's scores and, behind them, tile i-1's values, then computes tile i's
        // softmax while the values' product still runs; the outputs are rescaled once it lands. So a
        // step needs k of tile i and v of tile i-1 in shared memory: the copies run one tile ahead for
        // k, level for v (group i+1 brings k of tile i+1 and v of tile i). The first step has no values
        // to add and the last only values: both are peeled off the loop, so that every step in it waits
        // the same way (ptxas serializes the products where it cannot tell which group a wait leaves).
        const int steps = block_last - block_first;
        auto copies_for_step = [&](int i) { // group i+1, then the tiles of step i ready for all
            if (i + 1 < steps) load_rows(k_tiles, k, p.k.position_stride, block_first + i + 1, (i + 1) & 1);
            if (i < steps) load_rows(v_tiles, v, p.v.position_stride, block_first + i, i & 1);
            async_copy_commit();
            async_copy_wait<1>();
            fence_shared_for_async_proxy();
            __syncthreads();
        };
        auto k_address = [&](int i) { return shared_window_address(k_tiles + (i & 1) * KvTile::kElements); };
        auto v_address = [&](int i) { return shared_window_address(v_tiles + (i & 1) * KvTile::kElements); };
        if (steps > 0) load_rows(k_tiles, k, p.k.position_stride, block_first, 0);
        async_copy_commit();
        if (steps > 0) {
            FragA probabilities[kKeyTiles / 2];
            {
                copies_for_step(0);
                FragC s[1][kKeyTiles];
                issue_scores<T, Shape>(s[0], q_address, k_address(0), row0);
                warpgroup_wait<0>();
                fence_registers(s[0]);
                map_tile(s, block_first);
                float rescale[2];
                softmax_tile(s[0], row_max[0], row_sum[0], rescale, map);
                round_probabilities<T>(s[0], probabilities);
                __syncthreads(); // every warp is done with this step's tiles before they are loaded again
            }
            for (int i = 1; i < steps; i++) {
                copies_for_step(i);
                fence_registers(probabilities);
                fence_registers(out[0]);
                FragC s[1][kKeyTiles];
                fence_registers(s[0]);
                issue_scores<T, Shape>(s[0], q_address, k_address(i), row0);
                issue_values<T, Shape>(out[0], probabilities, v_address(i - 1));
                warpgroup_wait<1>(); // the scores; the values' product may still run
                fence_registers(s[0]);
                map_tile(s, block_first + i);
                float rescale[2];
                softmax_tile(s[0], row_max[0], row_sum[0], rescale, map);
                warpgroup_wait<0>();
                fence_registers(out[0]);
                rescale_rows(out[0], rescale);
                // rounded only now: the values' product read the last tile's from these registers
                round_probabilities<T>(s[0], probabilities);
                __syncthreads();
            }
            async_copy_wait<0>(); // v of the last tile
            fence_shared_for_async_proxy();
            __syncthreads();
            issue_values<T, Shape>(out[0], probabilities, v_address(steps - 1));
            warpgroup_wait<0>();
            fence_registers(out[0]);
        } else {
            copies_landed(); // the q tile's copies land before it is written
        }
    }

    // out / sum, staged through the warp's own rows of the q tile (no other warp reads them)
    const int g = lane >> 2, t = lane & 3;
    T *out_rows = rows_of<T>(p.out, batch, head, seq.q_start, packed) + q0 * p.out.position_stride;
    float *lse = p.lse ? p.lse + lse_offset(p, batch, head, seq.q_start) : nullptr;
#pragma unroll
    for (int r = 0; r < kRowTiles; r++) {
        FragC scaled[kDimTiles];
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const float sum = quad_sum(row_sum[r][half]);
            const float inverse = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
            for (int d = 0; d < kDimTiles; d++) {
                scaled[d].x[2 * half] = out[r][d].x[2 * half] * inverse;
                scaled[d].x[2 * half + 1] = out[r][d].x[2 * half + 1] * inverse;
            }
            const int row = row0 + r * 16 + g + half * 8;
            if (lse && t == 0 && row < valid_rows) {
                lse[(q0 + row) * p.lse_position_stride] =
                    sum > 0.f ? row_max[r][half] * map.to_log2 * kLn2 + logf(sum) : INFINITY;
            }
        }
        __syncwarp();
        store_accumulators<kBlockM, D, QTile>(q_tile, scaled, row0 + r * 16, lane, 1.f);
    }
    __syncwarp();
    store_rows<kBlockM, D, QTile>(q_tile, out_rows, p.out.position_stride, row0, Shape::kRowsPerWarp,
                                  valid_rows, lane);
}

// Launches the kernel with Config's tile shape (kBlockM, kBlockN, kWarps, kWarpgroup, kOverlap) for
// head dim D.
template <typename T, int D, typename Config>
cudaError_t launch_forward(const lab_attention_launch &p, cudaStream_t stream) {
    using Shape = ForwardShape<D, Config::kBlockM, Config::kBlockN, Config::kWarps, Config::kWarpgroup,
                               Config::kOverlap>;
    constexpr auto kernel = attention_forward_kernel<T, D, Config::kBlockM, Config::kBlockN, Config::kWarps,
                                                     Config::kWarpgroup, Config::kOverlap>;
    return launch_over_blocks<kernel>(p, p.seqlen_q, Config::kBlockM, p.heads_q, p.batch, Shape::kThreads,
                                      Shape::kSharedBytes, stream);
}

} // namespace
} // namespace lab
