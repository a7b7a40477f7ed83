// tile_mma.cuh - tensor-core tiles for mma.sync (sm_80+), the pieces attention's kernels are built
// from and a grouped product could reuse: a 16-bit tile in shared memory laid out so that ldmatrix
// reads it without bank conflicts, copied in from global memory with cp.async, and the registers
// (fragments) of one warp's m16n8k16 product.
//
// One mma.sync.m16n8k16 multiplies a 16x16 tile of A by a 16x8 tile of B into 16x8 float
// accumulators, the 32 threads of a warp each holding a share. Lane l = 4 g + t (g = l / 4, t = l % 4):
//   A: four registers of two 16-bit values: (row g, cols 2t, 2t+1), (row g+8, same cols),
//      (row g, cols 2t+8, 2t+9), (row g+8, cols 2t+8, 2t+9)
//   B: two registers: (k 2t, 2t+1; col g) and (k 2t+8, 2t+9; col g)
//   C: four floats: (row g, cols 2t, 2t+1), (row g+8, cols 2t, 2t+1)
// ldmatrix.x4 fills four registers from four 8x8 tiles of shared memory in exactly these shapes: lane
// l names the address of row l % 8 of tile l / 8, and register i of every lane receives tile i's row
// g, elements 2t and 2t+1 (with .trans, column g instead: the tile read transposed).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "async_copy.cuh"

namespace lab {

struct FragA {
    uint32_t x[4];
};
struct FragB {
    uint32_t x[2];
};
struct FragC {
    float x[4];
};

__device__ __forceinline__ void zero(FragC &c) {
#pragma unroll
    for (int i = 0; i < 4; i++) c.x[i] = 0.f;
}

// c += a b for 16-bit T (half or bfloat16), accumulating in float.
template <typename T> __device__ __forceinline__ void mma_16816(FragC &c, const FragA &a, const FragB &b) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c.x[0]), "+f"(c.x[1]), "+f"(c.x[2]), "+f"(c.x[3])
                     : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                     "{%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c.x[0]), "+f"(c.x[1]), "+f"(c.x[2]), "+f"(c.x[3])
                     : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]));
    }
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t shared_address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t shared_address) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address));
}

// Two floats rounded to T and packed into one register, the first in the low half.
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&v);
    } else {
        __half2 v = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t *>(&v);
    }
}

// Accumulators as the A operand of the next product: C tiles j and j+1 (16 rows x 8 columns each)
// are, rounded to T, one 16x16 A tile - the registers line up without moving between lanes (the
// trick that keeps attention's probabilities in registers between its two products).
template <typename T>
__device__ __forceinline__ FragA accumulators_as_a(const FragC &left, const FragC &right) {
    FragA a;
    a.x[0] = pack2<T>(left.x[0], left.x[1]);
    a.x[1] = pack2<T>(left.x[2], left.x[3]);
    a.x[2] = pack2<T>(right.x[0], right.x[1]);
    a.x[3] = pack2<T>(right.x[2], right.x[3]);
    return a;
}

// A tile of kRows rows of 16-bit elements in shared memory, rows kWidth elements apart (the columns
// used, rounded up to 64: 128 bytes, the 32 banks once). The 16-byte chunk c of row r is stored at
// chunk c ^ (r % 8) of its group of eight: the eight rows one ldmatrix phase reads at one column
// land in eight different bank groups, and so do a warp's cp.async writes along a row.
template <int kRows, int kColumns> struct SwizzledTile {
    static constexpr int kWidth = (kColumns + 63) / 64 * 64;
    static constexpr int kElements = kRows * kWidth;
    // The element offset of chunk `chunk` (8 elements) of row `row`.
    __host__ __device__ static __forceinline__ int chunk_offset(int row, int chunk) {
        return row * kWidth + ((chunk ^ (row & 7)) << 3);
    }
};

