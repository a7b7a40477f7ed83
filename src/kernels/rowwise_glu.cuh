// rowwise_glu.cuh - the SwiGLU and GeGLU backwards: from grad_out, gate and up, both gradients in
// one pass (three arrays read, two written, each element once). There is no reduction: rows whose
// every operand is contiguous and 16-byte aligned are cut into packets (glu_backward_packets, any
// number of rows at any row strides: gate and up may be the two halves of one [rows, 2h] array, and
// so may their gradients); other layouts take the row-wise machinery (GluBackward). The forwards
// are elementwise ops (ops.def).
#pragma once

#include "elementwise_vectorized.cuh"
#include "functors.cuh"
#include "rowwise_column_sums.cuh"

namespace lab {

// grad_gate = grad_out * up * act'(gate), grad_up = grad_out * act(gate); act is silu, or gelu's
// tanh approximation (kGelu). kProduct: the forward's product act(gate) * up is written as well (the
// PRODUCT operand) - a GLU followed by a linear layer that keeps gate and up, not their product,
// needs it again for the layer's weight gradient, and making it here reads nothing more (lab.nn's
// GluLinear). Kernels of their own, so that the plain backward's registers are as before: with both
// in one streamed kernel, ptxas spilled the geglu half types; now only the product's streamed rows of
// half types spill (16-28 bytes), a path for layouts the packets do not take.
template <bool kGelu, bool kProduct = false> struct GluBackward {
    static constexpr int kMaxChunks = 1; // three rows live in registers: 2 spill for half types (ptxas)
    static constexpr bool kColumnSums = false;

    // On return `gate` holds grad_gate, `up` grad_up and, with kProduct, `product` act(gate) * up.
    // `product` may be `grad_out` itself (no registers for a fourth row): each element's grad_out is
    // read before its product is written.
    template <typename A, int K>
    __device__ static void gradients(A (&grad_out)[K], A (&gate)[K], A (&up)[K], A (&product)[K]) {
#pragma unroll
        for (int i = 0; i < K; ++i) {
            A act, slope;
            glu_activation_and_slope<kGelu>(gate[i], act, slope);
            const A g = grad_out[i], u = up[i];
            gate[i] = g * u * slope;
            up[i] = g * act;
            if constexpr (kProduct) product[i] = act * u;
        }
    }

    // Every read before any write: an output may be the very view of an input.
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
        gradients(grad_out, gate, up, grad_out); // grad_out: the product, with kProduct
        if constexpr (kProduct) {
            store_row<T, kChunks, Index>(grad_out, row_at(a, row, LAB_ROW_PRODUCT),
                                         a.col_stride[LAB_ROW_PRODUCT], a, lane, chunk0, valid);
        }
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

// Where glu_backward_packets finds its operands: each one's first row, and the bytes between rows.
struct GluPackets {
    const char *grad_out, *gate, *up;
    char *grad_gate, *grad_up, *product; // product: null where not wanted
    int64_t row_stride[6];               // grad_out, gate, up, grad_gate, grad_up, product
    uint32_t packets_per_row, total;
};

// kPackets 16-byte packets of each input per thread, every load issued before the first use (the
// elementwise kernels' rule: bytes in flight hide the memory's latency; the row-wise kernel, a
// row of three inputs in 56 registers a thread, ran at 63% of DRAM bandwidth).
// kProduct: p.product is written too.
template <bool kGelu, bool kProduct, typename T, int kThreadsPerBlock, int kPackets>
__global__ void __launch_bounds__(kThreadsPerBlock) glu_backward_packets(const GluPackets p) {
    using A = compute_t<T>;
    using Packet = Packed16<T>;
    constexpr int V = Packet::kCount;
    const uint32_t threads = gridDim.x * kThreadsPerBlock;
    for (uint32_t first = blockIdx.x * kThreadsPerBlock + threadIdx.x; first < p.total;
         first += threads * kPackets) {
        Packet grad_out[kPackets], gate[kPackets], up[kPackets];
        constexpr int kOperands = kProduct ? 6 : 5;
        int64_t offset[kPackets][kOperands];
#pragma unroll
        for (int j = 0; j < kPackets; j++) {
            const uint32_t i = first + j * threads;
            if (i < p.total) {
                const uint32_t row = i / p.packets_per_row, column_bytes = i % p.packets_per_row * 16;
#pragma unroll
                for (int k = 0; k < kOperands; k++) offset[j][k] = row * p.row_stride[k] + column_bytes;
                grad_out[j] = *reinterpret_cast<const Packet *>(p.grad_out + offset[j][0]);
                gate[j] = *reinterpret_cast<const Packet *>(p.gate + offset[j][1]);
                up[j] = *reinterpret_cast<const Packet *>(p.up + offset[j][2]);
            }
        }
#pragma unroll
        for (int j = 0; j < kPackets; j++) {
            if (first + j * threads >= p.total) break;
            A g[V], a[V], b[V];
            unpack<false>(grad_out[j], g);
            unpack<false>(gate[j], a);
            unpack<false>(up[j], b);
            GluBackward<kGelu, kProduct>::gradients(g, a, b, g); // g: the product, with kProduct
            if constexpr (kProduct) {
                pack<false>(g, grad_out[j]);
                *reinterpret_cast<Packet *>(p.product + offset[j][5]) = grad_out[j];
            }
            pack<false>(a, gate[j]);
            pack<false>(b, up[j]);
            *reinterpret_cast<Packet *>(p.grad_gate + offset[j][3]) = gate[j];
            *reinterpret_cast<Packet *>(p.grad_up + offset[j][4]) = up[j];
        }
    }
}

} // namespace lab
