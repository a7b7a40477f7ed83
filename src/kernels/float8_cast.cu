// float8_cast.cu - lab_launch_float8_cast (launch.h): an array cast to float8 for lab.matmul's float8
// products, its transpose in the same pass, and the largest magnitude it held.
//
// Hopper's float8 products read both operands K-major (cuBLASLt's "TN": a's rows and b's columns
// contiguous), so a training step needs some operands transposed: the weight for the backward's
// gradient of the input, the activations and gradients for the weight's gradient. The cast writes
// the transpose while the tile is on chip (a 64 x 64 tile through shared memory), so it reads x once
// for both layouts. The amax it writes is what the next scale is made from (delayed scaling), or,
// with a reduction first, this one's (current scaling).
//
// Two kernels: a flat one when no transpose is asked (eight elements a thread, one 16- or 32-byte
// load and one 8-byte store), and the tiled one. Both saturate (a value past the format's largest
// finite one becomes that value, as TransformerEngine's casts do; NaN stays NaN) and reduce |x| to
// one atomicMax a warp, on the float's bits: for non-negative floats the integer order is the float
// order, and a NaN's bits are above infinity's, so a NaN in x comes out as amax's NaN.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "launch.h"
#include "resident_blocks.cuh"

namespace lab {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 8;   // the flat kernel's elements per thread and step
constexpr int kTile = 64;       // the tiled kernel's tile: 64 x 64 elements
constexpr int kTileStride = 68; // bytes per row of the staged transpose: 17 words, so the eight
                                // rows a warp writes at once fall in different banks

// 1 / scale, and 0 for a scale of 0: the scale made from the amax of an all-zero x (amax / 448) is 0,
// and its cast is zeros, not 0 * inf = NaN.
__device__ __forceinline__ float zero_or_reciprocal(float scale) { return scale == 0.f ? 0.f : 1.0f / scale; }

template <typename T> __device__ __forceinline__ float as_float(T v) { return float(v); }
template <> __device__ __forceinline__ float as_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float as_float<__nv_bfloat16>(__nv_bfloat16 v) {
    return __bfloat162float(v);
}

// Eight elements of x at `from`: one 16-byte load (two for float32) where `vector`, else element by
// element up to `count` (zeros past it).
template <typename T>
__device__ __forceinline__ void load_eight(const T *from, bool vector, int count, float (&v)[kPerThread]) {
    if (vector) {
        T values[kPerThread];
        if constexpr (sizeof(T) == 4) {
            reinterpret_cast<uint4 *>(values)[0] = reinterpret_cast<const uint4 *>(from)[0];
            reinterpret_cast<uint4 *>(values)[1] = reinterpret_cast<const uint4 *>(from)[1];
        } else {
            reinterpret_cast<uint4 *>(values)[0] = reinterpret_cast<const uint4 *>(from)[0];
        }
#pragma unroll
        for (int e = 0; e < kPerThread; e++) v[e] = as_float(values[e]);
    } else {
#pragma unroll
        for (int e = 0; e < kPerThread; e++) v[e] = e < count ? as_float(from[e]) : 0.f;
    }
}

// Eight values times `inverse` as float8 bytes (two conversions a pair), and |v| into amax_bits.
template <__nv_fp8_interpretation_t kFormat>
__device__ __forceinline__ void to_float8(const float (&v)[kPerThread], float inverse,
                                          uint8_t (&bytes)[kPerThread], unsigned &amax_bits) {
#pragma unroll
    for (int e = 0; e < kPerThread; e += 2) {
        const __nv_fp8x2_storage_t pair = __nv_cvt_float2_to_fp8x2(
            make_float2(v[e] * inverse, v[e + 1] * inverse), __NV_SATFINITE, kFormat);
        bytes[e] = uint8_t(pair & 0xFF);
        bytes[e + 1] = uint8_t(pair >> 8);
        amax_bits = max(amax_bits, max(__float_as_uint(fabsf(v[e])), __float_as_uint(fabsf(v[e + 1]))));
    }
}

// The warp's largest |x| into *amax: one atomic a warp.
__device__ __forceinline__ void publish_amax(float *amax, unsigned amax_bits) {
    if (!amax) return;
    amax_bits = __reduce_max_sync(0xFFFFFFFFu, amax_bits);
    if ((threadIdx.x & 31) == 0) atomicMax(reinterpret_cast<unsigned *>(amax), amax_bits);
}

template <typename T, __nv_fp8_interpretation_t kFormat>
__global__ void __launch_bounds__(kThreads) float8_cast_flat(const lab_float8_cast_launch p, bool vector) {
    const T *x = static_cast<const T *>(p.x);
    uint8_t *out = static_cast<uint8_t *>(p.out);
    const int64_t n = p.rows * p.cols;
    const float inverse = zero_or_reciprocal(*p.scale);
    unsigned amax_bits = 0;
    for (int64_t first = (int64_t(blockIdx.x) * kThreads + threadIdx.x) * kPerThread; first < n;
         first += int64_t(gridDim.x) * kThreads * kPerThread) {
        const int count = n - first < kPerThread ? int(n - first) : kPerThread;
        const bool whole = vector && count == kPerThread;
        float v[kPerThread];
        load_eight(x + first, whole, count, v);
        uint8_t bytes[kPerThread];
        to_float8<kFormat>(v, inverse, bytes, amax_bits);
        if (whole) {
            *reinterpret_cast<uint2 *>(out + first) = *reinterpret_cast<const uint2 *>(bytes);
        } else {
#pragma unroll
            for (int e = 0; e < kPerThread; e++) {
                if (e < count) out[first + e] = bytes[e]; // unrolled: bytes stays in registers
            }
        }
    }
    publish_amax(p.amax, amax_bits);
}

// One 64 x 64 tile a step: each thread casts two runs of eight elements of a row (rows t / 8 and
// t / 8 + 32), writes them to out as they are, and stages them transposed in shared memory, from
// which each thread writes sixteen bytes of one row of out_t. `vector_in` / `vector_out` /
// `vector_t`: x, out and out_t allow their vector accesses (aligned, rows of a multiple of 8 or 16).
template <typename T, __nv_fp8_interpretation_t kFormat>
__global__ void __launch_bounds__(kThreads)
    float8_cast_transpose(const lab_float8_cast_launch p, bool vector_in, bool vector_out, bool vector_t) {
    __shared__ __align__(16) uint8_t staged[kTile * kTileStride]; // staged[col][row], the tile transposed
    const T *x = static_cast<const T *>(p.x);
    uint8_t *out = static_cast<uint8_t *>(p.out), *out_t = static_cast<uint8_t *>(p.out_t);
    const int64_t rows = p.rows, cols = p.cols;
    const int64_t tile_rows = (rows + kTile - 1) / kTile, tile_cols = (cols + kTile - 1) / kTile;
    const float inverse = zero_or_reciprocal(*p.scale);
    unsigned amax_bits = 0;
    const int run_row = threadIdx.x / 8, run_col = (threadIdx.x % 8) * kPerThread;
    const int t_row = threadIdx.x / 4, t_col = (threadIdx.x % 4) * 16;
    for (int64_t tile = blockIdx.x; tile < tile_rows * tile_cols; tile += gridDim.x) {
        const int64_t row0 = (tile / tile_cols) * kTile, col0 = (tile % tile_cols) * kTile;
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int r = run_row + 32 * half;
            const int64_t row = row0 + r, col = col0 + run_col;
            const int64_t left = row < rows ? cols - col : 0; // elements of this run inside x
            const int count = left <= 0 ? 0 : left < kPerThread ? int(left) : kPerThread;
            float v[kPerThread];
            load_eight(x + row * cols + col, vector_in && count == kPerThread, count, v);
            uint8_t bytes[kPerThread];
            to_float8<kFormat>(v, inverse, bytes, amax_bits);
            if (out) {
                if (vector_out && count == kPerThread) {
                    *reinterpret_cast<uint2 *>(out + row * cols + col) =
                        *reinterpret_cast<const uint2 *>(bytes);
                } else {
#pragma unroll
                    for (int e = 0; e < kPerThread; e++) {
                        if (e < count) out[row * cols + col + e] = bytes[e];
                    }
                }
            }
#pragma unroll
            for (int e = 0; e < kPerThread; e++) staged[(run_col + e) * kTileStride + r] = bytes[e];
        }
        __syncthreads();
        if (out_t) {
            const int64_t t_out_row = col0 + t_row, t_out_col = row0 + t_col; // out_t is cols x rows
            if (t_out_row < cols) {
                uint32_t words[4];
#pragma unroll
                for (int w = 0; w < 4; w++) {
                    words[w] =
                        *reinterpret_cast<const uint32_t *>(&staged[t_row * kTileStride + t_col + 4 * w]);
                }
                uint8_t *to = out_t + t_out_row * rows + t_out_col;
                if (vector_t && t_out_col + 16 <= rows) {
                    *reinterpret_cast<uint4 *>(to) = make_uint4(words[0], words[1], words[2], words[3]);
                } else {
#pragma unroll
                    for (int e = 0; e < 16; e++) {
                        if (t_out_col + e < rows) to[e] = uint8_t(words[e / 4] >> (8 * (e % 4)));
                    }
                }
            }
        }
        __syncthreads(); // the next tile overwrites the staging
    }
    publish_amax(p.amax, amax_bits);
}

