// elementwise_casting.cu - operands of different dtypes (an fp16 activation plus an fp32 residual,
// or copy() as a strided cast). Arithmetic happens in one compute type C chosen by the plan (NumPy
// promotion, halves widened to float); each operand is converted on load and the result on store,
// with the operand's dtype read at run time. One kernel per (op, C), not per dtype combination.
// Casts are unchecked, like NumPy's casting="unsafe": float -> integer saturates on the GPU and
// NaN becomes 0; integer -> narrower integer wraps.
#include "dispatch.cuh"
#include "elementwise_strided.cuh"

namespace lab {
namespace {

template <int kOperands> struct CastingOperands {
    char *p[kOperands];
    lab_dtype dtypes[kOperands];
};

template <typename C> __device__ __forceinline__ C load_converted(const char *p, lab_dtype dtype) {
    switch (dtype) {
    case LAB_FLOAT16: return static_cast<C>(__half2float(*reinterpret_cast<const __half *>(p)));
    case LAB_BFLOAT16: return static_cast<C>(__bfloat162float(*reinterpret_cast<const __nv_bfloat16 *>(p)));
    case LAB_FLOAT32: return static_cast<C>(*reinterpret_cast<const float *>(p));
    case LAB_FLOAT64: return static_cast<C>(*reinterpret_cast<const double *>(p));
    case LAB_INT8: return static_cast<C>(*reinterpret_cast<const int8_t *>(p));
    case LAB_INT16: return static_cast<C>(*reinterpret_cast<const int16_t *>(p));
    case LAB_INT32: return static_cast<C>(*reinterpret_cast<const int32_t *>(p));
    case LAB_INT64: return static_cast<C>(*reinterpret_cast<const int64_t *>(p));
    default: return static_cast<C>(*reinterpret_cast<const uint8_t *>(p));
    }
}

template <typename C> __device__ __forceinline__ void store_converted(char *p, lab_dtype dtype, C v) {
    switch (dtype) {
    case LAB_FLOAT16:
        if constexpr (std::is_same_v<C, double>)
            *reinterpret_cast<__half *>(p) = __double2half(v);
        else {
            *reinterpret_cast<__half *>(p) = __float2half_rn(static_cast<float>(v));
        }
        break;
    case LAB_BFLOAT16:
        if constexpr (std::is_same_v<C, double>)
            *reinterpret_cast<__nv_bfloat16 *>(p) = __double2bfloat16(v);
        else {
            *reinterpret_cast<__nv_bfloat16 *>(p) = __float2bfloat16_rn(static_cast<float>(v));
        }
        break;
    case LAB_FLOAT32: *reinterpret_cast<float *>(p) = static_cast<float>(v); break;
    case LAB_FLOAT64: *reinterpret_cast<double *>(p) = static_cast<double>(v); break;
    case LAB_INT8: *reinterpret_cast<int8_t *>(p) = static_cast<int8_t>(v); break;
    case LAB_INT16: *reinterpret_cast<int16_t *>(p) = static_cast<int16_t>(v); break;
    case LAB_INT32: *reinterpret_cast<int32_t *>(p) = static_cast<int32_t>(v); break;
    case LAB_INT64: *reinterpret_cast<int64_t *>(p) = static_cast<int64_t>(v); break;
    default: *reinterpret_cast<uint8_t *>(p) = static_cast<uint8_t>(v); break;
    }
}

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
            CastingOperands<kOperands> operands{};
            for (int k = 0; k < kOperands; ++k) {
                operands.p[k] = launch.data[k];
                operands.dtypes[k] = launch.dtypes[k];
            }
            elementwise_casting<C, decltype(op), kOperands - 1>
                <<<blocks_for(launch.numel), kThreads, 0, stream>>>(
                    operands, make_layout<kOperands>(launch), launch.numel, to_params<C>(launch.scalars));
            return cudaGetLastError();
        });
    });
}

} // namespace lab
