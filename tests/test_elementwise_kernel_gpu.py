"""lab.ElementwiseKernel on a GPU: a CuPy-style kernel on every producer's arrays, each
dtype and size (0, 1, odd, prime, large: the vectorized kernel's tail and the strided kernel),
broadcasting and layouts, mixed dtypes, several outputs, outputs the operation reads or leaves,
the element index, every scalar type, outputs allocated when left out, streams and graph capture -
against NumPy float64 references, outputs poisoned first."""
import numpy as np
import pytest

import lab
from cuda_graphs import capture_and_replay
from producers import FLOAT_DTYPES, host_dtype, poison_value, producer_or_skip, round_to

pytestmark = pytest.mark.gpu

SIZES = [0, 1, 17, 1009, 100_003, (1 << 22) + 5]
DTYPES = ["float16", "bfloat16", "float32", "float64", "int8", "int32", "int64", "uint8"]
TOLERANCE = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-6, "float64": 1e-12}


def values(rng, n, dtype):
    if dtype in FLOAT_DTYPES:
        return rng.standard_normal(n)
    return rng.integers(0, 50, n) if dtype == "uint8" else rng.integers(-50, 50, n)


def check(got, want, dtype):
    want = round_to(want, dtype)
    if dtype in FLOAT_DTYPES:
        np.testing.assert_allclose(got, want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])
    else:
        np.testing.assert_array_equal(got, want)


FMA = lab.ElementwiseKernel("T x, T y, T a", "T z", "z = x * a + y", "fma_like")


