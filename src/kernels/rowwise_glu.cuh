// rowwise_glu.cuh - the SwiGLU and GeGLU backwards: from grad_out, gate and up, both gradients in
// one pass (three arrays read, two written, each element once). There is no reduction: the row-wise
// machinery serves for its two outputs and its strided rows - gate and up may be the two halves of
// one [rows, 2h] array, and so may their gradients. The forwards are elementwise ops (ops.def).
#pragma once

#include "functors.cuh"
#include "rowwise.cuh"

namespace lab {

// grad_gate = grad_out * up * act'(gate), grad_up = grad_out * act(gate); act is silu, or gelu's
// tanh approximation (kGelu).
template <bool kGelu> struct GluBackward {
    static constexpr int kMaxChunks = 1; // three rows live in registers: 2 spill for half types (ptxas)
    static constexpr bool kColumnSums = false;

    // On return `gate` holds grad_gate and `up` grad_up.
    template <typename A, int K>
    __device__ static void gradients(const A (&grad_out)[K], A (&gate)[K], A (&up)[K]) {
#pragma unroll
        for (int i = 0; i < K; ++i) {
            A act, slope;
            glu_activation_and_slope<kGelu>(gate[i], act, slope);
            gate[i] = grad_out[i] * up[i] * slope;
            up[i] = grad_out[i] * act;
        }
    }

    // Every read before any write: grad_gate or grad_up may be the very view of an input.
    template <typename T, int kChunks, typename Index>
    __device__ static void step(const RowArgs &a, int64_t row, int lane, Index chunk0, bool valid) {
        using A = compute_t<T>;
        constexpr int kSize = kChunks * kRowVec<T>;
        A grad_out[kSize], gate[kSize], up[kSize];
        load_row<T, kChunks, Index>(grad_out, row_at(a, row, LAB_ROW_GRAD), a.col_stride[LAB_ROW_GRAD], a,
                                    lane, chunk0, valid, A(0));
        load_row<T, kChunks, Index>(gate, row_at(a, row, LAB_ROW_X), a.col_stride[LAB_ROW_X], a, lane, chunk0,
                                    valid, A(0));
        load_row<T, kChunks, Index>(up, row_at(a, row, LAB_ROW_UP), a.col_stride[LAB_ROW_UP], a, lane, chunk0,
                                    valid, A(0));
        gradients(grad_out, gate, up);
        store_row<T, kChunks, Index>(gate, row_at(a, row, LAB_ROW_OUT), a.col_stride[LAB_ROW_OUT], a, lane,
                                     chunk0, valid);
        store_row<T, kChunks, Index>(up, row_at(a, row, LAB_ROW_GRAD_UP), a.col_stride[LAB_ROW_GRAD_UP], a,
                                     lane, chunk0, valid);
    }

    template <typename T, int kChunks>
    __device__ static void row(const RowArgs &a, int64_t row, int lane, bool valid,
                               ColumnSums<T, kChunks> &) {
        step<T, kChunks, int>(a, row, lane, 0, valid);
    }

    template <typename T, class Rows>
    __device__ static void streamed_row(const RowArgs &a, int64_t row, int64_t steps, Rows) {
        for (int64_t s = 0; s < steps; ++s) step<T, 1, int64_t>(a, row, threadIdx.x, s, true);
    }
};

} // namespace lab
