// elementwise_strided.cu - one dtype, any strides: transposes, steps, negative strides, and inputs
// broadcast with stride 0. The shared strided loop (elementwise_strided.cuh), one element per item.
#include "dispatch.cuh"
#include "elementwise_strided.cuh"

namespace lab {
namespace {

// One element of dtype T per item.
template <typename T, typename Op, int kInputs> struct ElementAccess {
    using C = compute_t<T>;
    using Loaded = C;
    OperandPtrs<kInputs + 1> ptrs;
    OpParams<C> params;

    __device__ __forceinline__ C load(int k, int64_t offset) const {
        return load_as_compute(*reinterpret_cast<const T *>(ptrs.p[k + 1] + offset));
    }
    __device__ __forceinline__ void store(int64_t offset, const C (&inputs)[kInputs]) const {
        C v[3];
#pragma unroll
        for (int k = 0; k < kInputs; ++k) v[k] = inputs[k];
        *reinterpret_cast<T *>(ptrs.p[0] + offset) =
            store_from_compute<T>(apply<C, Op, kInputs>(Op{}, v, params));
    }
};

template <typename T, typename Op, int kInputs>
__global__ void __launch_bounds__(kThreads)
    elementwise_strided(OperandPtrs<kInputs + 1> ptrs, StridedLayout<kInputs + 1> layout, int64_t n,
                        OpParams<compute_t<T>> params) {
    strided_loop<kInputs>(ElementAccess<T, Op, kInputs>{ptrs, params}, layout, n);
}

} // namespace

cudaError_t launch_strided(const lab_elementwise_launch &launch, cudaStream_t stream) {
    return visit_op(launch.op, [&](auto op, auto n_inputs, auto integers) {
        return visit_storage_type<decltype(integers)::value>(launch.dtypes[0], [&](auto tag) {
            using T = typename decltype(tag)::type;
            constexpr int kOperands = decltype(n_inputs)::value + 1;
            OperandPtrs<kOperands> ptrs{};
            for (int k = 0; k < kOperands; ++k) ptrs.p[k] = launch.data[k];
            elementwise_strided<T, decltype(op), kOperands - 1>
                <<<blocks_for(launch.numel), kThreads, 0, stream>>>(ptrs, make_layout<kOperands>(launch),
                                                                    launch.numel,
                                                                    to_params<compute_t<T>>(launch.scalars));
            return cudaGetLastError();
        });
    });
}

} // namespace lab
