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
// not (LAB_ATTENTION_PRODUCTS=mma.sync in the environment asks for that too, to compare the two).
cudaError_t launch_attention_forward_wgmma(const lab_attention_launch &launch, cudaStream_t stream);

namespace {

// kWarpgroup: the products are wgmma's (16 rows a warp, 64 a warpgroup) rather than mma.sync's.
template <int D, int kBlockM, int kBlockN, int kWarps, bool kWarpgroup> struct ForwardShape {
    static constexpr int kHeadDim = D, kQueries = kBlockM, kKeys = kBlockN, kThreads = kWarps * 32;
    static constexpr bool kWarpgroupProducts = kWarpgroup;
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
};

// s = q k^T for the warp's rows (row0 within the block) and the key tile.
template <typename T, typename Shape>
__device__ __forceinline__ void scores_of_tile(FragC (&s)[Shape::kRowTiles][Shape::kKeyTiles],
                                               uint32_t q_address, uint32_t k_address, int row0, int lane) {
    constexpr int D = Shape::kHeadDim, kBlockM = Shape::kQueries, kBlockN = Shape::kKeys;
    using QTile = typename Shape::QTile;
    using KvTile = typename Shape::KvTile;
    if constexpr (Shape::kWarpgroupProducts) {
        // the warpgroup's 64 rows start 16 rows a warp before this warp's; 1024 bytes from one 8-row
        // swizzle atom to the next, in q and in k
        const int group_row0 = row0 - (threadIdx.x / 32 % 4) * 16;
        warpgroup_fence();
#pragma unroll
        for (int kk = 0; kk < D; kk += 16) {
            const uint64_t a =
                matrix_descriptor(q_address + QTile::chunk_offset(group_row0, kk / 8) * 2, 16, 1024);
            const uint64_t b = matrix_descriptor(k_address + KvTile::chunk_offset(0, kk / 8) * 2, 16, 1024);
            warpgroup_mma_shared<T, kBlockN>(s[0], a, b, kk > 0);
        }
        warpgroup_commit();
        warpgroup_wait<0>();
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
    using KvTile = typename Shape::KvTile;
    if constexpr (Shape::kWarpgroupProducts) {
        // v is read MN-major: the head dimension contiguous, 64-column slabs kSlabElements apart, and
        // 1024 bytes from one group of eight keys to the next
        warpgroup_fence(); // the probabilities and the rescaled outputs were written by ordinary code
#pragma unroll
        for (int kk = 0; kk < kBlockN; kk += 16) {
            const uint64_t b = matrix_descriptor(v_address + KvTile::chunk_offset(kk, 0) * 2,
                                                 KvTile::kSlabElements * 2, 1024);
            warpgroup_mma_registers<T, D>(out[0], probabilities[0][kk / 16], b, 1);
        }
        warpgroup_commit();
        warpgroup_wait<0>();
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

template <typename T, int D, int kBlockM, int kBlockN, int kWarps, bool kWarpgroup>
__global__ void __launch_bounds__(kWarps * 32) attention_forward_kernel(const lab_attention_launch p) {
    using Shape = ForwardShape<D, kBlockM, kBlockN, kWarps, kWarpgroup>;
    using QTile = typename Shape::QTile;
    using KvTile = typename Shape::KvTile;
    constexpr int kRowTiles = Shape::kRowTiles, kKeyTiles = Shape::kKeyTiles, kDimTiles = Shape::kDimTiles;
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    const uint32_t window = shared_window_address(shared_bytes);
    T *q_tile = reinterpret_cast<T *>(shared_bytes +
                                      ((Shape::kAlignment - window % Shape::kAlignment) % Shape::kAlignment));
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

    int key_first, key_last;
    vis.keys_for(q0, q0 + kBlockM, &key_first, &key_last);
    const int block_first = key_first / kBlockN;
    const int block_last = key_last > key_first ? (key_last + kBlockN - 1) / kBlockN : block_first;

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

    auto load_keys = [&](int block, int stage) {
        load_key_block<kBlockN, D, Shape::kThreads, KvTile>(k_tiles, v_tiles, stage, k, v, p, block,
                                                            seq.len_k);
    };
    load_tile_async<kBlockM, D, Shape::kThreads, QTile>(q_tile, q, p.q.position_stride, valid_rows);
    if (block_first < block_last) load_keys(block_first, 0);
    async_copy_commit();

    for (int block = block_first; block < block_last; block++) {
        const int stage = (block - block_first) & 1;
        stage_ready<kWarpgroup>(block + 1 < block_last, [&] { load_keys(block + 1, stage ^ 1); });
        const uint32_t k_address = shared_window_address(k_tiles + stage * KvTile::kElements);
        const uint32_t v_address = shared_window_address(v_tiles + stage * KvTile::kElements);
        const int k0 = block * kBlockN;

        FragC s[kRowTiles][kKeyTiles];
        scores_of_tile<T, Shape>(s, q_address, k_address, row0, lane);

        // the online softmax, and p rounded into A fragments
        const bool mask = !vis.all_visible(q0 + row0, q0 + row0 + Shape::kRowsPerWarp, k0, k0 + kBlockN);
        FragA probabilities[kRowTiles][kKeyTiles / 2];
#pragma unroll
        for (int r = 0; r < kRowTiles; r++) {
            map_scores<false>(s[r], map, vis, mask, q0 + row0 + r * 16, k0, lane);
#pragma unroll
            for (int half = 0; half < 2; half++) {
                float tile_max = -INFINITY;
#pragma unroll
                for (int j = 0; j < kKeyTiles; j++)
                    tile_max = fmaxf(tile_max, fmaxf(s[r][j].x[2 * half], s[r][j].x[2 * half + 1]));
                const float new_max = fmaxf(row_max[r][half], quad_max(tile_max));
                // a row that has seen no key yet keeps max -inf; subtract 0 then, never -inf - -inf
                const float subtract = new_max == -INFINITY ? 0.f : new_max * map.to_log2;
                const float rescale = fast_exp2(row_max[r][half] * map.to_log2 - subtract);
                row_max[r][half] = new_max;
                float sum = 0.f;
#pragma unroll
                for (int j = 0; j < kKeyTiles; j++) {
#pragma unroll
                    for (int e = 2 * half; e < 2 * half + 2; e++) {
                        s[r][j].x[e] = fast_exp2(fmaf(s[r][j].x[e], map.to_log2, -subtract));
                        sum += s[r][j].x[e];
                    }
                }
                row_sum[r][half] = row_sum[r][half] * rescale + sum; // this lane's share of the row
#pragma unroll
                for (int d = 0; d < kDimTiles; d++) {
                    out[r][d].x[2 * half] *= rescale;
                    out[r][d].x[2 * half + 1] *= rescale;
                }
            }
#pragma unroll
            for (int j = 0; j < kKeyTiles; j += 2)
                probabilities[r][j / 2] = accumulators_as_a<T>(s[r][j], s[r][j + 1]);
        }

        add_values<T, Shape>(out, probabilities, v_address, lane);
        __syncthreads(); // every warp is done with this stage before it is loaded again
    }
    if (block_first >= block_last) { // no key at all: the q tile's copies land before it is written
        copies_landed();
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

// Launches the kernel with Config's tile shape (kBlockM, kBlockN, kWarps, kWarpgroup) for head dim D.
template <typename T, int D, typename Config>
cudaError_t launch_forward(const lab_attention_launch &p, cudaStream_t stream) {
    using Shape = ForwardShape<D, Config::kBlockM, Config::kBlockN, Config::kWarps, Config::kWarpgroup>;
    constexpr auto kernel =
        attention_forward_kernel<T, D, Config::kBlockM, Config::kBlockN, Config::kWarps, Config::kWarpgroup>;
    return launch_over_blocks<kernel>(p, p.seqlen_q, Config::kBlockM, p.heads_q, p.batch, Shape::kThreads,
                                      Shape::kSharedBytes, stream);
}

} // namespace
} // namespace lab
