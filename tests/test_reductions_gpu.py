"""Reductions on a GPU: every op x dtype x axis set x layout against NumPy in float64,
sizes around a warp and a block, a prime, 2^24 + 3 and one input past 2^31 elements; bitwise
determinism over 10 runs on each strategy; every producer. Outputs are poisoned before each run."""
import numpy as np
import pytest

import lab
from cuda_graphs import capture_and_replay
from producers import FLOAT_DTYPES, INT_DTYPES, producer_or_skip, round_to

pytestmark = pytest.mark.gpu

VALUE_OPS = ["sum", "mean", "prod", "amax", "amin", "norm", "var", "std", "logsumexp"]
INDEX_OPS = ["argmax", "argmin"]
# a float32 sum of n elements in float32 is within a few ulps per element of the float64 sum
RTOL = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 2e-5, "float64": 1e-10}


def numpy_logsumexp(x, axis, keepdims):
    """log(sum(exp(x))) in float64, shifted by the (finite) maximum; -inf for an empty reduction."""
    if x.size == 0:
        return np.full(np.shape(np.sum(x, axis=axis, keepdims=keepdims)), -np.inf)
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        total = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return total if keepdims else np.squeeze(total, axis=axis)


def numpy_reduce(op, x, axis, keepdim, ord=2, correction=1):
    axis = tuple(range(x.ndim)) if axis is None else axis
    if op == "norm":
        values = {1: np.abs(x), 2: x * x, np.inf: np.abs(x)}[ord]
        combined = (np.max if ord == np.inf else np.sum)(values, axis=axis, keepdims=keepdim)
        return np.sqrt(combined) if ord == 2 else combined
    if op in ("var", "std"):
        n = x.size // max(1, np.size(np.sum(x, axis=axis)))
        with np.errstate(divide="ignore", invalid="ignore"):
            centred = x - np.mean(x, axis=axis, keepdims=True)
            var = np.sum(centred * centred, axis=axis, keepdims=keepdim) / max(0, n - correction)
        return np.sqrt(var) if op == "std" else var
    if op == "logsumexp":
        return numpy_logsumexp(x, axis, keepdim)
    if op in INDEX_OPS:
        fn = np.argmax if op == "argmax" else np.argmin
        if isinstance(axis, tuple):  # None: into x flattened
            result = fn(x.reshape(-1))
            return np.reshape(result, (1,) * x.ndim) if keepdim else np.asarray(result)
        return fn(x, axis=axis, keepdims=keepdim)
    fn = {"sum": np.sum, "mean": np.mean, "prod": np.prod, "amax": np.max, "amin": np.min}[op]
    return fn(x, axis=axis, keepdims=keepdim)


def host_values(op, dtype, shape, rng):
    n = int(np.prod(shape))
    if dtype in INT_DTYPES:
        low, high = (-5, 6) if dtype != "uint8" else (0, 11)
        values = rng.integers(low, high, size=n)
        if op == "prod":
            values = rng.choice([-1, 1, 1, 2], size=n) if dtype != "uint8" else rng.choice([1, 1, 2], size=n)
    elif op == "prod":
        values = rng.uniform(0.97, 1.03, size=n)
    else:
        values = rng.uniform(-1.0, 1.0, size=n)
    return values.reshape(shape)


def run(op, producer, x_host, dtype, axis, keepdim, out_dtype, layout="contiguous", **kwargs):
    x, stored = producer.from_host(x_host, dtype)
    if layout == "transposed":
        x, stored = x.T, stored.T
    elif layout == "reversed":  # a negative step: CuPy makes such views (torch cannot)
        x, stored = x[::-1], stored[::-1]
    want = numpy_reduce(op, stored, axis, keepdim, **kwargs)
    out = producer.empty_poisoned(np.shape(want), out_dtype)
    assert getattr(lab, op)(x, out, axis=axis, keepdim=keepdim, **kwargs) is out
    return producer.to_host(out), want, stored


