// reducers.cuh - what each reduction of reduce_ops.def is, apart from how threads share it: the
// accumulator type (float for half types and float32, double for float64, int64 for integer sums
// and products), its identity, how an element enters it (`add`, which also sees the element's
// position for argmax), how two accumulators combine (in any tree: the kernels in reduction.cuh
// fix the order) and how the result is finished and stored. Also the arguments every reduction
// kernel receives.
#pragma once

#include <cuda/std/limits>
#include <stdint.h>
#include <type_traits>

#include "casting.cuh"
#include "indexing.cuh"

namespace lab {

// Where the elements of one output's reduction are, for each input: a single reduced dimension is
// a stride (the common case, no division); several go through indexing.cuh's divisions.
// `contiguous`: one dimension of unit stride in every input, so 16-byte loads can read it.
struct ReducedSpace {
    StridedLayout<2> layout;
    bool single, contiguous;
    int64_t stride[2];
    __device__ __forceinline__ void offsets(int64_t r, int64_t (&o)[2]) const {
        if (single) {
            o[0] = r * stride[0];
            o[1] = r * stride[1];
        } else {
            byte_offsets(layout, r, o);
        }
    }
};

struct ReductionArgs {
    const char *in[2]; // in[1]: the second input of a two-input reduction (dot), else null
    char *out;
    lab_dtype out_dtype;
    lab_reduce_finish finish;
    double correction;
    StridedLayout<3> kept; // operand 0: the input, 1: the output, 2: the second input
    ReducedSpace reduced;
    int64_t n_outputs, n_reduce;
    int slices; // pieces each output's elements are split into (split and column strategies)
};

// A value and where it was found, for argmax / argmin.
template <typename C> struct ValueIndex {
    C value;
    int64_t index;
};
template <typename C> __device__ __forceinline__ ValueIndex<C> shuffle_xor(ValueIndex<C> v, int lane_mask) {
    return {shuffle_xor(v.value, lane_mask), shuffle_xor(v.index, lane_mask)};
}

// Count, shift and the sums of (x - shift) and its square: a variance in one pass. The shift is
// the accumulator's first element, which keeps the sums small where the mean is large against the
// spread (the cancellation that ruins the plain sum-of-squares formula).
template <typename C> struct Moments {
    C n, shift, sum, sum_sq;
};
template <typename C> __device__ __forceinline__ Moments<C> shuffle_xor(Moments<C> v, int lane_mask) {
    return {shuffle_xor(v.n, lane_mask), shuffle_xor(v.shift, lane_mask), shuffle_xor(v.sum, lane_mask),
            shuffle_xor(v.sum_sq, lane_mask)};
}

// The running maximum and the sum of exp(x - maximum): logsumexp without overflow.
template <typename C> struct MaxAndSum {
    C max, sum;
};
template <typename C> __device__ __forceinline__ MaxAndSum<C> shuffle_xor(MaxAndSum<C> v, int lane_mask) {
    return {shuffle_xor(v.max, lane_mask), shuffle_xor(v.sum, lane_mask)};
}

// One position of a two-input reduction.
template <typename T> struct Pair {
    T first, second;
};

namespace {

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

// The finish column of reduce_ops.def, then the store cast to the output's dtype.
template <typename C> __device__ __forceinline__ void store_finished(char *out, const ReductionArgs &a, C v) {
    if (a.finish == LAB_FINISH_DIVIDE) v = v / static_cast<C>(a.n_reduce); // n = 0: NaN (as torch)
    if constexpr (std::is_floating_point_v<C>) {
        if (a.finish == LAB_FINISH_SQRT) v = sqrt(v);
    }
    store_converted<C>(out, a.out_dtype, v);
}

// What an element becomes before it is summed or compared (the norms' |x| and x^2).
struct AsIs {
    template <typename C> __device__ __forceinline__ C operator()(C v) const { return v; }
};
struct Absolute {
    template <typename C> __device__ __forceinline__ C operator()(C v) const { return fabs(v); }
};
struct Squared {
    template <typename C> __device__ __forceinline__ C operator()(C v) const { return v * v; }
};

// The defaults every reducer shares: one input, an element enters as combine(acc, lift(x)), and
// the result is finished (reduce_ops.def's column) and stored in out's dtype. The kernels call
// add(acc, x, index) for the elements of one accumulator in increasing index order; a reducer may
// rely on it (argmax does).
template <typename Derived, typename T, typename AccType> struct Reducer {
    using In = T;      // the input's storage type
    using Element = T; // what one position of the reduced space holds
    using Acc = AccType;
    static constexpr int kInputs = 1;
    // The blocks of 256 threads an SM that the kernels walking contiguous elements are built for
    // (their __launch_bounds__ minimum; 1 leaves ptxas free): the most at which ptxas keeps the
    // reducer's registers without spilling on sm_90, since blocks in flight are bytes in flight. A
    // float accumulator fits 32 registers in reduce_slices (a block, one slice) and 64 in
    // reduce_by_group (whose loop over outputs holds their positions); other accumulators are left free.
    static constexpr int kSliceBlocks = std::is_same_v<AccType, float> ? 8 : 1;
    static constexpr int kRowBlocks = std::is_same_v<AccType, float> ? 4 : 1;
    static __device__ __forceinline__ Acc add(Acc a, Element x, int64_t index) {
        return Derived::combine(a, Derived::lift(x, index));
    }
    // The elements of one 16-byte load (one input), from index `at` on: an add each, unless the
    // reducer has a cheaper way (argmax).
    static __device__ __forceinline__ Acc add_vector(Acc a, const Packet16 &x, int64_t at) {
#pragma unroll
        for (int e = 0; e < int(16 / sizeof(T)); ++e) a = Derived::add(a, packet_element<T>(x, e), at + e);
        return a;
    }
    static __device__ void finish(char *out, const ReductionArgs &args, Acc a) {
        store_finished(out, args, a);
    }
};

template <typename T, typename Pre = AsIs> struct SumReducer : Reducer<SumReducer<T, Pre>, T, sum_t<T>> {
    using Acc = sum_t<T>;
    static __device__ Acc identity() { return Acc(0); }
    static __device__ Acc lift(T v, int64_t) { return static_cast<Acc>(Pre()(load_as_compute(v))); }
    static __device__ Acc combine(Acc a, Acc b) { return wrapping_add(a, b); }
};
template <typename T> using AbsSumReducer = SumReducer<T, Absolute>;
template <typename T> using SquareSumReducer = SumReducer<T, Squared>;

template <typename T> struct ProdReducer : Reducer<ProdReducer<T>, T, sum_t<T>> {
    using Acc = sum_t<T>;
    static __device__ Acc identity() { return Acc(1); }
    static __device__ Acc lift(T v, int64_t) { return static_cast<Acc>(load_as_compute(v)); }
    static __device__ Acc combine(Acc a, Acc b) { return wrapping_mul(a, b); }
};

// amax / amin (and the inf-norm, the amax of |x|) propagate NaN, as torch and NumPy.
template <typename T, bool kMax, typename Pre = AsIs>
struct ExtremeReducer : Reducer<ExtremeReducer<T, kMax, Pre>, T, compute_t<T>> {
    using Acc = compute_t<T>;
    static __device__ Acc identity() { return kMax ? lowest<Acc>() : highest<Acc>(); }
    static __device__ Acc lift(T v, int64_t) { return Pre()(load_as_compute(v)); }
    static __device__ Acc combine(Acc a, Acc b) {
        if (is_nan(a) || is_nan(b)) return is_nan(a) ? a : b;
        return (kMax ? a > b : a < b) ? a : b;
    }
};
template <typename T> using MaxReducer = ExtremeReducer<T, true>;
template <typename T> using MinReducer = ExtremeReducer<T, false>;
template <typename T> using AbsMaxReducer = ExtremeReducer<T, true, Absolute>;

// argmax / argmin: NaN wins, and on ties the first index, whatever order the tree combines in.
template <typename T, bool kMax>
struct ArgExtremeReducer : Reducer<ArgExtremeReducer<T, kMax>, T, ValueIndex<compute_t<T>>> {
    using C = compute_t<T>;
    using Acc = ValueIndex<C>;
    static constexpr bool kFloat32 = std::is_same_v<T, float>; // the others spill at these bounds
    static constexpr int kSliceBlocks = kFloat32 ? 5 : 1, kRowBlocks = kFloat32 ? 4 : 1;
    static __device__ Acc identity() { return {kMax ? lowest<C>() : highest<C>(), INT64_MAX}; }
    static __device__ Acc lift(T v, int64_t index) { return {load_as_compute(v), index}; }
    // One element after those already in `a` (add's contract): a tie never replaces them, so only a
    // better value, a first NaN, or anything into the identity does.
    static __device__ __forceinline__ Acc add(Acc a, T x, int64_t index) {
        return add_value(a, load_as_compute(x), index);
    }
    static __device__ __forceinline__ Acc add_value(Acc a, C v, int64_t index) {
        const bool better = kMax ? v > a.value : v < a.value;
        return (better || (is_nan(v) && !is_nan(a.value)) || a.index == INT64_MAX) ? Acc{v, index} : a;
    }
    // A 16-byte load's elements, from index `at` on, after those in `a`: their best by a 32-bit
    // position first (by the same rules: the first on ties, the first NaN), then one add - the 64-bit
    // index and the identity test once a load, not once an element (argmax ran at 72% of the copy's
    // bandwidth where amax, without them, ran at 100%: bench/bench_bandwidth.py, 2026-12-03).
    static __device__ __forceinline__ Acc add_vector(Acc a, const Packet16 &x, int64_t at) {
        C best = packet_compute<T>(x, 0);
        int where = 0;
#pragma unroll
        for (int e = 1; e < int(16 / sizeof(T)); ++e) {
            const C v = packet_compute<T>(x, e);
            if ((kMax ? v > best : v < best) || (is_nan(v) && !is_nan(best))) {
                best = v;
                where = e;
            }
        }
        return add_value(a, best, at + where);
    }
    static __device__ Acc combine(Acc a, Acc b) {
        const bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
        if (a_nan != b_nan) return a_nan ? a : b;
        if (!a_nan && a.value != b.value) return (kMax ? a.value > b.value : a.value < b.value) ? a : b;
        return a.index <= b.index ? a : b;
    }
    static __device__ void finish(char *out, const ReductionArgs &args, Acc a) {
        if (args.out_dtype == LAB_INT32) {
            *reinterpret_cast<int32_t *>(out) = static_cast<int32_t>(a.index);
        } else {
            *reinterpret_cast<int64_t *>(out) = a.index;
        }
    }
};
template <typename T> using ArgMaxReducer = ArgExtremeReducer<T, true>;
template <typename T> using ArgMinReducer = ArgExtremeReducer<T, false>;

// var / std in one pass: shifted sums (see Moments); combining two moves the second's sums to the
// first's shift. The result divides by n - correction (torch's default correction is 1).
template <typename T> struct MomentsReducer : Reducer<MomentsReducer<T>, T, Moments<compute_t<T>>> {
    using C = compute_t<T>;
    using Acc = Moments<C>;
    static __device__ Acc identity() { return {C(0), C(0), C(0), C(0)}; }
    static __device__ Acc lift(T v, int64_t) { return {C(1), load_as_compute(v), C(0), C(0)}; }
    static __device__ __forceinline__ Acc add(Acc a, T x, int64_t) {
        const C v = load_as_compute(x);
        if (a.n == C(0)) return {C(1), v, C(0), C(0)};
        const C d = v - a.shift;
        return {a.n + C(1), a.shift, a.sum + d, a.sum_sq + d * d};
    }
    static __device__ Acc combine(Acc a, Acc b) {
        if (b.n == C(0)) return a;
        if (a.n == C(0)) return b;
        const C d =
            b.shift - a.shift; // b's elements measured from a's shift: x - a.shift = (x - b.shift) + d
        return {a.n + b.n, a.shift, a.sum + b.sum + b.n * d,
                a.sum_sq + b.sum_sq + d * (C(2) * b.sum + b.n * d)};
    }
    static __device__ void finish(char *out, const ReductionArgs &args, Acc a) {
        const C n = static_cast<C>(args.n_reduce); // exact, where a.n is a float count
        C m2 = a.sum_sq - a.sum * (a.sum / n);     // n = 0: NaN, as torch
        if (m2 < C(0)) m2 = C(0);
        C dof = n - static_cast<C>(args.correction);
        if (dof < C(0)) dof = C(0);
        store_finished(out, args, m2 / dof);
    }
};

// logsumexp: each combination rescales the smaller maximum's sum; infinities and NaN pass through
// (log(sum(exp)) of a row holding +inf is +inf, of a row of -inf is -inf, of nothing -inf).
template <typename T> struct LogSumExpReducer : Reducer<LogSumExpReducer<T>, T, MaxAndSum<compute_t<T>>> {
    using C = compute_t<T>;
    using Acc = MaxAndSum<C>;
    static __device__ Acc identity() { return {-cuda::std::numeric_limits<C>::infinity(), C(0)}; }
    static __device__ Acc lift(T v, int64_t) { return {load_as_compute(v), C(1)}; }
    static __device__ Acc combine(Acc a, Acc b) {
        if (is_nan(a.max) || is_nan(b.max)) return {cuda::std::numeric_limits<C>::quiet_NaN(), C(1)};
        const Acc hi = a.max >= b.max ? a : b, lo = a.max >= b.max ? b : a;
        if (hi.max == lo.max || isinf(hi.max)) return {hi.max, hi.sum + lo.sum};
        return {hi.max, hi.sum + lo.sum * exp(lo.max - hi.max)};
    }
    static __device__ void finish(char *out, const ReductionArgs &args, Acc a) {
        store_finished(out, args, a.max + log(a.sum));
    }
};

// dot: the sum of products of two inputs, fused multiply-adds in the accumulator type.
template <typename T> struct DotReducer : Reducer<DotReducer<T>, T, compute_t<T>> {
    using C = compute_t<T>;
    using Acc = C;
    using Element = Pair<T>;
    static constexpr int kInputs = 2;
    static constexpr int kSliceBlocks = 1, kRowBlocks = 1; // two inputs' loads: no room in 32 or 64
    static __device__ Acc identity() { return C(0); }
    static __device__ __forceinline__ Acc add(Acc a, Element x, int64_t) {
        return fma(load_as_compute(x.first), load_as_compute(x.second), a);
    }
    static __device__ Acc combine(Acc a, Acc b) { return a + b; }
};

} // namespace

} // namespace lab
