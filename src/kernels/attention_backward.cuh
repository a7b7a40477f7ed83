// attention_backward.cuh - attention's backward kernels: grad_q, grad_k and grad_v with the
// probabilities recomputed from q, k and the forward's log-sum-exp (FlashAttention-2's backward), and
// no atomics anywhere, so the gradients are the same bits run to run. Two builds that differ only in
// their products, as the forward's: attention_backward.cu instantiates them on mma.sync (any GPU from
// sm_80), attention_backward_wgmma.cu on Hopper's wgmma (sm_90a).
//
// With p = exp(s - lse), dp = grad_out v^T and delta = rowsum(grad_out * out):
//   grad_v = p^T grad_out     ds = p * (dp - delta)     grad_q = ds k * scale     grad_k = ds^T q * scale
// (with a softcap, ds also carries the tanh's slope). grad_q sums over keys and grad_k, grad_v over
// queries: a kernel that owned keys and added into grad_q from every block would need atomics. So
// two kernels each own what they write: the first takes a block of queries, walks their keys and
// writes grad_q (and keeps delta for the second); the second takes a block of keys, walks the
// queries that see them - of every query head that shares the key head - and writes grad_k and
// grad_v. s and dp are computed twice (once in each); that is the price of determinism.
//
// On wgmma each kernel's block is one warpgroup (64 rows, 16 a warp, as on mma.sync): s and dp are
// two products of tiles in shared memory, the gradients products of ds (or p) in registers with a
// tile read MN-major - the forward's p v, three times over.
#pragma once

#include "attention.cuh"
#include "warpgroup_mma.cuh"

