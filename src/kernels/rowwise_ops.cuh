// rowwise_ops.cuh - softmax and its backward, each written twice over one row: with the row in
// registers (read once, written once) and streamed for rows longer than the registers hold (read for
// the statistics, read again for the output; the second read mostly hits L2). The norms are in
// rowwise_norm_ops.cuh; rowwise_kernels.cuh runs them over the rows.
#pragma once

#include "rowwise_column_sums.cuh"

namespace lab {

// softmax: y = exp(x - max) / sum(exp(x - max)); log_softmax: y = x - max - log(sum(...)).
// (max, sum of exp(x - max)) pairs combined into one: the larger maximum, the other side's sum
// rescaled to it (Milakov & Gimelshein's online softmax). An all -inf side contributes nothing.
// One exponential, not one a side: the larger side's is exp(0) = 1. It is a sum's rescaling, and a
// sum holding its own maximum's term is at least 1, so row_exp_rescale's flushed subnormals change
// nothing. Each combine had two __expf and their branches: 20 instructions, 8 combines a row, a
// tenth of the staged softmax's instructions (ncu source counters, 2026-12-01).
struct OnlineSoftmaxCombine {
    template <typename A> __device__ __forceinline__ Pair<A> operator()(Pair<A> a, Pair<A> b) const {
        const A max = a.first > b.first ? a.first : b.first; // NaN in a.first: b's (the sum carries it)
        if (max == A(-INFINITY)) return {max, A(0)};
        // double keeps an exponential a side: with one, ptxas spilled 212 bytes a lane at four chunks, not 32
        if constexpr (std::is_same_v<A, double>) {
            return {max, a.second * row_exp(a.first - max) + b.second * row_exp(b.first - max)};
        } else {
            const bool a_larger = a.first == max;
            const A larger_sum = a_larger ? a.second : b.second, smaller_sum = a_larger ? b.second : a.second;
            return {max, larger_sum + smaller_sum * row_exp_rescale((a_larger ? b.first : a.first) - max)};
        }
    }
};

struct SoftmaxForward {
    static constexpr int kMaxChunks = 4;
    static constexpr bool kColumnSums = false;
    // X alone. Staged rows of 8192 bf16 and longer in blocks of half the threads (eight vectors a
    // thread), more rows an SM: bf16 rows of 16384 2.79 -> 3.31 TB/s, of 8192 3.14 -> 3.37
    // (bench/sweep_rowwise.py, H200, 2026-12-03); the norms and the backward ran no faster or slower so,
    // and keep the default.
    static constexpr StagedShape kStaged{LAB_ROW_X, 256, 8};

    // Each lane's own (max, sum) over its elements, then one group reduction of the pairs: one pass
    // through shared memory per row instead of two (max, then sum).
    template <typename T, int kChunks>
    __device__ static void row(const RowArgs &a, int64_t row, int lane, bool valid,
                               ColumnSums<T, kChunks> &) {
        using A = compute_t<T>;
        constexpr int kSize = kChunks * kRowVec<T>;
        A x[kSize];
        load_row<T, kChunks>(x, row_at(a, row, LAB_ROW_X), a.col_stride[LAB_ROW_X], a, lane, 0, valid,
                             A(-INFINITY));
        // Uniform conditions stay outside the element loops: the kernel is issue-bound (ncu), and a
        // select per element (or an exp the other branch needs) costs as much as the work itself.
        A max = A(-INFINITY), sum = 0;
#pragma unroll
        for (int i = 0; i < kSize; ++i) max = row_max(max, x[i]); // a NaN is carried by the sum instead
        if (max != A(-INFINITY)) {
            const ShiftedExp<A> exp_minus_max(max);
            if (a.log) {
#pragma unroll
                for (int i = 0; i < kSize; ++i) sum += exp_minus_max(x[i]);
            } else {
#pragma unroll
                for (int i = 0; i < kSize; ++i) {
                    x[i] = exp_minus_max(x[i]);
                    sum += x[i];
                }
            }
        } else if (!a.log) { // no finite element in this lane: its exponentials are 0
#pragma unroll
            for (int i = 0; i < kSize; ++i) x[i] = A(0);
        }
        const Pair<A> total = group_reduce(Pair<A>{max, sum}, OnlineSoftmaxCombine{}, a.group);
        if (a.log) {
            const A shift = total.first + row_log(total.second);
#pragma unroll
            for (int i = 0; i < kSize; ++i) x[i] -= shift;
        } else { // a lane with no finite element holds zeros; an all -inf row gives NaN, as torch
            const A scale = max == A(-INFINITY) && total.first != A(-INFINITY)
                                ? A(0)
                                : row_exp(max - total.first) / total.second;
#pragma unroll
            for (int i = 0; i < kSize; ++i) x[i] *= scale;
        }
        store_row<T, kChunks>(x, row_at(a, row, LAB_ROW_OUT), a.col_stride[LAB_ROW_OUT], a, lane, 0, valid);
    }