def check_values(op, got, want, stored, dtype, axis, out_dtype):
    if out_dtype in INT_DTYPES or op in ("amax", "amin"):
        np.testing.assert_array_equal(got, round_to(want, out_dtype), err_msg=op)
        return
    n = max(1, stored.size // max(1, np.size(want)))  # elements per output
    scale = np.sum(np.abs(stored), axis=axis) if op in ("sum", "mean") else np.abs(want)
    if op == "mean":
        scale = scale / n
    if op == "logsumexp":  # an absolute error of a few ulps of log(n) on top of the maximum's
        scale = scale + 1.0
    rtol = RTOL[out_dtype]
    if op == "prod":  # rounding errors of a product random-walk: sqrt(n) of them
        rtol *= max(1.0, np.sqrt(n) / 10)
    want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
    nan = np.isnan(want)  # var/std of one element, 0/0 as in torch and NumPy
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{op}: NaN where the reference has none, or the "
                                                              "reverse (an unwritten element?)")
    tol = rtol * (np.reshape(scale, np.shape(want)) + 1e-30) + rtol * np.abs(want)
    np.testing.assert_array_less(np.abs(got - want)[~nan], (tol + 1e-300)[~nan], err_msg=f"{op} over {axis}")


SHAPES_AXES = [
    ((1,), None), ((31,), 0), ((32,), None), ((33,), -1), ((1009,), 0),
    ((7, 33), 1), ((7, 33), 0), ((33, 7), (0, 1)), ((3, 5, 7), (0, 2)), ((3, 5, 7), 1), ((3, 5, 7), -3),
    ((2, 3, 4, 5), (1, 3)), ((1000, 32), 1), ((32, 1000), 0), ((64, 4099), 1), ((4099, 64), 0),
    ((2, 70000), 1), ((300000,), None),
]


@pytest.mark.parametrize("shape, axis", SHAPES_AXES, ids=[f"{s}-{a}" for s, a in SHAPES_AXES])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", VALUE_OPS)
def test_value_reductions_float(op, dtype, shape, axis):
    producer = producer_or_skip("torch", dtype)
    x = host_values(op, dtype, shape, np.random.default_rng(hash((op, dtype, shape)) % 2**32))
    out_dtype = "float32" if dtype in ("float16", "bfloat16") and op not in ("amax", "amin") else dtype
    got, want, stored = run(op, producer, x, dtype, axis, False, out_dtype)
    check_values(op, got, want, stored, dtype, axis, out_dtype)


@pytest.mark.parametrize("axis", [0, 1])  # columns of 132: four (two for int64) outputs per load
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin", "argmax", "argmin"])
def test_integer_inputs(op, dtype, axis):
    producer = producer_or_skip("torch", dtype)
    x = host_values(op, dtype, (9, 132), np.random.default_rng(7))
    out_dtype = "int64" if op in ("sum", "prod") or op in INDEX_OPS else dtype
    got, want, stored = run(op, producer, x, dtype, axis, False, out_dtype)
    np.testing.assert_array_equal(got, want.astype(np.int64), err_msg=op)


@pytest.mark.parametrize("shape, axis", SHAPES_AXES[:14], ids=[f"{s}-{a}" for s, a in SHAPES_AXES[:14]])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
@pytest.mark.parametrize("op", INDEX_OPS)
def test_index_reductions_first_index_on_ties(op, dtype, shape, axis):
    if isinstance(axis, tuple):
        axis = None
    producer = producer_or_skip("torch", dtype)
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, size=shape).astype(np.float64)  # many ties
    got, want, _ = run(op, producer, x, dtype, axis, False, "int64")
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["amax", "amin", "argmax", "argmin", "sum"])
def test_nan_propagates_and_wins(op):
    producer = producer_or_skip("torch")
    x = np.random.default_rng(1).uniform(-1, 1, size=(4, 300))
    x[1, 17] = x[1, 200] = x[3, 0] = np.nan
    out_dtype = "int64" if op in INDEX_OPS else "float32"
    got, want, _ = run(op, producer, x, "float32", 1, False, out_dtype)
    if op in INDEX_OPS:
        np.testing.assert_array_equal(got, want)  # the first NaN, as torch and NumPy
    else:
        assert np.isnan(got[1]) and np.isnan(got[3]) and not np.isnan(got[[0, 2]]).any()


