// attention_forward.cu - lab_launch_attention_forward (launch.h): out = softmax(scores) v, the
// scores never written to memory (FlashAttention-2's forward, on mma.sync).
//
// A block takes kBlockM queries of one (sequence, head) and walks the keys they see kBlockN at a
// time. Each warp owns kBlockM / kWarps query rows: it multiplies them by the key tile (s = q k^T in
// registers), folds the tile into its rows' running maximum and sum (the online softmax: earlier
// partial outputs are rescaled when the maximum grows), rounds the probabilities to 16 bits where
// they lie - the accumulator registers of one product are the A operand of the next - and adds p v
// into its output accumulators. The next key and value tiles are copied into shared memory while
// this one is used (two stages). At the end each row is divided by its sum, and the log-sum-exp kept
// for the backward.
#include "attention.cuh"

namespace lab {
namespace {

template <int D, int kBlockM, int kBlockN, int kWarps> struct ForwardShape {
    static constexpr int kThreads = kWarps * 32;
    static constexpr int kRowsPerWarp = kBlockM / kWarps;
    static constexpr int kRowTiles = kRowsPerWarp / 16; // 16-row tiles a warp owns
    static constexpr int kKeyTiles = kBlockN / 8;       // 8-key column tiles of s
    static constexpr int kDimTiles = D / 8;             // 8-column tiles of the output
    using QTile = SwizzledTile<kBlockM, D>;
    using KvTile = SwizzledTile<kBlockN, D>;
    static constexpr int kSharedBytes = (QTile::kElements + 4 * KvTile::kElements) * 2; // q; k, v twice
    static_assert(kRowsPerWarp % 16 == 0 && kBlockN % 16 == 0 && D % 16 == 0, "tiles are 16 wide");
};

template <typename T, int D, int kBlockM, int kBlockN, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) attention_forward_kernel(const lab_attention_launch p) {
    using Shape = ForwardShape<D, kBlockM, kBlockN, kWarps>;
    using QTile = typename Shape::QTile;
    using KvTile = typename Shape::KvTile;
    constexpr int kRowTiles = Shape::kRowTiles, kKeyTiles = Shape::kKeyTiles, kDimTiles = Shape::kDimTiles;
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    T *q_tile = reinterpret_cast<T *>(shared_bytes);
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
        load_key_block<kBlockN, D, Shape::kThreads>(k_tiles, v_tiles, stage, k, v, p, block, seq.len_k);
    };
    load_tile_async<kBlockM, D, Shape::kThreads>(q_tile, q, p.q.position_stride, valid_rows);
    if (block_first < block_last) load_keys(block_first, 0);
    async_copy_commit();

    for (int block = block_first; block < block_last; block++) {
        const int stage = (block - block_first) & 1;
        stage_ready(block + 1 < block_last, [&] { load_keys(block + 1, stage ^ 1); });
        const uint32_t k_address = shared_window_address(k_tiles + stage * KvTile::kElements);
        const uint32_t v_address = shared_window_address(v_tiles + stage * KvTile::kElements);
        const int k0 = block * kBlockN;

        // s = q k^T for the warp's rows and the tile's keys
        FragC s[kRowTiles][kKeyTiles];
#pragma unroll
        for (int r = 0; r < kRowTiles; r++)
#pragma unroll
            for (int j = 0; j < kKeyTiles; j++) zero(s[r][j]);
#pragma unroll
        for (int kk = 0; kk < D; kk += 16) {
            FragA a[kRowTiles];
#pragma unroll
            for (int r = 0; r < kRowTiles; r++) a[r] = load_a<kBlockM, D>(q_address, row0 + r * 16, kk, lane);
#pragma unroll
            for (int j = 0; j < kKeyTiles; j += 2) {
                FragB b0, b1;
                load_b_pair<kBlockN, D>(k_address, j * 8, kk, lane, b0, b1);
#pragma unroll
                for (int r = 0; r < kRowTiles; r++) {
                    mma_16816<T>(s[r][j], a[r], b0);
                    mma_16816<T>(s[r][j + 1], a[r], b1);
                }
            }
        }

        // the online softmax, and p rounded into A fragments
        const bool mask = !vis.all_visible(q0 + row0, q0 + row0 + Shape::kRowsPerWarp, k0, k0 + kBlockN);
        FragA probabilities[kRowTiles][kBlockN / 16];
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

        // out += p v
#pragma unroll
        for (int kk = 0; kk < kBlockN; kk += 16) {
#pragma unroll
            for (int d = 0; d < kDimTiles; d += 2) {
                FragB b0, b1;
                load_b_pair<kBlockN, D, true>(v_address, d * 8, kk, lane, b0, b1);
#pragma unroll
                for (int r = 0; r < kRowTiles; r++) {
                    mma_16816<T>(out[r][d], probabilities[r][kk / 16], b0);
                    mma_16816<T>(out[r][d + 1], probabilities[r][kk / 16], b1);
                }
            }
        }
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
        store_accumulators<kBlockM, D>(q_tile, scaled, row0 + r * 16, lane, 1.f);
    }
    __syncwarp();
    store_rows<kBlockM, D>(q_tile, out_rows, p.out.position_stride, row0, Shape::kRowsPerWarp, valid_rows,
                           lane);
}

// The shapes each head dimension runs with: 128 queries a block where the accumulators fit the
// registers, fewer for the widest rows.
template <int D> struct ForwardConfig;
template <> struct ForwardConfig<64> {
    static constexpr int kBlockM = 128, kBlockN = 64, kWarps = 4;
};
template <> struct ForwardConfig<96> {
    static constexpr int kBlockM = 128, kBlockN = 64, kWarps = 4;
};
template <> struct ForwardConfig<128> {
    static constexpr int kBlockM = 128, kBlockN = 64, kWarps = 4;
};
template <> struct ForwardConfig<256> {
    static constexpr int kBlockM = 64, kBlockN = 32, kWarps = 4;
};

template <typename T, int D> cudaError_t launch_forward(const lab_attention_launch &p, cudaStream_t stream) {
    using Config = ForwardConfig<D>;
    using Shape = ForwardShape<D, Config::kBlockM, Config::kBlockN, Config::kWarps>;
    constexpr auto kernel = attention_forward_kernel<T, D, Config::kBlockM, Config::kBlockN, Config::kWarps>;
    return launch_over_blocks<kernel>(p, p.seqlen_q, Config::kBlockM, p.heads_q, p.batch, Shape::kThreads,
                                      Shape::kSharedBytes, stream);
}

} // namespace
} // namespace lab

extern "C" cudaError_t lab_launch_attention_forward(const lab_attention_launch *launch, cudaStream_t stream) {
    using namespace lab;
    return visit_attention_shape<true>(*launch, [&](auto type, auto dim) {
        using T = typename decltype(type)::type;
        return launch_forward<T, decltype(dim)::value>(*launch, stream);
    });
}
