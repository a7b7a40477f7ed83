// resident_blocks.cuh - how many blocks of a kernel the current device runs at once (one full wave):
// its multiprocessors times the blocks one of them holds. Grids that must not depend on the input
// (the reductions' splits, the weight-gradient partials of the norms' backward) are sized from it.
// Included by the reduction and row-wise launchers.
#pragma once

#include <atomic>
#include <stdint.h>

#include <cuda_runtime.h>

namespace lab {

namespace {

// The current device's multiprocessors and the threads one of them holds, asked once per device (the
// design's "no per-call device queries"; devices past the table are asked every time).
struct DeviceShape {
    int multiprocessors, threads_per_multiprocessor;
};
cudaError_t current_device_shape(DeviceShape *shape) {
    constexpr int kCachedDevices = 64;
    static std::atomic<int> multiprocessors[kCachedDevices], threads_per_multiprocessor[kCachedDevices];
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    const bool cached = device < kCachedDevices;
    shape->multiprocessors = cached ? multiprocessors[device].load(std::memory_order_relaxed) : 0;
    shape->threads_per_multiprocessor =
        cached ? threads_per_multiprocessor[device].load(std::memory_order_relaxed) : 0;
    if (shape->multiprocessors > 0 && shape->threads_per_multiprocessor > 0) return cudaSuccess;
    err = cudaDeviceGetAttribute(&shape->multiprocessors, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess) {
        err = cudaDeviceGetAttribute(&shape->threads_per_multiprocessor,
                                     cudaDevAttrMaxThreadsPerMultiProcessor, device);
    }
    if (err == cudaSuccess && cached) {
        multiprocessors[device].store(shape->multiprocessors, std::memory_order_relaxed);
        threads_per_multiprocessor[device].store(shape->threads_per_multiprocessor,
                                                 std::memory_order_relaxed);
    }
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

} // namespace

} // namespace lab