namespace lab {
namespace {

// What both kernels read: the launch, and the scratch rows of delta ([heads_q][rows] floats, rows
// being a packed batch's total_q or batch * seqlen_q).
struct BackwardArgs {
    lab_attention_launch p;
    float *delta;
    int64_t delta_rows;
};

__device__ __forceinline__ float *delta_of(const BackwardArgs &a, int batch, int head, int64_t start) {
    const int64_t first = a.p.cu_seqlens_q ? start : batch * a.p.seqlen_q;
    return a.delta + head * a.delta_rows + first;
}

// A warp's 16 rows of delta = rowsum(grad_out * out), each row shared by two lanes (half of it each),
// summed in a fixed order. Rows at or past valid_rows get 0.
template <typename T, int D>
__device__ __forceinline__ float row_delta(const T *grad_out, int64_t grad_out_stride, const T *out,
                                           int64_t out_stride, int row, int valid_rows, int lane) {
    float sum = 0.f;
    if (row < valid_rows) {
        const int first = (lane & 1) * (D / 2);
#pragma unroll
        for (int c = first; c < first + D / 2; c += 8) {
            const uint4 gv = *reinterpret_cast<const uint4 *>(grad_out + row * grad_out_stride + c);
            const uint4 ov = *reinterpret_cast<const uint4 *>(out + row * out_stride + c);
            const T *g = reinterpret_cast<const T *>(&gv), *o = reinterpret_cast<const T *>(&ov);
#pragma unroll
            for (int e = 0; e < 8; e++) sum += float(g[e]) * float(o[e]);
        }
    }
    return sum + __shfl_xor_sync(0xffffffffu, sum, 1);
}

// ---- the products on wgmma (one warpgroup a block: its 64 rows are the block's) ----

// a = rows x_tile y_tile^T and b = rows u_tile w_tile^T, side by side: s and dp (x: q, y: k, u:
// grad_out, w: v in grad_q's kernel; x: k, y: q, u: v, w: grad_out in grad_k's). Every operand
// K-major; N columns (the other tile's rows).
template <typename T, typename RowsTile, typename ColumnsTile, int D, int N>
__device__ __forceinline__ void products_of_rows(FragC (&a)[N / 8], FragC (&b)[N / 8], uint32_t x, uint32_t y,
                                                 uint32_t u, uint32_t w) {
    warpgroup_fence();
#pragma unroll
    for (int kk = 0; kk < D; kk += 16) {
        const uint32_t rows_at = RowsTile::chunk_offset(0, kk / 8) * 2,
                       columns_at = ColumnsTile::chunk_offset(0, kk / 8) * 2;
        warpgroup_mma_shared<T, N>(a, matrix_descriptor(x + rows_at, 16, 1024),
                                   matrix_descriptor(y + columns_at, 16, 1024), kk > 0);
        warpgroup_mma_shared<T, N>(b, matrix_descriptor(u + rows_at, 16, 1024),
                                   matrix_descriptor(w + columns_at, 16, 1024), kk > 0);
    }
    warpgroup_commit();
    warpgroup_wait<0>();
    fence_registers(a);
    fence_registers(b);
}

// out (64 x D) += left tile, where `left` is 64 x K accumulators (p, or ds) rounded into A fragments
// and `tile` K x D in shared memory read MN-major (grad_out, q or k, their rows the product's k).
template <typename T, typename Tile, int D, int K>
__device__ __forceinline__ void add_product_of_transposed(FragC (&out)[D / 8], const FragC (&left)[K / 8],
                                                          uint32_t tile) {
    FragA a[K / 16];
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) a[kk / 16] = accumulators_as_a<T>(left[kk / 8], left[kk / 8 + 1]);
    warpgroup_fence();
#pragma unroll
    for (int kk = 0; kk < K; kk += 16) {
        const uint64_t b =
            matrix_descriptor(tile + Tile::chunk_offset(kk, 0) * 2, Tile::kSlabElements * 2, 1024);
        warpgroup_mma_registers<T, D>(out, a[kk / 16], b, 1);
    }
    warpgroup_commit();
    warpgroup_wait<0>();
    fence_registers(out);
}

// ---- grad_q (and delta): a block of kBlockM queries, 16 rows a warp, walking their keys ----

// The tiles' layout and the shared memory's start: wgmma's swizzle atoms begin on 1024-byte boundaries.
template <bool kWarpgroup, int kRows, int D>
using BackwardTile = std::conditional_t<kWarpgroup, WarpgroupTile<kRows, D>, SwizzledTile<kRows, D>>;
template <bool kWarpgroup> constexpr int kBackwardAlignment = kWarpgroup ? 1024 : 128;

template <int D, int kBlockM, int kBlockN, bool kWarpgroup = false> struct QueryShape {
    static constexpr int kWarps = kBlockM / 16, kThreads = kWarps * 32;
    static constexpr int kKeyTiles = kBlockN / 8, kDimTiles = D / 8;
    using RowTile = BackwardTile<kWarpgroup, kBlockM, D>;
    using KvTile = BackwardTile<kWarpgroup, kBlockN, D>;
    static constexpr int kSharedBytes = (2 * RowTile::kElements + 4 * KvTile::kElements) * 2 +
                                        2 * kBlockM * 4 + kBackwardAlignment<kWarpgroup> - 128;
    static_assert(!kWarpgroup || kWarps == 4, "on wgmma a block is one warpgroup");
};

template <typename T, int D, int kBlockM, int kBlockN, bool kWarpgroup>
__global__ void __launch_bounds__(kBlockM * 2) attention_grad_q_kernel(const BackwardArgs args) {
    using Shape = QueryShape<D, kBlockM, kBlockN, kWarpgroup>;
    using RowTile = typename Shape::RowTile;
    using KvTile = typename Shape::KvTile;
    constexpr int kKeyTiles = Shape::kKeyTiles, kDimTiles = Shape::kDimTiles;
    const lab_attention_launch &p = args.p;
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    T *q_tile = reinterpret_cast<T *>(aligned_shared<kBackwardAlignment<kWarpgroup>>(shared_bytes));
    T *grad_out_tile = q_tile + RowTile::kElements;
    T *k_tiles = grad_out_tile + RowTile::kElements; // two stages
    T *v_tiles = k_tiles + 2 * KvTile::kElements;
    float *row_lse = reinterpret_cast<float *>(v_tiles + 2 * KvTile::kElements); // log2 units
    float *row_delta_values = row_lse + kBlockM;

    const int batch = blockIdx.z, head = blockIdx.y, q0 = blockIdx.x * kBlockM;
    const Sequence seq = sequence_of(p, batch);
    if (q0 >= seq.len_q) return;
    const bool packed = p.cu_seqlens_q != nullptr;
    const int head_k = head / int(p.heads_q / p.heads_k);
    const T *q = rows_of<T>(p.q, batch, head, seq.q_start, packed) + q0 * p.q.position_stride;
    const T *grad_out =
        rows_of<T>(p.grad_out, batch, head, seq.q_start, packed) + q0 * p.grad_out.position_stride;
    const T *out = rows_of<T>(p.out, batch, head, seq.q_start, packed) + q0 * p.out.position_stride;
    const T *k = rows_of<T>(p.k, batch, head_k, seq.k_start, packed);
    const T *v = rows_of<T>(p.v, batch, head_k, seq.k_start, packed);
    const float *lse = p.lse + lse_offset(p, batch, head, seq.q_start) + q0 * p.lse_position_stride;
    float *delta = delta_of(args, batch, head, seq.q_start) + q0;
    const Visibility vis(p, seq);
    const ScoreMap map(p);
    const int valid_rows = min(kBlockM, seq.len_q - q0);

    int block_first, block_last;
    vis.key_blocks_for<kBlockN>(q0, q0 + kBlockM, &block_first, &block_last);

    auto load_keys = [&](int block, int stage) {
        load_key_block<kBlockN, D, Shape::kThreads, KvTile>(k_tiles, v_tiles, stage, k, v, p, block,
                                                            seq.len_k);
    };
    load_tile_async<kBlockM, D, Shape::kThreads, RowTile>(q_tile, q, p.q.position_stride, valid_rows);
    load_tile_async<kBlockM, D, Shape::kThreads, RowTile>(grad_out_tile, grad_out, p.grad_out.position_stride,
                                                          valid_rows);
    if (block_first < block_last) load_keys(block_first, 0);
    async_copy_commit();

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = warp * 16;
    { // delta and lse of the warp's rows, while the tiles are in flight
        const int row = row0 + lane / 2;
        const float d = row_delta<T, D>(grad_out, p.grad_out.position_stride, out, p.out.position_stride, row,
                                        valid_rows, lane);
        if ((lane & 1) == 0) {
            row_delta_values[row] = d;
            row_lse[row] = row < valid_rows ? lse[row * p.lse_position_stride] * kLog2e : INFINITY;
            if (row < valid_rows) delta[row] = d;
        }
    }

    FragC grad_q[kDimTiles];
#pragma unroll
    for (int d = 0; d < kDimTiles; d++) zero(grad_q[d]);
    const uint32_t q_address = shared_window_address(q_tile);
    const uint32_t grad_out_address = shared_window_address(grad_out_tile);
    const int g = lane >> 2;

    for (int block = block_first; block < block_last; block++) {
        const int stage = (block - block_first) & 1;
        stage_ready<kWarpgroup>(block + 1 < block_last, [&] { load_keys(block + 1, stage ^ 1); });
        const uint32_t k_address = shared_window_address(k_tiles + stage * KvTile::kElements);
        const uint32_t v_address = shared_window_address(v_tiles + stage * KvTile::kElements);
        const int k0 = block * kBlockN;

        // s = q k^T and dp = grad_out v^T, side by side
        FragC s[kKeyTiles], dp[kKeyTiles];
        if constexpr (kWarpgroup) {
            products_of_rows<T, RowTile, KvTile, D, kBlockN>(s, dp, q_address, k_address, grad_out_address,
                                                             v_address);
        } else {
#pragma unroll
            for (int j = 0; j < kKeyTiles; j++) zero(s[j]), zero(dp[j]);
#pragma unroll
            for (int kk = 0; kk < D; kk += 16) {
                const FragA a_q = load_a<kBlockM, D>(q_address, row0, kk, lane);
                const FragA a_grad = load_a<kBlockM, D>(grad_out_address, row0, kk, lane);
#pragma unroll
                for (int j = 0; j < kKeyTiles; j += 2) {
                    FragB b0, b1;
                    load_b_pair<kBlockN, D>(k_address, j * 8, kk, lane, b0, b1);
                    mma_16816<T>(s[j], a_q, b0);
                    mma_16816<T>(s[j + 1], a_q, b1);
                    load_b_pair<kBlockN, D>(v_address, j * 8, kk, lane, b0, b1);
                    mma_16816<T>(dp[j], a_grad, b0);
                    mma_16816<T>(dp[j + 1], a_grad, b1);
                }
            }
        }
        const bool mask = !vis.all_visible(q0 + row0, q0 + row0 + 16, k0, k0 + kBlockN);
        map_scores<false>(s, map, vis, mask, q0 + row0, k0, lane);
        const float lse2[2] = {row_lse[row0 + g], row_lse[row0 + g + 8]};
        const float delta_rows[2] = {row_delta_values[row0 + g], row_delta_values[row0 + g + 8]};
#pragma unroll
        for (int j = 0; j < kKeyTiles; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float pe = fast_exp2(fmaf(s[j].x[e], map.to_log2, -lse2[e >> 1]));
                dp[j].x[e] = pe > 0.f ? pe * (dp[j].x[e] - delta_rows[e >> 1]) * map.slope(s[j].x[e]) : 0.f;
            }
        }
        // grad_q += ds k
        if constexpr (kWarpgroup) {
            add_product_of_transposed<T, KvTile, D, kBlockN>(grad_q, dp, k_address);
        } else {
#pragma unroll
            for (int kk = 0; kk < kBlockN; kk += 16) {
                const FragA a = accumulators_as_a<T>(dp[kk / 8], dp[kk / 8 + 1]);
#pragma unroll
                for (int d = 0; d < kDimTiles; d += 2) {
                    FragB b0, b1;
                    load_b_pair<kBlockN, D, true>(k_address, d * 8, kk, lane, b0, b1);
                    mma_16816<T>(grad_q[d], a, b0);
                    mma_16816<T>(grad_q[d + 1], a, b1);
                }
            }
        }
        __syncthreads();
    }
    if (block_first >= block_last) {
        copies_landed();
    }
    T *grad_q_rows = rows_of<T>(p.grad_q, batch, head, seq.q_start, packed) + q0 * p.grad_q.position_stride;
    store_accumulators<kBlockM, D, RowTile>(q_tile, grad_q, row0, lane, p.scale);
    __syncwarp();
    store_rows<kBlockM, D, RowTile>(q_tile, grad_q_rows, p.grad_q.position_stride, row0, 16, valid_rows,
                                    lane);
}

