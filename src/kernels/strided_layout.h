/* strided_layout.h - the layout a strided kernel walks: its dimensions innermost first, each size
 * with the magic numbers that divide by it fast, and every operand's byte strides.
 *
 * Plain C with no host-only parts outside the guard, so three compilers read this one definition:
 * the C dispatch layer fills it for runtime-compiled kernels (lab.ElementwiseKernel), nvcc's
 * launchers fill it for lab's own kernels, and NVRTC compiles the kernels that read it
 * (indexing.cuh). A kernel for K operands declares LAB_STRIDED_LAYOUT_MEMBERS(K); a struct
 * declaring the same members for more operands starts with the same bytes, so the C side fills the
 * largest one and the launch copies just the kernel's part. */
#ifndef LAB_STRIDED_LAYOUT_H
#define LAB_STRIDED_LAYOUT_H

#ifdef __CUDACC_RTC__
#include <cuda/std/cstdint>
using cuda::std::int64_t;
using cuda::std::uint32_t;
using cuda::std::uint64_t;
#else
#include <stdint.h>
#endif

#define LAB_MAX_DIMS 8

/* n / divisor and n % divisor for n < 2^31 by a multiply-high and a shift (Granlund & Montgomery;
 * PyTorch's IntDivider): a 64-bit divide is ~100 instructions, this is three. */
typedef struct {
    uint32_t divisor, multiplier, shift;
} lab_fast_divmod;

typedef struct {
    int ndim;
    int index32; /* every linear index fits 31 bits: dimensions are divided with lab_fast_divmod */
    int64_t sizes[LAB_MAX_DIMS];
    lab_fast_divmod divisors[LAB_MAX_DIMS];
} lab_layout_dims;

#define LAB_STRIDED_LAYOUT_MEMBERS(n_operands)                                                               \
    lab_layout_dims dims;                                                                                    \
    int64_t strides[n_operands][LAB_MAX_DIMS] /* bytes, innermost dimension first */

#ifndef __CUDACC_RTC__
static inline lab_fast_divmod lab_fast_divmod_for(uint32_t d) {
    lab_fast_divmod f;
    f.divisor = d;
    f.shift = 0;
    while (((uint64_t)1 << f.shift) < d) ++f.shift;
    f.multiplier = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << f.shift) - d)) / d + 1);
    return f;
}

/* A plan's dimensions (outermost first, as the iterator orders them) into a kernel's layout
 * (innermost first): sizes, their divisors where `count` - the linear indices the kernel will
 * decompose - is below 2^31, and the strides of n_operands operands. */
static inline void lab_fill_layout(lab_layout_dims *dims, int64_t (*strides)[LAB_MAX_DIMS], int n_operands,
                                   int ndim, const int64_t *shape,
                                   const int64_t (*plan_strides)[LAB_MAX_DIMS], int64_t count) {
    dims->ndim = ndim;
    dims->index32 = count < ((int64_t)1 << 31);
    for (int d = 0; d < ndim; d++) {
        const int from = ndim - 1 - d;
        dims->sizes[d] = shape[from];
        if (dims->index32) dims->divisors[d] = lab_fast_divmod_for((uint32_t)shape[from]);
        for (int k = 0; k < n_operands; k++) strides[k][d] = plan_strides[k][from];
    }
}
#endif

#endif
