// attention_forward.cu - lab_launch_attention_forward (launch.h): the forward kernel of
// attention_forward.cuh on mma.sync, for every GPU from sm_80 and every head dimension - unless
// Hopper's wgmma build (attention_forward_wgmma.cu) takes the launch first.
#include "attention_forward.cuh"

namespace lab {
namespace {

// The shapes each head dimension runs with: 128 queries a block where the accumulators fit the
// registers, fewer for the widest rows.
template <int D> struct ForwardConfig {
    static constexpr int kBlockM = 128, kBlockN = 64, kWarps = 4;
    static constexpr bool kWarpgroup = false, kOverlap = false;
};
template <> struct ForwardConfig<256> {
    static constexpr int kBlockM = 64, kBlockN = 32, kWarps = 4;
    static constexpr bool kWarpgroup = false, kOverlap = false;
};

} // namespace
} // namespace lab

extern "C" cudaError_t lab_launch_attention_forward(const lab_attention_launch *launch, cudaStream_t stream) {
    using namespace lab;
    const cudaError_t on_warpgroups = launch_attention_forward_wgmma(*launch, stream);
    if (on_warpgroups != cudaErrorNotSupported) return on_warpgroups;
    return visit_attention_shape<true>(*launch, [&](auto type, auto dim) {
        using T = typename decltype(type)::type;
        constexpr int D = decltype(dim)::value;
        return launch_forward<T, D, ForwardConfig<D>>(*launch, stream);
    });
}