@pytest.mark.parametrize("producer_name", ["torch", "cupy", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_every_producer_dtype_and_size(producer_name, dtype, n):
    producer = producer_or_skip(producer_name, dtype)
    rng = np.random.default_rng(n)
    (x, xs), (y, ys) = producer.from_host(values(rng, n, dtype), dtype), producer.from_host(values(rng, n, dtype), dtype)
    z = producer.empty_poisoned((n,), dtype)
    a = np.dtype(host_dtype(dtype)).type(3) if dtype != "bfloat16" else 3.0
    assert FMA(x, y, a, z) is z
    check(producer.to_host(z), xs * 3 + ys, dtype)


def test_lab_arrays_and_allocated_outputs():
    rng = np.random.default_rng(0)
    x_host, y_host = rng.standard_normal((3, 1, 5)), rng.standard_normal((4, 1))
    x, y = lab.asarray(x_host.astype(np.float32)), lab.asarray(y_host.astype(np.float32))
    z = FMA(x, y, np.float32(2))  # outputs left out: a lab.Array of the broadcast shape
    assert isinstance(z, lab.Array) and z.shape == (3, 4, 5) and z.dtype == "float32"
    check(z.numpy().astype(np.float64), x_host.astype(np.float32) * 2 + y_host.astype(np.float32), "float32")
    pair = lab.ElementwiseKernel("T x", "T lo, float64 hi", "lo = x - 1; hi = x + 1", "around")(x)
    assert isinstance(pair, tuple) and pair[1].dtype == "float64"
    np.testing.assert_allclose(pair[1].numpy(), x_host.astype(np.float32) + 1, rtol=1e-6)


@pytest.mark.parametrize("layout", ["transposed", "broadcast_row", "broadcast_column", "every_other", "misaligned",
                                    "negative_step", "three_d"])
def test_layouts_take_the_strided_kernel(layout):
    torch = producer_or_skip("torch").torch
    g = torch.Generator(device="cuda").manual_seed(1)
    base = torch.randn(130, 258, device="cuda", generator=g)
    y = torch.randn(130, 258, device="cuda", generator=g)
    views = {
        "transposed": (base.t(), y.t()),
        "broadcast_row": (base, y[0]),
        "broadcast_column": (base, y[:, :1]),
        "every_other": (base[:, ::2], y[:, 1::2]),
        "misaligned": (base.flatten()[1:], y.flatten()[:-1]),
        "negative_step": (base.flip(0), y),
        "three_d": (base[:128].view(4, 32, 258).permute(2, 0, 1), y[:128].view(4, 32, 258).permute(2, 0, 1)),
    }
    x_view, y_view = views[layout]
    shape = torch.broadcast_shapes(x_view.shape, y_view.shape)
    z = torch.full(shape, float("nan"), device="cuda")
    FMA(x_view, y_view, np.float32(0.5), z)
    torch.testing.assert_close(z, x_view * 0.5 + y_view)
    reverse = tuple(reversed(range(len(shape))))  # a transposed output
    zt = torch.full(tuple(reversed(shape)), float("nan"), device="cuda").permute(*reverse)
    FMA(x_view, y_view, np.float32(0.5), zt)
    torch.testing.assert_close(zt, x_view * 0.5 + y_view)


@pytest.mark.parametrize("shape, transpose", [((1000,), False), ((37, 41), False), ((37, 41), True), ((5, 6, 7), True)])
def test_the_index_is_the_c_order_position(shape, transpose):
    torch = producer_or_skip("torch").torch
    out = torch.full(tuple(reversed(shape)) if transpose else shape, -1, dtype=torch.int64, device="cuda")
    if transpose:
        out = out.permute(*reversed(range(len(shape))))
    lab.ElementwiseKernel("int64 base", "int64 z", "z = base + i + 0 * _ind.size()", "position")(7, out)
    want = torch.arange(int(np.prod(shape)), device="cuda").view(shape) + 7
    assert torch.equal(out, want)


def test_mixed_dtypes_convert_on_load_and_store():
    torch = producer_or_skip("torch").torch
    n = 4099
    x = torch.randn(n, device="cuda").half()
    y = torch.randint(-1000, 1000, (n,), device="cuda", dtype=torch.int32)
    z = torch.full((n,), float("nan"), dtype=torch.float64, device="cuda")
    lab.ElementwiseKernel("float32 x, int64 y", "float64 z", "z = x * 2 + y", "mixed")(x, y, z)
    torch.testing.assert_close(z, x.double() * 2 + y.double())
    w = torch.full((n,), float("nan"), dtype=torch.bfloat16, device="cuda")
    lab.ElementwiseKernel("float64 x", "float64 w", "w = x / 3", "narrow")(z, w)  # float64 -> bfloat16 on store
    torch.testing.assert_close(w, (z / 3).bfloat16())


def test_outputs_the_operation_reads_or_leaves_keep_their_values():
    torch = producer_or_skip("torch").torch
    n = 10_007
    x = torch.randn(n, device="cuda")
    acc = torch.ones(n, device="cuda")
    lab.ElementwiseKernel("T x", "T acc", "acc += x", "accumulate")(x, acc)
    torch.testing.assert_close(acc, 1 + x)
    kept = torch.full((n,), 7.0, device="cuda")
    lab.ElementwiseKernel("T x", "T z", "if (x > 0) z = x;", "positive")(x, kept)
    torch.testing.assert_close(kept, torch.where(x > 0, x, torch.full_like(x, 7.0)))


def test_several_outputs_and_a_preamble():
    torch = producer_or_skip("torch").torch
    x = torch.randn(3, 1000, device="cuda", dtype=torch.bfloat16)
    y, z = torch.empty_like(x), torch.empty(3, 1000, device="cuda")
    kernel = lab.ElementwiseKernel("T x", "T y, float32 z", "y = square(x); z = -x", "two",
                                   preamble="__device__ float square(float v) { return v * v; }")
    kernel(x, y, z)
    torch.testing.assert_close(y, (x.float() ** 2).bfloat16())
    torch.testing.assert_close(z, -x.float())
    halves = torch.empty(3, 2000, device="cuda")  # two outputs interleaved in one buffer
    kernel(x.float(), halves[:, ::2], halves[:, 1::2])
    torch.testing.assert_close(halves[:, 1::2], -x.float())


def test_scalars_of_every_type():
    torch = producer_or_skip("torch").torch
    out = torch.full((9,), float("nan"), dtype=torch.float64, device="cuda")
    kernel = lab.ElementwiseKernel("int8 a, uint8 b, int16 c, int32 d, int64 e, uint64 f, float32 g, float64 h, bool k",
                                   "float64 z", "double v[9] = {double(a), double(b), double(c), double(d), double(e),"
                                   " double(f), g, h, k ? 1.0 : 0.0}; z = v[i];", "scalars")
    given = [np.int8(-7), np.uint8(200), np.int16(-300), -70000, -(2**40), np.uint64(2**63 + 5), 1.5, -2.25, True]
    kernel(*given, out)
    assert out.tolist() == [float(v) for v in given]


def test_streams_and_graph_capture():
    torch = producer_or_skip("torch").torch
    n = 1 << 20
    x, y, z = (torch.rand(n, device="cuda") for _ in range(3))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())  # x, y, z were filled on the default stream
    with torch.cuda.stream(side):
        FMA(x, y, np.float32(3), z)
    side.synchronize()
    torch.testing.assert_close(z, 3 * x + y)
    capture_and_replay(torch, lambda: FMA(x, y, np.float32(0.5), z), lambda: x.copy_(torch.rand_like(x)),
                       lambda _: torch.testing.assert_close(z, 0.5 * x + y))


def test_cupy_arrays_and_cupys_own_kernel_agree():
    cupy = producer_or_skip("cupy").cupy
    x, y = cupy.random.standard_normal((300, 301)), cupy.random.standard_normal((301,))
    source = ("T x, T y", "T z", "z = x > y ? x - y : T(0)", "relu_diff")
    ours, theirs = lab.ElementwiseKernel(*source)(x, y), cupy.ElementwiseKernel(*source)(x, y)
    cupy.testing.assert_allclose(cupy.asarray(ours), theirs)


def test_poisoned_output_of_every_size_is_written_everywhere():
    torch = producer_or_skip("torch").torch
    for n in (15, 16, 17, 4 * 128 * 2 + 3):  # around one vectorized item, and one block's worth
        for dtype in (torch.float16, torch.float32, torch.float64):
            x = torch.randn(n, device="cuda").to(dtype)
            z = torch.full((n,), poison_value("float32"), device="cuda", dtype=dtype)
            lab.ElementwiseKernel("T x", "T z", "z = x", "copy_through")(x, z)
            assert torch.equal(z, x)
