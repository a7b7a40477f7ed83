// casting.cuh - converting one element between a run-time dtype and the compute type C, the way
// both casting paths do it (elementwise_casting.cu for any strides, elementwise_casting_contiguous.cu
// for contiguous operands). Casts are unchecked, like NumPy's casting="unsafe": float -> integer
// saturates on the GPU and NaN becomes 0; integer -> narrower integer wraps.
#pragma once

#include <type_traits>

#include "dtype_traits.cuh"
#include "launch.h"

namespace lab {

// The storage type T of a value computed in C (halves round to nearest even, as everywhere in lab).
template <typename T, typename C> __device__ __forceinline__ T convert_to(C v) {
    constexpr bool from_double = std::is_same_v<C, double>;
    if constexpr (std::is_same_v<T, __half>) {
        return from_double ? __double2half(v) : __float2half_rn(static_cast<float>(v));
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        return from_double ? __double2bfloat16(v) : __float2bfloat16_rn(static_cast<float>(v));
    } else {
        return static_cast<T>(v);
    }
}

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
    case LAB_FLOAT16: *reinterpret_cast<__half *>(p) = convert_to<__half>(v); break;
    case LAB_BFLOAT16: *reinterpret_cast<__nv_bfloat16 *>(p) = convert_to<__nv_bfloat16>(v); break;
    case LAB_FLOAT32: *reinterpret_cast<float *>(p) = convert_to<float>(v); break;
    case LAB_FLOAT64: *reinterpret_cast<double *>(p) = convert_to<double>(v); break;
    case LAB_INT8: *reinterpret_cast<int8_t *>(p) = convert_to<int8_t>(v); break;
    case LAB_INT16: *reinterpret_cast<int16_t *>(p) = convert_to<int16_t>(v); break;
    case LAB_INT32: *reinterpret_cast<int32_t *>(p) = convert_to<int32_t>(v); break;
    case LAB_INT64: *reinterpret_cast<int64_t *>(p) = convert_to<int64_t>(v); break;
    default: *reinterpret_cast<uint8_t *>(p) = convert_to<uint8_t>(v); break;
    }
}

template <int kOperands> struct CastingOperands {
    char *p[kOperands];
    lab_dtype dtypes[kOperands];
};

// The operands of a planned launch, with their run-time dtypes.
template <int kOperands> CastingOperands<kOperands> casting_operands(const lab_elementwise_launch &launch) {
    CastingOperands<kOperands> operands{};
    for (int k = 0; k < kOperands; ++k) {
        operands.p[k] = launch.data[k];
        operands.dtypes[k] = launch.dtypes[k];
    }
    return operands;
}

} // namespace lab
