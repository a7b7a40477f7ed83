// elementwise_contiguous.cu - the fast paths: every operand contiguous and of one dtype.
//
//   vectorized: every pointer 16-byte aligned -> 16-byte packets (elementwise_vectorized.cuh);
//   contiguous: some pointer misaligned (a view starting at an odd element) -> one element at a time.
// The plan (dispatch/elementwise_kind.c) checked the alignment at run time; sizes never need to divide
// evenly.
#include "dispatch.cuh"
#include "elementwise_vectorized.cuh"

namespace lab {
namespace {

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

} // namespace

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
                return launch_vectorized<T, Op, kInputs>(out, inputs, launch.numel, params, stream);
            } else {
                elementwise_contiguous<T, Op, kInputs>
                    <<<blocks_for(launch.numel), kThreads, 0, stream>>>(out, inputs, launch.numel, params);
            }
            return cudaGetLastError();
        });
    });
}

} // namespace lab
