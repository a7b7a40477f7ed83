// elementwise_casting.cu - operands of different dtypes (an fp16 activation plus an fp32 residual,
// or copy() as a strided cast). Arithmetic happens in one compute type C chosen by the plan (NumPy
// promotion, halves widened to float); each operand is converted on load and the result on store,
// with the operand's dtype read at run time (casting.cuh). One kernel per (op, C), not per dtype
// combination. This path takes any strides; contiguous operands take the grouped loads of
// elementwise_casting_contiguous.cu.
#include "casting.cuh"
#include "dispatch.cuh"
#include "elementwise_strided.cuh"

namespace lab {
namespace {

// One element per item, converted from (to) the operand's run-time dtype on load (store).
template <typename C, typename Op, int kInputs> struct CastingAccess {
    using Loaded = C;
    CastingOperands<kInputs + 1> operands;
    OpParams<C> params;

    __device__ __forceinline__ C load(int k, int64_t offset) const {
        return load_converted<C>(operands.p[k + 1] + offset, operands.dtypes[k + 1]);
    }
    __device__ __forceinline__ void store(int64_t offset, const C (&inputs)[kInputs]) const {
        C v[3];
#pragma unroll
        for (int k = 0; k < kInputs; ++k) v[k] = inputs[k];
        store_converted<C>(operands.p[0] + offset, operands.dtypes[0],
                           apply<C, Op, kInputs>(Op{}, v, params));
    }
};

template <typename C, typename Op, int kInputs>
__global__ void __launch_bounds__(kThreads)
    elementwise_casting(CastingOperands<kInputs + 1> operands, StridedLayout<kInputs + 1> layout, int64_t n,
                        OpParams<C> params) {
    strided_loop<kInputs>(CastingAccess<C, Op, kInputs>{operands, params}, layout, n);
}

} // namespace

cudaError_t launch_casting(const lab_elementwise_launch &launch, cudaStream_t stream) {
    return visit_op(launch.op, [&](auto op, auto n_inputs, auto integers) {
        return visit_compute_type<decltype(integers)::value>(launch.compute, [&](auto tag) {
            using C = typename decltype(tag)::type;
            constexpr int kOperands = decltype(n_inputs)::value + 1;
            const CastingOperands<kOperands> operands = casting_operands<kOperands>(launch);
            elementwise_casting<C, decltype(op), kOperands - 1>
                <<<blocks_for(launch.numel), kThreads, 0, stream>>>(
                    operands, make_layout<kOperands>(launch), launch.numel, to_params<C>(launch.scalars));
            return cudaGetLastError();
        });
    });
}

} // namespace lab
