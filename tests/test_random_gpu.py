"""lab's random numbers on a GPU: the distributions' moments and Kolmogorov-Smirnov distance against
NumPy's exact distributions, every float dtype, odd and prime sizes (the ragged end), the same seed
giving the same bits on any producer's array, consecutive calls drawing new numbers, and a fill's
numbers depending on its elements' indices only (a fill of n + k elements starts with the n of a
fill of n). Outputs are poisoned (NaN) first, so an element left unwritten fails."""
import math

import numpy as np
import pytest

import lab
import philox_reference
from producers import LabProducer

pytestmark = pytest.mark.gpu


LAB = LabProducer()


def poisoned(n, dtype):
    """n NaNs of dtype as a lab.Array."""
    return LAB.empty_poisoned((n,), dtype)


def filled(fill, n, dtype="float32", *args):
    """fill(out, *args) on n poisoned elements; their values as float64."""
    out = poisoned(n, dtype)
    assert fill(out, *args) is out
    return LAB.to_host(out)


def ks_distance(sample, cdf):
    x = np.sort(sample)
    n = len(x)
    c = cdf(x)
    return max(np.max(np.arange(1, n + 1) / n - c), np.max(c - np.arange(n) / n))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("n", [1, 7, 1031, 1 << 20])
def test_uniform_lies_in_its_interval_and_fills_every_element(dtype, n):
    values = filled(lab.uniform, n, dtype, -2.0, 3.0)
    assert np.isfinite(values).all(), "an element left unwritten"
    assert (values >= -2.0).all() and (values <= 3.0).all()
    if n >= 1 << 20:
        assert abs(values.mean() - 0.5) < 0.02 and abs(values.var() - 25 / 12) < 0.05
        if dtype in ("float32", "float64"):
            assert ks_distance(values, lambda x: (x + 2.0) / 5.0) < 2.0 / math.sqrt(n)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_normal_has_the_moments_and_shape_of_a_normal(dtype):
    n = 1 << 21
    values = filled(lab.normal, n, dtype, 1.5, 2.0)
    assert np.isfinite(values).all()
    z = (values - 1.5) / 2.0
    assert abs(z.mean()) < 0.01 and abs(z.var() - 1.0) < 0.01
    assert abs(np.mean(z ** 3)) < 0.02 and abs(np.mean(z ** 4) - 3.0) < 0.05
    from math import erf
    cdf = np.vectorize(lambda x: 0.5 * (1.0 + erf(x / math.sqrt(2.0))))
    assert ks_distance(z[: 1 << 16], cdf) < 2.0 / math.sqrt(1 << 16)


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_bernoulli_is_ones_with_probability_p(p):
    n = 1 << 20
    values = filled(lab.bernoulli, n, "float32", p)
    assert set(np.unique(values)) <= {0.0, 1.0}
    assert abs(values.mean() - p) < 4 * math.sqrt(p * (1 - p) / n) + 1e-12


def test_every_bit_of_the_uniform_numbers_is_balanced():
    """The 24 bits a float32 uniform number keeps of its Philox word are each 1 half the time: a
    generator with a stuck or biased bit (a wrong shift, a word used twice) fails here."""
    n = 1 << 22
    lab.manual_seed(7)
    words = (filled(lab.uniform, n) * (1 << 24)).astype(np.int64)
    assert ((words >= 0) & (words < 1 << 24)).all()
    ones = np.array([((words >> bit) & 1).mean() for bit in range(24)])
    assert np.abs(ones - 0.5).max() < 5 * 0.5 / math.sqrt(n), ones


def drawn_integers(n, dtype, low, high):
    """randint on n elements of dtype (poisoned first where a poison is outside [low, high)), as int64
    or, for the float dtypes, float64."""
    out = lab.empty(n, dtype)
    if dtype in ("int8", "int16", "int32", "int64", "uint8"):
        info = np.iinfo(dtype)  # a range of every value the dtype holds leaves no poison to tell
        poison = high if high <= info.max else low - 1 if low > info.min else None
        if poison is not None:
            lab.copy(lab.asarray(np.full(n, poison, dtype=dtype)), out)
    else:
        lab.copy(poisoned(n, dtype), out)
    assert lab.randint(out, low, high) is out
    if dtype == "bfloat16":
        wide = lab.empty(n, "float32")
        lab.copy(out, wide)
        out = wide
    values = out.numpy()
    return values.astype(np.int64) if values.dtype.kind in "iu" else values.astype(np.float64)


@pytest.mark.parametrize("dtype, low, high", [
    ("int8", -128, 128), ("uint8", 0, 256), ("int16", -3, 4), ("int32", -1000, 1000), ("int64", 5, 6),
    ("float32", -7, 9), ("float16", 0, 100), ("bfloat16", -50, 50), ("float64", -3, 3)])
@pytest.mark.parametrize("n", [1, 7, 1 << 20])
def test_randint_draws_every_integer_of_its_range_as_often(dtype, low, high, n):
    values = drawn_integers(n, dtype, low, high)
    assert ((values >= low) & (values < high)).all(), "an element outside [low, high), or left unwritten"
    assert (values == np.round(values)).all()
    if n >= 1 << 20:
        counts = np.bincount((values - low).astype(np.int64), minlength=high - low)
        expected = n / (high - low)
        assert (np.abs(counts - expected) < 6 * math.sqrt(expected) + 1).all()


def test_randint_over_ranges_wider_than_two_to_the_32():
    n = 1 << 20
    lab.manual_seed(3)
    full = drawn_integers(n, "int64", -(1 << 63), (1 << 63) - 1)
    ones = np.array([((full >> bit) & 1).mean() for bit in range(64)])
    assert np.abs(ones - 0.5).max() < 6 * 0.5 / math.sqrt(n), "a 64-bit draw's bits are each 1 half the time"
    assert lab.get_rng_state()[1] == n // 2  # two words an element: two elements a group
    wide = drawn_integers(n, "int64", 0, 3 << 40)
    assert wide.min() >= 0 and wide.max() < 3 << 40
    assert abs(wide.mean() / (3 << 40) - 0.5) < 0.01