@pytest.mark.parametrize("layout", ["transposed", "reversed"])
@pytest.mark.parametrize("op", ["sum", "amax", "argmax", "mean"])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_layouts(op, axis, layout):
    producer = producer_or_skip("torch" if layout == "transposed" else "cupy")
    x = host_values(op, "float32", (300, 257), np.random.default_rng(5))
    out_dtype = "int64" if op in INDEX_OPS else "float32"
    got, want, stored = run(op, producer, x, "float32", axis, False, out_dtype, layout)
    if op in INDEX_OPS:
        np.testing.assert_array_equal(got, want)
    else:
        check_values(op, got, want, stored, "float32", axis, out_dtype)


@pytest.mark.parametrize("op", ["sum", "var", "argmin"])
@pytest.mark.parametrize("columns", [slice(0, 256), slice(1, 257), slice(0, 256, 2)])
def test_column_sums_aligned_or_not(op, columns):
    """Column reductions load four neighbouring outputs at once only where every load is aligned
    and the columns are contiguous; an offset or strided view takes the one-output path."""
    producer = producer_or_skip("torch")
    x = host_values(op, "float32", (3000, 520), np.random.default_rng(31))
    xd, stored = producer.from_host(x, "float32")
    view, stored = xd[:, columns], stored[:, columns]
    want = numpy_reduce(op, stored, 0, False)
    out = producer.empty_poisoned(want.shape, "int64" if op in INDEX_OPS else "float32")
    getattr(lab, op)(view, out, axis=0)
    got = producer.to_host(out)
    if op in INDEX_OPS:
        np.testing.assert_array_equal(got, want)
    else:
        check_values(op, got, want, stored, "float32", 0, "float32")


