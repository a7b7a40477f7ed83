// elementwise_strided.cuh - the loop the three strided paths share (strided, strided_vectorized,
// casting): each thread takes kUnroll items, turns each item's linear index into every operand's
// byte offset (indexing.cuh), issues all its loads before the first use, then computes and stores.
//
// What an item is - one element of one dtype, a 16-byte packet, or an element converted from its
// operand's run-time dtype - is the Access policy's business:
//   typename Access::Loaded                     what one input's load yields
//   Loaded load(int k, int64_t offset)          input k (0-based) at that byte offset
//   void store(int64_t offset, const Loaded (&inputs)[kInputs])   compute the item, store it
#pragma once

#include "elementwise.cuh"
#include "indexing.cuh"

namespace lab {

template <int kOperands> struct OperandPtrs {
    char *p[kOperands];
};

template <int kInputs, typename Access>
__device__ __forceinline__ void strided_loop(const Access &access, const StridedLayout<kInputs + 1> &layout,
                                             int64_t n_items) {
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * kUnroll + threadIdx.x;
    typename Access::Loaded loaded[kUnroll][kInputs];
    int64_t out_offset[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kThreads;
        if (i < n_items) {
            int64_t offsets[kInputs + 1];
            byte_offsets(layout, i, offsets);
            out_offset[u] = offsets[0];
#pragma unroll
            for (int k = 0; k < kInputs; ++k) loaded[u][k] = access.load(k, offsets[k + 1]);
        }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kThreads;
        if (i < n_items) access.store(out_offset[u], loaded[u]);
    }
}

} // namespace lab
