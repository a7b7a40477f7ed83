// elementwise.cuh - what the five elementwise access paths share (vectorized or contiguous, strided,
// strided_vectorized, casting, casting_contiguous): block shape, how a functor is
// applied, scalar parameters, and the per-path launchers that elementwise_launch.cu chooses between.
#pragma once

#include <type_traits>

#include "dtype_traits.cuh"
#include "functors.cuh"
#include "indexing.cuh"
#include "launch.h"

namespace lab {

constexpr int kThreads = 128; // threads per block
constexpr int kUnroll = 4;    // elements (or 16-byte packets) per input per thread, loaded before use

template <typename C, typename Op, int kInputs>
__device__ __forceinline__ C apply(const Op &op, const C (&v)[3], const OpParams<C> &params) {
    return op(v[0], kInputs > 1 ? v[1] : C(0), kInputs > 2 ? v[2] : C(0), params);
}

inline unsigned int blocks_for(int64_t items) {
    const int64_t per_block = static_cast<int64_t>(kThreads) * kUnroll;
    const int64_t blocks = (items + per_block - 1) / per_block;
    return static_cast<unsigned int>(blocks < 1 ? 1 : blocks);
}

template <typename C> OpParams<C> to_params(const lab_scalars &s) {
    if constexpr (std::is_integral_v<C>) {
        return OpParams<C>{static_cast<C>(s.as_int[0]), static_cast<C>(s.as_int[1])};
    } else {
        return OpParams<C>{static_cast<C>(s.as_float[0]), static_cast<C>(s.as_float[1])};
    }
}

// From the plan (outermost first) to the strided kernels' layout (innermost first).
template <int kOperands> StridedLayout<kOperands> make_layout(const lab_elementwise_launch &launch) {
    StridedLayout<kOperands> layout{};
    lab_fill_layout(&layout.dims, layout.strides, kOperands, launch.ndim, launch.shape, launch.byte_strides,
                    launch.numel);
    return layout;
}

// One per path; each lives in its own .cu file so nvcc builds them in parallel.
cudaError_t launch_contiguous(const lab_elementwise_launch &launch, cudaStream_t stream);
cudaError_t launch_strided(const lab_elementwise_launch &launch, cudaStream_t stream);
cudaError_t launch_strided_vectorized(const lab_elementwise_launch &launch, cudaStream_t stream);
cudaError_t launch_casting(const lab_elementwise_launch &launch, cudaStream_t stream);
cudaError_t launch_casting_contiguous(const lab_elementwise_launch &launch, cudaStream_t stream);

} // namespace lab
