// rowwise_ring.cuh - a block's ring of shared memory for rows walked twice (cross-entropy writing its
// gradient, rows_ring in rowwise_kernels.cuh): the rows' first steps copied in by cp.async, read by
// the first pass, refilled with the block's next row as the second pass finishes each step.
#pragma once

#include "rowwise.cuh"

namespace lab {

// Rows in device memory walked twice whose first `staged_steps` steps also sit in the block's ring of
// shared memory (rows_ring, for cross-entropy with its gradient): the first pass reads those steps
// from the ring, the second computes from them and, as each step is done, refills its slots with the
// same step of the block's next row - so the next row's copies fly while this row's gradient is
// written, and a row is read from device memory once. Steps past the ring are read from device memory
// twice, as GlobalRows are. A 16-byte vector v of a row has slot v: a thread reads back only what its
// own copies wrote, so the ring needs no barrier.
struct RingRows : GlobalRows {
    static constexpr bool kRing = true, kWindow = false;
    unsigned shared;  // the ring's address in the shared window
    int staged_steps; // the steps of a row the ring holds
    const char *next; // the next row's X, refilled into the ring; null for the block's last row
    __device__ __forceinline__ int ring_steps() const { return staged_steps; }
};

// Waits until this thread's copies but the last `pending` groups have landed (cp.async.wait_group
// takes a constant: a switch over the few a ring may have).
constexpr int kMaxRingSteps = 8;
__device__ __forceinline__ void async_copy_wait_pending(int pending) {
    switch (pending) {
    case 0: async_copy_wait<0>(); break;
    case 1: async_copy_wait<1>(); break;
    case 2: async_copy_wait<2>(); break;
    case 3: async_copy_wait<3>(); break;
    case 4: async_copy_wait<4>(); break;
    case 5: async_copy_wait<5>(); break;
    case 6: async_copy_wait<6>(); break;
    default: async_copy_wait<kMaxRingSteps - 1>(); break;
    }
}

// Starts copying this lane's kChunks chunks of step `step` of the row at `row` into slot `slot` of the
// block's shared memory at `shared` (a slot: one step, kChunks 16-byte vectors a lane), those wholly
// inside the row (a row's last, partial vector is read from device memory each pass), as one commit
// group - an empty one where no chunk is copied, so that every step counts one group.
template <typename T, int kChunks>
__device__ __forceinline__ void fill_slot(unsigned shared, int slot, const char *row, const RowArgs &a,
                                          int lane, int64_t step) {
    const int64_t full = a.n / kRowVec<T>;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
        const int64_t v = (step * kChunks + c) * a.group + lane;
        const unsigned at = unsigned((slot * kChunks + c) * a.group + lane) * 16u;
        if (v >= 0 && v < full) async_copy_16(shared + at, row + v * 16);
    }
    async_copy_commit();
}
template <typename T, int kChunks>
__device__ __forceinline__ void ring_fill_step(const RingRows &ring, const char *row, const RowArgs &a,
                                               int lane, int step) {
    fill_slot<T, kChunks>(ring.shared, step, row, a, lane, step);
}

// Loads this lane's chunks of step `step` from slot `slot`, as fill_slot copied them (its wait done by
// the caller), converted to the compute type; a chunk the slot does not hold (the row's last, partial
// vector, or past the row's end) comes from the row in device memory, `fill` past its end. The shared
// loads are volatile asm so that no refill of the same slot is moved above them.
template <typename T, int kChunks>
__device__ __forceinline__ void load_slot(compute_t<T> (&v)[kChunks * kRowVec<T>], unsigned shared, int slot,
                                          const char *row, const RowArgs &a, int lane, int64_t step,
                                          compute_t<T> fill) {
    constexpr int kVec = kRowVec<T>;
    const int64_t full = a.n / kVec;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
        const int64_t vector = (step * kChunks + c) * a.group + lane;
        compute_t<T> chunk[kVec];
        if (vector < full) {
            Packet16 p;
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(p.bits.x), "=r"(p.bits.y), "=r"(p.bits.z), "=r"(p.bits.w)
                         : "r"(shared + unsigned((slot * kChunks + c) * a.group + lane) * 16u));
#pragma unroll
            for (int i = 0; i < kVec; ++i) chunk[i] = packet_compute<T>(p, i);
        } else {
            load_row<T, 1, int64_t>(chunk, row, int64_t(sizeof(T)), a, lane, step * kChunks + c, true, fill);
        }
#pragma unroll
        for (int i = 0; i < kVec; ++i) v[c * kVec + i] = chunk[i];
    }
}
template <typename T, int kChunks>
__device__ __forceinline__ void load_ring_step(compute_t<T> (&v)[kChunks * kRowVec<T>], const RingRows &ring,
                                               const char *row, const RowArgs &a, int lane, int step,
                                               compute_t<T> fill) {
    load_slot<T, kChunks>(v, ring.shared, step, row, a, lane, step, fill);
}

// Rows in device memory walked through a window of `depth` slots of shared memory (rows_window): each
// pass copies the step `depth` ahead of the one it computes into the slot that step freed, so a
// thread keeps `depth` steps of copies in flight without registers for them. The second pass walks
// backwards from the row's end, which the window still holds from the first.
struct WindowRows : GlobalRows {
    static constexpr bool kWindow = true;
    unsigned shared;
    int depth;
};

} // namespace lab
