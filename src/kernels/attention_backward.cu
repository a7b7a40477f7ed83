// attention_backward.cu - lab_launch_attention_backward (launch.h): attention_backward.cuh's two
// kernels on mma.sync, for every GPU from sm_80 - unless Hopper's wgmma build
// (attention_backward_wgmma.cu) takes the launch first. The rows of delta both kernels share live in
// scratch memory for the launch.
#include "attention_backward.cuh"

namespace lab {
namespace {

// Blocks per head dimension: the accumulators of the widest rows leave room for fewer columns.
template <int D> struct BackwardConfig {
    static constexpr int kQueries = 64, kKeys = 64; // grad_q: a block's queries, a step's keys
    static constexpr int kKvKeys = 64, kKvQueries = D > 64 ? 32 : 64; // grad_k, grad_v
    static constexpr bool kWarpgroup = false;
};

} // namespace
} // namespace lab

extern "C" cudaError_t lab_launch_attention_backward(const lab_attention_launch *launch,
                                                     cudaStream_t stream) {
    using namespace lab;
    BackwardArgs args{*launch, nullptr, 0};
    args.delta_rows = launch->cu_seqlens_q ? launch->total_q : launch->batch * launch->seqlen_q;
    const size_t delta_bytes = size_t(launch->heads_q) * size_t(args.delta_rows) * sizeof(float);
    cudaError_t err =
        lab_scratch_alloc(reinterpret_cast<void **>(&args.delta), delta_bytes ? delta_bytes : 4, stream);
    if (err != cudaSuccess) return err;
    err = launch_attention_backward_wgmma(*launch, args.delta, args.delta_rows, stream);
    if (err == cudaErrorNotSupported) {
        err = visit_attention_shape<false>(*launch, [&](auto type, auto dim) {
            using T = typename decltype(type)::type;
            constexpr int D = decltype(dim)::value;
            return launch_backward<T, D, BackwardConfig<D>>(args, stream);
        });
    }
    const cudaError_t freed = cudaFreeAsync(args.delta, stream);
    return err != cudaSuccess ? err : freed;
}
