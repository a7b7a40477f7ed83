// functors.cuh - the arithmetic of every elementwise op, one small struct per op.
//
// A functor sees values already converted to the compute type C (float for half types) and the op's
// scalar parameters in C; it never knows about memory, layouts or dtypes. Unused inputs arrive as 0.
// Integer arithmetic goes through the unsigned type so overflow wraps (as in NumPy and PyTorch)
// instead of being undefined behaviour.
#pragma once

// No host headers: NVRTC compiles this file too (user kernels may include it). The math functions
// are CUDA's device built-ins; type traits come from libcu++ (cuda/std), which nvcc and NVRTC share.
#include <cuda/std/type_traits>

namespace lab {

// An op marked kTranscendental spends many instructions per element (exp, erf, tanh); the
// vectorized kernel gives such ops more elements per thread in half precision.
template <typename Op, typename = void> struct IsTranscendental : cuda::std::false_type {};
template <typename Op>
struct IsTranscendental<Op, cuda::std::void_t<decltype(Op::kTranscendental)>>
    : cuda::std::bool_constant<Op::kTranscendental> {};

template <typename C> struct OpParams {
    C alpha;
    C beta;
};

template <typename C> __device__ __forceinline__ C wrapping_add(C a, C b) {
    if constexpr (cuda::std::is_integral_v<C>) {
        using U = cuda::std::make_unsigned_t<C>;
        return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
    } else {
        return a + b;
    }
}
template <typename C> __device__ __forceinline__ C wrapping_sub(C a, C b) {
    if constexpr (cuda::std::is_integral_v<C>) {
        using U = cuda::std::make_unsigned_t<C>;
        return static_cast<C>(static_cast<U>(a) - static_cast<U>(b));
    } else {
        return a - b;
    }
}
template <typename C> __device__ __forceinline__ C wrapping_mul(C a, C b) {
    if constexpr (cuda::std::is_integral_v<C>) {
        using U = cuda::std::make_unsigned_t<C>;
        return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
    } else {
        return a * b;
    }
}

template <typename C> __device__ __forceinline__ bool is_nan(C v) {
    if constexpr (cuda::std::is_floating_point_v<C>) {
        return v != v;
    } else {
        return false;
    }
}

// Single and double precision math by overload, so one functor body serves both.
__device__ __forceinline__ float math_exp(float v) { return expf(v); }
__device__ __forceinline__ double math_exp(double v) { return exp(v); }
__device__ __forceinline__ float math_sqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double math_sqrt(double v) { return sqrt(v); }
__device__ __forceinline__ float math_erf(float v) { return erff(v); }
__device__ __forceinline__ double math_erf(double v) { return erf(v); }
__device__ __forceinline__ float math_tanh(float v) { return tanhf(v); }
__device__ __forceinline__ float math_fabs(float v) { return fabsf(v); }
__device__ __forceinline__ double math_fabs(double v) { return fabs(v); }
__device__ __forceinline__ double math_tanh(double v) { return tanh(v); }

struct AddOp { // out = a + alpha * b
    template <typename C> __device__ C operator()(C a, C b, C, const OpParams<C> &p) const {
        return wrapping_add(a, wrapping_mul(p.alpha, b));
    }
};
struct SubOp {
    template <typename C> __device__ C operator()(C a, C b, C, const OpParams<C> &) const {
        return wrapping_sub(a, b);
    }
};
struct MulOp {
    template <typename C> __device__ C operator()(C a, C b, C, const OpParams<C> &) const {
        return wrapping_mul(a, b);
    }
};
struct DivOp {
    template <typename C> __device__ C operator()(C a, C b, C, const OpParams<C> &) const { return a / b; }
};
// maximum/minimum propagate NaN, like numpy.maximum and torch.maximum (fmaxf would drop it).
struct MaximumOp {
    template <typename C> __device__ C operator()(C a, C b, C, const OpParams<C> &) const {
        if (is_nan(a) || is_nan(b)) return is_nan(a) ? a : b;
        return a > b ? a : b;
    }
};
struct MinimumOp {
    template <typename C> __device__ C operator()(C a, C b, C, const OpParams<C> &) const {
        if (is_nan(a) || is_nan(b)) return is_nan(a) ? a : b;
        return a < b ? a : b;
    }
};
struct FusedAddMulOp { // out = (a + b) * s, s an array
    template <typename C> __device__ C operator()(C a, C b, C s, const OpParams<C> &) const {
        return (a + b) * s;
    }
};
struct FusedAddMulScalarOp { // out = (a + b) * alpha, the scale a Python number
    template <typename C> __device__ C operator()(C a, C b, C, const OpParams<C> &p) const {
        return (a + b) * p.alpha;
    }
};
struct AxpbyOp { // out = alpha * x + beta * y
    template <typename C> __device__ C operator()(C x, C y, C, const OpParams<C> &p) const {
        return p.alpha * x + p.beta * y;
    }
};
struct AddReluOp {
    template <typename C> __device__ C operator()(C a, C b, C, const OpParams<C> &) const {
        C s = a + b;
        return (s > C(0) || is_nan(s)) ? s : C(0);
    }
};
struct NegOp {
    template <typename C> __device__ C operator()(C a, C, C, const OpParams<C> &) const {
        return wrapping_sub(C(0), a);
    }
};
struct AbsOp {
    template <typename C> __device__ C operator()(C a, C, C, const OpParams<C> &) const {
        if constexpr (cuda::std::is_unsigned_v<C>) {
            return a;
        } else if constexpr (cuda::std::is_integral_v<C>) {
            return a < C(0) ? wrapping_sub(C(0), a) : a;
        } else {
            return math_fabs(a);
        }
    }
};
struct SqrtOp {
    template <typename C> __device__ C operator()(C a, C, C, const OpParams<C> &) const {
        return math_sqrt(a);
    }
};
struct ExpOp {
    static constexpr bool kTranscendental =
        true; // many instructions per element: see elementwise_vectorized.cuh
    template <typename C> __device__ C operator()(C a, C, C, const OpParams<C> &) const {
        return math_exp(a);
    }
};
struct ReluOp { // NaN stays NaN, as in torch.relu
    template <typename C> __device__ C operator()(C a, C, C, const OpParams<C> &) const {
        return (a > C(0) || is_nan(a)) ? a : C(0);
    }
};
struct SigmoidOp {
    static constexpr bool kTranscendental =
        true; // many instructions per element: see elementwise_vectorized.cuh
    template <typename C> __device__ C operator()(C a, C, C, const OpParams<C> &) const {
        return C(1) / (C(1) + math_exp(-a));
    }
};
struct SiluOp {
    static constexpr bool kTranscendental =
        true; // many instructions per element: see elementwise_vectorized.cuh
    template <typename C> __device__ C operator()(C a, C, C, const OpParams<C> &) const {
        return a / (C(1) + math_exp(-a));
    }
};
struct GeluOp { // exact: x * Phi(x)
    static constexpr bool kTranscendental =
        true; // many instructions per element: see elementwise_vectorized.cuh
    template <typename C> __device__ C operator()(C a, C, C, const OpParams<C> &) const {
        const C inv_sqrt2 = C(0.70710678118654752440);
        return C(0.5) * a * (C(1) + math_erf(a * inv_sqrt2));
    }
};
struct GeluTanhOp { // the tanh approximation, gelu(approximate="tanh")
    static constexpr bool kTranscendental =
        true; // many instructions per element: see elementwise_vectorized.cuh
    template <typename C> __device__ C operator()(C a, C, C, const OpParams<C> &) const {
        const C sqrt_2_over_pi = C(0.79788456080286535588);
        const C inner = sqrt_2_over_pi * (a + C(0.044715) * a * a * a);
        return C(0.5) * a * (C(1) + math_tanh(inner));
    }
};
// The gated linear units of a transformer MLP (Shazeer, "GLU Variants Improve Transformer", 2020):
// out = act(gate) * up, with silu (SwiGLU) or gelu's tanh approximation (GeGLU) as act.
template <bool kGelu, typename C> __device__ __forceinline__ C glu_activation(C gate) {
    if constexpr (kGelu) {
        return GeluTanhOp{}(gate, C(0), C(0), OpParams<C>{});
    } else {
        return SiluOp{}(gate, C(0), C(0), OpParams<C>{});
    }
}
struct SwigluOp {
    static constexpr bool kTranscendental = true;
    template <typename C> __device__ C operator()(C gate, C up, C, const OpParams<C> &) const {
        return glu_activation<false>(gate) * up;
    }
};
struct GegluOp {
    static constexpr bool kTranscendental = true;
    template <typename C> __device__ C operator()(C gate, C up, C, const OpParams<C> &) const {
        return glu_activation<true>(gate) * up;
    }
};
// act(gate) and its derivative together, for the backward (kernels/rowwise_glu.cuh): they share
// the exponential (silu) or the tanh (gelu).
template <bool kGelu, typename C>
__device__ __forceinline__ void glu_activation_and_slope(C gate, C &act, C &slope) {
    if constexpr (kGelu) {
        const C k0 = C(0.79788456080286535588), k1 = C(0.044715);
        const C t = math_tanh(k0 * (gate + k1 * gate * gate * gate));
        act = C(0.5) * gate * (C(1) + t);
        slope = C(0.5) * (C(1) + t) + C(0.5) * gate * (C(1) - t * t) * k0 * (C(1) + C(3) * k1 * gate * gate);
    } else {
        const C sigmoid = C(1) / (C(1) + math_exp(-gate));
        act = gate * sigmoid;
        slope = sigmoid * (C(1) + gate * (C(1) - sigmoid));
    }
}
struct ScaleOp { // out = alpha * x (foreach_scale's per-tensor path)
    template <typename C> __device__ C operator()(C a, C, C, const OpParams<C> &p) const {
        return wrapping_mul(p.alpha, a);
    }
};
struct CopyOp {
    template <typename C> __device__ C operator()(C a, C, C, const OpParams<C> &) const { return a; }
};

} // namespace lab
