// scratch.cu - stream-ordered scratch memory for kernels that need a buffer between two passes
// (the split reductions' partial results).
//
// Why not plain cudaMallocAsync: the device's default pool gives its memory back to the driver at
// every synchronisation (release threshold 0), so the next call maps it again - measured at ~80 us
// of idle GPU per reduction on the H200 (bench_reductions.py, 2026-11-30), a third of a 2^28 sum.
// lab's own pool per device keeps what it grew to (a few MB at most: partials are small), and
// leaves every other pool's settings alone. Under stream capture the allocation goes through
// cudaMallocAsync, which records a memory node of the graph's own. lab.memory_stats reads the pool,
// and lab.empty_cache gives back what it holds unused (lab_scratch_pool).
#include <atomic>
#include <mutex>

#include "launch.h"

namespace {

constexpr int kMaxDevices = 64;
std::mutex pool_creation;
std::atomic<cudaMemPool_t> pools[kMaxDevices];

cudaError_t scratch_pool(int device, cudaMemPool_t *pool) {
    *pool = pools[device].load(std::memory_order_acquire);
    if (*pool) return cudaSuccess;
    std::lock_guard<std::mutex> lock(pool_creation);
    *pool = pools[device].load(std::memory_order_acquire);
    if (*pool) return cudaSuccess;
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaError_t err = cudaMemPoolCreate(pool, &props);
    if (err != cudaSuccess) return err;
    uint64_t keep_everything = UINT64_MAX;
    err = cudaMemPoolSetAttribute(*pool, cudaMemPoolAttrReleaseThreshold, &keep_everything);
    if (err != cudaSuccess) {
        cudaMemPoolDestroy(*pool);
        return err;
    }
    pools[device].store(*pool, std::memory_order_release);
    return cudaSuccess;
}

} // namespace

extern "C" cudaError_t lab_scratch_alloc(void **ptr, size_t bytes, cudaStream_t stream) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaError_t err = cudaStreamIsCapturing(stream, &capture);
    if (err != cudaSuccess) return err;
    if (capture != cudaStreamCaptureStatusNone) return cudaMallocAsync(ptr, bytes, stream);
    int device = 0;
    err = cudaGetDevice(&device);
    if (err != cudaSuccess) return err;
    if (device < 0 || device >= kMaxDevices) return cudaMallocAsync(ptr, bytes, stream);
    cudaMemPool_t pool;
    err = scratch_pool(device, &pool);
    return err != cudaSuccess ? err : cudaMallocFromPoolAsync(ptr, bytes, pool, stream);
}

extern "C" cudaError_t lab_scratch_pool(cudaMemPool_t *pool) {
    *pool = nullptr;
    int device = 0;
    const cudaError_t err = cudaGetDevice(&device);
    const bool known = err == cudaSuccess && device >= 0 && device < kMaxDevices;
    if (known) *pool = pools[device].load(std::memory_order_acquire);
    return err;
}
