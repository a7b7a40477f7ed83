// resident_blocks.cuh - how many blocks of a kernel the current device runs at once (one full wave):
// its multiprocessors times the blocks one of them holds. Grids that must not depend on the input
// (the reductions' splits, the weight-gradient partials of the norms' backward) are sized from it.
// And how much dynamic shared memory a kernel may opt in to. Included by the reduction and row-wise
// launchers.
#pragma once

#include <atomic>
#include <stdint.h>

#include <cuda_runtime.h>

namespace lab {

namespace {

// The current device (its ordinal) and the facts of it the launchers size grids, shared memory and
// the rows in flight (against its L2 and its memory's speed) by, asked once per device (the design's
// "no per-call device queries"; devices past the table are asked every time).
struct DeviceShape {
    int device, multiprocessors, threads_per_multiprocessor, shared_per_block_opt_in, major, l2_bytes;
    int memory_khz, memory_bus_bits;
    // DRAM's peak: two transfers a clock (DDR) across the bus. An H100 SXM's 3.35 TB/s, an H200's 4.8.
    double peak_dram_bytes_per_second() const { return 2.0 * memory_khz * 1e3 * memory_bus_bits / 8; }
};
cudaError_t current_device_shape(DeviceShape *shape) {
    constexpr int kCachedDevices = 64;
    constexpr int kFacts = 7;
    static constexpr cudaDeviceAttr kAttributes[kFacts] = {cudaDevAttrMultiProcessorCount,
                                                           cudaDevAttrMaxThreadsPerMultiProcessor,
                                                           cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                                           cudaDevAttrComputeCapabilityMajor,
                                                           cudaDevAttrL2CacheSize,
                                                           cudaDevAttrMemoryClockRate,
                                                           cudaDevAttrGlobalMemoryBusWidth};
    static std::atomic<int> cache[kCachedDevices][kFacts];
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    int facts[kFacts] = {};
    const bool cacheable = device < kCachedDevices;
    for (int k = 0; k < kFacts && err == cudaSuccess; ++k) {
        facts[k] = cacheable ? cache[device][k].load(std::memory_order_relaxed) : 0;
        if (facts[k] > 0) continue;
        err = cudaDeviceGetAttribute(&facts[k], kAttributes[k], device);
        if (err == cudaSuccess && cacheable) cache[device][k].store(facts[k], std::memory_order_relaxed);
    }
    *shape = DeviceShape{device, facts[0], facts[1], facts[2], facts[3], facts[4], facts[5], facts[6]};
    return err;
}

// Blocks of `threads` threads and `shared_bytes` of dynamic shared memory running `kernel` that the
// device holds at once. The occupancy query depends only on the kernel's registers and the block's
// shape, so it is asked once and kept in `cached`: the caller keeps one per kernel and block shape
// (asking on every launch is the per-call device query the design rules out). Kept per kernel, not
// per device: a process mixing GPU architectures sizes a grid from the first one's occupancy - more
// or fewer waves on the others, still one fixed grid on each.
template <typename Kernel>
cudaError_t resident_blocks(Kernel kernel, int threads, size_t shared_bytes, std::atomic<int> &cached,
                            int64_t *blocks) {
    cudaError_t err = cudaSuccess;
    int per_multiprocessor = cached.load(std::memory_order_relaxed);
    if (per_multiprocessor == 0) {
        err =
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, kernel, threads, shared_bytes);
        if (err == cudaSuccess) cached.store(per_multiprocessor, std::memory_order_relaxed);
    }
    DeviceShape device{};
    if (err == cudaSuccess) err = current_device_shape(&device);
    *blocks =
        static_cast<int64_t>(device.multiprocessors) * (per_multiprocessor > 0 ? per_multiprocessor : 1);
    return err;
}

// The dynamic shared memory `kernel` may take: the device's opt-in limit less the kernel's own static
// shared memory (its group reductions'). Past 48 KB a kernel must opt in: its attribute is raised to
// that limit once per device (a bit each in `raised_on`; devices past 64 every time). The caller keeps
// the two caches per kernel.
template <typename Kernel>
cudaError_t opt_in_shared_limit(Kernel kernel, std::atomic<int> &static_bytes_plus_one,
                                std::atomic<uint64_t> &raised_on, size_t *bytes) {
    DeviceShape device{};
    cudaError_t err = current_device_shape(&device);
    int own = static_bytes_plus_one.load(std::memory_order_relaxed) - 1; // -1: not asked yet
    if (err == cudaSuccess && own < 0) {
        cudaFuncAttributes attributes{};
        err = cudaFuncGetAttributes(&attributes, kernel);
        own = int(attributes.sharedSizeBytes);
        if (err == cudaSuccess) static_bytes_plus_one.store(own + 1, std::memory_order_relaxed);
    }
    if (err != cudaSuccess) return err;
    const int limit = device.shared_per_block_opt_in - own;
    const uint64_t bit = device.device < 64 ? uint64_t(1) << device.device : 0;
    if (limit > 0 && !(raised_on.load(std::memory_order_relaxed) & bit)) {
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, limit);
        if (err == cudaSuccess) raised_on.fetch_or(bit, std::memory_order_relaxed);
    }
    *bytes = limit > 0 ? size_t(limit) : 0;
    return err;
}

} // namespace

} // namespace lab