def test_randint_takes_the_same_numbers_for_the_same_state_and_indices():
    lab.manual_seed(9)
    short = drawn_integers(1000, "int32", 0, 1 << 30)
    lab.manual_seed(9)
    long = drawn_integers(1 << 20, "int32", 0, 1 << 30)
    assert np.array_equal(short, long[:1000])
    lab.manual_seed(9)
    as_float = drawn_integers(1000, "float64", 0, 1 << 30)
    assert np.array_equal(short, as_float.astype(np.int64)), "the dtype changes the type, not the draw"


def test_the_same_seed_gives_the_same_bits_and_the_next_call_new_ones():
    lab.manual_seed(2024)
    first = filled(lab.normal, 4099)
    second = filled(lab.normal, 4099)
    lab.manual_seed(2024)
    again = filled(lab.normal, 4099)
    assert np.array_equal(first, again)
    assert not np.array_equal(first, second)
    assert lab.get_rng_state()[1] == math.ceil(4099 / 4)  # one call since the seed: 1025 groups
    lab.uniform(lab.empty(4099, "bfloat16"))
    assert lab.get_rng_state()[1] == math.ceil(4099 / 4) + math.ceil(4099 / 8), "16-bit numbers: eight a group"


def state_after_a_first_draw(seed):
    """(seed, offset) after manual_seed(seed) and one fill: an offset that is not 0."""
    lab.manual_seed(seed)
    lab.uniform(lab.empty(13))
    return lab.get_rng_state()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("n", [1, 4099, (1 << 20) + 5])
def test_uniform_equals_the_host_philox_reference_bit_for_bit(dtype, n):
    """Same seed, same numbers on any GPU and any grid: the fill equals NumPy's Philox4x32-10 run on
    the host from the same (seed, offset), so it can depend on nothing else."""
    seed, offset = state_after_a_first_draw(20261207)
    got = filled(lab.uniform, n, dtype)
    np.testing.assert_array_equal(got, philox_reference.uniform(seed, offset, n, dtype))


@pytest.mark.parametrize("low, high", [(-1000, 1000), (0, 1 << 32), (-(1 << 63), (1 << 63) - 1), (7, 3 << 40)])
def test_randint_equals_the_host_philox_reference(low, high):
    seed, offset = state_after_a_first_draw(31)
    got = drawn_integers(4099, "int64", low, high)
    assert got.tolist() == philox_reference.randint(seed, offset, 4099, low, high)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_dropout_keeps_the_elements_the_host_reference_keeps(dtype):
    n, p = 4099, 0.3
    seed, offset = state_after_a_first_draw(5)
    x = lab.empty(n, dtype)
    lab.copy(lab.asarray(np.ones(n, np.float32)), x)
    mask = lab.zeros(n, "uint8")
    lab.dropout(x, p, poisoned(n, dtype), mask_out=mask)
    kept = philox_reference.unit_numbers(seed, offset, n, sixteen_bits=dtype == "bfloat16") >= np.float32(p)
    np.testing.assert_array_equal(mask.numpy().astype(bool), kept)


def test_a_fill_depends_only_on_the_indices_it_covers():
    lab.manual_seed(7)
    short = filled(lab.uniform, 1000)
    lab.manual_seed(7)
    long = filled(lab.uniform, 1 << 20)  # another grid, another number of blocks
    assert np.array_equal(short, long[:1000])


def test_any_producers_array_takes_the_same_numbers():
    torch = pytest.importorskip("torch")
    lab.manual_seed(11)
    ours = filled(lab.uniform, 513)
    lab.manual_seed(11)
    theirs = torch.full((513,), float("nan"), device="cuda")
    lab.uniform(theirs)
    torch.cuda.synchronize()
    assert np.array_equal(ours, theirs.cpu().double().numpy())


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_dropout_keeps_one_minus_p_scaled_and_its_backward_keeps_the_same(dtype):
    n, p = (1 << 20) + 3, 0.3
    x = lab.asarray(np.random.default_rng(0).uniform(0.5, 1.5, n).astype(np.float32))
    if dtype != "float32":
        wide = x
        x = lab.empty(n, dtype)
        lab.copy(wide, x)
    xs = filled(lambda o: lab.copy(x, o), n, dtype)
    state = lab.get_rng_state()
    out, mask = poisoned(n, dtype), lab.zeros(n, "uint8")
    lab.dropout(x, p, out, mask_out=mask)
    got = filled(lambda o: lab.copy(out, o), n, dtype)
    kept = mask.numpy().astype(bool)
    assert abs(kept.mean() - (1 - p)) < 4 * math.sqrt(p * (1 - p) / n)
    tol = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-12}[dtype]
    np.testing.assert_allclose(got[kept], xs[kept] / (1 - p), rtol=tol)
    assert (got[~kept] == 0).all()
    again = poisoned(n, dtype)
    lab.dropout(x, p, again, rng_state=state)  # the backward's call: the same elements kept
    assert np.array_equal(filled(lambda o: lab.copy(again, o), n, dtype), got)
    assert lab.get_rng_state() != state  # the forward moved the offset on; the second call did not
    residual = poisoned(n, dtype)
    lab.copy(x, residual)
    summed = poisoned(n, dtype)
    lab.dropout_add(residual, x, p, summed, rng_state=state)
    np.testing.assert_allclose(filled(lambda o: lab.copy(summed, o), n, dtype), xs + got, rtol=2 * tol, atol=tol)
