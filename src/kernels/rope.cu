// rope.cu - the rotary position embedding (lab_launch_rope, kernels/launch.h): q and k in one launch.
// Each thread takes one run of pairs of one row and writes both elements of every pair it reads, so
// an output may be its input's very view. Where every operand allows it a run is a 16-byte packet of
// x (and the table columns that go with it); otherwise a thread takes a single pair, at any strides.
#include "dispatch.cuh"
#include "launch.h"

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

__device__ __forceinline__ RowBases row_bases(const lab_rope_launch &l, const lab_rope_tensor &t,
                                              int64_t row) {
    const int64_t i2 = row % t.shape[2], rest = row / t.shape[2];
    const int64_t i1 = rest % t.shape[1], i0 = rest / t.shape[1];
    int64_t offset[4];
    for (int k = 0; k < 4; k++)
        offset[k] = i0 * t.strides[k][0] + i1 * t.strides[k][1] + i2 * t.strides[k][2];
    return {t.x + offset[LAB_ROPE_X], t.out + offset[LAB_ROPE_OUT], l.cos + offset[LAB_ROPE_COS],
            l.sin + offset[LAB_ROPE_SIN]};
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

// Work items: tensor 0's rows * per_row[0], then tensor 1's.
struct Items {
    int64_t per_row[2];
    int64_t first_of_second; // tensor 0's item count
    int64_t total;
};

// The packet path: every operand's head dimension contiguous, every row start and table column
// aligned to its packet. A row is rot_runs runs of V pairs, then the tail's V-element packets.
template <typename T, typename C>
__global__ void rope_packets(const lab_rope_launch l, const Items items, const int64_t rot_runs) {
    using F = compute_t<T>;
    constexpr int V = Packed16<T>::kCount;
    const int64_t half = l.rotary_dim / 2;
    for (int64_t item = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; item < items.total;
         item += int64_t(gridDim.x) * blockDim.x) {
        const int t = item >= items.first_of_second;
        const int64_t local = t ? item - items.first_of_second : item;
        const int64_t run = local % items.per_row[t];
        const RowBases r = row_bases(l, l.tensors[t], local / items.per_row[t]);
        if (run >= rot_runs) { // the unrotated tail, copied
            const int64_t e = l.rotary_dim + (run - rot_runs) * V;
            *reinterpret_cast<Pack<T, V> *>(r.out + e * sizeof(T)) =
                *reinterpret_cast<const Pack<T, V> *>(r.x + e * sizeof(T));
            continue;
        }
        if (!l.interleaved) { // pairs (j, j + half) for j in [run * V, run * V + V)
            const int64_t j = run * V;
            const Pack<T, V> xa = *reinterpret_cast<const Pack<T, V> *>(r.x + j * sizeof(T));
            const Pack<T, V> xb = *reinterpret_cast<const Pack<T, V> *>(r.x + (j + half) * sizeof(T));
            const int64_t col_b = l.pair_table ? j : j + half;
            const Pack<C, V> ca = *reinterpret_cast<const Pack<C, V> *>(r.cos + j * sizeof(C));
            const Pack<C, V> sa = *reinterpret_cast<const Pack<C, V> *>(r.sin + j * sizeof(C));
            const Pack<C, V> cb = *reinterpret_cast<const Pack<C, V> *>(r.cos + col_b * sizeof(C));
            const Pack<C, V> sb = *reinterpret_cast<const Pack<C, V> *>(r.sin + col_b * sizeof(C));
            Pack<T, V> oa, ob;
#pragma unroll
            for (int v = 0; v < V; v++) {
                F out_a, out_b;
                rotate<F>(load_as_compute(xa.v[v]), load_as_compute(xb.v[v]), F(load_as_compute(ca.v[v])),
                          F(load_as_compute(sa.v[v])), F(load_as_compute(cb.v[v])),
                          F(load_as_compute(sb.v[v])), l.backward, out_a, out_b);
                oa.v[v] = store_from_compute<T>(out_a);
                ob.v[v] = store_from_compute<T>(out_b);
            }
            *reinterpret_cast<Pack<T, V> *>(r.out + j * sizeof(T)) = oa;
            *reinterpret_cast<Pack<T, V> *>(r.out + (j + half) * sizeof(T)) = ob;
        } else { // pairs (2i, 2i + 1) inside one packet of V elements
            const int64_t e = run * V;
            const Pack<T, V> x = *reinterpret_cast<const Pack<T, V> *>(r.x + e * sizeof(T));
            Pack<T, V> o;
            C cs[V], sn[V];
            if (l.pair_table) {
                const Pack<C, V / 2> c = *reinterpret_cast<const Pack<C, V / 2> *>(r.cos + e / 2 * sizeof(C));
                const Pack<C, V / 2> s = *reinterpret_cast<const Pack<C, V / 2> *>(r.sin + e / 2 * sizeof(C));
#pragma unroll
                for (int v = 0; v < V; v++) cs[v] = c.v[v / 2], sn[v] = s.v[v / 2];
            } else {
                const Pack<C, V> c = *reinterpret_cast<const Pack<C, V> *>(r.cos + e * sizeof(C));
                const Pack<C, V> s = *reinterpret_cast<const Pack<C, V> *>(r.sin + e * sizeof(C));
#pragma unroll
                for (int v = 0; v < V; v++) cs[v] = c.v[v], sn[v] = s.v[v];
            }
#pragma unroll
            for (int v = 0; v < V; v += 2) {
                F out_a, out_b;
                rotate<F>(load_as_compute(x.v[v]), load_as_compute(x.v[v + 1]), F(load_as_compute(cs[v])),
                          F(load_as_compute(sn[v])), F(load_as_compute(cs[v + 1])),
                          F(load_as_compute(sn[v + 1])), l.backward, out_a, out_b);
                o.v[v] = store_from_compute<T>(out_a);
                o.v[v + 1] = store_from_compute<T>(out_b);
            }
            *reinterpret_cast<Pack<T, V> *>(r.out + e * sizeof(T)) = o;
        }
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

template <typename T, typename C> cudaError_t launch_typed(const lab_rope_launch &l, cudaStream_t stream) {
    constexpr int V = Packed16<T>::kCount;
    const bool packets = packet_path_fits<T, C>(l);
    const int64_t half = l.rotary_dim / 2, tail = l.head_dim - l.rotary_dim;
    const int64_t rot_runs = packets ? (l.interleaved ? l.rotary_dim : half) / V : half;
    Items items = {{0, 0}, 0, 0};
    for (int t = 0; t < l.n_tensors; t++) {
        const int64_t tail_items = l.tensors[t].in_place ? 0 : packets ? tail / V : tail;
        items.per_row[t] = rot_runs + tail_items;
        items.total += l.tensors[t].rows * items.per_row[t];
        if (t == 0) items.first_of_second = items.total;
    }
    if (items.total == 0) return cudaSuccess;
    constexpr int kThreads = 256;
    const int64_t blocks = (items.total + kThreads - 1) / kThreads;
    const unsigned grid = unsigned(blocks < (int64_t(1) << 20) ? blocks : (int64_t(1) << 20));
    if (packets) {
        rope_packets<T, C><<<grid, kThreads, 0, stream>>>(l, items, rot_runs);
    } else {
        rope_pairs<T, C><<<grid, kThreads, 0, stream>>>(l, items);
    }
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