bool aligned(const void *pointer, uintptr_t bytes) {
    return reinterpret_cast<uintptr_t>(pointer) % bytes == 0;
}

template <typename T, __nv_fp8_interpretation_t kFormat>
cudaError_t launch(const lab_float8_cast_launch &p, cudaStream_t stream) {
    DeviceShape shape;
    cudaError_t err = current_device_shape(&shape);
    if (err != cudaSuccess) return err;
    if (p.amax && (err = cudaMemsetAsync(p.amax, 0, sizeof(float), stream)) != cudaSuccess) return err;
    // a grid of at most eight resident blocks a multiprocessor, striding: the amax is one atomic a warp
    const int64_t most_blocks = int64_t(shape.multiprocessors) * 8;
    if (!p.out_t) {
        const int64_t n = p.rows * p.cols;
        const int64_t steps = (n + kThreads * kPerThread - 1) / (kThreads * kPerThread);
        const bool vector = aligned(p.x, 16) && aligned(p.out, 8);
        float8_cast_flat<T, kFormat>
            <<<unsigned(steps < most_blocks ? steps : most_blocks), kThreads, 0, stream>>>(p, vector);
    } else {
        const int64_t tiles = ((p.rows + kTile - 1) / kTile) * ((p.cols + kTile - 1) / kTile);
        const bool vector_in = aligned(p.x, 16) && p.cols % kPerThread == 0;
        const bool vector_out = p.out && aligned(p.out, 8) && p.cols % kPerThread == 0;
        const bool vector_t = aligned(p.out_t, 16) && p.rows % 16 == 0;
        float8_cast_transpose<T, kFormat>
            <<<unsigned(tiles < most_blocks ? tiles : most_blocks), kThreads, 0, stream>>>(
                p, vector_in, vector_out, vector_t);
    }
    return cudaGetLastError();
}

template <typename T> cudaError_t launch_input(const lab_float8_cast_launch &p, cudaStream_t stream) {
    switch (p.out_dtype) {
    case LAB_FLOAT8_E4M3FN: return launch<T, __NV_E4M3>(p, stream);
    case LAB_FLOAT8_E5M2: return launch<T, __NV_E5M2>(p, stream);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace
} // namespace lab

extern "C" cudaError_t lab_launch_float8_cast(const lab_float8_cast_launch *launch, cudaStream_t stream) {
    using namespace lab;
    if (launch->rows * launch->cols == 0) { // nothing to cast; the amax of nothing is 0
        return launch->amax ? cudaMemsetAsync(launch->amax, 0, sizeof(float), stream) : cudaSuccess;
    }
    switch (launch->x_dtype) {
    case LAB_FLOAT16: return launch_input<__half>(*launch, stream);
    case LAB_BFLOAT16: return launch_input<__nv_bfloat16>(*launch, stream);
    case LAB_FLOAT32: return launch_input<float>(*launch, stream);
    default: return cudaErrorInvalidValue;
    }
}
