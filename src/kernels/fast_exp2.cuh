// fast_exp2.cuh - 2^x in one instruction, for the softmaxes (row-wise kernels, attention).
#pragma once

namespace lab {

// 2^x as the hardware approximates it (one MUFU.EX2, ~2 ulp), results below 2^-126 flushed to 0.
// exp2f adds a compare and two multiplies an element to keep those subnormal results (SASS of the
// staged softmax, 2026-11-30: 6 instructions an exponential instead of 1); no softmax, whose terms
// sum to at least 1, can tell them from 0.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

} // namespace lab