    // Online along the row too: a running maximum, the sum rescaled whenever the maximum grows.
    template <typename T, class Rows>
    __device__ static void streamed_row(const RowArgs &a, int64_t row, typename Rows::Index steps,
                                        Rows rows) {
        using Index = typename Rows::Index; // int where the row is staged: cheaper index math
        using A = compute_t<T>;
        constexpr int kSize = kRowVec<T>;
        const int lane = threadIdx.x;
        const char *in = rows.at(a, row, LAB_ROW_X);
        // The whole steps walked without a test a load (walk_steps), but for float64: its staged kernel
        // spilled 216 bytes so at its 32 registers.
        constexpr bool kWholeSteps = sizeof(T) < 8;
        A max = A(-INFINITY), sum = 0;
        walk_steps<T, kWholeSteps>(a, lane, steps, [&](Index step, auto tiles) {
            A x[kSize];
            load_row<T, 1, Index, decltype(tiles)>(x, in, a.col_stride[LAB_ROW_X], a, lane, step, true,
                                                   A(-INFINITY));
            A tile_max = A(-INFINITY);
#pragma unroll
            for (int i = 0; i < kSize; ++i) tile_max = row_max(tile_max, x[i]); // NaN: carried by the sum
            if (tile_max > max) {
                sum = max == A(-INFINITY) ? A(0) : sum * row_exp(max - tile_max);
                max = tile_max;
            }
            if (max != A(-INFINITY)) {
                const ShiftedExp<A> exp_minus_max(max);
#pragma unroll
                for (int i = 0; i < kSize; ++i) sum += exp_minus_max(x[i]);
            }
        });
        const Pair<A> total = group_reduce(Pair<A>{max, sum}, OnlineSoftmaxCombine{}, a.group);
        char *out = row_at(a, row, LAB_ROW_OUT);
        // The second pass's formula chosen once, outside the loop: a select per element would take the
        // exponential for log_softmax too (the staged rows are issue-bound: every instruction shows).
        auto write = [&](auto formula) {
            walk_steps<T, kWholeSteps>(a, lane, steps, [&](Index step, auto tiles) {
                using Tiles = decltype(tiles);
                A x[kSize];
                load_row<T, 1, Index, Tiles>(x, in, a.col_stride[LAB_ROW_X], a, lane, step, true, A(0));
#pragma unroll
                for (int i = 0; i < kSize; ++i) x[i] = formula(x[i]);
                store_row<T, 1, Index, Tiles>(x, out, a.col_stride[LAB_ROW_OUT], a, lane, step, true);
            });
        };
        if (a.log) {
            const A shift = total.first + row_log(total.second);
            write([shift](A v) { return v - shift; });
        } else { // exp(x - max) / sum as one exponential, exp(x - (max + log(sum))): no multiply an element
            const auto normalized = ShiftedExp<A>::divided(total.first, total.second);
            write([normalized](A v) { return normalized(v); });
        }
    }
};

// softmax: grad_x = y * (grad_out - sum(grad_out * y)); log_softmax: grad_x = grad_out - exp(y) *
// sum(grad_out). y (the forward's output) is the X operand, grad_out GRAD.
struct SoftmaxBackward {
    static constexpr int kMaxChunks = 2;
    static constexpr bool kColumnSums = false;
    static constexpr StagedShape kStaged{LAB_ROW_GRAD};

