// philox.cuh - the counter-based generator lab's random numbers come from: Philox4x32-10 (Salmon et
// al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the generator cuRAND and torch use.
//
// A counter-based generator has no state to carry from one number to the next: four 32-bit words are
// a pure function of a 128-bit counter and a 64-bit key. lab's key is the seed and its counter the
// element's index (in groups of four) plus the generator's offset, so an element's number depends on
// nothing but (seed, offset, index): not on the grid, the GPU, or the order threads run in. Ten
// rounds of two 32x32->64 multiplications and xors, the key bumped by the Weyl constants between
// rounds. Host code can run it too: tests/philox_vectors.cu checks it against Random123's
// known-answer vectors.
#pragma once

#include <stdint.h>

namespace lab {

struct Philox4 {
    uint32_t x[4];
};

// The high word of a 32x32-bit product (nvcc makes this one mul.hi on the device).
__host__ __device__ __forceinline__ uint32_t high_word(uint32_t a, uint32_t b) {
    return uint32_t((uint64_t(a) * b) >> 32);
}

__host__ __device__ __forceinline__ Philox4 philox4x32_10(Philox4 counter, uint32_t key0, uint32_t key1) {
    constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma unroll
    for (int round = 0; round < 10; round++) {
        const uint32_t hi0 = high_word(kM0, counter.x[0]), lo0 = kM0 * counter.x[0];
        const uint32_t hi1 = high_word(kM1, counter.x[2]), lo1 = kM1 * counter.x[2];
        counter = Philox4{{hi1 ^ counter.x[1] ^ key0, lo1, hi0 ^ counter.x[3] ^ key1, lo0}};
        key0 += kW0;
        key1 += kW1;
    }
    return counter;
}

// The four words of group `group` (a 64-bit index) under `seed`.
__host__ __device__ __forceinline__ Philox4 random_group(uint64_t seed, uint64_t group) {
    return philox4x32_10(Philox4{{uint32_t(group), uint32_t(group >> 32), 0u, 0u}}, uint32_t(seed),
                         uint32_t(seed >> 32));
}

} // namespace lab
