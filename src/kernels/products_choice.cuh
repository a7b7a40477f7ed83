// products_choice.cuh - which product build an attention launch runs (host code): Hopper's wgmma
// kernels on a compute capability 9.0 device, unless LAB_ATTENTION_PRODUCTS says otherwise. Shared by
// the forward's and the backward's wgmma units.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

namespace lab {

// Whether the current device runs sm_90a code (compute capability 9.0 exactly), asked once a device.
inline bool device_has_wgmma() {
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
// in one process): "mma.sync" keeps a launch off wgmma, "wgmma-serial" runs the forward's wgmma kernel
// without its softmax overlapped with the products; unset, or anything else, the default.
enum class Products { kMmaSync, kSerial, kOverlapped };
inline Products products_wanted() {
    const char *choice = getenv("LAB_ATTENTION_PRODUCTS");
    if (choice == nullptr) return Products::kOverlapped;
    if (strcmp(choice, "mma.sync") == 0) return Products::kMmaSync;
    return strcmp(choice, "wgmma-serial") == 0 ? Products::kSerial : Products::kOverlapped;
}

} // namespace lab
