// attention_forward_wgmma.cu - attention_forward.cuh's kernel on Hopper's wgmma, built for sm_90a
// only (setup.py gives this unit `-gencode=arch=compute_90a,code=sm_90a` and LAB_WGMMA_BUILT where
// the build includes sm_90; elsewhere it compiles to the launcher alone, which declines).
//
// Two warpgroups take 128 queries against 128 keys a step: each issues a 64 x 128 product for the
// scores and a 64 x head_dim one for the values. With 160 KiB of tiles (head_dim 128) one block fits
// an SM, and the two warpgroups overlap each other's softmax with their products.
#include "attention_forward.cuh"
#include "products_choice.cuh"

namespace lab {
namespace {

template <int D, bool kOverlapSoftmax> struct WarpgroupConfig {
    static constexpr int kBlockM = 128, kBlockN = 128, kWarps = 8;
    static constexpr bool kWarpgroup = true, kOverlap = kOverlapSoftmax;
};

} // namespace

cudaError_t launch_attention_forward_wgmma(const lab_attention_launch &launch, cudaStream_t stream) {
#if defined(LAB_WGMMA_BUILT)
    const Products products = products_wanted();
    if ((launch.head_dim != 64 && launch.head_dim != 128) || products == Products::kMmaSync ||
        !device_has_wgmma()) {
        return cudaErrorNotSupported;
    }
    return visit_attention_shape<false>(launch, [&](auto type, auto dim) -> cudaError_t {
        using T = typename decltype(type)::type;
        constexpr int D = decltype(dim)::value;
        if constexpr (D == 64 || D == 128) {
            using Serial = WarpgroupConfig<D, false>;
            using Overlapped = WarpgroupConfig<D, true>;
            if (products == Products::kSerial) return launch_forward<T, D, Serial>(launch, stream);
            return launch_forward<T, D, Overlapped>(launch, stream);
        }
        return cudaErrorNotSupported;
    });
#else
    (void)launch, (void)stream;
    return cudaErrorNotSupported;
#endif
}

} // namespace lab
