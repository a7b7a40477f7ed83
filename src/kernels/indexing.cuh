// indexing.cuh - turning a linear element index into each operand's byte offset, for the strided
// and casting paths.
//
// Division is the cost: a 64-bit divide is ~100 instructions, so while the index fits in 31 bits
// each dimension's size is divided by multiply-high and shift with a magic number computed on the
// host (Granlund & Montgomery; PyTorch's IntDivider). Dimensions are stored innermost first.
#pragma once

#include <stdint.h>

#include "launch.h"

namespace lab {

// ceil(a / b) for b > 0: how many blocks of b cover a items (the launchers' grid arithmetic).
__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct FastDivmod {
    uint32_t divisor, multiplier, shift;

    FastDivmod() = default;
    __host__ explicit FastDivmod(uint32_t d) : divisor(d) {
        shift = 0;
        while ((uint64_t(1) << shift) < d) ++shift;
        multiplier = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1);
    }
    // Exact for n < 2^31.
    __device__ __forceinline__ void divmod(uint32_t n, uint32_t &quotient, uint32_t &remainder) const {
        quotient = (__umulhi(n, multiplier) + n) >> shift;
        remainder = n - quotient * divisor;
    }
};

template <int kOperands> struct StridedLayout {
    int ndim;
    bool index32; // numel < 2^31: use FastDivmod
    int64_t sizes[LAB_MAX_DIMS];
    FastDivmod divisors[LAB_MAX_DIMS];
    int64_t strides[kOperands][LAB_MAX_DIMS]; // bytes
};

// From the plan (outermost first) to the kernel's layout (innermost first).
template <int kOperands> StridedLayout<kOperands> make_layout(const lab_elementwise_launch &launch) {
    StridedLayout<kOperands> layout{};
    layout.ndim = launch.ndim;
    layout.index32 = launch.numel < (int64_t(1) << 31);
    for (int d = 0; d < launch.ndim; d++) {
        const int from = launch.ndim - 1 - d;
        layout.sizes[d] = launch.shape[from];
        if (layout.index32) layout.divisors[d] = FastDivmod(static_cast<uint32_t>(launch.shape[from]));
        for (int k = 0; k < kOperands; k++) layout.strides[k][d] = launch.byte_strides[k][from];
    }
    return layout;
}

template <int kOperands>
__device__ __forceinline__ void byte_offsets(const StridedLayout<kOperands> &layout, int64_t index,
                                             int64_t (&offsets)[kOperands]) {
#pragma unroll
    for (int k = 0; k < kOperands; ++k) offsets[k] = 0;
    if (layout.index32) {
        uint32_t rest = static_cast<uint32_t>(index);
        // Not unrolled: an unrolled 8-deep loop per element per unroll step made each kernel take
        // ~10x longer to compile, for no measurable gain on the 1-3 dimensions left after merging.
        for (int d = 0; d < layout.ndim; ++d) {
            if (d == layout.ndim - 1) { // the outermost dimension needs no division
#pragma unroll
                for (int k = 0; k < kOperands; ++k) offsets[k] += int64_t(rest) * layout.strides[k][d];
                break;
            }
            uint32_t quotient, position;
            layout.divisors[d].divmod(rest, quotient, position);
#pragma unroll
            for (int k = 0; k < kOperands; ++k) offsets[k] += int64_t(position) * layout.strides[k][d];
            rest = quotient;
        }
    } else {
        int64_t rest = index;
        for (int d = 0; d < layout.ndim; ++d) {
            const int64_t position = d == layout.ndim - 1 ? rest : rest % layout.sizes[d];
            rest = d == layout.ndim - 1 ? 0 : rest / layout.sizes[d];
#pragma unroll
            for (int k = 0; k < kOperands; ++k) offsets[k] += position * layout.strides[k][d];
        }
    }
}

} // namespace lab