    template <typename T, int K>
    __device__ static void finish(const RowArgs &a, compute_t<T> (&y)[K], const compute_t<T> (&dy)[K],
                                  compute_t<T> total) {
        if (a.log) { // the branch outside the loop: a select inside would take the exp for every element
#pragma unroll
            for (int i = 0; i < K; ++i) y[i] = dy[i] - row_exp(y[i]) * total;
        } else {
#pragma unroll
            for (int i = 0; i < K; ++i) y[i] *= dy[i] - total;
        }
    }

    template <typename T, int K>
    __device__ static compute_t<T> partial(const RowArgs &a, const compute_t<T> (&y)[K],
                                           const compute_t<T> (&dy)[K]) {
        compute_t<T> s = 0;
        if (a.log) {
#pragma unroll
            for (int i = 0; i < K; ++i) s += dy[i];
        } else {
#pragma unroll
            for (int i = 0; i < K; ++i) s += dy[i] * y[i];
        }
        return s;
    }

    template <typename T, int kChunks>
    __device__ static void row(const RowArgs &a, int64_t row, int lane, bool valid,
                               ColumnSums<T, kChunks> &) {
        using A = compute_t<T>;
        constexpr int kSize = kChunks * kRowVec<T>;
        A y[kSize], dy[kSize];
        load_row<T, kChunks>(y, row_at(a, row, LAB_ROW_X), a.col_stride[LAB_ROW_X], a, lane, 0, valid, A(0));
        load_row<T, kChunks>(dy, row_at(a, row, LAB_ROW_GRAD), a.col_stride[LAB_ROW_GRAD], a, lane, 0, valid,
                             A(0));
        const A total = group_sum(partial<T>(a, y, dy), a.group);
        finish<T>(a, y, dy, total);
        store_row<T, kChunks>(y, row_at(a, row, LAB_ROW_OUT), a.col_stride[LAB_ROW_OUT], a, lane, 0, valid);
    }

    template <typename T, class Rows>
    __device__ static void streamed_row(const RowArgs &a, int64_t row, typename Rows::Index steps,
                                        Rows rows) {
        using Index = typename Rows::Index; // int where the row is staged: cheaper index math
        using A = compute_t<T>;
        constexpr int kSize = kRowVec<T>;
        const int lane = threadIdx.x;
        const char *y_row = rows.at(a, row, LAB_ROW_X), *dy_row = rows.at(a, row, LAB_ROW_GRAD);
        A y[kSize], dy[kSize], s = 0;
        for (Index step = 0; step < steps; ++step) {
            load_row<T, 1, Index>(y, y_row, a.col_stride[LAB_ROW_X], a, lane, step, true, A(0));
            load_row<T, 1, Index>(dy, dy_row, a.col_stride[LAB_ROW_GRAD], a, lane, step, true, A(0));
            s += partial<T>(a, y, dy);
        }
        const A total = group_sum(s, a.group);
        char *out = row_at(a, row, LAB_ROW_OUT);
        for (Index step = 0; step < steps; ++step) {
            load_row<T, 1, Index>(y, y_row, a.col_stride[LAB_ROW_X], a, lane, step, true, A(0));
            load_row<T, 1, Index>(dy, dy_row, a.col_stride[LAB_ROW_GRAD], a, lane, step, true, A(0));
            finish<T>(a, y, dy, total);
            store_row<T, 1, Index>(y, out, a.col_stride[LAB_ROW_OUT], a, lane, step, true);
        }
    }
};

} // namespace lab
