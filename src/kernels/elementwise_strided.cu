// elementwise_strided.cu - one dtype, any strides: transposes, steps, negative strides, and inputs
// broadcast with stride 0. Each thread turns kUnroll linear indices into byte offsets
// (indexing.cuh), loads all its inputs first, then computes and stores.
#include "dispatch.cuh"
#include "elementwise.cuh"
#include "indexing.cuh"

namespace lab {
namespace {

template <int kOperands> struct OperandPtrs {
    char *p[kOperands];
};

template <typename T, typename Op, int kInputs>
__global__ void __launch_bounds__(kThreads)
elementwise_strided(OperandPtrs<kInputs + 1> ptrs, StridedLayout<kInputs + 1> layout, int64_t n,
                    OpParams<compute_t<T>> params) {
    using C = compute_t<T>;
    const Op op;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * kUnroll + threadIdx.x;
    C loaded[kInputs][kUnroll];
    int64_t out_offset[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kThreads;
        if (i < n) {
            int64_t offsets[kInputs + 1];
            byte_offsets(layout, i, offsets);
            out_offset[u] = offsets[0];
#pragma unroll
            for (int k = 0; k < kInputs; ++k)
                loaded[k][u] = load_as_compute(*reinterpret_cast<const T *>(ptrs.p[k + 1] + offsets[k + 1]));
        }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kThreads;
        if (i < n) {
            C v[3];
#pragma unroll
            for (int k = 0; k < kInputs; ++k) v[k] = loaded[k][u];
            *reinterpret_cast<T *>(ptrs.p[0] + out_offset[u]) = store_from_compute<T>(apply<C, Op, kInputs>(op, v, params));
        }
    }
}

}  // namespace

cudaError_t launch_strided(const lab_elementwise_launch &launch, cudaStream_t stream) {
    return visit_op(launch.op, [&](auto op, auto n_inputs, auto integers) {
        return visit_storage_type<decltype(integers)::value>(launch.dtypes[0], [&](auto tag) {
            using T = typename decltype(tag)::type;
            constexpr int kOperands = decltype(n_inputs)::value + 1;
            OperandPtrs<kOperands> ptrs{};
            for (int k = 0; k < kOperands; ++k) ptrs.p[k] = launch.data[k];
            elementwise_strided<T, decltype(op), kOperands - 1><<<blocks_for(launch.numel), kThreads, 0, stream>>>(
                ptrs, make_layout<kOperands>(launch), launch.numel, to_params<compute_t<T>>(launch.scalars));
            return cudaGetLastError();
        });
    });
}

}  // namespace lab
