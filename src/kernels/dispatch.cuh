// dispatch.cuh - from run-time enums to compile-time types: which functor an op is, which C++ type
// a dtype is stored as, which type arithmetic is done in. Each visitor calls a generic lambda with
// a tag, so a launcher is written once and instantiated only for the combinations that exist
// (integer types only for ops that allow them).
#pragma once

#include <type_traits>

#include "dtype_traits.cuh"
#include "functors.cuh"
#include "launch.h"

namespace lab {

template <typename T> struct TypeTag {
    using type = T;
};

// fn(Op{}, integral_constant<int, n_inputs>, bool_constant<integers allowed>) for the op's row in ops.def.
template <typename Fn> cudaError_t visit_op(lab_op op, Fn &&fn) {
    switch (op) {
#define LAB_OP(id, functor, n_inputs, integers)                                                              \
    case LAB_OP_##id:                                                                                        \
        return fn(functor{}, std::integral_constant<int, n_inputs>{}, std::bool_constant<bool(integers)>{});
#include "ops.def"
#undef LAB_OP
    default: return cudaErrorInvalidValue;
    }
}

// fn(TypeTag<T>{}) for an integer dtype, where kIntegers allows them; else the bug guard below.
template <bool kIntegers, typename Fn> cudaError_t visit_integer_type(lab_dtype dtype, Fn &&fn) {
    if constexpr (kIntegers) {
        switch (dtype) {
        case LAB_INT8: return fn(TypeTag<int8_t>{});
        case LAB_INT16: return fn(TypeTag<int16_t>{});
        case LAB_INT32: return fn(TypeTag<int32_t>{});
        case LAB_INT64: return fn(TypeTag<int64_t>{});
        case LAB_UINT8: return fn(TypeTag<uint8_t>{});
        default: break;
        }
    }
    return cudaErrorInvalidValue; // the plan validated dtypes first: this is a bug guard
}

// fn(TypeTag<T>{}) for the storage type T of dtype; integer dtypes only when kIntegers.
template <bool kIntegers, typename Fn> cudaError_t visit_storage_type(lab_dtype dtype, Fn &&fn) {
    switch (dtype) {
    case LAB_FLOAT16: return fn(TypeTag<__half>{});
    case LAB_BFLOAT16: return fn(TypeTag<__nv_bfloat16>{});
    case LAB_FLOAT32: return fn(TypeTag<float>{});
    case LAB_FLOAT64: return fn(TypeTag<double>{});
    default: return visit_integer_type<kIntegers>(dtype, fn);
    }
}

// fn(TypeTag<C>{}) for a compute dtype (never a half type: halves compute in float).
template <bool kIntegers, typename Fn> cudaError_t visit_compute_type(lab_dtype dtype, Fn &&fn) {
    switch (dtype) {
    case LAB_FLOAT32: return fn(TypeTag<float>{});
    case LAB_FLOAT64: return fn(TypeTag<double>{});
    default: return visit_integer_type<kIntegers>(dtype, fn);
    }
}

} // namespace lab
