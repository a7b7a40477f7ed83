// rope.cu - the rotary position embedding (lab_launch_rope, kernels/launch.h): q and k in one launch.
// Each thread writes both elements of every pair it reads, so an output may be its input's very
// view. Where every operand allows it a thread takes 16-byte packets of x (and the table columns
// that go with them), staged through shared memory; otherwise a single pair, at any strides.
#include "async_copy.cuh"
#include "dispatch.cuh"
#include "indexing.cuh"
#include "launch.h"
#include "resident_blocks.cuh"

#include <algorithm>
#include <atomic>

namespace lab {
namespace {

// N elements moved by one load or store: the struct's alignment is its size (16 bytes for x's
// packets; 8 to 32 for a table's columns, as its dtype and form make them).
template <typename T, int N> struct alignas(sizeof(T) * N) Pack {
    T v[N];
};

// Where one row's elements start, for each of x, out, cos and sin.
struct RowBases {
    const char *x;
    char *out;
    const char *cos, *sin;
};

// The bases of row (i0, i1, i2) of tensor t, in the plan's order of dimensions.
__device__ __forceinline__ RowBases row_bases(const lab_rope_launch &l, const lab_rope_tensor &t, int64_t i0,
                                              int64_t i1, int64_t i2) {
    int64_t offset[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        offset[k] = i0 * t.strides[k][0] + i1 * t.strides[k][1] + i2 * t.strides[k][2];
    return {t.x + offset[LAB_ROPE_X], t.out + offset[LAB_ROPE_OUT], l.cos + offset[LAB_ROPE_COS],
            l.sin + offset[LAB_ROPE_SIN]};
}

__device__ __forceinline__ RowBases row_bases(const lab_rope_launch &l, const lab_rope_tensor &t,
                                              int64_t row) {
    const int64_t i2 = row % t.shape[2], rest = row / t.shape[2];
    return row_bases(l, t, rest / t.shape[1], rest % t.shape[1], i2);
}

// One pair (a, b) - a the first element, b its partner - and the table values at each one's column.
// Forward rotates by the angle; backward applies the transpose (launch.h gives both formulas).
template <typename F>
__device__ __forceinline__ void rotate(F a, F b, F cos_a, F sin_a, F cos_b, F sin_b, bool backward, F &out_a,
                                       F &out_b) {
    if (backward) {
        out_a = a * cos_a + b * sin_b;
        out_b = b * cos_b - a * sin_a;
    } else {
        out_a = a * cos_a - b * sin_a;
        out_b = b * cos_b + a * sin_b;
    }
}

// Work items: tensor 0's, then tensor 1's; per_row of them for each row.
struct Items {
    int64_t per_row[2];
    int64_t first_of_second; // tensor 0's item count
    int64_t total;
    // The packet path counts its items in 32 bits and divides by multiply-high and shift
    // (indexing.cuh): by per_row, and by the tensor's shape[2] and shape[1] for the row's place.
    lab_fast_divmod by_per_row[2], by_shape2[2], by_shape1[2];
};

constexpr int kThreads = 256;

// Where a packet-path item works: its tensor, its row's bases, and its run - a run below rot_runs
// rotates V pairs; from rot_runs on, the unrotated tail is copied a packet at a time.
struct ItemPlace {
    RowBases r;
    uint32_t run;
};

// The tensor is selected, not indexed by t: an indexed kernel parameter is copied to local memory.
__device__ __forceinline__ ItemPlace place_of(const lab_rope_launch &l, const Items &items, uint32_t item) {
    const uint32_t first_of_second = uint32_t(items.first_of_second);
    const int t = item >= first_of_second;
    const lab_rope_tensor &tensor = t ? l.tensors[1] : l.tensors[0];
    const uint32_t local = t ? item - first_of_second : item;
    uint32_t row, run, plane, i0, i1, i2;
    divmod(t ? items.by_per_row[1] : items.by_per_row[0], local, row, run);
    divmod(t ? items.by_shape2[1] : items.by_shape2[0], row, plane, i2);
    divmod(t ? items.by_shape1[1] : items.by_shape1[0], plane, i0, i1);
    return {row_bases(l, tensor, i0, i1, i2), run};
}

// The byte offset in its row of an item's packet a: the first elements of its pairs (rotate-half),
// its interleaved pairs, or its piece of the tail. Packet b, the partners, is rotary_dim / 2 further.
template <typename T>
__device__ __forceinline__ int64_t offset_a(const lab_rope_launch &l, uint32_t run, int64_t rot_runs) {
    constexpr int V = Packed16<T>::kCount;
    if (run >= rot_runs) return (l.rotary_dim + (run - rot_runs) * V) * int64_t(sizeof(T));
    return int64_t(run) * V * int64_t(sizeof(T));
}

// Rotates an item's packets a (and b, in rotate-half) with their table columns and stores them.
template <typename T, typename C>
__device__ __forceinline__ void rotate_and_store(const lab_rope_launch &l, const ItemPlace &p,
                                                 int64_t rot_runs, const Pack<T, Packed16<T>::kCount> &xa,
                                                 const Pack<T, Packed16<T>::kCount> &xb) {
    using F = compute_t<T>;
    constexpr int V = Packed16<T>::kCount;
    using XPack = Pack<T, V>;
    using CPack = Pack<C, V>;
    const int64_t a = offset_a<T>(l, p.run, rot_runs);
    if (p.run >= rot_runs) { // the unrotated tail, copied
        *reinterpret_cast<XPack *>(p.r.out + a) = xa;
        return;
    }
    if (!l.interleaved) { // pairs (j, j + half) for j in [run * V, run * V + V)
        const int64_t half = l.rotary_dim / 2, j = int64_t(p.run) * V, col_b = l.pair_table ? j : j + half;
        const CPack ca = *reinterpret_cast<const CPack *>(p.r.cos + j * sizeof(C));
        const CPack sa = *reinterpret_cast<const CPack *>(p.r.sin + j * sizeof(C));
        const CPack cb = *reinterpret_cast<const CPack *>(p.r.cos + col_b * sizeof(C));
        const CPack sb = *reinterpret_cast<const CPack *>(p.r.sin + col_b * sizeof(C));
        XPack oa, ob;
#pragma unroll
        for (int v = 0; v < V; v++) {
            F out_a, out_b;
            rotate<F>(load_as_compute(xa.v[v]), load_as_compute(xb.v[v]), F(load_as_compute(ca.v[v])),
                      F(load_as_compute(sa.v[v])), F(load_as_compute(cb.v[v])), F(load_as_compute(sb.v[v])),
                      l.backward, out_a, out_b);
            oa.v[v] = store_from_compute<T>(out_a);
            ob.v[v] = store_from_compute<T>(out_b);
        }
        *reinterpret_cast<XPack *>(p.r.out + j * sizeof(T)) = oa;
        *reinterpret_cast<XPack *>(p.r.out + (j + half) * sizeof(T)) = ob;
        return;
    }
    // interleaved: pairs (2i, 2i + 1) inside one packet of V elements
    const int64_t e = int64_t(p.run) * V;
    C cs[V], sn[V]; // the table's value at each element's column
    if (l.pair_table) {
        const Pack<C, V / 2> c = *reinterpret_cast<const Pack<C, V / 2> *>(p.r.cos + e / 2 * sizeof(C));
        const Pack<C, V / 2> s = *reinterpret_cast<const Pack<C, V / 2> *>(p.r.sin + e / 2 * sizeof(C));
#pragma unroll
        for (int v = 0; v < V; v++) cs[v] = c.v[v / 2], sn[v] = s.v[v / 2];
    } else {
        const CPack c = *reinterpret_cast<const CPack *>(p.r.cos + e * sizeof(C));
        const CPack s = *reinterpret_cast<const CPack *>(p.r.sin + e * sizeof(C));
#pragma unroll
        for (int v = 0; v < V; v++) cs[v] = c.v[v], sn[v] = s.v[v];
    }
    XPack o;
#pragma unroll
    for (int v = 0; v < V; v += 2) {
        F out_a, out_b;
        rotate<F>(load_as_compute(xa.v[v]), load_as_compute(xa.v[v + 1]), F(load_as_compute(cs[v])),
                  F(load_as_compute(sn[v])), F(load_as_compute(cs[v + 1])), F(load_as_compute(sn[v + 1])),
                  l.backward, out_a, out_b);
        o.v[v] = store_from_compute<T>(out_a);
        o.v[v + 1] = store_from_compute<T>(out_b);
    }
    *reinterpret_cast<XPack *>(p.r.out + e * sizeof(T)) = o;
}

// The packet path: every operand's head dimension contiguous, every row start and table column
// aligned to its packet. A row is rot_runs runs of V pairs, then the tail's V-element packets; an
// item is one run of one row. A grid of resident blocks strides over the items, and each thread
// keeps a ring of kStages items in shared memory: it copies the x packets of the item kStages - 1
// strides ahead with cp.async while it rotates the current one, so the bytes in flight are not held
// in registers. (One item a thread, loads then stores, reached 48-60% of DRAM's bandwidth in Nsight
// Compute; holding several heads a thread, or the next item, in registers ran out of registers
// before it had enough in flight - bench/results/2026-12-03-h200-sweep-rope.txt.) A thread reads
// back only its own slots, so no barrier is needed; the items ahead are other elements than the
// current one's, so an output may be its input's view.
constexpr int kStages = 3, kMinBlocks = 4;

template <typename T, typename C>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    rope_packets(const lab_rope_launch l, const Items items, const int64_t rot_runs) {
    using XPack = Pack<T, Packed16<T>::kCount>;
    extern __shared__ __align__(16) unsigned char ring[];
    const uint32_t total = uint32_t(items.total), step = gridDim.x * uint32_t(blockDim.x);
    const uint32_t first = blockIdx.x * uint32_t(blockDim.x) + threadIdx.x;
    const unsigned ring_base = shared_window_address(ring);
    // slot (stage, packet) of this thread: consecutive threads' slots are consecutive 16 bytes
    auto slot = [&](int stage, int packet) {
        return ((stage * 2 + packet) * blockDim.x + threadIdx.x) * 16u;
    };
    const int64_t half_bytes = l.rotary_dim / 2 * int64_t(sizeof(T));
    // one commit group per item (empty past the end), so waiting for all but kStages - 1 groups
    // waits for the current item's
    auto fetch = [&](int64_t item, int stage) {
        if (item < total) {
            const ItemPlace p = place_of(l, items, uint32_t(item));
            const char *x = p.r.x + offset_a<T>(l, p.run, rot_runs);
            async_copy_16(ring_base + slot(stage, 0), x);
            if (!l.interleaved && p.run < rot_runs) async_copy_16(ring_base + slot(stage, 1), x + half_bytes);
        }
        async_copy_commit();
    };
#pragma unroll
    for (int s = 0; s < kStages - 1; s++) fetch(int64_t(first) + int64_t(s) * step, s);
    int stage = 0;
    for (uint32_t item = first; item < total; item += step) { // total < 2^31: no 32-bit wrap
        fetch(int64_t(item) + int64_t(kStages - 1) * step, stage == 0 ? kStages - 1 : stage - 1);
        async_copy_wait<kStages - 1>();
        const ItemPlace p = place_of(l, items, item);
        XPack xa = *reinterpret_cast<const XPack *>(ring + slot(stage, 0)), xb;
        if (!l.interleaved && p.run < rot_runs) xb = *reinterpret_cast<const XPack *>(ring + slot(stage, 1));
        rotate_and_store<T, C>(l, p, rot_runs, xa, xb);
        stage = stage + 1 == kStages ? 0 : stage + 1;
    }
}

// The general path: one pair (or one tail element) a thread, every operand at its own strides.
template <typename T, typename C> __global__ void rope_pairs(const lab_rope_launch l, const Items items) {
    using F = compute_t<T>;
    const int64_t half = l.rotary_dim / 2;
    for (int64_t item = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; item < items.total;
         item += int64_t(gridDim.x) * blockDim.x) {
        const int t = item >= items.first_of_second;
        const lab_rope_tensor &tensor = l.tensors[t];
        const int64_t local = t ? item - items.first_of_second : item;
        const int64_t pair = local % items.per_row[t];
        const RowBases r = row_bases(l, tensor, local / items.per_row[t]);
        const int64_t *cols = tensor.col_strides;
        if (pair >= half) { // the unrotated tail, copied
            const int64_t e = l.rotary_dim + pair - half;
            *reinterpret_cast<T *>(r.out + e * cols[LAB_ROPE_OUT]) =
                *reinterpret_cast<const T *>(r.x + e * cols[LAB_ROPE_X]);
            continue;
        }
        const int64_t a = l.interleaved ? 2 * pair : pair, b = l.interleaved ? a + 1 : pair + half;
        const int64_t col_a = l.pair_table ? pair : a, col_b = l.pair_table ? pair : b;
        auto x_at = [&](int64_t e) {
            return load_as_compute(*reinterpret_cast<const T *>(r.x + e * cols[LAB_ROPE_X]));
        };
        auto table_at = [&](const char *table, int k, int64_t col) {
            return F(load_as_compute(*reinterpret_cast<const C *>(table + col * cols[k])));
        };
        F out_a, out_b;
        rotate<F>(x_at(a), x_at(b), table_at(r.cos, LAB_ROPE_COS, col_a),
                  table_at(r.sin, LAB_ROPE_SIN, col_a), table_at(r.cos, LAB_ROPE_COS, col_b),
                  table_at(r.sin, LAB_ROPE_SIN, col_b), l.backward, out_a, out_b);
        *reinterpret_cast<T *>(r.out + a * cols[LAB_ROPE_OUT]) = store_from_compute<T>(out_a);
        *reinterpret_cast<T *>(r.out + b * cols[LAB_ROPE_OUT]) = store_from_compute<T>(out_b);
    }
}

bool aligned(const void *p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Whether operand k of every tensor is contiguous along the head dimension (elements of `size`
// bytes) and every row of it starts on a multiple of `align` bytes from an aligned base.
bool packets_fit(const lab_rope_launch &l, int k, const void *base, int64_t size, int64_t align) {
    if (!aligned(base, align)) return false;
    for (int t = 0; t < l.n_tensors; t++) {
        const lab_rope_tensor &tensor = l.tensors[t];
        if (tensor.col_strides[k] != size) return false;
        for (int d = 0; d < 3; d++) {
            if (tensor.shape[d] > 1 && tensor.strides[k][d] % align != 0) return false;
        }
    }
    return true;
}

template <typename T, typename C> bool packet_path_fits(const lab_rope_launch &l) {
    constexpr int V = Packed16<T>::kCount;
    const int64_t half = l.rotary_dim / 2, tail = l.head_dim - l.rotary_dim;
    if ((l.interleaved ? l.rotary_dim : half) % V != 0 || tail % V != 0) return false;
    // a table load is V columns, or V / 2 when interleaved pairs share one
    const int64_t table_columns = l.interleaved && l.pair_table ? V / 2 : V;
    const int64_t table_align = table_columns * int64_t(sizeof(C));
    for (int t = 0; t < l.n_tensors; t++) {
        if (!packets_fit(l, LAB_ROPE_X, l.tensors[t].x, sizeof(T), 16) ||
            !packets_fit(l, LAB_ROPE_OUT, l.tensors[t].out, sizeof(T), 16)) {
            return false;
        }
    }
    return packets_fit(l, LAB_ROPE_COS, l.cos, sizeof(C), table_align) &&
           packets_fit(l, LAB_ROPE_SIN, l.sin, sizeof(C), table_align);
}

// Blocks for `items` threads' worth of work, at most 2^20 (the kernels stride over the rest).
unsigned grid_for(int64_t items) {
    const int64_t blocks = (items + kThreads - 1) / kThreads;
    return unsigned(blocks < (int64_t(1) << 20) ? blocks : (int64_t(1) << 20));
}

// The packet path's grid is one wave of resident blocks (fewer for small inputs).
template <typename T, typename C>
cudaError_t launch_packets(const lab_rope_launch &l, const Items &items, int64_t rot_runs,
                           cudaStream_t stream) {
    const auto kernel = rope_packets<T, C>;
    const size_t ring_bytes = size_t(kStages) * 2 * kThreads * 16;
    static std::atomic<int> resident_per_multiprocessor{0};
    int64_t wave = 0;
    const cudaError_t err = resident_blocks(kernel, kThreads, ring_bytes, resident_per_multiprocessor, &wave);
    if (err != cudaSuccess) return err;
    const unsigned grid = unsigned(std::min<int64_t>(grid_for(items.total), wave));
    kernel<<<grid, kThreads, ring_bytes, stream>>>(l, items, rot_runs);
    return cudaGetLastError();
}

// The work items: V-element runs (rot_runs a row, then tail_per_row unless in place) on the packet
// path, single pairs and tail elements on the general path.
Items count_items(const lab_rope_launch &l, int64_t rot_runs, int64_t tail_per_row) {
    Items items = {};
    for (int t = 0; t < l.n_tensors; t++) {
        const lab_rope_tensor &tensor = l.tensors[t];
        items.per_row[t] = rot_runs + (tensor.in_place ? 0 : tail_per_row);
        items.total += tensor.rows * items.per_row[t];
        if (t == 0) items.first_of_second = items.total;
    }
    if (items.total <= INT32_MAX) {
        for (int t = 0; t < l.n_tensors; t++) {
            const lab_rope_tensor &tensor = l.tensors[t];
            items.by_per_row[t] = lab_fast_divmod_for(uint32_t(items.per_row[t] > 0 ? items.per_row[t] : 1));
            items.by_shape2[t] = lab_fast_divmod_for(uint32_t(tensor.shape[2] > 0 ? tensor.shape[2] : 1));
            items.by_shape1[t] = lab_fast_divmod_for(uint32_t(tensor.shape[1] > 0 ? tensor.shape[1] : 1));
        }
    }
    return items;
}

template <typename T, typename C> cudaError_t launch_typed(const lab_rope_launch &l, cudaStream_t stream) {
    constexpr int V = Packed16<T>::kCount;
    const int64_t half = l.rotary_dim / 2, tail = l.head_dim - l.rotary_dim;
    if (packet_path_fits<T, C>(l)) {
        const int64_t rot_runs = (l.interleaved ? l.rotary_dim : half) / V;
        const Items items = count_items(l, rot_runs, tail / V);
        if (items.total == 0) return cudaSuccess;
        if (items.total <= INT32_MAX) return launch_packets<T, C>(l, items, rot_runs, stream);
    }
    const Items items = count_items(l, half, tail);
    if (items.total == 0) return cudaSuccess;
    rope_pairs<T, C><<<grid_for(items.total), kThreads, 0, stream>>>(l, items);
    return cudaGetLastError();
}

} // namespace
} // namespace lab

extern "C" cudaError_t lab_launch_rope(const lab_rope_launch *launch, cudaStream_t stream) {
    return lab::visit_storage_type<false>(launch->dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        return launch->table_dtype == launch->dtype ? lab::launch_typed<T, T>(*launch, stream)
                                                    : lab::launch_typed<T, float>(*launch, stream);
    });
}
