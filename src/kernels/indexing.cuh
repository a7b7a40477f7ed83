// indexing.cuh - turning a linear element index into each operand's byte offset, for the strided
// and casting paths of lab's kernels and of lab.ElementwiseKernel's generated ones.
//
// Division is the cost: a 64-bit divide is ~100 instructions, so while the index fits in 31 bits
// each dimension's size is divided by multiply-high and shift with a magic number computed on the
// host (Granlund & Montgomery; PyTorch's IntDivider). Dimensions are stored innermost first.
#pragma once

// No host headers: NVRTC compiles it too, for lab.ElementwiseKernel's strided kernels.
#include "strided_layout.h"

namespace lab {

// ceil(a / b) for b > 0: how many blocks of b cover a items (the launchers' grid arithmetic).
__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// n / divisor and n % divisor, exact for n < 2^31 (strided_layout.h computes the magic numbers).
__device__ __forceinline__ void divmod(const lab_fast_divmod &f, uint32_t n, uint32_t &quotient,
                                       uint32_t &remainder) {
    quotient = (__umulhi(n, f.multiplier) + n) >> f.shift;
    remainder = n - quotient * f.divisor;
}

template <int kOperands> struct StridedLayout {
    LAB_STRIDED_LAYOUT_MEMBERS(kOperands);
};

template <int kOperands>
__device__ __forceinline__ void byte_offsets(const StridedLayout<kOperands> &layout, int64_t index,
                                             int64_t (&offsets)[kOperands]) {
#pragma unroll
    for (int k = 0; k < kOperands; ++k) offsets[k] = 0;
    if (layout.dims.index32) {
        uint32_t rest = static_cast<uint32_t>(index);
        // Not unrolled: an unrolled 8-deep loop per element per unroll step made each kernel take
        // ~10x longer to compile, for no measurable gain on the 1-3 dimensions left after merging.
        for (int d = 0; d < layout.dims.ndim; ++d) {
            if (d == layout.dims.ndim - 1) { // the outermost dimension needs no division
#pragma unroll
                for (int k = 0; k < kOperands; ++k) offsets[k] += int64_t(rest) * layout.strides[k][d];
                break;
            }
            uint32_t quotient, position;
            divmod(layout.dims.divisors[d], rest, quotient, position);
#pragma unroll
            for (int k = 0; k < kOperands; ++k) offsets[k] += int64_t(position) * layout.strides[k][d];
            rest = quotient;
        }
    } else {
        int64_t rest = index;
        for (int d = 0; d < layout.dims.ndim; ++d) {
            const int64_t position = d == layout.dims.ndim - 1 ? rest : rest % layout.dims.sizes[d];
            rest = d == layout.dims.ndim - 1 ? 0 : rest / layout.dims.sizes[d];
#pragma unroll
            for (int k = 0; k < kOperands; ++k) offsets[k] += position * layout.strides[k][d];
        }
    }
}

} // namespace lab