def test_broadcast_input_and_strided_output():
    torch = producer_or_skip("torch").torch
    row = torch.rand(1, 513, device="cuda")
    x = row.expand(1000, 513)  # stride 0 along dimension 0
    big = torch.full((1000, 3), float("nan"), device="cuda")
    out = big[:, 1]  # every third element
    lab.sum(x, out, axis=1)
    torch.testing.assert_close(out, x.sum(dim=1), rtol=1e-5, atol=1e-5)
    assert torch.isnan(big[:, 0]).all() and torch.isnan(big[:, 2]).all()
    cols = torch.full((513,), float("nan"), device="cuda")
    lab.sum(x, cols, axis=0)
    torch.testing.assert_close(cols, 1000 * row[0], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("keepdim", [False, True])
def test_keepdim_and_cast_outputs(keepdim):
    torch = producer_or_skip("torch").torch
    x = torch.rand(6, 7, 8, device="cuda")
    out = torch.empty((6, 1, 8) if keepdim else (6, 8), device="cuda", dtype=torch.float64)
    lab.mean(x, out, axis=1, keepdim=keepdim)
    torch.testing.assert_close(out, x.double().mean(dim=1, keepdim=keepdim), rtol=1e-6, atol=1e-6)
    idx = torch.empty((6, 1, 8) if keepdim else (6, 8), device="cuda", dtype=torch.int32)
    lab.argmax(x, idx, axis=1, keepdim=keepdim)
    assert torch.equal(idx.long(), x.argmax(dim=1, keepdim=keepdim))


@pytest.mark.parametrize("op, value", [("sum", 0.0), ("prod", 1.0), ("mean", float("nan")), ("norm", 0.0),
                                       ("var", float("nan")), ("std", float("nan")), ("logsumexp", -float("inf"))])
def test_empty_reductions_have_their_identity(op, value):
    torch = producer_or_skip("torch").torch
    x = torch.empty(5, 0, device="cuda")
    out = torch.full((5,), -7.0, device="cuda")
    getattr(lab, op)(x, out, axis=1)
    expected = torch.full((5,), value, device="cuda")
    torch.testing.assert_close(out, expected, equal_nan=True)
    nothing = torch.empty(0, 4, device="cuda")
    with pytest.raises(ValueError, match="has zero elements along the reduced dimensions"):
        lab.amax(nothing, torch.empty(4, device="cuda"), axis=0)


@pytest.mark.parametrize("op", ["sum", "var", "logsumexp", "argmax"])
@pytest.mark.parametrize("shape, axis", [(((1 << 24) + 3,), None), ((4096, 4096), 0), ((4096, 4096), 1),
                                         ((1 << 21, 8), 1), ((300, 1000), 1)])
def test_deterministic_bitwise(op, shape, axis):
    """The same input, the same bits, 10 times: split (full sum), columns (in two passes), by-block
    (long rows), by-quad (rows of 8) and by-warp (rows of 1000) alike."""
    torch = producer_or_skip("torch").torch
    x = torch.randn(*shape, device="cuda")
    want_shape = () if axis is None else tuple(s for d, s in enumerate(shape) if d != axis)
    dtype = torch.int64 if op == "argmax" else torch.float32
    first = torch.empty(want_shape, device="cuda", dtype=dtype)
    getattr(lab, op)(x, first, axis=axis)
    for _ in range(9):
        again = torch.empty(want_shape, device="cuda", dtype=dtype)
        getattr(lab, op)(x, again, axis=axis)
        assert torch.equal(again, first)
    dims = tuple(range(len(shape))) if axis is None else axis
    reference = {"sum": lambda: x.double().sum(dim=dims), "var": lambda: x.double().var(dim=dims),
                 "logsumexp": lambda: x.double().logsumexp(dim=dims), "argmax": lambda: x.argmax(dim=axis)}[op]()
    if op == "argmax":
        assert torch.equal(first, reference.reshape(want_shape))
    else:
        torch.testing.assert_close(first, reference.float(), rtol=1e-4, atol=1e-2)


@pytest.mark.parametrize("ord", [1, 2, float("inf")])
@pytest.mark.parametrize("shape, axis", [((1009,), 0), ((7, 33), 1), ((33, 7), 0), ((3, 5, 7), (0, 2)),
                                         ((2, 70000), 1), ((300000,), None), ((4099, 64), 0)])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_norm_orders(ord, dtype, shape, axis):
    producer = producer_or_skip("torch", dtype)
    x = host_values("norm", dtype, shape, np.random.default_rng(17))
    out_dtype = "float32" if dtype in ("float16", "bfloat16") else dtype
    got, want, stored = run("norm", producer, x, dtype, axis, False, out_dtype, ord=ord)
    check_values("norm", got, want, stored, dtype, axis, out_dtype)


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("correction", [0, 1, 2.5])
@pytest.mark.parametrize("shape, axis", [((1,), 0), ((2,), 0), ((7, 33), 1), ((33, 7), 0), ((300000,), None),
                                         ((64, 4099), 1)])
def test_var_std_corrections(op, correction, shape, axis):
    producer = producer_or_skip("torch")
    x = host_values(op, "float64", shape, np.random.default_rng(23))
    got, want, stored = run(op, producer, x, "float64", axis, False, "float64", correction=correction)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=0, err_msg=f"{op} correction={correction}")


@pytest.mark.parametrize("shape, axis", [((1 << 20,), None), ((256, 4096), 1), ((4096, 256), 0)])
def test_var_of_values_far_from_zero(shape, axis):
    """1e4 + noise in float32: the sum-of-squares formula would lose every digit (1e8 - 1e8); the
    shifted sums keep them."""
    producer = producer_or_skip("torch")
    x = 1e4 + np.random.default_rng(29).uniform(-1, 1, size=shape)
    got, want, _ = run("var", producer, x, "float32", axis, False, "float32")
    np.testing.assert_allclose(got, want, rtol=1e-3)


def test_logsumexp_infinities_and_nan():
    producer = producer_or_skip("torch")
    rows = np.array([[-np.inf] * 5, [1.0, np.inf, 2.0, -np.inf, 0.0], [1.0, np.nan, 2.0, 3.0, 4.0],
                     [1e30, 1e30, -1e30, 0.0, 1.0], [-1e30, -1e30, -1e30, -1e30, -1e30]])
    got, _, _ = run("logsumexp", producer, rows, "float32", 1, False, "float32")
    assert got[0] == -np.inf and got[1] == np.inf and np.isnan(got[2])
    np.testing.assert_allclose(got[3], np.float32(1e30), rtol=1e-6)  # 1e30 + log(2): below an ulp
    np.testing.assert_allclose(got[4], np.float32(-1e30), rtol=1e-6)


