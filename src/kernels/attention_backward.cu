// attention_backward.cu - lab_launch_attention_backward (launch.h): grad_q, grad_k and grad_v with
// the probabilities recomputed from q, k and the forward's log-sum-exp (FlashAttention-2's backward,
// on mma.sync), and no atomics anywhere, so the gradients are the same bits run to run.
//
// With p = exp(s - lse), dp = grad_out v^T and delta = rowsum(grad_out * out):
//   grad_v = p^T grad_out     ds = p * (dp - delta)     grad_q = ds k * scale     grad_k = ds^T q * scale
// (with a softcap, ds also carries the tanh's slope). grad_q sums over keys and grad_k, grad_v over
// queries: a kernel that owned keys and added into grad_q from every block would need atomics. So
// two kernels each own what they write: the first takes a block of queries, walks their keys and
// writes grad_q (and keeps delta for the second); the second takes a block of keys, walks the
// queries that see them - of every query head that shares the key head - and writes grad_k and
// grad_v. s and dp are computed twice (once in each); that is the price of determinism.
#include "attention.cuh"

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

// ---- grad_q (and delta): a block of kBlockM queries, 16 rows a warp, walking their keys ----

template <int D, int kBlockM, int kBlockN> struct QueryShape {
    static constexpr int kWarps = kBlockM / 16, kThreads = kWarps * 32;
    static constexpr int kKeyTiles = kBlockN / 8, kDimTiles = D / 8;
    using RowTile = SwizzledTile<kBlockM, D>;
    using KvTile = SwizzledTile<kBlockN, D>;
    static constexpr int kSharedBytes =
        (2 * RowTile::kElements + 4 * KvTile::kElements) * 2 + 2 * kBlockM * 4;
};

template <typename T, int D, int kBlockM, int kBlockN>
__global__ void __launch_bounds__(kBlockM * 2) attention_grad_q_kernel(const BackwardArgs args) {
    using Shape = QueryShape<D, kBlockM, kBlockN>;
    using RowTile = typename Shape::RowTile;
    using KvTile = typename Shape::KvTile;
    constexpr int kKeyTiles = Shape::kKeyTiles, kDimTiles = Shape::kDimTiles;
    const lab_attention_launch &p = args.p;
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    T *q_tile = reinterpret_cast<T *>(shared_bytes);
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
        load_key_block<kBlockN, D, Shape::kThreads>(k_tiles, v_tiles, stage, k, v, p, block, seq.len_k);
    };
    load_tile_async<kBlockM, D, Shape::kThreads>(q_tile, q, p.q.position_stride, valid_rows);
    load_tile_async<kBlockM, D, Shape::kThreads>(grad_out_tile, grad_out, p.grad_out.position_stride,
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
        stage_ready(block + 1 < block_last, [&] { load_keys(block + 1, stage ^ 1); });
        const uint32_t k_address = shared_window_address(k_tiles + stage * KvTile::kElements);
        const uint32_t v_address = shared_window_address(v_tiles + stage * KvTile::kElements);
        const int k0 = block * kBlockN;

        // s = q k^T and dp = grad_out v^T, side by side
        FragC s[kKeyTiles], dp[kKeyTiles];
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
        __syncthreads();
    }
    if (block_first >= block_last) {
        copies_landed();
    }
    T *grad_q_rows = rows_of<T>(p.grad_q, batch, head, seq.q_start, packed) + q0 * p.grad_q.position_stride;
    store_accumulators<kBlockM, D>(q_tile, grad_q, row0, lane, p.scale);
    __syncwarp();
    store_rows<kBlockM, D>(q_tile, grad_q_rows, p.grad_q.position_stride, row0, 16, valid_rows, lane);
}

// ---- grad_k and grad_v: a block of kBlockN keys, 16 rows a warp, walking the queries that see them ----

template <int D, int kBlockN, int kBlockM> struct KeyShape {
    static constexpr int kWarps = kBlockN / 16, kThreads = kWarps * 32;
    static constexpr int kQueryTiles = kBlockM / 8, kDimTiles = D / 8;
    using KvTile = SwizzledTile<kBlockN, D>;
    using RowTile = SwizzledTile<kBlockM, D>;
    static constexpr int kSharedBytes =
        (2 * KvTile::kElements + 4 * RowTile::kElements) * 2 + 4 * kBlockM * 4;
};

