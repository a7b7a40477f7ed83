// sweep_rows.cuh - what the standalone row sweeps (sweep_norms.cu, sweep_norm_backward.cu) share: a
// 16-byte vector of eight bfloat16 and a sum over the block.
#pragma once

#include <cuda_bf16.h>

struct alignas(16) Vec8 {
    __nv_bfloat162 h[4];
};

// Sum over the block, every warp receiving the total. `scratch` (32 floats) is reused by the next
// call only after a barrier; a loop over rows alternates two of them (by row parity) so that one
// row's reduction never overwrites what a slower warp still reads from the previous row's.
__device__ __forceinline__ float block_sum(float v, float *scratch) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
