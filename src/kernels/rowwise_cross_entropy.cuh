// rowwise_cross_entropy.cuh - cross-entropy over rows of logits, one target class per row, with
// the gradient written in the same pass (as Liger-Kernel does): once a row's (max, sum of exp) are
// known, d loss / d x = softmax(x) - onehot(target) needs nothing else, so the softmax is never
// stored and the backward has nothing left to read. For 'mean', a first kernel counts the rows
// whose target is not ignore_index (the gradient's scale); for 'mean' and 'sum' a last kernel adds
// the rows' losses in a fixed order (deterministic, no atomics). Two options change the row's
// function: Gemma's softcap reads each logit x as c tanh(x / c) (its derivative 1 - (x'/c)^2 joins
// the gradient), and PaLM's z-loss adds z lse^2 (its gradient 2 z lse softmax).
#pragma once

#include "functors.cuh"
#include "rowwise_ops.cuh"
#include "rowwise_window.cuh"

namespace lab {

// What a row's group reduces in one pass: softmax's online (max, sum of exp) pair, the target's
// logit (one lane holds it, the others add 0) and the sum of the logits (label smoothing).
template <typename A> struct LogitStats {
    A max, sum, target, total;
};
template <typename A> __device__ __forceinline__ LogitStats<A> shuffle_xor(LogitStats<A> v, int lane_mask) {
    return {__shfl_xor_sync(0xffffffffu, v.max, lane_mask), __shfl_xor_sync(0xffffffffu, v.sum, lane_mask),
            __shfl_xor_sync(0xffffffffu, v.target, lane_mask),
            __shfl_xor_sync(0xffffffffu, v.total, lane_mask)};
}
struct LogitStatsCombine {
    template <typename A>
    __device__ __forceinline__ LogitStats<A> operator()(LogitStats<A> a, LogitStats<A> b) const {
        const Pair<A> softmax = OnlineSoftmaxCombine{}(Pair<A>{a.max, a.sum}, Pair<A>{b.max, b.sum});
        return {softmax.first, softmax.second, a.target + b.target, a.total + b.total};
    }
};

// loss = logsumexp(x) - (1 - s) x[t] - s mean(x) for target t and label smoothing s (torch's
// definition: (1 - s) of the target's negative log-likelihood plus s of the uniform one).
struct CrossEntropy {
    static constexpr int kMaxChunks = 2; // 4: 212 bytes of spills a thread for half types (ptxas)
    static constexpr bool kColumnSums = false;

    __device__ static int64_t target_of(const RowArgs &a, int64_t row) {
        const char *at = row_at(a, row, LAB_ROW_TARGET);
        return a.target64 ? *reinterpret_cast<const int64_t *>(at)
                          : int64_t(*reinterpret_cast<const int32_t *>(at));
    }

    // An ignored row's loss is 0. A target outside [0, n) (and not ignore_index) gives NaN - the
    // device-side check: it reaches the reduced loss and the gradient, never a read out of bounds.
    template <typename A> __device__ static A loss_of(const RowArgs &a, const LogitStats<A> &s, int64_t t) {
        if (t == a.ignore_index) return A(0);
        if (t < 0 || t >= a.n) return A(NAN);
        const A smoothing = A(a.smoothing), lse = s.max + row_log(s.sum);
        return lse - (A(1) - smoothing) * s.target - smoothing * s.total / A(a.n) + A(a.z_loss) * lse * lse;
    }

    // The softcapped logit, and the factor its gradient takes: d(c tanh(x / c))/dx = 1 - (x' / c)^2.
    template <typename A> __device__ static A softcapped(const RowArgs &a, A x) {
        const A cap = A(a.softcap);
        return cap * math_tanh(x / cap);
    }
    template <typename A> __device__ static A softcap_slope(const RowArgs &a, A capped) {
        const A ratio = capped / A(a.softcap);
        return A(1) - ratio * ratio;
    }

    // What softmax_j is multiplied by in the gradient besides the row's scale: 1 + 2 z lse (z-loss).
    template <typename A> __device__ static A z_factor(const RowArgs &a, const LogitStats<A> &total) {
        return a.z_loss != 0 ? A(1) + A(2 * a.z_loss) * (total.max + row_log(total.sum)) : A(1);
    }

    template <typename A> __device__ static void store_loss(const RowArgs &a, int64_t row, A loss) {
        if (a.reduction == LAB_LOSS_NONE) {
            store_converted(row_at(a, row, LAB_ROW_LOSS), a.loss_dtype, loss);
        } else {
            static_cast<A *>(a.row_losses)[row] = loss;
        }
    }

