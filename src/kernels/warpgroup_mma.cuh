// warpgroup_mma.cuh - Hopper's tensor-core product (wgmma, sm_90a): what changes from tile_mma.cuh's
// mma.sync when four warps multiply together and read their operands straight from shared memory.
//
// One wgmma.mma_async.m64nNk16 multiplies a 64x16 tile of A by a 16xN tile of B into 64xN float
// accumulators held by a warpgroup (four consecutive warps, the first one's index a multiple of 4).
// Warp w of the group holds rows 16w .. 16w+15, in exactly mma.sync's C layout, one FragC per eight
// columns: so everything written for mma.sync's accumulators (the online softmax, accumulators_as_a,
// store_accumulators) works on wgmma's unchanged. A comes from shared memory or, in mma.sync's A
// layout, from registers (attention's probabilities); B always comes from shared memory. No ldmatrix:
// the tensor cores read the tiles themselves, described by a 64-bit matrix descriptor, and the
// product runs asynchronously - issued, committed as a group, waited for.
//
// The tiles must be in the layout the descriptor names. WarpgroupTile below is the 128-byte swizzle:
// a tile is cut into 64-column slabs (128 bytes a row), each slab's rows 128 bytes apart, and the
// 16-byte chunk c of row r stored at chunk c ^ (r % 8) - tile_mma.cuh's SwizzledTile for a 64-column
// tile, repeated slab after slab. Eight rows (1024 bytes) are one swizzle atom, and the hardware
// applies the XOR to address bits, so a slab must start on a 1024-byte boundary.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "tile_mma.cuh"