template <typename T, int D, int kBlockN, int kBlockM>
__global__ void __launch_bounds__(kBlockN * 2) attention_grad_kv_kernel(const BackwardArgs args) {
    using Shape = KeyShape<D, kBlockN, kBlockM>;
    using KvTile = typename Shape::KvTile;
    using RowTile = typename Shape::RowTile;
    constexpr int kQueryTiles = Shape::kQueryTiles, kDimTiles = Shape::kDimTiles;
    const lab_attention_launch &p = args.p;
    extern __shared__ __align__(128) unsigned char shared_bytes[];
    T *k_tile = reinterpret_cast<T *>(shared_bytes);
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
        load_tile_async<kBlockM, D, Shape::kThreads>(q_tiles + stage * RowTile::kElements, q,
                                                     p.q.position_stride, rows);
        load_tile_async<kBlockM, D, Shape::kThreads>(grad_out_tiles + stage * RowTile::kElements, grad_out,
                                                     p.grad_out.position_stride, rows);
        const float *lse = p.lse + lse_offset(p, batch, head, seq.q_start) + q0 * p.lse_position_stride;
        const float *delta = delta_of(args, batch, head, seq.q_start) + q0;
        for (int r = threadIdx.x; r < kBlockM; r += Shape::kThreads) {
            stage_lse[stage * kBlockM + r] = r < rows ? lse[r * p.lse_position_stride] * kLog2e : INFINITY;
            stage_delta[stage * kBlockM + r] = r < rows ? delta[r] : 0.f;
        }
    };
    load_tile_async<kBlockN, D, Shape::kThreads>(k_tile, k, p.k.position_stride, valid_keys);
    load_tile_async<kBlockN, D, Shape::kThreads>(v_tile, v, p.v.position_stride, valid_keys);
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
        stage_ready(step + 1 < steps, [&] { load_queries(step + 1, stage ^ 1); });
        const uint32_t q_address = shared_window_address(q_tiles + stage * RowTile::kElements);
        const uint32_t grad_out_address = shared_window_address(grad_out_tiles + stage * RowTile::kElements);
        const float *lse2 = stage_lse + stage * kBlockM;
        const float *delta = stage_delta + stage * kBlockM;
        const int q0 = (block_first + step % blocks_per_head) * kBlockM;

        // s^T = k q^T and dp^T = v grad_out^T: rows are the warp's keys, columns the block's queries
        FragC s[kQueryTiles], dp[kQueryTiles];
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
        __syncthreads();
    }
    if (steps == 0) { // no query sees these keys: their gradients are zeros
        copies_landed();
    }
    T *grad_k_rows = rows_of<T>(p.grad_k, batch, head_k, seq.k_start, packed) + k0 * p.grad_k.position_stride;
    T *grad_v_rows = rows_of<T>(p.grad_v, batch, head_k, seq.k_start, packed) + k0 * p.grad_v.position_stride;
    store_accumulators<kBlockN, D>(k_tile, grad_k, row0, lane, p.scale);
    store_accumulators<kBlockN, D>(v_tile, grad_v, row0, lane, 1.f);
    __syncwarp();
    store_rows<kBlockN, D>(k_tile, grad_k_rows, p.grad_k.position_stride, row0, 16, valid_keys, lane);
    store_rows<kBlockN, D>(v_tile, grad_v_rows, p.grad_v.position_stride, row0, 16, valid_keys, lane);
}

// Blocks per head dimension: the accumulators of the widest rows leave room for fewer columns.
template <int D> struct BackwardConfig {
    static constexpr int kQueries = 64, kKeys = 64; // grad_q: a block's queries, a step's keys
    static constexpr int kKvKeys = 64, kKvQueries = D > 64 ? 32 : 64; // grad_k, grad_v
};

template <typename T, int D> cudaError_t launch_backward(const BackwardArgs &args, cudaStream_t stream) {
    using Config = BackwardConfig<D>;
    using Queries = QueryShape<D, Config::kQueries, Config::kKeys>;
    using Keys = KeyShape<D, Config::kKvKeys, Config::kKvQueries>;
    const lab_attention_launch &p = args.p;
    constexpr auto grad_q_kernel = attention_grad_q_kernel<T, D, Config::kQueries, Config::kKeys>;
    constexpr auto grad_kv_kernel = attention_grad_kv_kernel<T, D, Config::kKvKeys, Config::kKvQueries>;
    const cudaError_t err =
        launch_over_blocks<grad_q_kernel>(args, p.seqlen_q, Config::kQueries, p.heads_q, p.batch,
                                          Queries::kThreads, Queries::kSharedBytes, stream);
    if (err != cudaSuccess) return err;
    return launch_over_blocks<grad_kv_kernel>(args, p.seqlen_k, Config::kKvKeys, p.heads_k, p.batch,
                                              Keys::kThreads, Keys::kSharedBytes, stream);
}

} // namespace
} // namespace lab

extern "C" cudaError_t lab_launch_attention_backward(const lab_attention_launch *launch,
                                                     cudaStream_t stream) {
    using namespace lab;
    BackwardArgs args{*launch, nullptr, 0};
    args.delta_rows = launch->cu_seqlens_q ? launch->total_q : launch->batch * launch->seqlen_q;
    const size_t delta_bytes = size_t(launch->heads_q) * size_t(args.delta_rows) * sizeof(float);
    cudaError_t err =
        lab_scratch_alloc(reinterpret_cast<void **>(&args.delta), delta_bytes ? delta_bytes : 4, stream);
    if (err != cudaSuccess) return err;
    err = visit_attention_shape<false>(*launch, [&](auto type, auto dim) {
        using T = typename decltype(type)::type;
        return launch_backward<T, decltype(dim)::value>(args, stream);
    });
    const cudaError_t freed = cudaFreeAsync(args.delta, stream);
    return err != cudaSuccess ? err : freed;
}