    // What the row's gradient is multiplied by: 1, or 1 / (rows that count) for 'mean', times the
    // row's upstream gradient where one is given; 0 for an ignored row, NaN for a target out of range.
    template <typename A> __device__ static A grad_scale(const RowArgs &a, int64_t row, int64_t t) {
        if (t == a.ignore_index) return A(0);
        if (t < 0 || t >= a.n) return A(NAN);
        const A scale = a.grad_scale ? *static_cast<const A *>(a.grad_scale) : A(1);
        return a.row[LAB_ROW_GRAD] ? scale * load_converted<A>(row_at(a, row, LAB_ROW_GRAD), a.upstream_dtype)
                                   : scale;
    }

    template <typename T, int kChunks>
    __device__ static void row(const RowArgs &a, int64_t row, int lane, bool valid,
                               ColumnSums<T, kChunks> &) {
        using A = compute_t<T>;
        constexpr int kVec = kRowVec<T>, kSize = kChunks * kVec;
        const int64_t t = valid ? target_of(a, row) : a.ignore_index;
        A x[kSize];
        load_row<T, kChunks>(x, row_at(a, row, LAB_ROW_X), a.col_stride[LAB_ROW_X], a, lane, 0, valid,
                             A(-INFINITY));
        const bool capped = a.softcap != 0;
        if (capped) { // past the row's end x stays -inf
#pragma unroll
            for (int i = 0; i < kSize; ++i) {
                if (tile_column<T>(i / kVec, i % kVec, lane, a.group) < int(a.n)) x[i] = softcapped(a, x[i]);
            }
        }
        // Which of this lane's registers holds column t, if any: the target's logit comes from the
        // registers, never from memory that the gradient (possibly the logits themselves) overwrites.
        int held = -1;
        if (t >= 0 && t < a.n) {
            const int vec = int(t / kVec);
            if ((vec & (a.group - 1)) == lane) held = (vec / a.group) * kVec + int(t % kVec);
        }
        LogitStats<A> s{A(-INFINITY), A(0), A(0), A(0)};
#pragma unroll
        for (int i = 0; i < kSize; ++i) {
            s.max = row_max(s.max, x[i]);
            if (i == held) s.target = x[i];
        }
        if (a.smoothing != 0) { // past the row's end x is -inf: mask those positions out
#pragma unroll
            for (int i = 0; i < kSize; ++i) {
                if (tile_column<T>(i / kVec, i % kVec, lane, a.group) < int(a.n)) s.total += x[i];
            }
        }
        // Softcapped rows keep x' (its gradient needs it) and take the exponentials twice.
        if (s.max != A(-INFINITY)) {
            const ShiftedExp<A> exp_minus_max(s.max);
#pragma unroll
            for (int i = 0; i < kSize; ++i) {
                const A e = exp_minus_max(x[i]);
                s.sum += e;
                if (!capped) x[i] = e;
            }
        } else if (!capped) {
#pragma unroll
            for (int i = 0; i < kSize; ++i) x[i] = A(0);
        }
        const LogitStats<A> total = group_reduce(s, LogitStatsCombine{}, a.group);
        if (valid && lane == 0) store_loss(a, row, loss_of(a, total, t));
        if (!a.row[LAB_ROW_OUT]) return;
        // d loss / d x_j = scale * (softmax_j (1 + 2 z lse) - (1 - s) [j == t] - s / n), times the
        // softcap's slope
        const A upstream = grad_scale<A>(a, row, t), smoothing = A(a.smoothing);
        const A scale = upstream * z_factor(a, total), uniform = upstream * smoothing / A(a.n),
                hit = upstream * (A(1) - smoothing);
        if (capped) {
            const ShiftedExp<A> softmax = ShiftedExp<A>::divided(total.max, total.sum);
#pragma unroll
            for (int i = 0; i < kSize; ++i) {
                x[i] = (softmax(x[i]) * scale - uniform - (i == held ? hit : A(0))) * softcap_slope(a, x[i]);
            }
        } else {
            const A to_softmax = s.max == A(-INFINITY) && total.max != A(-INFINITY)
                                     ? A(0)
                                     : row_exp(s.max - total.max) / total.sum * scale;
#pragma unroll
            for (int i = 0; i < kSize; ++i) x[i] = x[i] * to_softmax - uniform - (i == held ? hit : A(0));
        }
        store_row<T, kChunks>(x, row_at(a, row, LAB_ROW_OUT), a.col_stride[LAB_ROW_OUT], a, lane, 0, valid);
    }

