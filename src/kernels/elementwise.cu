// elementwise.cu - the contiguous elementwise kernels and their launcher (level 4).
//
// One kernel template serves every op in ops.def: the functor supplies the arithmetic, the
// template supplies the memory access. Two access paths:
//   vectorized: every pointer 16-byte aligned -> each thread moves 16-byte packets, kUnroll of
//               them per input, all loads issued before the first use (bytes in flight hide HBM
//               latency); the last n % lanes elements go through a scalar tail;
//   scalar:     any pointer misaligned (a view starting at an odd element) -> one element at a time.
// Alignment is checked at run time on every launch (as PyTorch's MemoryAccess.cuh does), never
// assumed, and sizes never need to divide evenly.
#include "dtype_traits.cuh"
#include "functors.cuh"
#include "launch.h"

namespace lab {
namespace {

constexpr int kThreads = 128;  // threads per block
constexpr int kUnroll = 4;     // packets (or scalars) per input per thread

template <typename T> struct InputPtrs {
    const T *p[3];
};

template <typename T, typename Op, int kInputs>
__device__ __forceinline__ compute_t<T> apply(const Op &op, const compute_t<T> (&v)[3],
                                              const OpParams<compute_t<T>> &params) {
    return op(v[0], kInputs > 1 ? v[1] : compute_t<T>(0), kInputs > 2 ? v[2] : compute_t<T>(0), params);
}

template <typename T, typename Op, int kInputs>
__global__ void __launch_bounds__(kThreads)
elementwise_vectorized(T *out, InputPtrs<T> in, int64_t n, OpParams<compute_t<T>> params) {
    using C = compute_t<T>;
    using Packet = Packed16<T>;
    constexpr int kLanes = Packet::kCount;
    const Op op;
    const int64_t n_packets = n / kLanes;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * kUnroll + threadIdx.x;

    Packet loaded[kInputs][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kThreads;
        if (i < n_packets) {
#pragma unroll
            for (int k = 0; k < kInputs; ++k) loaded[k][u] = reinterpret_cast<const Packet *>(in.p[k])[i];
        }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kThreads;
        if (i < n_packets) {
            Packet result;
#pragma unroll
            for (int lane = 0; lane < kLanes; ++lane) {
                C v[3];
#pragma unroll
                for (int k = 0; k < kInputs; ++k) v[k] = load_as_compute(loaded[k][u].v[lane]);
                result.v[lane] = store_from_compute<T>(apply<T, Op, kInputs>(op, v, params));
            }
            reinterpret_cast<Packet *>(out)[i] = result;
        }
    }

    // The n % kLanes elements after the last whole packet: fewer than 16, done by block 0.
    const int64_t tail_start = n_packets * kLanes;
    if (blockIdx.x == 0 && tail_start + threadIdx.x < n) {
        const int64_t i = tail_start + threadIdx.x;
        C v[3];
#pragma unroll
        for (int k = 0; k < kInputs; ++k) v[k] = load_as_compute(in.p[k][i]);
        out[i] = store_from_compute<T>(apply<T, Op, kInputs>(op, v, params));
    }
}

template <typename T, typename Op, int kInputs>
__global__ void __launch_bounds__(kThreads)
elementwise_scalar(T *out, InputPtrs<T> in, int64_t n, OpParams<compute_t<T>> params) {
    using C = compute_t<T>;
    const Op op;
    const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads * kUnroll + threadIdx.x;
    C loaded[kInputs][kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kThreads;
        if (i < n) {
#pragma unroll
            for (int k = 0; k < kInputs; ++k) loaded[k][u] = load_as_compute(in.p[k][i]);
        }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = first + static_cast<int64_t>(u) * kThreads;
        if (i < n) {
            C v[3];
#pragma unroll
            for (int k = 0; k < kInputs; ++k) v[k] = loaded[k][u];
            out[i] = store_from_compute<T>(apply<T, Op, kInputs>(op, v, params));
        }
    }
}

inline bool is_aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

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

template <typename T, typename Op, int kInputs>
cudaError_t launch_typed(void *out, const void *const in[3], int64_t n, lab_scalars scalars, cudaStream_t stream) {
    InputPtrs<T> inputs{};
    bool aligned = is_aligned16(out);
    for (int k = 0; k < kInputs; ++k) {
        inputs.p[k] = static_cast<const T *>(in[k]);
        aligned = aligned && is_aligned16(in[k]);
    }
    const OpParams<compute_t<T>> params = to_params<compute_t<T>>(scalars);
    T *typed_out = static_cast<T *>(out);
    if (aligned) {
        const int64_t packets = n / Packed16<T>::kCount;
        elementwise_vectorized<T, Op, kInputs><<<blocks_for(packets), kThreads, 0, stream>>>(typed_out, inputs, n, params);
    } else {
        elementwise_scalar<T, Op, kInputs><<<blocks_for(n), kThreads, 0, stream>>>(typed_out, inputs, n, params);
    }
    return cudaGetLastError();
}

// dtype -> storage type; integer dtypes are compiled only for ops that allow them.
template <typename Op, int kInputs, bool kIntegers>
cudaError_t launch_for_dtype(lab_dtype dtype, void *out, const void *const in[3], int64_t n, lab_scalars s,
                             cudaStream_t stream) {
    switch (dtype) {
    case LAB_FLOAT16: return launch_typed<__half, Op, kInputs>(out, in, n, s, stream);
    case LAB_BFLOAT16: return launch_typed<__nv_bfloat16, Op, kInputs>(out, in, n, s, stream);
    case LAB_FLOAT32: return launch_typed<float, Op, kInputs>(out, in, n, s, stream);
    case LAB_FLOAT64: return launch_typed<double, Op, kInputs>(out, in, n, s, stream);
    default: break;
    }
    if constexpr (kIntegers) {
        switch (dtype) {
        case LAB_INT8: return launch_typed<int8_t, Op, kInputs>(out, in, n, s, stream);
        case LAB_INT16: return launch_typed<int16_t, Op, kInputs>(out, in, n, s, stream);
        case LAB_INT32: return launch_typed<int32_t, Op, kInputs>(out, in, n, s, stream);
        case LAB_INT64: return launch_typed<int64_t, Op, kInputs>(out, in, n, s, stream);
        case LAB_UINT8: return launch_typed<uint8_t, Op, kInputs>(out, in, n, s, stream);
        default: break;
        }
    }
    return cudaErrorInvalidValue;  // the C layer validates dtypes first, so this is a bug guard
}

}  // namespace
}  // namespace lab

extern "C" cudaError_t lab_launch_elementwise(lab_op op, lab_dtype dtype, void *out, const void *const in[3],
                                              int64_t n, lab_scalars scalars, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    switch (op) {
#define LAB_OP(id, functor, n_inputs, integers) \
    case LAB_OP_##id: return lab::launch_for_dtype<lab::functor, n_inputs, integers>(dtype, out, in, n, scalars, stream);
#include "ops.def"
#undef LAB_OP
    default: return cudaErrorInvalidValue;
    }
}

#ifndef LAB_ARCH_LIST
#define LAB_ARCH_LIST "unknown"
#endif
extern "C" const char *lab_compiled_architectures(void) { return LAB_ARCH_LIST; }
