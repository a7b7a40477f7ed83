// rope.cu - the rotary position embedding (lab_launch_rope, kernels/launch.h): q and k in one launch.
// Each thread writes both elements of every pair it reads, so an output may be its input's very
// view. Where every operand allows it a thread takes the same 16-byte packets of x (and the table
// columns that go with them) in several neighbouring rows; otherwise a single pair, at any strides.
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

// Row r's bases from row 0's: k rows further along the innermost planned dimension.
__device__ __forceinline__ RowBases next_rows(const RowBases &r, const lab_rope_tensor &t, int k) {
    return {r.x + k * t.strides[LAB_ROPE_X][2], r.out + k * t.strides[LAB_ROPE_OUT][2],
            r.cos + k * t.strides[LAB_ROPE_COS][2], r.sin + k * t.strides[LAB_ROPE_SIN][2]};
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

// Work items: tensor 0's, then tensor 1's; per_row of them for each group of neighbouring rows along
// the innermost planned dimension (a group is one row on the general path).
struct Items {
    int64_t per_row[2];
    int64_t groups[2];       // the packet path's groups along the innermost dimension
    int64_t first_of_second; // tensor 0's item count
    int64_t total;
};

// A packet-path item rotates one run of the same columns in K rows: their loads are all in flight
// before the first rotation (one row a thread reached 48% of DRAM bandwidth, Nsight Compute counting
// 44% of warps active: too few bytes in flight). For a transposed (B, S, H, D) projection the rows
// are heads, which share their table columns: those are read once (kSharedTable), and four rows fit
// in the registers; rows with their own columns (positions, for a contiguous (B, H, S, D) q) hold
// twice the registers a row, so they go two at a time.
constexpr int kRowsPerItem = 4, kRowsPerItemOwnTables = 2;

constexpr int kThreads = 256;

// The packet path: every operand's head dimension contiguous, every row start and table column
// aligned to its packet. A row is rot_runs runs of V pairs, then the tail's V-element packets.
// Items are counted in 32 bits (a 64-bit division is a long software routine): the launch takes
// the general path beyond that. At least two blocks a multiprocessor: unbounded, ptxas gave the
// four-row kernel 161 registers, one block of 256 threads a multiprocessor, and Nsight Compute
// measured 49-52% of DRAM bandwidth - no more bytes in flight than one row a thread at 54 registers
// and four blocks; bounded, 128 registers and 58 bytes of spills.
template <typename T, typename C, int K, bool kSharedTable>
__global__ void __launch_bounds__(kThreads, 2)
    rope_packets(const lab_rope_launch l, const Items items, const int64_t rot_runs) {
    using F = compute_t<T>;
    constexpr int V = Packed16<T>::kCount;
    using XPack = Pack<T, V>;
    using CPack = Pack<C, V>;
    using Index = uint32_t;
    const int64_t half = l.rotary_dim / 2;
    const Index total = Index(items.total), first_of_second = Index(items.first_of_second);
    for (Index item = blockIdx.x * Index(blockDim.x) + threadIdx.x; item < total;
         item += Index(gridDim.x) * Index(blockDim.x)) {
        const int t = item >= first_of_second;
        const lab_rope_tensor &tensor = l.tensors[t];
        const Index local = t ? item - first_of_second : item;
        // selected, not indexed by t: an indexed kernel parameter is copied to local memory first
        const Index per_row = Index(t ? items.per_row[1] : items.per_row[0]);
        const Index groups = Index(t ? items.groups[1] : items.groups[0]);
        const Index run = local % per_row, group = local / per_row;
        const Index plane = group / groups, shape1 = Index(tensor.shape[1]);
        const int64_t first_row = int64_t(group % groups) * K;
        const RowBases r = row_bases(l, tensor, plane / shape1, plane % shape1, first_row);
        const int rows = tensor.shape[2] - first_row < K ? int(tensor.shape[2] - first_row) : K;
        if (run >= rot_runs) { // the unrotated tail, copied
            const int64_t e = (l.rotary_dim + (run - rot_runs) * V) * sizeof(T);
#pragma unroll
            for (int k = 0; k < K; k++) {
                if (k < rows) {
                    const RowBases rk = next_rows(r, tensor, k);
                    *reinterpret_cast<XPack *>(rk.out + e) = *reinterpret_cast<const XPack *>(rk.x + e);
                }
            }
            continue;
        }
        if (!l.interleaved) { // pairs (j, j + half) for j in [run * V, run * V + V)
            const int64_t j = run * V, col_b = l.pair_table ? j : j + half;
            XPack xa[K], xb[K];
#pragma unroll
            for (int k = 0; k < K; k++) {
                if (k < rows) {
                    const char *x = next_rows(r, tensor, k).x;
                    xa[k] = *reinterpret_cast<const XPack *>(x + j * sizeof(T));
                    xb[k] = *reinterpret_cast<const XPack *>(x + (j + half) * sizeof(T));
                }
            }
            CPack ca, sa, cb, sb; // cos and sin at the columns of a and of b
            auto columns = [&](const RowBases &at) {
                ca = *reinterpret_cast<const CPack *>(at.cos + j * sizeof(C));
                sa = *reinterpret_cast<const CPack *>(at.sin + j * sizeof(C));
                cb = *reinterpret_cast<const CPack *>(at.cos + col_b * sizeof(C));
                sb = *reinterpret_cast<const CPack *>(at.sin + col_b * sizeof(C));
            };
            if (kSharedTable) columns(r);
#pragma unroll
            for (int k = 0; k < K; k++) {
                if (k >= rows) break;
                const RowBases rk = next_rows(r, tensor, k);
                if (!kSharedTable) columns(rk);
                XPack oa, ob;
#pragma unroll
                for (int v = 0; v < V; v++) {
                    F out_a, out_b;
                    rotate<F>(load_as_compute(xa[k].v[v]), load_as_compute(xb[k].v[v]),
                              F(load_as_compute(ca.v[v])), F(load_as_compute(sa.v[v])),
                              F(load_as_compute(cb.v[v])), F(load_as_compute(sb.v[v])), l.backward, out_a,
                              out_b);
                    oa.v[v] = store_from_compute<T>(out_a);
                    ob.v[v] = store_from_compute<T>(out_b);
                }
                *reinterpret_cast<XPack *>(rk.out + j * sizeof(T)) = oa;
                *reinterpret_cast<XPack *>(rk.out + (j + half) * sizeof(T)) = ob;
            }
        } else { // pairs (2i, 2i + 1) inside one packet of V elements
            const int64_t e = run * V;
            XPack x[K];
#pragma unroll
            for (int k = 0; k < K; k++) {
                if (k < rows) {
                    x[k] = *reinterpret_cast<const XPack *>(next_rows(r, tensor, k).x + e * sizeof(T));
                }
            }
            C cs[V], sn[V]; // the table's value at each element's column
            auto columns = [&](const char *cos, const char *sin) {
                if (l.pair_table) {
                    const Pack<C, V / 2> c =
                        *reinterpret_cast<const Pack<C, V / 2> *>(cos + e / 2 * sizeof(C));
                    const Pack<C, V / 2> s =
                        *reinterpret_cast<const Pack<C, V / 2> *>(sin + e / 2 * sizeof(C));
#pragma unroll
                    for (int v = 0; v < V; v++) cs[v] = c.v[v / 2], sn[v] = s.v[v / 2];
                } else {
                    const CPack c = *reinterpret_cast<const CPack *>(cos + e * sizeof(C));
                    const CPack s = *reinterpret_cast<const CPack *>(sin + e * sizeof(C));
#pragma unroll
                    for (int v = 0; v < V; v++) cs[v] = c.v[v], sn[v] = s.v[v];
                }
            };
            if (kSharedTable) columns(r.cos, r.sin);
#pragma unroll
            for (int k = 0; k < K; k++) {
                if (k >= rows) break;
                const RowBases rk = next_rows(r, tensor, k);
                if (!kSharedTable) columns(rk.cos, rk.sin);
                XPack o;
#pragma unroll
                for (int v = 0; v < V; v += 2) {
                    F out_a, out_b;
                    rotate<F>(load_as_compute(x[k].v[v]), load_as_compute(x[k].v[v + 1]),
                              F(load_as_compute(cs[v])), F(load_as_compute(sn[v])),
                              F(load_as_compute(cs[v + 1])), F(load_as_compute(sn[v + 1])), l.backward, out_a,
                              out_b);
                    o.v[v] = store_from_compute<T>(out_a);
                    o.v[v + 1] = store_from_compute<T>(out_b);
                }
                *reinterpret_cast<XPack *>(rk.out + e * sizeof(T)) = o;
            }
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

// Whether neighbouring rows along the innermost planned dimension read the same table columns.
bool tables_shared_by_neighbours(const lab_rope_launch &l) {
    for (int t = 0; t < l.n_tensors; t++) {
        const lab_rope_tensor &tensor = l.tensors[t];
        if (tensor.shape[2] > 1 &&
            (tensor.strides[LAB_ROPE_COS][2] != 0 || tensor.strides[LAB_ROPE_SIN][2] != 0)) {
            return false;
        }
    }
    return true;
}

// Blocks for `items` threads' worth of work, at most 2^20 (the kernels stride over the rest).
unsigned grid_for(int64_t items) {
    const int64_t blocks = (items + kThreads - 1) / kThreads;
    return unsigned(blocks < (int64_t(1) << 20) ? blocks : (int64_t(1) << 20));
}

template <typename T, typename C, int K, bool kSharedTable>
cudaError_t launch_packets(const lab_rope_launch &l, const Items &items, int64_t rot_runs,
                           cudaStream_t stream) {
    const unsigned grid = grid_for(items.total);
    rope_packets<T, C, K, kSharedTable><<<grid, kThreads, 0, stream>>>(l, items, rot_runs);
    return cudaGetLastError();
}

// The work items of the packet path (V-element runs, rows_per_item rows an item) or of the general
// path (single pairs, one row an item).
Items count_items(const lab_rope_launch &l, int64_t rot_runs, int64_t tail_per_item, int rows_per_item) {
    Items items = {{0, 0}, {0, 0}, 0, 0};
    for (int t = 0; t < l.n_tensors; t++) {
        const lab_rope_tensor &tensor = l.tensors[t];
        items.per_row[t] = rot_runs + (tensor.in_place ? 0 : tail_per_item);
        items.groups[t] = (tensor.shape[2] + rows_per_item - 1) / rows_per_item;
        items.total += tensor.shape[0] * tensor.shape[1] * items.groups[t] * items.per_row[t];
        if (t == 0) items.first_of_second = items.total;
    }
    return items;
}

template <typename T, typename C> cudaError_t launch_typed(const lab_rope_launch &l, cudaStream_t stream) {
    constexpr int V = Packed16<T>::kCount;
    const int64_t half = l.rotary_dim / 2, tail = l.head_dim - l.rotary_dim;
    if (packet_path_fits<T, C>(l)) {
        const bool shared_table = tables_shared_by_neighbours(l);
        const int64_t rot_runs = (l.interleaved ? l.rotary_dim : half) / V;
        const Items items =
            count_items(l, rot_runs, tail / V, shared_table ? kRowsPerItem : kRowsPerItemOwnTables);
        if (items.total == 0) return cudaSuccess;
        if (items.total <= INT32_MAX) {
            return shared_table
                       ? launch_packets<T, C, kRowsPerItem, true>(l, items, rot_runs, stream)
                       : launch_packets<T, C, kRowsPerItemOwnTables, false>(l, items, rot_runs, stream);
        }
    }
    const Items items = count_items(l, half, tail, 1);
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
