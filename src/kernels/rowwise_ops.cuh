// rowwise_ops.cuh - softmax, the norms and their backwards, each written twice over one row: with
// the row in registers (read once, written once) and streamed for rows longer than the registers
// hold (read for the statistics, read again for the output; the second read mostly hits L2).
// rowwise_kernels.cuh runs them over the rows.
#pragma once

#include "rowwise.cuh"

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
    static constexpr int kStagedInput = LAB_ROW_X; // X alone

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
        A max = A(-INFINITY), sum = 0;
        for (Index step = 0; step < steps; ++step) {
            A x[kSize];
            load_row<T, 1, Index>(x, in, a.col_stride[LAB_ROW_X], a, lane, step, true, A(-INFINITY));
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
        }
        const Pair<A> total = group_reduce(Pair<A>{max, sum}, OnlineSoftmaxCombine{}, a.group);
        char *out = row_at(a, row, LAB_ROW_OUT);
        // The second pass's formula chosen once, outside the loop: a select per element would take the
        // exponential for log_softmax too (the staged rows are issue-bound: every instruction shows).
        auto write = [&](auto formula) {
            for (Index step = 0; step < steps; ++step) {
                A x[kSize];
                load_row<T, 1, Index>(x, in, a.col_stride[LAB_ROW_X], a, lane, step, true, A(0));
#pragma unroll
                for (int i = 0; i < kSize; ++i) x[i] = formula(x[i]);
                store_row<T, 1, Index>(x, out, a.col_stride[LAB_ROW_OUT], a, lane, step, true);
            }
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
    static constexpr int kStagedInput = LAB_ROW_GRAD;

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

// layer_norm: y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) (the population
// variance); rms_norm: y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps). With a residual
// (rms_norm), h = x + residual rounded to T is written to RESIDUAL_OUT and normalized.
//
// The statistics come from one group reduction of two sums - of d = x - shift and of d^2 - with the
// row's first element as the shift (layer_norm; 0 for rms_norm): var = mean(d^2) - mean(d)^2 loses
// nothing to cancellation when the shift is near the mean, as one of the row's own values is.
//
// kCentered: layer_norm (the shift, the mean, a bias); else rms_norm (and its residual). Each is its
// own kernel: with both behind a runtime flag the staged bf16 kernels spilled 48 bytes a thread at
// their 32 registers; split, layer_norm's spills nothing and rms_norm's 36 bytes (ptxas). Splitting
// off the residual too moved those spills about (32-44 bytes each), so it stays a runtime flag.
template <bool kCentered> struct NormForward {
    static constexpr int kMaxChunks = 2; // 4: 600 bytes of spills a thread for half types (ptxas)
    static constexpr bool kColumnSums = false;
    static constexpr int kStagedInput = LAB_ROW_RESIDUAL; // where there is one

    // x (+ residual, rounded to T) at column 0 of the row: the shift.
    template <typename T> __device__ static compute_t<T> shift_of(const RowArgs &a, int64_t row, bool valid) {
        using A = compute_t<T>;
        if (!kCentered || !valid || a.n == 0) return A(0);
        return load_as_compute(*reinterpret_cast<const T *>(row_at(a, row, LAB_ROW_X)));
    }

    template <typename A>
    __device__ static void statistics(const RowArgs &a, Pair<A> sums, A shift, A &mean, A &rstd) {
        const A n = A(a.n), mean_shifted = sums.first / n;
        A var = sums.second / n - (kCentered ? mean_shifted * mean_shifted : A(0));
        var = var > A(0) || var != var ? var : A(0); // rounding may dip below 0; NaN (no elements) stays
        mean = kCentered ? shift + mean_shifted : A(0);
        rstd = row_rsqrt(var + A(a.eps));
    }

    template <typename T, int kChunks>
    __device__ static void row(const RowArgs &a, int64_t row, int lane, bool valid,
                               ColumnSums<T, kChunks> &) {
        using A = compute_t<T>;
        constexpr int kSize = kChunks * kRowVec<T>;
        A x[kSize];
        load_row<T, kChunks>(x, row_at(a, row, LAB_ROW_X), a.col_stride[LAB_ROW_X], a, lane, 0, valid, A(0));
        if (!kCentered && a.row[LAB_ROW_RESIDUAL]) { // rms_norm only: the shift stays 0
            A r[kSize];
            load_row<T, kChunks>(r, row_at(a, row, LAB_ROW_RESIDUAL), a.col_stride[LAB_ROW_RESIDUAL], a, lane,
                                 0, valid, A(0));
#pragma unroll
            for (int i = 0; i < kSize; ++i) x[i] = round_to<T>(x[i] + r[i]);
            store_row<T, kChunks>(x, row_at(a, row, LAB_ROW_RESIDUAL_OUT), a.col_stride[LAB_ROW_RESIDUAL_OUT],
                                  a, lane, 0, valid);
        }
        const A shift = shift_of<T>(a, row, valid);
        A s1 = 0, s2 = 0;
        if constexpr (kCentered) { // past the row's end x is 0, not the shift: mask those positions out
#pragma unroll
            for (int i = 0; i < kSize; ++i) {
                const bool inside = tile_column<T>(i / kRowVec<T>, i % kRowVec<T>, lane, a.group) < int(a.n);
                const A d = inside ? x[i] - shift : A(0);
                s1 += d;
                s2 += d * d;
            }
        } else { // rms_norm: the fill (0) adds nothing to the sum of squares
#pragma unroll
            for (int i = 0; i < kSize; ++i) s2 += x[i] * x[i];
        }
        A mean, rstd;
        statistics(a, group_sums(s1, s2, a.group), shift, mean, rstd);
        A w[kSize];
        load_columns<T, kChunks>(w, a, LAB_COL_WEIGHT, lane, 0, A(1));
#pragma unroll
        for (int i = 0; i < kSize; ++i) x[i] = (x[i] - mean) * rstd * w[i];
        if (kCentered && a.col[LAB_COL_BIAS]) {
            load_columns<T, kChunks>(w, a, LAB_COL_BIAS, lane, 0, A(0));
#pragma unroll
            for (int i = 0; i < kSize; ++i) x[i] += w[i];
        }
        store_row<T, kChunks>(x, row_at(a, row, LAB_ROW_OUT), a.col_stride[LAB_ROW_OUT], a, lane, 0, valid);
        if (valid && lane == 0) {
            if (kCentered && a.row[LAB_ROW_MEAN]) {
                store_statistic(a, row_at(a, row, LAB_ROW_MEAN), double(mean));
            }
            if (a.row[LAB_ROW_RSTD]) store_statistic(a, row_at(a, row, LAB_ROW_RSTD), double(rstd));
        }
    }

    // Pass one: the sums (and h, where there is a residual); pass two: the output, reading the
    // normalized value back from where pass one left it (x, or h in RESIDUAL_OUT).
    template <typename T, class Rows>
    __device__ static void streamed_row(const RowArgs &a, int64_t row, typename Rows::Index steps,
                                        Rows rows) {
        using Index = typename Rows::Index; // int where the row is staged: cheaper index math
        using A = compute_t<T>;
        constexpr int kSize = kRowVec<T>;
        const int lane = threadIdx.x;
        const bool residual = !kCentered && a.row[LAB_ROW_RESIDUAL] != nullptr;
        const A shift = shift_of<T>(a, row, true);
        // each row pointer found once (several leading dimensions cost divisions), outside the loops
        const char *x_row = rows.at(a, row, LAB_ROW_X);
        const char *residual_row = residual ? rows.at(a, row, LAB_ROW_RESIDUAL) : nullptr;
        char *h_row = residual ? row_at(a, row, LAB_ROW_RESIDUAL_OUT) : nullptr;
        A s1 = 0, s2 = 0;
        for (Index step = 0; step < steps; ++step) {
            A x[kSize];
            load_row<T, 1, Index>(x, x_row, a.col_stride[LAB_ROW_X], a, lane, step, true, A(0));
            if (residual) {
                A r[kSize];
                load_row<T, 1, Index>(r, residual_row, a.col_stride[LAB_ROW_RESIDUAL], a, lane, step, true,
                                      A(0));
#pragma unroll
                for (int i = 0; i < kSize; ++i) x[i] = round_to<T>(x[i] + r[i]);
                store_row<T, 1, Index>(x, h_row, a.col_stride[LAB_ROW_RESIDUAL_OUT], a, lane, step, true);
            }
            if constexpr (kCentered) { // past the row's end x is 0, not the shift: mask those positions out
                if (tile_column<T, Index>(step, kSize - 1, lane, a.group) < a.n) { // the whole chunk inside
#pragma unroll
                    for (int i = 0; i < kSize; ++i) {
                        const A d = x[i] - shift;
                        s1 += d;
                        s2 += d * d;
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < kSize; ++i) {
                        const A d = tile_column<T, Index>(step, i, lane, a.group) < a.n ? x[i] - shift : A(0);
                        s1 += d;
                        s2 += d * d;
                    }
                }
            } else { // rms_norm: the fill (0) adds nothing to the sum of squares
#pragma unroll
                for (int i = 0; i < kSize; ++i) s2 += x[i] * x[i];
            }
        }
        A mean, rstd;
        statistics(a, group_sums(s1, s2, a.group), shift, mean, rstd);
        const char *normalized_row = residual ? h_row : x_row;
        const int64_t normalized_stride = a.col_stride[residual ? LAB_ROW_RESIDUAL_OUT : LAB_ROW_X];
        char *out = row_at(a, row, LAB_ROW_OUT);
        for (Index step = 0; step < steps; ++step) {
            A x[kSize], w[kSize];
            load_row<T, 1, Index>(x, normalized_row, normalized_stride, a, lane, step, true, A(0));
            load_columns<T, 1, Index>(w, a, LAB_COL_WEIGHT, lane, step, A(1));
#pragma unroll
            for (int i = 0; i < kSize; ++i) x[i] = (x[i] - mean) * rstd * w[i];
            if (kCentered && a.col[LAB_COL_BIAS]) {
                load_columns<T, 1, Index>(w, a, LAB_COL_BIAS, lane, step, A(0));
#pragma unroll
                for (int i = 0; i < kSize; ++i) x[i] += w[i];
            }
            store_row<T, 1, Index>(x, out, a.col_stride[LAB_ROW_OUT], a, lane, step, true);
        }
        if (lane == 0) {
            if (kCentered && a.row[LAB_ROW_MEAN]) {
                store_statistic(a, row_at(a, row, LAB_ROW_MEAN), double(mean));
            }
            if (a.row[LAB_ROW_RSTD]) store_statistic(a, row_at(a, row, LAB_ROW_RSTD), double(rstd));
        }
    }
};

// grad_x = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = grad_out * weight, xhat = (x - mean)
// * rstd (layer_norm; rms_norm: mean 0 and no mean(g) term), the two means from one group
// reduction. grad_weight = sum over rows of grad_out * xhat, grad_bias = sum of grad_out: per-column
// sums each group carries across its rows.
// kCentered: layer_norm (x has a mean, and g one); rms_norm's backward, without, reads no mean and
// subtracts none: 8% fewer instructions (ncu, bf16 16384 x 4096). Its pair reduction stays: with one
// sum ptxas spilled the float32 lanes. kBiasSums: the bias gradient is wanted (layer_norm with a bias).
// Otherwise its column sums are never made: at four chunks of a half type they are 32 registers a
// lane, the difference between three blocks an SM and spilling.
template <bool kCentered, bool kBiasSums> struct NormBackward {
    static_assert(kCentered || !kBiasSums, "rms_norm has no bias");
    static constexpr bool kBias = kBiasSums;
    // Four chunks a lane, held as packets (load_packets): x, grad_out and the weight of a 4096-long
    // bf16 row in 48 registers of 128 lanes, the column sums beside them - one row a block of 128,
    // four blocks an SM (three with the bias sums' 32 more registers), their loads in flight. The
    // 64-register layout (one chunk, 512 lanes) ran at 39% of DRAM (bench/sweep_norm_backward.cu).
    static constexpr int kMaxChunks = 4;
    struct RegisterShape { // (rowwise_kernels.cuh) 128 lanes at four chunks, 512 at one or two (128
                           // registers)
        static constexpr int most_lanes(int chunks) { return chunks >= 4 ? 128 : 512; }
        static constexpr int min_blocks(int chunks) { return chunks >= 4 ? (kBiasSums ? 3 : 4) : 1; }
        static constexpr int fewest_threads =
            128; // four or three blocks of 128 fit where two or one of 256 would
    };
    static constexpr bool kColumnSums = true;

    // The row's mean (0 for rms_norm) and rstd, from the forward's statistics.
    template <typename A>
    __device__ static void statistics(const RowArgs &a, int64_t row, bool valid, A &mean, A &rstd) {
        mean = kCentered && valid ? A(load_statistic(a, row_at(a, row, LAB_ROW_MEAN))) : A(0);
        rstd = valid ? A(load_statistic(a, row_at(a, row, LAB_ROW_RSTD))) : A(0);
    }

    template <typename A> __device__ static void means(const RowArgs &a, A s1, A s2, A &mean_g, A &mean_gx) {
        const Pair<A> sums = group_sums(s1, s2, a.group);
        mean_g = kCentered ? sums.first / A(a.n) : A(0);
        mean_gx = sums.second / A(a.n);
    }

    // x, grad_out and the weight stay packets (RowPacket) in storage type; each pass converts what it uses.
    template <typename T, int kChunks>
    __device__ static void row(const RowArgs &a, int64_t row, int lane, bool valid,
                               ColumnSums<T, kChunks> &sums) {
        using A = compute_t<T>;
        constexpr int kVec = kRowVec<T>;
        A mean, rstd;
        statistics(a, row, valid, mean, rstd);
        RowPacket x[kChunks], g[kChunks], w[kChunks];
        const T zero = store_from_compute<T>(A(0));
        load_packets<T, kChunks>(x, row_at(a, row, LAB_ROW_X), a.col_stride[LAB_ROW_X], a, lane, 0, valid,
                                 zero);
        load_packets<T, kChunks>(g, row_at(a, row, LAB_ROW_GRAD), a.col_stride[LAB_ROW_GRAD], a, lane, 0,
                                 valid, zero);
        load_packets<T, kChunks>(w, a.col[LAB_COL_WEIGHT], a.col_data_stride[LAB_COL_WEIGHT], a, lane, 0,
                                 a.col[LAB_COL_WEIGHT] != nullptr, store_from_compute<T>(A(1)));
        // No mask past the row's end, where x is 0 and xhat is not: grad_out is 0 there, and each
        // term with xhat has it as a factor (a branch per element had doubled the instructions).
        auto xhat_at = [&](int c, int i) { return (packet_compute<T>(x[c], i) - mean) * rstd; };
        A s1 = 0, s2 = 0;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
#pragma unroll
            for (int i = 0; i < kVec; ++i) {
                const A xhat = xhat_at(c, i), grad = packet_compute<T>(g[c], i);
                sums.weight[c * kVec + i] += grad * xhat;
                if constexpr (kBiasSums) sums.bias[c * kVec + i] += grad;
                const A gw = grad * packet_compute<T>(w[c], i);
                s1 += gw;
                s2 += gw * xhat;
            }
        }
        A mean_g, mean_gx;
        means(a, s1, s2, mean_g, mean_gx);
        char *out = row_at(a, row, LAB_ROW_OUT);
#pragma unroll
        for (int c = 0; c < kChunks; ++c) { // chunk by chunk: one chunk's results live at a time
            A grad_x[kVec];
#pragma unroll
            for (int i = 0; i < kVec; ++i) {
                const A gw = packet_compute<T>(g[c], i) * packet_compute<T>(w[c], i);
                grad_x[i] = rstd * (gw - mean_g - xhat_at(c, i) * mean_gx);
            }
            store_row<T, 1>(grad_x, out, a.col_stride[LAB_ROW_OUT], a, lane, c, valid);
        }
    }

    // Streamed rows add their column sums into the block's own (a Global- or SharedColumnSink).
    template <typename T, class Rows, class Sink>
    __device__ static void streamed_row(const RowArgs &a, int64_t row, typename Rows::Index steps, Rows rows,
                                        const Sink &sums) {
        using Index = typename Rows::Index; // int where the row is staged: cheaper index math
        using A = compute_t<T>;
        constexpr int kSize = kRowVec<T>;
        const int lane = threadIdx.x;
        const char *x_row = rows.at(a, row, LAB_ROW_X), *g_row = rows.at(a, row, LAB_ROW_GRAD);
        A mean, rstd;
        statistics(a, row, true, mean, rstd);
        // x, grad_out and weight at one step along the row: both passes read the same three
        auto load_step = [&](Index step, A(&x)[kSize], A(&g)[kSize], A(&w)[kSize]) {
            load_row<T, 1, Index>(x, x_row, a.col_stride[LAB_ROW_X], a, lane, step, true, A(0));
            load_row<T, 1, Index>(g, g_row, a.col_stride[LAB_ROW_GRAD], a, lane, step, true, A(0));
            load_columns<T, 1, Index>(w, a, LAB_COL_WEIGHT, lane, step, A(1));
        };
        A s1 = 0, s2 = 0;
        for (Index step = 0; step < steps; ++step) {
            A x[kSize], g[kSize], w[kSize];
            load_step(step, x, g, w);
            // No mask past the row's end, as in row(): grad_out is 0 there, a factor of every term.
#pragma unroll
            for (int i = 0; i < kSize; ++i) {
                const A gw = g[i] * w[i];
                s1 += gw;
                s2 += gw * ((x[i] - mean) * rstd);
            }
        }
        A mean_g, mean_gx;
        means(a, s1, s2, mean_g, mean_gx);
        char *out = row_at(a, row, LAB_ROW_OUT);
        for (Index step = 0; step < steps; ++step) {
            A x[kSize], g[kSize], w[kSize];
            load_step(step, x, g, w);
#pragma unroll
            for (int i = 0; i < kSize; ++i) {
                const A xhat = (x[i] - mean) * rstd;
                sums.add(step, i, lane, a, g[i] * xhat, g[i]);
                x[i] = rstd * (g[i] * w[i] - mean_g - xhat * mean_gx);
            }
            store_row<T, 1, Index>(x, out, a.col_stride[LAB_ROW_OUT], a, lane, step, true);
        }
    }
};

} // namespace lab