// ---- grad_k and grad_v: a block of kBlockN keys, 16 rows a warp, walking the queries that see them ----

template <int D, int kBlockN, int kBlockM, bool kWarpgroup = false> struct KeyShape {
    static constexpr int kWarps = kBlockN / 16, kThreads = kWarps * 32;
    static constexpr int kQueryTiles = kBlockM / 8, kDimTiles = D / 8;
    using KvTile = BackwardTile<kWarpgroup, kBlockN, D>;
    using RowTile = BackwardTile<kWarpgroup, kBlockM, D>;
    static constexpr int kSharedBytes = (2 * KvTile::kElements + 4 * RowTile::kElements) * 2 +
                                        4 * kBlockM * 4 + kBackwardAlignment<kWarpgroup> - 128;
    static_assert(!kWarpgroup || kWarps == 4, "on wgmma a block is one warpgroup");
};

template <typename T, int D, int kBlockN, int kBlockM, bool kWarpgroup>
__global__ void __launch_bounds__(kBlockN * 2) attention_grad_kv_kernel(const BackwardArgs args) {
    using Shape = KeyShape<D, kBlockN, kBlockM, kWarpgroup>;
    using KvTile = typename Shape::KvTile;
    using RowTile = typename Shape::RowTile;
    constexpr int kQueryTiles = Shape::kQueryTiles, kDimTiles = Shape::kDimTiles;
    const lab_attention_launch &p = args.p;
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    T *k_tile = reinterpret_cast<T *>(aligned_shared<kBackwardAlignment<kWarpgroup>>(shared_bytes));
    T *v_tile = k_tile + KvTile::kElements;
    T *q_tiles = v_tile + KvTile::kElements; // two stages
    T *grad_out_tiles = q_tiles + 2 * RowTile::kElements;
    float *stage_lse = reinterpret_cast<float *>(grad_out_tiles + 2 * RowTile::kElements); // [2][kBlockM]
    float *stage_delta = stage_lse + 2 * kBlockM;

    const int batch = blockIdx.z, head_k = blockIdx.y, k0 = blockIdx.x * kBlockN;
    const Sequence seq = sequence_of(p, batch);
    if (k0 >= seq.len_k) return;
    const bool packed = p.cu_seqlens_q != nullptr;
    const int group = int(p.heads_q / p.heads_k);
    const T *k = rows_of<T>(p.k, batch, head_k, seq.k_start, packed) + k0 * p.k.position_stride;
    const T *v = rows_of<T>(p.v, batch, head_k, seq.k_start, packed) + k0 * p.v.position_stride;
    const Visibility vis(p, seq);
    const ScoreMap map(p);
    const int valid_keys = min(kBlockN, seq.len_k - k0);

    int query_first, query_last;
    vis.queries_for(k0, k0 + kBlockN, &query_first, &query_last);
    const int block_first = query_first / kBlockM;
    const int blocks_per_head =
        query_last > query_first ? (query_last + kBlockM - 1) / kBlockM - block_first : 0;
    const int steps = blocks_per_head * group;

    // step i: query block block_first + i % blocks_per_head of query head head_k * group + i /
    // blocks_per_head
    auto load_queries = [&](int step, int stage) {
        const int head = head_k * group + step / blocks_per_head;
        const int q0 = (block_first + step % blocks_per_head) * kBlockM, rows = min(kBlockM, seq.len_q - q0);
        const T *q = rows_of<T>(p.q, batch, head, seq.q_start, packed) + q0 * p.q.position_stride;
        const T *grad_out =
            rows_of<T>(p.grad_out, batch, head, seq.q_start, packed) + q0 * p.grad_out.position_stride;
        load_tile_async<kBlockM, D, Shape::kThreads, RowTile>(q_tiles + stage * RowTile::kElements, q,
                                                              p.q.position_stride, rows);
        load_tile_async<kBlockM, D, Shape::kThreads, RowTile>(grad_out_tiles + stage * RowTile::kElements,
                                                              grad_out, p.grad_out.position_stride, rows);
        const float *lse = p.lse + lse_offset(p, batch, head, seq.q_start) + q0 * p.lse_position_stride;
        const float *delta = delta_of(args, batch, head, seq.q_start) + q0;
        for (int r = threadIdx.x; r < kBlockM; r += Shape::kThreads) {
            stage_lse[stage * kBlockM + r] = r < rows ? lse[r * p.lse_position_stride] * kLog2e : INFINITY;
            stage_delta[stage * kBlockM + r] = r < rows ? delta[r] : 0.f;
        }
    };
    load_tile_async<kBlockN, D, Shape::kThreads, KvTile>(k_tile, k, p.k.position_stride, valid_keys);
    load_tile_async<kBlockN, D, Shape::kThreads, KvTile>(v_tile, v, p.v.position_stride, valid_keys);
    if (steps > 0) load_queries(0, 0);
    async_copy_commit();

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row0 = warp * 16; // the warp's keys, within the block
    const int t = lane & 3;
    FragC grad_k[kDimTiles], grad_v[kDimTiles];
#pragma unroll
    for (int d = 0; d < kDimTiles; d++) zero(grad_k[d]), zero(grad_v[d]);
    const uint32_t k_address = shared_window_address(k_tile), v_address = shared_window_address(v_tile);

    for (int step = 0; step < steps; step++) {
        const int stage = step & 1;
        stage_ready<kWarpgroup>(step + 1 < steps, [&] { load_queries(step + 1, stage ^ 1); });
        const uint32_t q_address = shared_window_address(q_tiles + stage * RowTile::kElements);
        const uint32_t grad_out_address = shared_window_address(grad_out_tiles + stage * RowTile::kElements);
        const float *lse2 = stage_lse + stage * kBlockM;
        const float *delta = stage_delta + stage * kBlockM;
        const int q0 = (block_first + step % blocks_per_head) * kBlockM;

        // s^T = k q^T and dp^T = v grad_out^T: rows are the warp's keys, columns the block's queries
        FragC s[kQueryTiles], dp[kQueryTiles];
        if constexpr (kWarpgroup) {
            products_of_rows<T, KvTile, RowTile, D, kBlockM>(s, dp, k_address, q_address, v_address,
                                                             grad_out_address);
        } else {
#pragma unroll
            for (int j = 0; j < kQueryTiles; j++) zero(s[j]), zero(dp[j]);
#pragma unroll
            for (int kk = 0; kk < D; kk += 16) {
                const FragA a_k = load_a<kBlockN, D>(k_address, row0, kk, lane);
                const FragA a_v = load_a<kBlockN, D>(v_address, row0, kk, lane);
#pragma unroll
                for (int j = 0; j < kQueryTiles; j += 2) {
                    FragB b0, b1;
                    load_b_pair<kBlockM, D>(q_address, j * 8, kk, lane, b0, b1);
                    mma_16816<T>(s[j], a_k, b0);
                    mma_16816<T>(s[j + 1], a_k, b1);
                    load_b_pair<kBlockM, D>(grad_out_address, j * 8, kk, lane, b0, b1);
                    mma_16816<T>(dp[j], a_v, b0);
                    mma_16816<T>(dp[j + 1], a_v, b1);
                }
            }
        }
        const bool mask = !vis.all_visible(q0, q0 + kBlockM, k0 + row0, k0 + row0 + 16);
        map_scores<true>(s, map, vis, mask, k0 + row0, q0, lane);
#pragma unroll
        for (int j = 0; j < kQueryTiles; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int column = j * 8 + 2 * t + (e & 1);
                const float pe = fast_exp2(fmaf(s[j].x[e], map.to_log2, -lse2[column]));
                dp[j].x[e] = pe > 0.f ? pe * (dp[j].x[e] - delta[column]) * map.slope(s[j].x[e]) : 0.f;
                s[j].x[e] = pe;
            }
        }
        // grad_v += p^T grad_out and grad_k += ds^T q
        if constexpr (kWarpgroup) {
            add_product_of_transposed<T, RowTile, D, kBlockM>(grad_v, s, grad_out_address);
            add_product_of_transposed<T, RowTile, D, kBlockM>(grad_k, dp, q_address);
        } else {
#pragma unroll
            for (int kk = 0; kk < kBlockM; kk += 16) {
                const FragA a_p = accumulators_as_a<T>(s[kk / 8], s[kk / 8 + 1]);
                const FragA a_ds = accumulators_as_a<T>(dp[kk / 8], dp[kk / 8 + 1]);
#pragma unroll
                for (int d = 0; d < kDimTiles; d += 2) {
                    FragB b0, b1;
                    load_b_pair<kBlockM, D, true>(grad_out_address, d * 8, kk, lane, b0, b1);
                    mma_16816<T>(grad_v[d], a_p, b0);
                    mma_16816<T>(grad_v[d + 1], a_p, b1);
                    load_b_pair<kBlockM, D, true>(q_address, d * 8, kk, lane, b0, b1);
                    mma_16816<T>(grad_k[d], a_ds, b0);
                    mma_16816<T>(grad_k[d + 1], a_ds, b1);
                }
            }
        }
        __syncthreads();
    }
    if (steps == 0) { // no query sees these keys: their gradients are zeros
        copies_landed();
    }
    T *grad_k_rows = rows_of<T>(p.grad_k, batch, head_k, seq.k_start, packed) + k0 * p.grad_k.position_stride;
    T *grad_v_rows = rows_of<T>(p.grad_v, batch, head_k, seq.k_start, packed) + k0 * p.grad_v.position_stride;
    store_accumulators<kBlockN, D, KvTile>(k_tile, grad_k, row0, lane, p.scale);
    store_accumulators<kBlockN, D, KvTile>(v_tile, grad_v, row0, lane, 1.f);
    __syncwarp();
    store_rows<kBlockN, D, KvTile>(k_tile, grad_k_rows, p.grad_k.position_stride, row0, 16, valid_keys, lane);
    store_rows<kBlockN, D, KvTile>(v_tile, grad_v_rows, p.grad_v.position_stride, row0, 16, valid_keys, lane);
}

