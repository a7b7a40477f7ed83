// attention_backward_wgmma.cu - attention_backward.cuh's two kernels on Hopper's wgmma, built for
// sm_90a only (as attention_forward_wgmma.cu: elsewhere the launcher alone, which declines).
//
// Each block is one warpgroup: grad_q's takes 64 queries and walks their keys 64 at a time, grad_k's
// and grad_v's takes 64 keys and walks the queries that see them 64 at a time. A step is four
// products - s and dp from tiles in shared memory (64 x 64 each), then the gradients from p or ds in
// registers times a tile read MN-major (64 x head_dim).
#include "attention_backward.cuh"
#include "products_choice.cuh"

namespace lab {
namespace {

template <int D> struct WarpgroupBackwardConfig {
    static constexpr int kQueries = 64, kKeys = 64, kKvKeys = 64, kKvQueries = 64;
    static constexpr bool kWarpgroup = true;
};

} // namespace

cudaError_t launch_attention_backward_wgmma(const lab_attention_launch &launch, float *delta,
                                            int64_t delta_rows, cudaStream_t stream) {
#if defined(LAB_WGMMA_BUILT)
    if ((launch.head_dim != 64 && launch.head_dim != 128) || products_wanted() == Products::kMmaSync ||
        !device_has_wgmma()) {
        return cudaErrorNotSupported;
    }
    const BackwardArgs args{launch, delta, delta_rows};
    return visit_attention_shape<false>(launch, [&](auto type, auto dim) -> cudaError_t {
        using T = typename decltype(type)::type;
        constexpr int D = decltype(dim)::value;
        using Config = WarpgroupBackwardConfig<D>;
        if constexpr (D == 64 || D == 128) return launch_backward<T, D, Config>(args, stream);
        return cudaErrorNotSupported;
    });
#else
    (void)launch, (void)delta, (void)delta_rows, (void)stream;
    return cudaErrorNotSupported;
#endif
}

} // namespace lab
