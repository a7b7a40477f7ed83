// rowwise_window.cuh - a window of shared memory through which a thread walks a long row (cross-entropy's
// streamed rows, rows_window in rowwise_kernels.cuh): the steps ahead of the one it computes are copied
// in by cp.async, so the copies in flight are not bounded by the registers that hold one step.
#pragma once

#include "rowwise.cuh"

namespace lab {

// Rows in device memory walked through a window of `depth` slots of shared memory (rows_window): each
// pass copies the step `depth` ahead of the one it computes into the slot that step freed, so a
// thread keeps `depth` steps of copies in flight without registers for them. The second pass walks
// backwards from the row's end, which the window still holds from the first. A 16-byte vector of a
// slot is copied and read back by the same thread, so the window needs no barrier.
struct WindowRows : GlobalRows {
    static constexpr bool kWindow = true;
    unsigned shared;
    int depth;
};

// Rows of two operands (x and grad_out: rms_norm's backward) whose steps all sit in the block's shared
// memory (rows_streamed with a.streamed_row_buffer): each pass reads them there, and the second,
// as it finishes a step, copies the same step of the block's next row into its place (one commit
// group a step, x and grad_out together) - so the next row's reads fly while this row is reduced
// and written, and each row is read from device memory once. Slot s of x is step s of the row; grad_out's
// slots follow x's. As in the window, a thread reads back only what its own copies wrote.
struct BufferedRows : GlobalRows {
    static constexpr bool kBuffered = true;
    unsigned x_slots, grad_slots;
    const char *next_x, *next_grad; // the block's next row; null for its last
};
template <class Rows, typename = void> constexpr bool kRowsBuffered = false;
template <class Rows>
constexpr bool kRowsBuffered<Rows, std::void_t<decltype(Rows::kBuffered)>> = Rows::kBuffered;

// Waits until this thread's copies but the last `pending` groups have landed (cp.async.wait_group
// takes a constant: a switch over the depths a window may have).
constexpr int kMaxWindowDepth = 8;
__device__ __forceinline__ void async_copy_wait_pending(int pending) {
    switch (pending) {
    case 0: async_copy_wait<0>(); break;
    case 1: async_copy_wait<1>(); break;
    case 2: async_copy_wait<2>(); break;
    case 3: async_copy_wait<3>(); break;
    case 4: async_copy_wait<4>(); break;
    case 5: async_copy_wait<5>(); break;
    case 6: async_copy_wait<6>(); break;
    default: async_copy_wait<kMaxWindowDepth - 1>(); break;
    }
}

// Starts copying this lane's kChunks chunks of step `step` of the row at `row` into slot `slot` of the
// block's shared memory at `shared` (a slot: one step, kChunks 16-byte vectors a lane), those wholly
// inside the row (a row's last, partial vector is read from device memory each pass). The row's first
// `whole_steps` steps lie wholly inside it: their chunks go without a test each. fill_slot also closes
// the copies as one commit group - an empty one where no chunk is copied, so that every step counts one.
template <typename T, int kChunks>
__device__ __forceinline__ void copy_to_slot(unsigned shared, int slot, const char *row, const RowArgs &a,
                                             int lane, int64_t step, int64_t whole_steps) {
    const int64_t first = step * kChunks * a.group + lane; // this lane's first vector of the step
    const unsigned to = shared + unsigned(slot * kChunks * a.group + lane) * 16u;
    if (step >= 0 && step < whole_steps) {
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
            async_copy_16(to + unsigned(c * a.group) * 16u, row + (first + int64_t(c) * a.group) * 16);
        }
    } else {
        const int64_t full = a.n / kRowVec<T>;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
            const int64_t v = first + int64_t(c) * a.group;
            if (v >= 0 && v < full) async_copy_16(to + unsigned(c * a.group) * 16u, row + v * 16);
        }
    }
}
template <typename T, int kChunks>
__device__ __forceinline__ void fill_slot(unsigned shared, int slot, const char *row, const RowArgs &a,
                                          int lane, int64_t step, int64_t whole_steps) {
    copy_to_slot<T, kChunks>(shared, slot, row, a, lane, step, whole_steps);
    async_copy_commit();
}

// Loads this lane's chunks of step `step` from slot `slot`, as fill_slot copied them (its wait done by
// the caller), converted to the compute type; a chunk the slot does not hold (the row's last, partial
// vector, or past the row's end) comes from the row in device memory, `fill` past its end. The shared
// loads are volatile asm so that no refill of the same slot is moved above them.
template <typename T, int kChunks>
__device__ __forceinline__ void load_slot(compute_t<T> (&v)[kChunks * kRowVec<T>], unsigned shared, int slot,
                                          const char *row, const RowArgs &a, int lane, int64_t step,
                                          int64_t whole_steps, compute_t<T> fill) {
    constexpr int kVec = kRowVec<T>;
    const int64_t first = step * kChunks * a.group + lane;
    const unsigned from = shared + unsigned(slot * kChunks * a.group + lane) * 16u;
    const auto from_slot = [&](int c) {
        Packet16 p;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(p.bits.x), "=r"(p.bits.y), "=r"(p.bits.z), "=r"(p.bits.w)
                     : "r"(from + unsigned(c * a.group) * 16u));
#pragma unroll
        for (int i = 0; i < kVec; ++i) v[c * kVec + i] = packet_compute<T>(p, i);
    };
    if (step < whole_steps) {
#pragma unroll
        for (int c = 0; c < kChunks; ++c) from_slot(c);
        return;
    }
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
        if (first + int64_t(c) * a.group < a.n / kVec) {
            from_slot(c);
        } else {
            compute_t<T> chunk[kVec];
            load_row<T, 1, int64_t>(chunk, row, int64_t(sizeof(T)), a, lane, step * kChunks + c, true, fill);
#pragma unroll
            for (int i = 0; i < kVec; ++i) v[c * kVec + i] = chunk[i];
        }
    }
}

} // namespace lab