namespace lab {

template <int kRows, int kColumns> struct WarpgroupTile {
    static_assert(kColumns % 64 == 0 && kRows % 8 == 0, "whole 64-column slabs of whole swizzle atoms");
    static constexpr int kSlabElements = kRows * 64;
    static constexpr int kElements = kRows * kColumns;
    // The element offset of chunk `chunk` (8 elements) of row `row`.
    __host__ __device__ static __forceinline__ int chunk_offset(int row, int chunk) {
        return (chunk >> 3) * kSlabElements + row * 64 + (((chunk & 7) ^ (row & 7)) << 3);
    }
};

// The descriptor of a matrix in shared memory with the 128-byte swizzle: its first element's
// address, and two strides in bytes whose meaning depends on which dimension is contiguous.
//   K-major (each row's k elements contiguous: q and k for q k^T): `stride` from one 8-row atom to
//   the next (1024 here); `leading` is unused, the 16 k of one instruction lying inside a row.
//   MN-major (each k's n elements contiguous: v for p v, where k runs over keys): `leading` from one
//   64-column slab to the next, `stride` from one group of 8 k to the next (1024).
__device__ __forceinline__ uint64_t matrix_descriptor(uint32_t shared_address, uint32_t leading,
                                                      uint32_t stride) {
    constexpr uint64_t kSwizzle128 = uint64_t(1) << 62;
    return uint64_t((shared_address & 0x3FFFF) >> 4) | (uint64_t((leading >> 4) & 0x3FFF) << 16) |
           (uint64_t((stride >> 4) & 0x3FFF) << 32) | kSwizzle128;
}

// Before a group of products whose accumulators or A registers ordinary instructions wrote.
__device__ __forceinline__ void warpgroup_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void warpgroup_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most kPending committed groups of this warpgroup are still running.
template <int kPending> __device__ __forceinline__ void warpgroup_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Pins registers a product reads or writes, at this point of the program. After a wait: the compiler
// sees a product's accumulators as written when it is issued, so without this it could move their
// first reads above the wait that makes them real. Before an issue: the last writes of its A
// fragments and accumulators land first, rather than among products already running (which makes
// ptxas serialize them).
template <typename Fragment, int kTiles>
__device__ __forceinline__ void fence_registers(Fragment (&f)[kTiles]) {
    constexpr int kRegisters = sizeof(f[0].x) / sizeof(f[0].x[0]);
#pragma unroll
    for (int j = 0; j < kTiles; j++) {
#pragma unroll
        for (int e = 0; e < kRegisters; e++) {
            if constexpr (std::is_same_v<Fragment, FragC>) {
                asm volatile("" : "+f"(f[j].x[e])::"memory");
            } else {
                asm volatile("" : "+r"(f[j].x[e])::"memory");
            }
        }
    }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LAB_WGMMA_ACC4(j) "+f"(d[j].x[0]), "+f"(d[j].x[1]), "+f"(d[j].x[2]), "+f"(d[j].x[3])
#define LAB_WGMMA_ACC16 LAB_WGMMA_ACC4(0), LAB_WGMMA_ACC4(1), LAB_WGMMA_ACC4(2), LAB_WGMMA_ACC4(3)
#define LAB_WGMMA_ACC32                                                                                      \
    LAB_WGMMA_ACC16, LAB_WGMMA_ACC4(4), LAB_WGMMA_ACC4(5), LAB_WGMMA_ACC4(6), LAB_WGMMA_ACC4(7)
#define LAB_WGMMA_ACC64                                                                                      \
    LAB_WGMMA_ACC32, LAB_WGMMA_ACC4(8), LAB_WGMMA_ACC4(9), LAB_WGMMA_ACC4(10), LAB_WGMMA_ACC4(11),           \
        LAB_WGMMA_ACC4(12), LAB_WGMMA_ACC4(13), LAB_WGMMA_ACC4(14), LAB_WGMMA_ACC4(15)
#define LAB_WGMMA_REGS16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define LAB_WGMMA_REGS32                                                                                     \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "  \
    "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define LAB_WGMMA_REGS64                                                                                     \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "  \
    "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "   \
    "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "   \
    "%62, %63}"
// Both operands in shared memory, both K-major; `accumulate` 0 overwrites d (the first k step).
// COUNT (16, 32 or 64) names the accumulator lists: pasted here, so that a wrapper passing it on does
// not expand the lists into dozens of arguments first.
#define LAB_WGMMA_SS(shape, type, COUNT, A, B, KEEP)                                                         \
    asm volatile("{\n.reg .pred keep;\nsetp.ne.b32 keep, %" KEEP ", 0;\n"                                    \
                 "wgmma.mma_async.sync.aligned." shape ".f32." type "." type " " LAB_WGMMA_REGS##COUNT       \
                 ", %" A ", %" B ", keep, 1, 1, 0, 0;\n}\n"                                                  \
                 : LAB_WGMMA_ACC##COUNT                                                                      \
                 : "l"(a), "l"(b), "r"(accumulate))
// A from registers (mma.sync's A layout per warp), B in shared memory MN-major (transposed: 1).
#define LAB_WGMMA_RS(shape, type, COUNT, A, B, KEEP)                                                         \
    asm volatile("{\n.reg .pred keep;\nsetp.ne.b32 keep, %" KEEP ", 0;\n"                                    \
                 "wgmma.mma_async.sync.aligned." shape ".f32." type "." type " " LAB_WGMMA_REGS##COUNT       \
                 ", " A ", %" B ", keep, 1, 1, 1;\n}\n"                                                      \
                 : LAB_WGMMA_ACC##COUNT                                                                      \
                 : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "l"(b), "r"(accumulate))
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// FORM(shape, type, ...) for T's type name: the products' PTX spells bfloat16 "bf16" and half "f16".
#define LAB_WGMMA_FOR_TYPE(FORM, shape, ...)                                                                 \
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {                                                        \
        FORM(shape, "bf16", __VA_ARGS__);                                                                    \
    } else {                                                                                                 \
        FORM(shape, "f16", __VA_ARGS__);                                                                     \
    }
#endif

// d (64 x N, as N / 8 FragC per warp) = a b (+ d where accumulate), a and b described K-major.
template <typename T, int N>
__device__ __forceinline__ void warpgroup_mma_shared(FragC (&d)[N / 8], uint64_t a, uint64_t b,
                                                     int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(N == 32 || N == 64 || N == 128, "the shapes lab's kernels use");
    if constexpr (N == 32) {
        LAB_WGMMA_FOR_TYPE(LAB_WGMMA_SS, "m64n32k16", 16, "16", "17", "18")
    } else if constexpr (N == 64) {
        LAB_WGMMA_FOR_TYPE(LAB_WGMMA_SS, "m64n64k16", 32, "32", "33", "34")
    } else {
        LAB_WGMMA_FOR_TYPE(LAB_WGMMA_SS, "m64n128k16", 64, "64", "65", "66")
    }
#else
    __trap(); // built only into the sm_90a kernels
#endif
}

// d (64 x N) += a b: a one 16-column A fragment per warp in registers, b described MN-major.
template <typename T, int N>
__device__ __forceinline__ void warpgroup_mma_registers(FragC (&d)[N / 8], const FragA &a, uint64_t b,
                                                        int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(N == 64 || N == 128, "the shapes lab's kernels use");
    if constexpr (N == 64) {
        LAB_WGMMA_FOR_TYPE(LAB_WGMMA_RS, "m64n64k16", 32, "{%32, %33, %34, %35}", "36", "37")
    } else {
        LAB_WGMMA_FOR_TYPE(LAB_WGMMA_RS, "m64n128k16", 64, "{%64, %65, %66, %67}", "68", "69")
    }
#else
    __trap();
#endif
}

} // namespace lab