@pytest.mark.parametrize("layout", ["contiguous", "strided", "misaligned"])
@pytest.mark.parametrize("n", [0, 1, 31, 1009, (1 << 24) + 3])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_dot(dtype, n, layout):
    producer = producer_or_skip("torch", dtype)
    rng = np.random.default_rng(n)
    a_host, b_host = rng.uniform(-1, 1, size=2 * n + 2), rng.uniform(-1, 1, size=2 * n + 2)
    a_all, a_stored = producer.from_host(a_host, dtype)
    b_all, b_stored = producer.from_host(b_host, dtype)
    pick = {"contiguous": (slice(0, n), slice(0, n)), "strided": (slice(0, 2 * n, 2), slice(1, 2 * n + 1, 2)),
            "misaligned": (slice(1, n + 1), slice(0, n))}[layout]  # a one element past b: no 16-byte loads
    a, b = a_all[pick[0]], b_all[pick[1]]
    want = np.dot(a_stored[pick[0]], b_stored[pick[1]])
    out_dtype = "float32" if dtype in ("float16", "bfloat16") else dtype
    out = producer.empty_poisoned((), out_dtype)
    assert lab.dot(a, b, out) is out
    scale = np.dot(np.abs(a_stored[pick[0]]), np.abs(b_stored[pick[1]]))
    np.testing.assert_allclose(producer.to_host(out), want, rtol=0, atol=RTOL[out_dtype] * (scale + 1e-30) + 1e-300)


def test_past_two_to_the_31_elements():
    torch = producer_or_skip("torch").torch
    n = (1 << 31) + 4099
    x = torch.ones(n, dtype=torch.int8, device="cuda")
    x[n - 1] = 5
    total = torch.empty((), dtype=torch.int64, device="cuda")
    lab.sum(x, total)
    assert total.item() == n + 4
    where = torch.empty((), dtype=torch.int64, device="cuda")
    lab.argmax(x, where)
    assert where.item() == n - 1
    del x
    torch.cuda.empty_cache()


@pytest.mark.parametrize("producer_name", ["cupy", "numba"])
@pytest.mark.parametrize("op", ["sum", "amax", "argmin"])
def test_other_producers(producer_name, op):
    producer = producer_or_skip(producer_name)
    x = host_values(op, "float32", (37, 129), np.random.default_rng(11))
    xd, stored = producer.from_host(x, "float32")
    want = numpy_reduce(op, stored, 1, False)
    out = producer.empty_poisoned(want.shape, "int64" if op in INDEX_OPS else "float32")
    getattr(lab, op)(xd, out, axis=1)
    got = producer.to_host(out)
    if op in INDEX_OPS or op == "amax":
        np.testing.assert_array_equal(got, round_to(want, "float32") if op == "amax" else want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_lab_array_and_stream():
    x = lab.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    out = lab.empty(3)
    s = lab.Stream()
    lab.sum(x, out, axis=1, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(out.numpy(), [6, 22, 38])


def test_two_pass_reductions_under_graph_capture():
    """A split (full sum) and a column reduction in two passes take their partials from the graph's
    own memory while captured; replays recompute from the arrays' new contents."""
    torch = producer_or_skip("torch").torch
    x, m = torch.randn(1 << 22, device="cuda"), torch.randn(4096, 4096, device="cuda")
    total, columns = torch.empty((), device="cuda"), torch.empty(4096, device="cuda")

    def launch():
        lab.sum(x, total)
        lab.sum(m, columns, axis=0)

    def refill():
        x.copy_(torch.randn_like(x))
        m.copy_(torch.randn_like(m))

    def check(_):
        torch.testing.assert_close(total, x.double().sum().float(), rtol=1e-4, atol=1e-2)
        torch.testing.assert_close(columns, m.double().sum(dim=0).float(), rtol=1e-4, atol=1e-3)

    capture_and_replay(torch, launch, refill, check, replays=3)
