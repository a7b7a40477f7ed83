// reduce.cuh - the block reduction every reducing kernel shares (karpathy/llm.c's blockReduce).
//
// A warp combines its 32 values with shuffles; one partial per warp goes through shared memory;
// the first warp combines the partials; the result reaches every thread. The combination order is
// a fixed tree, so the same inputs give bitwise the same result on every run (no atomics).
#pragma once

namespace lab {

struct SumCombine {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};

// A warp shuffle of one value; a type the hardware cannot shuffle whole (a value with its index)
// overloads it next to its definition, and warp_reduce finds that overload.
template <typename T> __device__ __forceinline__ T shuffle_xor(T v, int lane_mask) {
    return static_cast<T>(__shfl_xor_sync(0xffffffffu, v, lane_mask));
}

// Combines v across aligned groups of kWidth lanes of a warp (all 32 by default); every lane of a
// group receives its group's result. Every lane of the warp must call it.
template <int kWidth = 32, typename T, typename Combine>
__device__ __forceinline__ T warp_reduce(T v, Combine combine) {
    static_assert(kWidth >= 1 && kWidth <= 32 && (kWidth & (kWidth - 1)) == 0, "a power of two up to 32");
#pragma unroll
    for (int offset = kWidth / 2; offset > 0; offset >>= 1) v = combine(v, shuffle_xor(v, offset));
    return v;
}

// Combines v across a block of kThreads threads (a multiple of 32, at most 1024); every thread
// receives the result. `identity` fills the unused partial slots. Every thread of the block must
// call it (it synchronises); calling it again right after is safe.
template <int kThreads, typename T, typename Combine>
__device__ __forceinline__ T block_reduce(T v, Combine combine, T identity) {
    static_assert(kThreads % 32 == 0 && kThreads <= 1024, "block_reduce needs whole warps");
    constexpr int kWarps = kThreads / 32;
    __shared__ T partials[kWarps];
    __shared__ T result;
    v = warp_reduce(v, combine);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T w = lane < kWarps ? partials[lane] : identity;
        w = warp_reduce(w, combine);
        if (lane == 0) result = w;
    }
    __syncthreads();
    const T out = result;
    __syncthreads(); // the next call may overwrite `partials` and `result` only after everyone read
    return out;
}

} // namespace lab
