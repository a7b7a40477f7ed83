"""Philox4x32-10 in NumPy, and the numbers lab's fills make of its words: an independent host
reference for src/kernels/philox.cuh and random_fill.cuh. A GPU's fill that equals it bit for bit
depends on nothing but (seed, offset, index) - not on the GPU model or the launch geometry - which is
how tests/test_random_gpu.py checks 'same seed, same numbers on any GPU' on whichever GPU it has."""
import numpy as np

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
LOW32 = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter, key):
    """The four output words (uint64 arrays holding 32-bit values) for counters of four 32-bit words
    (arrays broadcast together) under a key of two."""
    c0, c1, c2, c3 = (np.asarray(word, dtype=np.uint64) & LOW32 for word in counter)
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    for _ in range(10):
        product0, product1 = M0 * c0, M1 * c2  # both factors below 2^32: exact in 64 bits
        c0, c1, c2, c3 = (product1 >> np.uint64(32)) ^ c1 ^ k0, product1 & LOW32, \
            (product0 >> np.uint64(32)) ^ c3 ^ k1, product0 & LOW32
        k0, k1 = (k0 + W0) & LOW32, (k1 + W1) & LOW32
    return c0, c1, c2, c3


def group_words(seed, groups):
    """Words of Philox groups `groups` (an array of indices, the offset included) under `seed`, as
    an array of shape (len(groups), 4)."""
    groups = np.asarray(groups, dtype=np.uint64)
    zero = np.zeros_like(groups)
    seed = np.uint64(seed)
    return np.stack(philox4x32_10((groups & LOW32, groups >> np.uint64(32), zero, zero),
                                  (seed & LOW32, seed >> np.uint64(32))), axis=1)


def bfloat16_values(float32_values):
    """float32 values rounded to bfloat16 (to nearest, ties to even), as float64."""
    bits = np.asarray(float32_values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)) << np.uint64(16)
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


def uniform(seed, offset, n, dtype):
    """lab.uniform(out) (low 0, high 1) on n elements of dtype from state (seed, offset), as float64."""
    if dtype == "float64":
        words = group_words(seed, offset + np.arange((n + 1) // 2))
        pairs = [(words[:, 0] << np.uint64(21)) ^ (words[:, 1] >> np.uint64(11)),
                 (words[:, 2] << np.uint64(21)) ^ (words[:, 3] >> np.uint64(11))]
        return (np.stack(pairs, axis=1).reshape(-1)[:n].astype(np.float64) * 2.0 ** -53)
    values = unit_numbers(seed, offset, n, sixteen_bits=dtype in ("float16", "bfloat16"))
    if dtype == "float16":
        return values.astype(np.float16).astype(np.float64)
    return bfloat16_values(values) if dtype == "bfloat16" else values.astype(np.float64)


def unit_numbers(seed, offset, n, sixteen_bits):
    """The float32 numbers in [0, 1) behind uniform, bernoulli and dropout: the top 24 bits of a word
    each, or for the 16-bit dtypes two 16-bit numbers a word, low half first (eight a group)."""
    if sixteen_bits:
        words = group_words(seed, offset + np.arange((n + 7) // 8))
        halves = np.stack([words & np.uint64(0xFFFF), words >> np.uint64(16)], axis=2).reshape(-1)[:n]
        return halves.astype(np.float32) * np.float32(2.0 ** -16)
    words = group_words(seed, offset + np.arange((n + 3) // 4)).reshape(-1)[:n]
    return (words >> np.uint64(8)).astype(np.float32) * np.float32(2.0 ** -24)


def randint(seed, offset, n, low, high):
    """lab.randint(out, low, high) on n elements from state (seed, offset), as Python ints: Lemire's
    multiply-shift of a word (ranges up to 2^32) or of two words as one 64-bit number."""
    span = high - low
    if span > 1 << 32:
        words = group_words(seed, offset + np.arange((n + 1) // 2))
        draws = [(int(w[0]) << 32 | int(w[1]), int(w[2]) << 32 | int(w[3])) for w in words]
        return [low + ((draw * span) >> 64) for pair in draws for draw in pair][:n]
    words = group_words(seed, offset + np.arange((n + 3) // 4)).reshape(-1)[:n]
    return [low + ((int(word) * span) >> 32) for word in words]