// Copies rows [0, valid_rows) of a kRows x kColumns tile from global memory (row r at
// base + r * row_stride elements, 16-byte aligned) into shared memory, zeros for the rest, with
// cp.async from all kThreads threads (the caller commits and waits). The copies a thread makes are
// counted at compile time and unrolled: where kThreads is a multiple of the chunks in a row, each
// thread keeps one chunk column and steps down the rows, so a copy costs an add and a compare. (A
// loop from threadIdx.x, as first written, left ptxas a few hundred integer instructions per
// key block of the attention forward's loop - a fifth of all it issued there.)
template <int kRows, int kColumns, int kThreads, typename Tile = SwizzledTile<kRows, kColumns>, typename T>
__device__ __forceinline__ void load_tile_async(T *tile, const T *base, int64_t row_stride, int valid_rows) {
    constexpr int kChunks = kColumns / 8;
    constexpr int kCopies = kRows * kChunks / kThreads; // per thread
    static_assert(kRows * kChunks % kThreads == 0, "every thread makes the same number of copies");
    const uint32_t tile_address = shared_window_address(tile);
    if constexpr (kThreads % kChunks == 0) {
        constexpr int kRowStep = kThreads / kChunks;
        const int chunk = threadIdx.x % kChunks, first_row = threadIdx.x / kChunks;
        const T *source = base + first_row * row_stride + chunk * 8;
#pragma unroll
        for (int copy = 0; copy < kCopies; copy++) {
            const int row = first_row + copy * kRowStep;
            const bool valid = row < valid_rows;
            async_copy_16_or_zero(tile_address + Tile::chunk_offset(row, chunk) * 2, valid ? source : base,
                                  valid);
            source += kRowStep * row_stride;
        }
    } else {
#pragma unroll
        for (int copy = 0; copy < kCopies; copy++) {
            const int i = threadIdx.x + copy * kThreads, row = i / kChunks, chunk = i % kChunks;
            const bool valid = row < valid_rows;
            const T *source = base + (valid ? row * row_stride + chunk * 8 : 0);
            async_copy_16_or_zero(tile_address + Tile::chunk_offset(row, chunk) * 2, source, valid);
        }
    }
}

// One step of a two-stage copy pipeline, at the top of a loop over tiles: when there is a next tile,
// start its copies into the other stage (load_next) and wait for all but those; else wait for every
// copy. Then every thread of the block sees this stage's tile - and, kForTensorCores, so do the
// tensor cores of wgmma, which read shared memory through the async proxy. (The loop's body ends
// with a __syncthreads, so no warp still reads the stage load_next overwrites.)
template <bool kForTensorCores = false, typename LoadNext>
__device__ __forceinline__ void stage_ready(bool has_next, LoadNext &&load_next) {
    if (has_next) {
        load_next();
        async_copy_commit();
        async_copy_wait<1>();
    } else {
        async_copy_wait<0>();
    }
    if constexpr (kForTensorCores) fence_shared_for_async_proxy();
    __syncthreads();
}

// After a loop over tiles that may have run no step at all: the copies it would have waited for (the
// tiles loaded before it) have landed and every thread sees them, before the block writes over them.
__device__ __forceinline__ void copies_landed() {
    async_copy_wait<0>();
    __syncthreads();
}

// The row and 16-byte chunk whose address lane `lane` gives ldmatrix.x4 - its matrix lane / 8, that
// matrix's row lane % 8 - for each fragment below (host code can run these: tests/tile_fragments.cu
// replays ldmatrix on them and checks every register against the mma layout above).
struct TileSpot {
    int row, chunk;
};
// A: the 16x16 block at (row0, k0) - matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
// (rows 8-15, k 8-15): A's four registers in order.
__host__ __device__ __forceinline__ TileSpot a_spot(int row0, int k0, int lane) {
    return {row0 + (lane & 15), (k0 >> 3) + (lane >> 4)};
}
// B = tile^T, rows n0 .. n0+15, columns k0 .. k0+15 - matrices (n 0-7, k 0-7), (n 0-7, k 8-15),
// (n 8-15, k 0-7), (n 8-15, k 8-15): the first 8-column tile's two registers, then the second's.
__host__ __device__ __forceinline__ TileSpot b_pair_spot(int n0, int k0, int lane) {
    return {n0 + (lane & 7) + ((lane >> 4) << 3), (k0 >> 3) + ((lane >> 3) & 1)};
}
// B = tile, rows k0 .. k0+15, columns n0 .. n0+15, read transposed - matrices (k 0-7, n 0-7),
// (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
__host__ __device__ __forceinline__ TileSpot b_pair_trans_spot(int k0, int n0, int lane) {
    return {k0 + (lane & 7) + (((lane >> 3) & 1) << 3), (n0 >> 3) + (lane >> 4)};
}