    // Online along the row, as softmax's streamed forward, kStreamChunks chunks a lane per step (all
    // loaded before any is used); the gradient is a second pass, backwards, whose reads partly hit L2.
    // Through a window of shared memory (WindowRows) the copies of the next steps fly while a step is
    // computed; from registers (GlobalRows) a thread has one step in flight.
    static constexpr int kStreamChunks = 2; // 4: over 100 bytes of spills a thread for half types (ptxas)
    static constexpr int kStreamThreads = 512;
    static constexpr bool kHeadedRows = true; // its streamed walk takes HeadedRows
    static constexpr bool kWindowRows = true; // and WindowRows (rows_window)

    // A streamed step's columns counted from its first (lane 0's first element of chunk0), in 32
    // bits: this lane's element i is column(i); the target (-1: not in this step) and the row's end
    // in the same count.
    template <typename T> struct StepColumns {
        int base, target, end;
        __device__ StepColumns(const RowArgs &a, int64_t t, int64_t chunk0, int lane) {
            const int64_t start = chunk0 * a.group * kRowVec<T>;
            const int64_t span = int64_t(kStreamChunks) * a.group * kRowVec<T>;
            base = lane * kRowVec<T>;
            target = t - start >= 0 && t - start < span ? int(t - start) : -1;
            end = a.n - start > span ? int(span) : int(a.n - start);
        }
        __device__ int column(int i, int group) const {
            return (i / kRowVec<T>)*group * kRowVec<T> + base + i % kRowVec<T>;
        }
    };

