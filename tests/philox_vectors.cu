// philox_vectors.cu - a host program (no GPU) that runs philox.cuh's generator on Random123's
// known-answer vectors for Philox4x32-10 (its kat_vectors file: counter, key, the four output words)
// and prints the failures. Built and run by tests/test_random.py.
#include <cstdio>

#include "philox.cuh"

int main() {
    struct Vector {
        uint32_t counter[4], key[2], want[4];
    } vectors[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
         {0xffffffffu, 0xffffffffu},
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
         {0xa4093822u, 0x299f31d0u},
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    int failures = 0;
    for (const Vector &v : vectors) {
        const lab::Philox4 got = lab::philox4x32_10(
            lab::Philox4{{v.counter[0], v.counter[1], v.counter[2], v.counter[3]}}, v.key[0], v.key[1]);
        for (int i = 0; i < 4; i++) {
            if (got.x[i] != v.want[i]) {
                failures++;
                std::printf("counter %08x.. key %08x %08x: word %d is %08x, want %08x\n", v.counter[0],
                            v.key[0], v.key[1], i, got.x[i], v.want[i]);
            }
        }
    }
    std::printf("%d vectors, %d failures\n", int(sizeof(vectors) / sizeof(vectors[0])), failures);
    return failures != 0;
}
