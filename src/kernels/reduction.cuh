// reduction.cuh - sum, mean, prod, amax, amin, argmax, argmin over any set of dimensions of any
// layout: the reducers and kernels behind dispatch/reduction_kind.c. reduction_values.cu and
// reduction_indices.cu instantiate them (two files, so nvcc compiles them in parallel), and the
// latter holds the extern "C" launcher.
//
// A reducer says what one reduction is: the accumulator type (float for half types and float32,
// double for float64, int64 for integer sums and products), its identity, how an element enters it
// (`lift`, which also sees the element's position for argmax), how two accumulators combine, and
// how the result is stored (cast to the output's dtype, or the index). The strategies differ only
// in which threads share an output; every one combines in a fixed order, so a result is bitwise
// the same on every run.
#pragma once

#include <cuda/std/limits>
#include <type_traits>

#include "casting.cuh"
#include "dispatch.cuh"
#include "indexing.cuh"
#include "reduce.cuh"

namespace lab {

// A value and where it was found, for argmax / argmin.
template <typename C> struct ValueIndex {
    C value;
    int64_t index;
};
template <typename C> __device__ __forceinline__ ValueIndex<C> shuffle_xor(ValueIndex<C> v, int lane_mask) {
    return {shuffle_xor(v.value, lane_mask), shuffle_xor(v.index, lane_mask)};
}

namespace {

constexpr int kReduceThreads = 256;
constexpr int kLanesInFlight = 4; // elements each thread loads before combining them

template <typename T> using sum_t = std::conditional_t<std::is_integral_v<T>, int64_t, compute_t<T>>;

// The identities of max and min: infinities for floats (so a row of -inf still has a max), the
// type's limits for integers.
template <typename C> __device__ __forceinline__ C lowest() {
    return std::is_floating_point_v<C> ? -cuda::std::numeric_limits<C>::infinity()
                                       : cuda::std::numeric_limits<C>::lowest();
}
template <typename C> __device__ __forceinline__ C highest() {
    return std::is_floating_point_v<C> ? cuda::std::numeric_limits<C>::infinity()
                                       : cuda::std::numeric_limits<C>::max();
}

template <typename T> struct SumReducer {
    using In = T;
    using Acc = sum_t<T>;
    static __device__ Acc identity() { return Acc(0); }
    static __device__ Acc lift(T v, int64_t) { return static_cast<Acc>(load_as_compute(v)); }
    static __device__ Acc combine(Acc a, Acc b) { return wrapping_add(a, b); }
    static __device__ void finish(char *out, lab_dtype dtype, Acc a, int64_t) {
        store_converted<Acc>(out, dtype, a);
    }
};
template <typename T> struct MeanReducer : SumReducer<T> {
    using Acc = sum_t<T>;
    static __device__ void finish(char *out, lab_dtype dtype, Acc a, int64_t n) {
        store_converted<Acc>(out, dtype, a / static_cast<Acc>(n)); // n = 0: 0 / 0, NaN (as torch)
    }
};
template <typename T> struct ProdReducer : SumReducer<T> {
    using Acc = sum_t<T>;
    static __device__ Acc identity() { return Acc(1); }
    static __device__ Acc combine(Acc a, Acc b) { return wrapping_mul(a, b); }
};
// amax / amin propagate NaN (as torch and NumPy).
template <typename T, bool kMax> struct ExtremeReducer {
    using In = T;
    using Acc = compute_t<T>;
    static __device__ Acc identity() { return kMax ? lowest<Acc>() : highest<Acc>(); }
    static __device__ Acc lift(T v, int64_t) { return load_as_compute(v); }
    static __device__ Acc combine(Acc a, Acc b) {
        if (is_nan(a) || is_nan(b)) return is_nan(a) ? a : b;
        return (kMax ? a > b : a < b) ? a : b;
    }
    static __device__ void finish(char *out, lab_dtype dtype, Acc a, int64_t) {
        store_converted<Acc>(out, dtype, a);
    }
};
template <typename T> using MaxReducer = ExtremeReducer<T, true>;
template <typename T> using MinReducer = ExtremeReducer<T, false>;

// argmax / argmin: NaN wins, and on ties the first index, whatever order the tree combines in.
template <typename T, bool kMax> struct ArgExtremeReducer {
    using In = T;
    using C = compute_t<T>;
    using Acc = ValueIndex<C>;
    static __device__ Acc identity() { return {kMax ? lowest<C>() : highest<C>(), INT64_MAX}; }
    static __device__ Acc lift(T v, int64_t index) { return {load_as_compute(v), index}; }
    static __device__ Acc combine(Acc a, Acc b) {
        const bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
        if (a_nan != b_nan) return a_nan ? a : b;
        if (!a_nan && a.value != b.value) return (kMax ? a.value > b.value : a.value < b.value) ? a : b;
        return a.index <= b.index ? a : b;
    }
    static __device__ void finish(char *out, lab_dtype dtype, Acc a, int64_t) {
        if (dtype == LAB_INT32) {
            *reinterpret_cast<int32_t *>(out) = static_cast<int32_t>(a.index);
        } else {
            *reinterpret_cast<int64_t *>(out) = a.index;
        }
    }
};
template <typename T> using ArgMaxReducer = ArgExtremeReducer<T, true>;
template <typename T> using ArgMinReducer = ArgExtremeReducer<T, false>;

template <typename R> struct CombineOf {
    template <typename A> __device__ __forceinline__ A operator()(A a, A b) const { return R::combine(a, b); }
};

// Where the elements of one output's reduction are: a single reduced dimension is a stride (the
// common case, no division); several go through indexing.cuh's divisions.
struct ReducedSpace {
    StridedLayout<1> layout;
    bool single;
    int64_t stride;
    __device__ __forceinline__ int64_t offset(int64_t r) const {
        if (single) return r * stride;
        int64_t o[1];
        byte_offsets(layout, r, o);
        return o[0];
    }
};

// Elements [first, end) of one output, `step` apart, combined into acc: kLanesInFlight loads issued
// before they are combined, into separate accumulators joined in a fixed order.
template <typename R>
__device__ __forceinline__ typename R::Acc accumulate(const char *row, const ReducedSpace &space,
                                                      int64_t first, int64_t end, int64_t step) {
    using T = typename R::In;
    typename R::Acc acc[kLanesInFlight];
#pragma unroll
    for (int u = 0; u < kLanesInFlight; ++u) acc[u] = R::identity();
    int64_t r = first;
    for (; r + (kLanesInFlight - 1) * step < end; r += kLanesInFlight * step) {
        T v[kLanesInFlight];
#pragma unroll
        for (int u = 0; u < kLanesInFlight; ++u)
            v[u] = *reinterpret_cast<const T *>(row + space.offset(r + u * step));
#pragma unroll
        for (int u = 0; u < kLanesInFlight; ++u) acc[u] = R::combine(acc[u], R::lift(v[u], r + u * step));
    }
    for (; r < end; r += step)
        acc[0] = R::combine(acc[0], R::lift(*reinterpret_cast<const T *>(row + space.offset(r)), r));
#pragma unroll
    for (int u = 1; u < kLanesInFlight; ++u) acc[0] = R::combine(acc[0], acc[u]);
    return acc[0];
}

struct ReductionArgs {
    const char *in;
    char *out;
    lab_dtype out_dtype;
    StridedLayout<2> kept; // operand 0: the input, 1: the output
    ReducedSpace reduced;
    int64_t n_outputs, n_reduce;
    int slices;
};

// kGroup threads per output: a warp (32) or the whole block.
template <typename R, int kGroup>
__global__ void __launch_bounds__(kReduceThreads) reduce_by_group(ReductionArgs a) {
    constexpr int kGroupsPerBlock = kReduceThreads / kGroup;
    const int lane = threadIdx.x % kGroup, group = threadIdx.x / kGroup;
    for (int64_t o = static_cast<int64_t>(blockIdx.x) * kGroupsPerBlock + group; o < a.n_outputs;
         o += static_cast<int64_t>(gridDim.x) * kGroupsPerBlock) {
        int64_t offsets[2];
        byte_offsets(a.kept, o, offsets);
        typename R::Acc acc = accumulate<R>(a.in + offsets[0], a.reduced, lane, a.n_reduce, kGroup);
        if constexpr (kGroup == 32) {
            acc = warp_reduce(acc, CombineOf<R>{});
        } else {
            acc = block_reduce<kReduceThreads>(acc, CombineOf<R>{}, R::identity());
        }
        if (lane == 0) R::finish(a.out + offsets[1], a.out_dtype, acc, a.n_reduce);
    }
}

// A thread per output; neighbouring threads take neighbouring outputs, so when the innermost kept
// dimension is the input's contiguous one (a column sum), every load of a warp is one transaction.
template <typename R> __global__ void __launch_bounds__(kReduceThreads) reduce_by_thread(ReductionArgs a) {
    for (int64_t o = static_cast<int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x; o < a.n_outputs;
         o += static_cast<int64_t>(gridDim.x) * kReduceThreads) {
        int64_t offsets[2];
        byte_offsets(a.kept, o, offsets);
        const typename R::Acc acc = accumulate<R>(a.in + offsets[0], a.reduced, 0, a.n_reduce, 1);
        R::finish(a.out + offsets[1], a.out_dtype, acc, a.n_reduce);
    }
}

// Split, pass 1: block b reduces slice b % slices of output b / slices into partials[b].
template <typename R>
__global__ void __launch_bounds__(kReduceThreads) reduce_slices(ReductionArgs a, typename R::Acc *partials) {
    const int64_t o = blockIdx.x / a.slices, s = blockIdx.x % a.slices;
    const int64_t per_slice = (a.n_reduce + a.slices - 1) / a.slices;
    const int64_t first = s * per_slice,
                  end = first + per_slice < a.n_reduce ? first + per_slice : a.n_reduce;
    int64_t offsets[2];
    byte_offsets(a.kept, o, offsets);
    typename R::Acc acc = R::identity();
    if (first + threadIdx.x < end) {
        acc = accumulate<R>(a.in + offsets[0], a.reduced, first + threadIdx.x, end, kReduceThreads);
    }
    acc = block_reduce<kReduceThreads>(acc, CombineOf<R>{}, R::identity());
    if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// Split, pass 2: each output's partials, combined in slice order.
template <typename R>
__global__ void __launch_bounds__(kReduceThreads)
    combine_slices(ReductionArgs a, const typename R::Acc *partials) {
    for (int64_t o = static_cast<int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x; o < a.n_outputs;
         o += static_cast<int64_t>(gridDim.x) * kReduceThreads) {
        typename R::Acc acc = R::identity();
        for (int s = 0; s < a.slices; ++s) acc = R::combine(acc, partials[o * a.slices + s]);
        int64_t offsets[2];
        byte_offsets(a.kept, o, offsets);
        R::finish(a.out + offsets[1], a.out_dtype, acc, a.n_reduce);
    }
}

unsigned int grid_for(int64_t items, int64_t per_block) {
    const int64_t blocks = (items + per_block - 1) / per_block;
    return static_cast<unsigned int>(blocks<1 ? 1 : blocks>(1 << 20) ? (1 << 20) : blocks);
}

ReductionArgs make_args(const lab_reduction_launch &l) {
    ReductionArgs a{};
    a.in = l.in;
    a.out = l.out;
    a.out_dtype = l.out_dtype;
    a.n_outputs = l.n_outputs;
    a.n_reduce = l.n_reduce;
    a.slices = l.slices;
    a.kept.ndim = l.kept_ndim;
    a.kept.index32 = l.n_outputs < (int64_t(1) << 31);
    for (int d = 0; d < l.kept_ndim; ++d) { // innermost first for indexing.cuh
        const int from = l.kept_ndim - 1 - d;
        a.kept.sizes[d] = l.kept_shape[from];
        if (a.kept.index32) a.kept.divisors[d] = FastDivmod(static_cast<uint32_t>(l.kept_shape[from]));
        a.kept.strides[0][d] = l.kept_in_strides[from];
        a.kept.strides[1][d] = l.kept_out_strides[from];
    }
    StridedLayout<1> &r = a.reduced.layout;
    r.ndim = l.reduced_ndim;
    r.index32 = l.n_reduce < (int64_t(1) << 31);
    for (int d = 0; d < l.reduced_ndim; ++d) {
        const int from = l.reduced_ndim - 1 - d;
        r.sizes[d] = l.reduced_shape[from];
        if (r.index32) r.divisors[d] = FastDivmod(static_cast<uint32_t>(l.reduced_shape[from]));
        r.strides[0][d] = l.reduced_in_strides[from];
    }
    a.reduced.single = l.reduced_ndim <= 1;
    a.reduced.stride = l.reduced_ndim == 1 ? l.reduced_in_strides[0] : 0;
    return a;
}

template <typename R> cudaError_t launch_reducer(const lab_reduction_launch &l, cudaStream_t stream) {
    const ReductionArgs a = make_args(l);
    switch (l.strategy) {
    case LAB_REDUCE_BY_WARP:
        reduce_by_group<R, 32><<<grid_for(l.n_outputs, kReduceThreads / 32), kReduceThreads, 0, stream>>>(a);
        return cudaGetLastError();
    case LAB_REDUCE_BY_BLOCK:
        reduce_by_group<R, kReduceThreads><<<grid_for(l.n_outputs, 1), kReduceThreads, 0, stream>>>(a);
        return cudaGetLastError();
    case LAB_REDUCE_BY_THREAD:
        reduce_by_thread<R><<<grid_for(l.n_outputs, kReduceThreads), kReduceThreads, 0, stream>>>(a);
        return cudaGetLastError();
    case LAB_REDUCE_SPLIT: {
        using Acc = typename R::Acc;
        Acc *partials = nullptr;
        const int64_t blocks = l.n_outputs * l.slices;
        cudaError_t err = cudaMallocAsync(reinterpret_cast<void **>(&partials), sizeof(Acc) * blocks, stream);
        if (err != cudaSuccess) return err;
        reduce_slices<R><<<static_cast<unsigned int>(blocks), kReduceThreads, 0, stream>>>(a, partials);
        err = cudaGetLastError();
        if (err == cudaSuccess) {
            combine_slices<R>
                <<<grid_for(l.n_outputs, kReduceThreads), kReduceThreads, 0, stream>>>(a, partials);
            err = cudaGetLastError();
        }
        const cudaError_t freed = cudaFreeAsync(partials, stream);
        return err != cudaSuccess ? err : freed;
    }
    }
    return cudaErrorInvalidValue;
}

} // namespace

// The switch of each half (one per .cu file) over reduce_ops.def: the file defines
// LAB_REDUCE_ROW_0 / LAB_REDUCE_ROW_1 (value / index reductions) as LAB_REDUCE_CASE or as nothing,
// so token pasting on the `index_output` column keeps its half's rows.
#define LAB_REDUCE_CASE(id, reducer, integers)                                                               \
    case LAB_REDUCE_##id:                                                                                    \
        return visit_storage_type<bool(integers)>(launch.in_dtype, [&](auto tag) {                           \
            return launch_reducer<reducer<typename decltype(tag)::type>>(launch, stream);                    \
        });
#define LAB_REDUCE_OP(id, reducer, integers, index_output)                                                   \
    LAB_REDUCE_ROW_##index_output(id, reducer, integers)

// The launchers of the two halves (one per .cu file).
cudaError_t launch_value_reduction(const lab_reduction_launch &launch, cudaStream_t stream);
cudaError_t launch_index_reduction(const lab_reduction_launch &launch, cudaStream_t stream);

} // namespace lab