    template <typename T, class Rows>
    __device__ static void streamed_row(const RowArgs &a, int64_t row, int64_t steps, Rows rows) {
        using A = compute_t<T>;
        constexpr int kVec = kRowVec<T>, kSize = kStreamChunks * kVec;
        const int lane = threadIdx.x;
        const int64_t t = target_of(a, row);
        const char *row_in = rows.at(a, row, LAB_ROW_X);
        // HeadedRows (e.g. a vocabulary of 50257): the row's first `head` columns, up to the 16-byte
        // boundary, one a lane; the rest, the body, walked in 16-byte vectors as an aligned row of its
        // own. Element by element instead, such rows ran at a third of the speed (bf16 4096 x 50257,
        // 0.76 TB/s against 2.10, 2026-12-03).
        RowArgs trimmed;
        int head = 0;
        if constexpr (Rows::kHeads) {
            trimmed = a;
            head = int((16 - reinterpret_cast<uintptr_t>(row_in) % 16) % 16 / sizeof(T));
            head = a.n < head ? int(a.n) : head;
            trimmed.n = a.n - head;
            trimmed.vectorized = true;
        }
        const RowArgs &body = Rows::kHeads ? trimmed : a;
        const char *in = row_in + head * int(sizeof(T));
        const int64_t body_target = t >= head && t < a.n ? t - head : -1;
        // The steps wholly inside a vectorized row load and store their chunks without a test each (the
        // per-chunk column tests, a third of the loop's instructions: ncu source counters, 2026-12-03).
        const int64_t whole_steps = body.vectorized ? body.n / (int64_t(kStreamChunks) * a.group * kVec) : 0;
        LogitStats<A> s{A(-INFINITY), A(0), A(0), A(0)};
        if (Rows::kHeads && lane < head) { // the head's columns, one a lane, before the body's
            A x = load_as_compute(reinterpret_cast<const T *>(row_in)[lane]);
            if (a.softcap != 0) x = softcapped(a, x);
            if (lane == t) s.target = x;
            if (a.smoothing != 0) s.total = x;
            s.max = x;
            s.sum = x == A(-INFINITY) ? A(0) : A(1);
        }
        int slot = 0; // WindowRows: this step's slot; the window starts with the row's first steps
        if constexpr (Rows::kWindow) {
            for (int d = 0; d < rows.depth; ++d) {
                fill_slot<T, kStreamChunks>(rows.shared, d, in, body, lane, d, whole_steps);
            }
        }
        for (int64_t step = 0; step < steps; ++step) {
            const int64_t chunk0 = step * kStreamChunks;
            A x[kSize];
            if constexpr (Rows::kWindow) {
                async_copy_wait_pending(rows.depth - 1);
                load_slot<T, kStreamChunks>(x, rows.shared, slot, in, body, lane, step, whole_steps,
                                            A(-INFINITY));
            } else if (step < whole_steps) {
                load_row<T, kStreamChunks, int64_t, WholeTiles>(x, in, 0, body, lane, chunk0, true,
                                                                A(-INFINITY));
            } else {
                load_row<T, kStreamChunks, int64_t>(x, in, a.col_stride[LAB_ROW_X], body, lane, chunk0, true,
                                                    A(-INFINITY));
            }
            // columns relative to this step's first, in 32 bits: the target's, and the row's end
            const StepColumns<T> at(body, body_target, chunk0, lane);
            if (a.softcap != 0) { // past the row's end x stays -inf
#pragma unroll
                for (int i = 0; i < kSize; ++i) {
                    if (at.column(i, a.group) < at.end) x[i] = softcapped(a, x[i]);
                }
            }
            A tile_max = A(-INFINITY);
#pragma unroll
            for (int i = 0; i < kSize; ++i) tile_max = row_max(tile_max, x[i]);
            if (at.target >= 0) { // one step of one lane holds the target: no compare per element elsewhere
#pragma unroll
                for (int i = 0; i < kSize; ++i) {
                    if (at.column(i, a.group) == at.target) s.target = x[i];
                }
            }
            if (a.smoothing != 0) {
#pragma unroll
                for (int i = 0; i < kSize; ++i) {
                    if (at.column(i, a.group) < at.end) s.total += x[i];
                }
            }
            if (tile_max > s.max) {
                s.sum = s.max == A(-INFINITY) ? A(0) : s.sum * row_exp(s.max - tile_max);
                s.max = tile_max;
            }
            if (s.max != A(-INFINITY)) {
                const ShiftedExp<A> exp_minus_max(s.max);
#pragma unroll
                for (int i = 0; i < kSize; ++i) s.sum += exp_minus_max(x[i]);
            }
            if constexpr (Rows::kWindow) { // the step `depth` ahead into the slot this one freed
                fill_slot<T, kStreamChunks>(rows.shared, slot, in, body, lane, step + rows.depth,
                                            whole_steps);
                slot = slot + 1 == rows.depth ? 0 : slot + 1;
            }
        }
        const LogitStats<A> total = group_reduce(s, LogitStatsCombine{}, a.group);
        if (lane == 0) store_loss(a, row, loss_of(a, total, t));
        if (!a.row[LAB_ROW_OUT]) return;
        const A upstream = grad_scale<A>(a, row, t), smoothing = A(a.smoothing);
        const A to_softmax = upstream * z_factor(a, total) / total.sum,
                uniform = upstream * smoothing / A(a.n), hit = upstream * (A(1) - smoothing);
        const bool capped = a.softcap != 0;
        const ShiftedExp<A> exp_minus_max(total.max);
        char *row_out = row_at(a, row, LAB_ROW_OUT), *out = row_out + head * int(sizeof(T));
        if (Rows::kHeads && lane < head) {
            const A x = load_as_compute(reinterpret_cast<const T *>(row_in)[lane]);
            const A xc = capped ? softcapped(a, x) : x, hit_here = lane == t ? hit : A(0);
            const A g = exp_minus_max(xc) * to_softmax - uniform - hit_here;
            reinterpret_cast<T *>(row_out)[lane] =
                store_from_compute<T>(capped ? g * softcap_slope(a, xc) : g);
        }
        // Backwards: the end of the row was read last, so it is the part most likely still in L2 - and
        // the part a window still holds, its slots refilled with the steps before it.
        if constexpr (Rows::kWindow) slot = int((steps - 1) % rows.depth);
        for (int64_t step = steps - 1; step >= 0; --step) {
            const int64_t chunk0 = step * kStreamChunks;
            A x[kSize];
            if constexpr (Rows::kWindow) {
                async_copy_wait_pending(rows.depth - 1);
                load_slot<T, kStreamChunks>(x, rows.shared, slot, in, body, lane, step, whole_steps, A(0));
            } else if (step < whole_steps) {
                load_row<T, kStreamChunks, int64_t, LastUseTiles>(x, in, 0, body, lane, chunk0, true, A(0));
            } else {
                load_row<T, kStreamChunks, int64_t>(x, in, a.col_stride[LAB_ROW_X], body, lane, chunk0, true,
                                                    A(0));
            }
            const StepColumns<T> at(body, body_target, chunk0, lane);
            if (capped) { // the gradient of x' times the slope of x -> x'
#pragma unroll
                for (int i = 0; i < kSize; ++i) {
                    const A xc = softcapped(a, x[i]);
                    const A g = exp_minus_max(xc) * to_softmax - uniform -
                                (at.column(i, a.group) == at.target ? hit : A(0));
                    x[i] = g * softcap_slope(a, xc);
                }
            } else {
#pragma unroll
                for (int i = 0; i < kSize; ++i) x[i] = exp_minus_max(x[i]) * to_softmax - uniform;
                if (at.target >= 0) {
#pragma unroll
                    for (int i = 0; i < kSize; ++i) x[i] -= at.column(i, a.group) == at.target ? hit : A(0);
                }
            }
            if (step < whole_steps) {
                store_row<T, kStreamChunks, int64_t, LastUseTiles>(x, out, 0, body, lane, chunk0, true);
            } else {
                store_row<T, kStreamChunks, int64_t>(x, out, a.col_stride[LAB_ROW_OUT], body, lane, chunk0,
                                                     true);
            }
            if constexpr (Rows::kWindow) { // the step `depth` behind into the slot this one freed
                fill_slot<T, kStreamChunks>(rows.shared, slot, in, body, lane, step - rows.depth,
                                            whole_steps);
                slot = slot == 0 ? rows.depth - 1 : slot - 1;
            }
        }
    }
};

// The backward of a loss whose gradient the forward wrote: grad *= the upstream gradient of the row's
// loss (one number for every row when the loss was reduced). A row whose upstream gradient is exactly
// 1 - loss.backward() on a mean or a sum - is skipped without touching memory: the common case costs
// a launch, and the check is on the device, so nothing synchronizes and graph capture works.
struct CrossEntropyBackward {
    static constexpr int kMaxChunks = 4;
    static constexpr bool kColumnSums = false;