// Launches both kernels with Config's blocks (kQueries, kKeys for grad_q; kKvKeys, kKvQueries for
// grad_k and grad_v; kWarpgroup) for head dim D.
template <typename T, int D, typename Config>
cudaError_t launch_backward(const BackwardArgs &args, cudaStream_t stream) {
    using Queries = QueryShape<D, Config::kQueries, Config::kKeys, Config::kWarpgroup>;
    using Keys = KeyShape<D, Config::kKvKeys, Config::kKvQueries, Config::kWarpgroup>;
    const lab_attention_launch &p = args.p;
    constexpr auto grad_q_kernel =
        attention_grad_q_kernel<T, D, Config::kQueries, Config::kKeys, Config::kWarpgroup>;
    constexpr auto grad_kv_kernel =
        attention_grad_kv_kernel<T, D, Config::kKvKeys, Config::kKvQueries, Config::kWarpgroup>;
    const cudaError_t err =
        launch_over_blocks<grad_q_kernel>(args, p.seqlen_q, Config::kQueries, p.heads_q, p.batch,
                                          Queries::kThreads, Queries::kSharedBytes, stream);
    if (err != cudaSuccess) return err;
    return launch_over_blocks<grad_kv_kernel>(args, p.seqlen_k, Config::kKvKeys, p.heads_k, p.batch,
                                              Keys::kThreads, Keys::kSharedBytes, stream);
}

} // namespace

// The backward on wgmma (attention_backward_wgmma.cu) where this build and this GPU have it and the
// head dimension is one its tiles take; cudaErrorNotSupported, having launched nothing, where not
// (and where LAB_ATTENTION_PRODUCTS=mma.sync). `delta` is the scratch both kernels share.
cudaError_t launch_attention_backward_wgmma(const lab_attention_launch &launch, float *delta,
                                            int64_t delta_rows, cudaStream_t stream);

} // namespace lab
