// elementwise_contiguous.cu - the fast paths: every operand contiguous and of one dtype.
//
//   vectorized: every pointer 16-byte aligned -> each thread moves 16-byte packets, kUnroll of
//               them per input, all loads issued before the first use (bytes in flight hide HBM
//               latency); the last n % lanes elements go through a scalar tail in block 0;
//   contiguous: some pointer misaligned (a view starting at an odd element) -> one element at a time.
// The plan (src/plan.c) checked the alignment at run time; sizes never need to divide evenly.
#include "dispatch.cuh"
#include "elementwise.cuh"

namespace lab {
namespace {

template <typename T> struct InputPtrs {
    const T *p[3];
};

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
                result.v[lane] = store_from_compute<T>(apply<C, Op, kInputs>(op, v, params));
            }
            reinterpret_cast<Packet *>(out)[i] = result;
        }
    }

    const int64_t tail_start = n_packets * kLanes;  // fewer than 16 elements after the last packet
    if (blockIdx.x == 0 && tail_start + threadIdx.x < n) {
        const int64_t i = tail_start + threadIdx.x;
        C v[3];
#pragma unroll
        for (int k = 0; k < kInputs; ++k) v[k] = load_as_compute(in.p[k][i]);
        out[i] = store_from_compute<T>(apply<C, Op, kInputs>(op, v, params));
    }
}

template <typename T, typename Op, int kInputs>
__global__ void __launch_bounds__(kThreads)
elementwise_contiguous(T *out, InputPtrs<T> in, int64_t n, OpParams<compute_t<T>> params) {
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
            out[i] = store_from_compute<T>(apply<C, Op, kInputs>(op, v, params));
        }
    }
}

}  // namespace

cudaError_t launch_contiguous(const lab_elementwise_launch &launch, cudaStream_t stream) {
    return visit_op(launch.op, [&](auto op, auto n_inputs, auto integers) {
        return visit_storage_type<decltype(integers)::value>(launch.dtypes[0], [&](auto tag) {
            using T = typename decltype(tag)::type;
            using Op = decltype(op);
            constexpr int kInputs = decltype(n_inputs)::value;
            InputPtrs<T> inputs{};
            for (int k = 0; k < kInputs; ++k) inputs.p[k] = reinterpret_cast<const T *>(launch.data[k + 1]);
            T *out = reinterpret_cast<T *>(launch.data[0]);
            const auto params = to_params<compute_t<T>>(launch.scalars);
            if (launch.path == LAB_PATH_VECTORIZED) {
                const unsigned int blocks = blocks_for(launch.numel / Packed16<T>::kCount);
                elementwise_vectorized<T, Op, kInputs><<<blocks, kThreads, 0, stream>>>(out, inputs, launch.numel, params);
            } else {
                elementwise_contiguous<T, Op, kInputs><<<blocks_for(launch.numel), kThreads, 0, stream>>>(
                    out, inputs, launch.numel, params);
            }
            return cudaGetLastError();
        });
    });
}

}  // namespace lab
