// async_copy.cuh - cp.async (sm_80+): 16 bytes from global to shared memory without passing through
// registers, tracked in commit groups. Used where a kernel keeps bytes in flight in shared memory:
// the staged rows (rowwise.cuh stage_row), rope's ring of items (rope.cu) and attention's tiles
// (tile_mma.cuh). Also the 32-bit address in the shared window that such instructions take (and
// cluster.cuh's mbarriers and st.async).
#pragma once

#include <stdint.h>

namespace lab {

// The address of `p` (which points into shared memory) in the shared window: what PTX's shared-memory
// instructions take, 32 bits where a generic pointer has 64.
__device__ __forceinline__ uint32_t shared_window_address(const void *p) {
    return uint32_t(__cvta_generic_to_shared(p));
}

// Where a kernel's tiles start: its dynamic shared memory (declared 128-byte aligned) rounded up to
// kAlignment - 1024 for wgmma's swizzle atoms.
template <int kAlignment> __device__ __forceinline__ unsigned char *aligned_shared(unsigned char *bytes) {
    if constexpr (kAlignment <= 128) return bytes; // what the declaration promises already
    const uint32_t window = shared_window_address(bytes);
    return bytes + (kAlignment - window % kAlignment) % kAlignment;
}

// Starts copying 16 bytes (both addresses 16-byte aligned) to `shared_address`, an address in the
// shared window (shared_window_address), through L2 only (.cg: the data is used once).
__device__ __forceinline__ void async_copy_16(unsigned shared_address, const void *global) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address), "l"(global));
}

// As async_copy_16, but where `valid` is false writes 16 zero bytes instead and reads nothing
// (the source operand's size is 0): a tile's rows past the end of its sequence.
__device__ __forceinline__ void async_copy_16_or_zero(unsigned shared_address, const void *global,
                                                      bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address), "l"(global),
                 "r"(valid ? 16 : 0));
}

// Shared memory written by copies like these (or by st.shared) that the tensor cores read next
// (wgmma, sm_90) travels another path, the async proxy: each writing thread fences after its copies
// land and before the barrier that publishes them.
__device__ __forceinline__ void fence_shared_for_async_proxy() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Closes the group of copies started since the last one.
__device__ __forceinline__ void async_copy_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most kPending groups are still in flight (0: every copy this thread started).
template <int kPending> __device__ __forceinline__ void async_copy_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

} // namespace lab
