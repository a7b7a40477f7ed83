// attention_forward_wgmma.cu - attention_forward.cuh's kernel on Hopper's wgmma, built for sm_90a
// only (setup.py gives this unit `-gencode=arch=compute_90a,code=sm_90a` and LAB_WGMMA_BUILT where
// the build includes sm_90; elsewhere it compiles to the launcher alone, which declines).
//
// Two warpgroups take 128 queries against 128 keys a step: each issues a 64 x 128 product for the
// scores and a 64 x head_dim one for the values. With 160 KiB of tiles (head_dim 128) one block fits
// an SM, and the two warpgroups overlap each other's softmax with their products.
#include <stdlib.h>
#include <string.h>

#include "attention_forward.cuh"

namespace lab {
namespace {

template <int D, bool kOverlapSoftmax> struct WarpgroupConfig {
    static constexpr int kBlockM = 128, kBlockN = 128, kWarps = 8;
    static constexpr bool kWarpgroup = true, kOverlap = kOverlapSoftmax;
};

// Whether the current device runs sm_90a code (compute capability 9.0 exactly), asked once a device.
bool device_has_wgmma() {
    static std::atomic<uint64_t> asked{0}, answer{0};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device >= 64) return false;
    const uint64_t bit = uint64_t(1) << device;
    if (asked.load(std::memory_order_acquire) & bit) return answer.load(std::memory_order_acquire) & bit;
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
        return false;
    }
    if (major == 9 && minor == 0) answer.fetch_or(bit, std::memory_order_acq_rel);
    asked.fetch_or(bit, std::memory_order_acq_rel);
    return major == 9 && minor == 0;
}

// LAB_ATTENTION_PRODUCTS (read at each launch, so that a benchmark can time the builds side by side
// in one process): "mma.sync" keeps the forward off wgmma, "wgmma-serial" runs the wgmma kernel
// without its softmax overlapped with the products; unset, or anything else, the overlapped one.
enum class Products { kMmaSync, kSerial, kOverlapped };
Products products_wanted() {
    const char *choice = getenv("LAB_ATTENTION_PRODUCTS");
    if (choice == nullptr) return Products::kOverlapped;
    if (strcmp(choice, "mma.sync") == 0) return Products::kMmaSync;
    return strcmp(choice, "wgmma-serial") == 0 ? Products::kSerial : Products::kOverlapped;
}

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