// The A fragment of the 16x16 block at (row0, column k0) of a row-major tile (k0 a multiple of 16).
template <int kRows, int kColumns>
__device__ __forceinline__ FragA load_a(uint32_t tile_address, int row0, int k0, int lane) {
    using Tile = SwizzledTile<kRows, kColumns>;
    uint32_t r[4];
    const TileSpot spot = a_spot(row0, k0, lane);
    ldmatrix_x4(r, tile_address + Tile::chunk_offset(spot.row, spot.chunk) * 2);
    return {{r[0], r[1], r[2], r[3]}};
}

// B fragments for two neighbouring 8-column tiles (columns n0 .. n0+15, k from k0) of a product with
// this tile's transpose, B[k][n] = tile[n][k] (q k^T reads k this way) - or, kTransposed, with the
// tile itself, B[k][n] = tile[k][n], read transposed by ldmatrix (p v reads v this way).
template <int kRows, int kColumns, bool kTransposed = false>
__device__ __forceinline__ void load_b_pair(uint32_t tile_address, int n0, int k0, int lane, FragB &first,
                                            FragB &second) {
    using Tile = SwizzledTile<kRows, kColumns>;
    uint32_t r[4];
    if constexpr (kTransposed) {
        const TileSpot spot = b_pair_trans_spot(k0, n0, lane);
        ldmatrix_x4_trans(r, tile_address + Tile::chunk_offset(spot.row, spot.chunk) * 2);
    } else {
        const TileSpot spot = b_pair_spot(n0, k0, lane);
        ldmatrix_x4(r, tile_address + Tile::chunk_offset(spot.row, spot.chunk) * 2);
    }
    first = {{r[0], r[1]}};
    second = {{r[2], r[3]}};
}

// Writes a warp's accumulators - kTiles C tiles side by side, 16 rows from row0 - as T into the
// tile (the caller then copies rows out with store_rows).
template <int kRows, int kColumns, typename Tile = SwizzledTile<kRows, kColumns>, int kTiles, typename T>
__device__ __forceinline__ void store_accumulators(T *tile, const FragC (&acc)[kTiles], int row0, int lane,
                                                   float factor) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < kTiles; j++) {
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int row = row0 + g + half * 8, column = j * 8 + 2 * t;
            const uint32_t packed = pack2<T>(acc[j].x[2 * half] * factor, acc[j].x[2 * half + 1] * factor);
            *reinterpret_cast<uint32_t *>(tile + Tile::chunk_offset(row, column >> 3) + (column & 7)) =
                packed;
        }
    }
}

// Copies rows [row0, row0 + count) of the tile (those below valid_rows) to global memory, 16 bytes
// a store, by the 32 lanes of one warp.
template <int kRows, int kColumns, typename Tile = SwizzledTile<kRows, kColumns>, typename T>
__device__ __forceinline__ void store_rows(const T *tile, T *base, int64_t row_stride, int row0, int count,
                                           int valid_rows, int lane) {
    constexpr int kChunks = kColumns / 8;
    for (int i = lane; i < count * kChunks; i += 32) {
        const int row = row0 + i / kChunks, chunk = i % kChunks;
        if (row >= valid_rows) continue;
        *reinterpret_cast<uint4 *>(base + row * row_stride + chunk * 8) =
            *reinterpret_cast<const uint4 *>(tile + Tile::chunk_offset(row, chunk));
    }
}

} // namespace lab