    template <typename T, int kChunks, typename Index>
    __device__ static void scale(const RowArgs &a, int64_t row, int lane, Index chunk0, compute_t<T> by) {
        using A = compute_t<T>;
        A g[kChunks * kRowVec<T>];
        char *at = row_at(a, row, LAB_ROW_OUT);
        load_row<T, kChunks, Index>(g, at, a.col_stride[LAB_ROW_OUT], a, lane, chunk0, true, A(0));
#pragma unroll
        for (int i = 0; i < kChunks * kRowVec<T>; ++i) g[i] *= by;
        store_row<T, kChunks, Index>(g, at, a.col_stride[LAB_ROW_OUT], a, lane, chunk0, true);
    }

    template <typename T> __device__ static compute_t<T> upstream(const RowArgs &a, int64_t row) {
        return load_converted<compute_t<T>>(row_at(a, row, LAB_ROW_LOSS), a.loss_dtype);
    }

    template <typename T, int kChunks>
    __device__ static void row(const RowArgs &a, int64_t row, int lane, bool valid,
                               ColumnSums<T, kChunks> &) {
        if (!valid) return;
        const compute_t<T> by = upstream<T>(a, row);
        if (by != compute_t<T>(1)) scale<T, kChunks, int>(a, row, lane, 0, by);
    }

    template <typename T, class Rows>
    __device__ static void streamed_row(const RowArgs &a, int64_t row, int64_t steps, Rows) {
        const compute_t<T> by = upstream<T>(a, row);
        if (by == compute_t<T>(1)) return;
        for (int64_t step = 0; step < steps; ++step) scale<T, 1, int64_t>(a, row, threadIdx.x, step, by);
    }
};

// 'mean': how many rows count (target != ignore_index), before the main kernel scales each row's
// gradient by the inverse: counts[0] = 1 / count, counts[1] = count. One block, a fixed-order sum.
template <typename A> __global__ void __launch_bounds__(1024) count_targets(RowArgs a, A *counts) {
    long long counted = 0;
    for (int64_t row = threadIdx.x; row < a.rows; row += blockDim.x) {
        counted += CrossEntropy::target_of(a, row) != a.ignore_index;
    }
    counted = group_sum(counted, int(blockDim.x));
    if (threadIdx.x == 0) {
        counts[0] = A(1) / A(counted);
        counts[1] = A(counted);
    }
}

// The reduced loss: the rows' losses added in a fixed order (each thread every blockDim.x-th row,
// then the block's fixed tree), divided by the rows that count for 'mean' (no row: 0 / 0, NaN, as torch).
template <typename A> __global__ void __launch_bounds__(1024) sum_row_losses(RowArgs a, const A *counts) {
    const A *losses = static_cast<const A *>(a.row_losses);
    A total = 0;
    for (int64_t row = threadIdx.x; row < a.rows; row += blockDim.x) total += losses[row];
    total = group_sum(total, int(blockDim.x));
    if (threadIdx.x == 0) {
        store_converted(a.row[LAB_ROW_LOSS], a.loss_dtype,
                        a.reduction == LAB_LOSS_MEAN ? total / counts[1] : total);
    }
}

} // namespace lab
