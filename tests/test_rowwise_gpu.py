"""Row-wise ops on a GPU: softmax, log_softmax, layer_norm, rms_norm (with and without a
residual) and their backwards, against NumPy in float64 computed from the stored inputs, for every
float dtype and row lengths 1 .. 262144 (rows in registers, staged in shared memory, and streamed);
each staged op with staging forced down to one partial 16-byte piece and turned off; strided, transposed,
misaligned and unmergeable layouts; in place; the weight gradients bitwise equal run to run; more
than 2^31 elements; every producer. Outputs are poisoned (NaN) before each run."""
import numpy as np
import pytest

import lab
from producers import FLOAT_DTYPES, producer_or_skip

pytestmark = pytest.mark.gpu

# Elementwise results: a few roundings of the output dtype. Sums over rows (weight gradients) and the
# statistics carry float32 accumulation over the row: the scale below is the sum of |terms|.
RTOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-5, "float64": 1e-11}
# float16 has subnormals below 6.1e-5 (a softmax of 131072 elements lives there): half their spacing
ATOL = {"float16": 3e-8, "bfloat16": 0.0, "float32": 0.0, "float64": 0.0}
SHAPES = [(1, 1), (5, 7), (257, 128), (33, 1000), (64, 4096), (3, 50257), (2, 131072), (2, 262144), (4099, 32)]
SHAPE_IDS = [f"{r}x{n}" for r, n in SHAPES]


def numpy_softmax(x, log=False):
    top = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - top)
    s = np.sum(e, axis=-1, keepdims=True)
    return x - top - np.log(s) if log else e / s


def numpy_norm(x, w, b, eps, centered):
    mean = np.mean(x, axis=-1, keepdims=True) if centered else np.zeros(x.shape[:-1] + (1,))
    var = np.mean((x - mean) ** 2, axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (x - mean) * rstd * (1.0 if w is None else w) + (0.0 if b is None else b)
    return y, mean[..., 0], rstd[..., 0]


def numpy_norm_backward(dy, x, w, eps, centered):
    _, mean, rstd = numpy_norm(x, None, None, eps, centered)
    mean, rstd = mean[..., None], rstd[..., None]
    xhat = (x - mean) * rstd
    g = dy * (1.0 if w is None else w)
    n = x.shape[-1]
    mean_g = np.sum(g, axis=-1, keepdims=True) / n if centered else 0.0
    dx = rstd * (g - mean_g - xhat * np.sum(g * xhat, axis=-1, keepdims=True) / n)
    return dx, np.sum(dy * xhat, axis=0), np.sum(dy, axis=0)


def check(got, want, dtype, scale=None, what=""):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, what
    assert not np.isnan(got).any(), f"{what}: NaN in the output (an element left unwritten?)"
    scale = np.abs(want) if scale is None else scale
    tol = RTOL[dtype] * (np.abs(want) + scale) + ATOL[dtype]
    bad = np.abs(got - want) > tol
    assert not bad.any(), f"{what}: {bad.sum()} of {bad.size} elements off, worst {np.max(np.abs(got - want)):.3g}"


def row_scale(want):
    """The typical magnitude of a row's values: a softmax's small entries are compared against it."""
    return np.broadcast_to(np.mean(np.abs(want), axis=-1, keepdims=True), want.shape)


def values(rng, shape, spread=2.0):
    return rng.uniform(-spread, spread, size=shape)


@pytest.fixture
def torch_producer(request):
    return producer_or_skip("torch", request.node.callspec.params.get("dtype", "float32"))


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_forward(op, dtype, shape, torch_producer):
    p = torch_producer
    x, stored = p.from_host(values(np.random.default_rng(1), shape, 8.0), dtype)
    out = p.empty_poisoned(shape, dtype)
    assert getattr(lab, op)(x, out) is out
    want = numpy_softmax(stored, log=op == "log_softmax")
    check(p.to_host(out), want, dtype, row_scale(want) if op == "softmax" else None, op)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_backward(op, dtype, shape, torch_producer):
    p = torch_producer
    rng = np.random.default_rng(2)
    y_host = numpy_softmax(values(rng, shape), log=op == "log_softmax")
    y, y_stored = p.from_host(y_host, dtype)
    dy, dy_stored = p.from_host(values(rng, shape), dtype)
    grad_x = p.empty_poisoned(shape, dtype)
    assert getattr(lab, f"{op}_backward")(dy, y, grad_x) is grad_x
    if op == "softmax":
        total = np.sum(dy_stored * y_stored, axis=-1, keepdims=True)
        want = y_stored * (dy_stored - total)
        scale = np.abs(y_stored) * (np.abs(dy_stored) + np.sum(np.abs(dy_stored * y_stored), -1, keepdims=True))
    else:
        total = np.sum(dy_stored, axis=-1, keepdims=True)
        want = dy_stored - np.exp(y_stored) * total
        scale = np.abs(dy_stored) + np.exp(y_stored) * np.sum(np.abs(dy_stored), -1, keepdims=True)
    check(p.to_host(grad_x), want, dtype, scale, f"{op}_backward")


@pytest.mark.parametrize("affine", ["weight_bias", "none"])
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_norm_forward(op, dtype, shape, affine, torch_producer):
    p = torch_producer
    rng = np.random.default_rng(3)
    x, x_stored = p.from_host(values(rng, shape) + 3.0, dtype)  # a mean far from 0
    w = b = w_stored = b_stored = None
    if affine == "weight_bias":
        w, w_stored = p.from_host(values(rng, shape[-1:]), dtype)
        b, b_stored = p.from_host(values(rng, shape[-1:]), dtype)
    out = p.empty_poisoned(shape, dtype)
    stats_dtype = "float64" if dtype == "float64" else "float32"
    mean, rstd = p.empty_poisoned(shape[:-1], stats_dtype), p.empty_poisoned(shape[:-1], stats_dtype)
    eps = 1e-5
    if op == "layer_norm":
        assert lab.layer_norm(x, w, b, out, eps=eps, mean=mean, rstd=rstd) is out
    else:
        b_stored = None
        assert lab.rms_norm(x, w, out, eps=eps, rstd=rstd) is out
    want, want_mean, want_rstd = numpy_norm(x_stored, w_stored, b_stored, eps, op == "layer_norm")
    scale = row_scale(want) * (1 if w is None else 1 + np.abs(w_stored))
    check(p.to_host(out), want, dtype, scale, op)
    check(p.to_host(rstd), want_rstd, stats_dtype, what="rstd")
    if op == "layer_norm":
        check(p.to_host(mean), want_mean, stats_dtype, what="mean")


@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_norm_backward(op, dtype, shape, weight, torch_producer):
    check_norm_backward(op, dtype, shape, weight, torch_producer)


# Streamed rows of at most eight steps whose column sums fit shared memory take their x and grad_out
# there too (BufferedRows): more rows than the grid (each block refills its buffer with a next row), a
# row of whole steps and one ending in a partial step (20000 = 2500 16-byte vectors of bf16). Only
# rms_norm's backward is buffered; layer_norm's, on the same shapes, streams either way.
@pytest.mark.parametrize("window_depth", [-1, 0], ids=["default", "off"], indirect=True)
@pytest.mark.parametrize("shape", [(300, 16384), (300, 20000)], ids=str)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_norm_backward_buffered_rows(op, dtype, shape, window_depth, torch_producer):
    check_norm_backward(op, dtype, shape, True, torch_producer)


# Rows cut across a thread-block cluster (Hopper; elsewhere these run the other layouts): by default
# rows too long for the registers - bf16 16384 in four blocks, 12288 in four slices of 3072 (part of the
# last chunk past each slice's end), float32 16384 in eight, float64 16384 not at all (its slices would
# not fit eight blocks). Forced, clusters of 2, 4 and 8 on rows the registers hold, and on rows that do
# not cut evenly (8200 bf16: 1025 vectors), which keep their layout. Fewer rows than clusters, and more
# rows than the grid.
@pytest.mark.parametrize("cluster_blocks", [-1, 0, 2, 4, 8], ids=lambda c: f"cluster{c}", indirect=True)
@pytest.mark.parametrize("shape", [(300, 8192), (300, 16384), (7, 12288), (3, 8200), (130, 1024)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_norm_backward_cut_across_clusters(op, dtype, shape, cluster_blocks, torch_producer):
    check_norm_backward(op, dtype, shape, True, torch_producer)


# Rows that fill whole tiles (four chunks of up to 128 lanes: bf16 4096 and 1024, float32 2048), which
# both backwards take, more of them than the grid holds at once, so that each block walks several and its
# column sums carry across them. (Slices that fill them: the clusters' bf16 rows of 16384 above.)
@pytest.mark.parametrize("shape", [(5000, 4096), (20001, 1024), (3001, 2048)], ids=str)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_norm_backward_whole_tiles_over_many_rows(op, dtype, shape, torch_producer):
    check_norm_backward(op, dtype, shape, True, torch_producer)


def check_norm_backward(op, dtype, shape, weight, p):
    """layer_norm's or rms_norm's backward on `shape` against NumPy in float64, from lab's forward's
    statistics."""
    rng = np.random.default_rng(4)
    centered = op == "layer_norm"
    stats_dtype = "float64" if dtype == "float64" else "float32"
    x, x_stored = p.from_host(values(rng, shape) + 1.0, dtype)
    dy, dy_stored = p.from_host(values(rng, shape), dtype)
    w, w_stored = p.from_host(values(rng, shape[-1:]), dtype) if weight else (None, None)
    # the statistics from lab's own forward, as a training step has them
    scratch = p.empty_poisoned(shape, dtype)
    mean, rstd = p.empty_poisoned(shape[:-1], stats_dtype), p.empty_poisoned(shape[:-1], stats_dtype)
    grad_x = p.empty_poisoned(shape, dtype)
    grad_w = p.empty_poisoned(shape[-1:], dtype) if weight else None
    grad_b = p.empty_poisoned(shape[-1:], dtype) if weight else None
    if centered:
        lab.layer_norm(x, w, None, scratch, mean=mean, rstd=rstd)
        assert lab.layer_norm_backward(dy, x, w, mean, rstd, grad_x, grad_w, grad_b) is grad_x
    else:
        lab.rms_norm(x, w, scratch, eps=1e-5, rstd=rstd)
        assert lab.rms_norm_backward(dy, x, w, rstd, grad_x, grad_w) is grad_x
    eps = 1e-5  # layer_norm's default, and what rms_norm was given above
    want_dx, want_dw, want_db = numpy_norm_backward(dy_stored, x_stored, w_stored, eps, centered)
    _, _, want_rstd = numpy_norm(x_stored, None, None, eps, centered)
    g = np.abs(dy_stored) * (1 if w is None else np.abs(w_stored))
    dx_scale = want_rstd[..., None] * (g + np.mean(g * 3, axis=-1, keepdims=True))
    check(p.to_host(grad_x), want_dx, dtype, dx_scale, f"{op}_backward grad_x")
    if weight:
        xhat_abs = np.abs(x_stored - np.mean(x_stored, -1, keepdims=True) * centered) * want_rstd[..., None]
        # + 0.05: float32 statistics put an absolute error of ~1e-7 on every xhat, even where xhat is 0
        check(p.to_host(grad_w), want_dw, dtype, np.sum(np.abs(dy_stored) * (xhat_abs + 0.05), axis=0), "grad_weight")
        if centered:
            check(p.to_host(grad_b), want_db, dtype, np.sum(np.abs(dy_stored), axis=0), "grad_bias")


@pytest.mark.parametrize("shape", [(5, 7), (64, 4096), (3, 50257), (2, 262144)], ids=str)
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_rms_norm_with_residual(dtype, shape, torch_producer):
    p = torch_producer
    rng = np.random.default_rng(5)
    x, x_stored = p.from_host(values(rng, shape), dtype)
    r, r_stored = p.from_host(values(rng, shape), dtype)
    w, w_stored = p.from_host(values(rng, shape[-1:]), dtype)
    out, h, rstd = p.empty_poisoned(shape, dtype), p.empty_poisoned(shape, dtype), p.empty_poisoned(shape[:-1], "float32")
    assert lab.rms_norm(x, w, out, rstd=rstd, residual=r, residual_out=h) is out
    from producers import round_to
    h_want = round_to(x_stored + r_stored, dtype)
    np.testing.assert_array_equal(p.to_host(h), h_want)  # h is x + residual rounded once, as torch's add
    eps = {"bfloat16": 0.0078125, "float32": np.finfo(np.float32).eps}[dtype]
    want, _, _ = numpy_norm(h_want, w_stored, None, eps, False)
    check(p.to_host(out), want, dtype, row_scale(want) * (1 + np.abs(w_stored)), "rms_norm(x + residual)")
    # in place: the residual stream updated where it lies
    lab.rms_norm(x, w, out, residual=r, residual_out=r)
    np.testing.assert_array_equal(p.to_host(r), h_want)
    check(p.to_host(out), want, dtype, row_scale(want) * (1 + np.abs(w_stored)), "in place")


# Rows each layout may take: one partial 16-byte piece; one row ending in a partial piece (2051 x 2
# bytes); the register and staged layouts' boundary (1000 float32 = 250 vectors); the headline length.
STAGING_SHAPES = [(1, 7), (1, 2051), (5, 1000), (64, 4096), (3, 5000)]


@pytest.mark.parametrize("staging", ["forced", "forced, 16 vectors a thread", "off"])
@pytest.mark.parametrize("shape", STAGING_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_staged_and_unstaged_rows(dtype, shape, staging):
    """The ops that may be staged, with staging forced on every contiguous aligned row (cutting the copy's
    last piece short; also with 16 vectors a thread, so that threads loop over several) and with it turned
    off (the register-held and streamed layouts take those rows)."""
    p = producer_or_skip("torch", dtype)
    previous = lab.lab._rowwise_staged_min_vectors(1 if staging.startswith("forced") else 1 << 62)
    per_thread = lab.lab._rowwise_staged_vectors_per_thread(16 if "16" in staging else 0)
    try:
        for op in ("softmax", "log_softmax"):
            test_softmax_forward(op, dtype, shape, p)
            test_softmax_backward(op, dtype, shape, p)
        for op in ("layer_norm", "rms_norm"):
            test_norm_forward(op, dtype, shape, "weight_bias", p)
            test_norm_backward(op, dtype, shape, True, p)
        if dtype in ("bfloat16", "float32"):
            test_rms_norm_with_residual(dtype, shape, p)
    finally:
        lab.lab._rowwise_staged_min_vectors(previous)
        lab.lab._rowwise_staged_vectors_per_thread(per_thread)


# Staged rows past the 47 KB every kernel has, where the kernel opts in to more shared memory (by default up
# to half of what a block may have): x of 16384 and 32768 columns, x beside grad_out or a residual; a row
# ending in a partial 16-byte piece (24577 columns); and the same rows held to 47 KB (streamed instead).
@pytest.mark.parametrize("most_bytes", [-1, 47 * 1024], ids=["default", "47KB"])
@pytest.mark.parametrize("shape", [(3, 16384), (2, 32768), (4, 24577)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_long_staged_rows(dtype, shape, most_bytes):
    p = producer_or_skip("torch", dtype)
    previous = lab.lab._rowwise_staged_most_bytes(most_bytes)
    try:
        test_softmax_forward("softmax", dtype, shape, p)
        test_softmax_backward("log_softmax", dtype, shape, p)
        for op in ("layer_norm", "rms_norm"):
            test_norm_forward(op, dtype, shape, "weight_bias", p)
        if dtype in ("bfloat16", "float32"):
            test_rms_norm_with_residual(dtype, shape, p)
    finally:
        lab.lab._rowwise_staged_most_bytes(previous)


@pytest.mark.parametrize("cap", [4, 2, 1])
@pytest.mark.parametrize("shape", [(4099, 32), (33, 1000), (64, 4096), (7, 8192)], ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_norm_backward_at_each_chunk_cap(dtype, shape, cap):
    """The norms' backward in registers at four, two and one chunks a lane: each kernel keeps its
    column sums in shared memory, a slot per thread, added across a block's rows (several rows a block
    on the short rows) before they become its partial row."""
    p = producer_or_skip("torch", dtype)
    previous = lab.lab._rowwise_max_chunks(cap)
    try:
        for op in ("layer_norm", "rms_norm"):
            test_norm_backward(op, dtype, shape, True, p)
    finally:
        lab.lab._rowwise_max_chunks(previous)


def test_matches_torch_bfloat16():
    """Against torch's own ops on the benchmark's kind of input: bf16, rows of 4096."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(512, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(4096, device="cuda", dtype=torch.bfloat16, generator=g)
    out = torch.empty_like(x)

    def close(got, want):  # one bfloat16 rounding apart at most, where the float32 values straddle
        torch.testing.assert_close(got.float(), want.float(), rtol=1.6e-2, atol=1e-2)

    close(lab.softmax(x, out), F.softmax(x, -1))
    close(lab.log_softmax(x, out), F.log_softmax(x, -1))
    close(lab.layer_norm(x, w, b, out), F.layer_norm(x, (4096,), w, b))
    close(lab.rms_norm(x, w, out, eps=1e-6), F.rms_norm(x, (4096,), w, eps=1e-6))


@pytest.mark.parametrize("layout", ["transposed", "every_other_column", "misaligned", "unmergeable", "axis0"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_layouts(layout, dtype):
    torch = pytest.importorskip("torch")
    producer_or_skip("torch", dtype)
    tdtype = getattr(torch, dtype)
    base = torch.randn(24, 40, 66, device="cuda").to(tdtype)
    axis = -1
    if layout == "transposed":
        x = base[0].t()  # rows of 24 elements, 66 apart
    elif layout == "every_other_column":
        x = base[:, :, ::2]
    elif layout == "misaligned":
        x = base.reshape(-1)[1:1 + 24 * 65].view(24, 65)
    elif layout == "unmergeable":
        x = base.permute(1, 0, 2)
    else:
        x, axis = base[0], 0
    host = x.double().cpu().numpy()
    out = torch.full(x.shape, float("nan"), device="cuda", dtype=tdtype).transpose(0, -1).contiguous().transpose(0, -1)
    lab.softmax(x, out, axis=axis)
    want = np.moveaxis(numpy_softmax(np.moveaxis(host, axis, -1)), -1, axis)
    check(out.double().cpu().numpy(), want, dtype, np.broadcast_to(np.mean(want, axis=axis, keepdims=True), want.shape),
          f"softmax {layout}")
    if axis == -1:
        w = torch.randn(x.shape[-1], device="cuda").to(tdtype)[None].expand(2, -1)[1]  # a view, stride 1
        mean = torch.empty(x.shape[:-1], device="cuda")
        lab.layer_norm(x, w, None, out, mean=mean)
        want, want_mean, _ = numpy_norm(host, w.double().cpu().numpy(), None, 1e-5, True)
        check(out.double().cpu().numpy(), want, dtype, row_scale(want) * 3, f"layer_norm {layout}")
        check(mean.double().cpu().numpy(), want_mean, "float32", np.abs(host).mean(-1), "mean")


# in registers (several a block, one), staged, streamed, cut across a cluster of eight (Hopper)
@pytest.mark.parametrize("n", [128, 1000, 4096, 20000, 16384])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_weight_gradients_are_deterministic(op, n):
    torch = pytest.importorskip("torch")
    x = torch.randn(3000, n, device="cuda")
    dy, w = torch.randn_like(x), torch.randn(n, device="cuda")
    rstd, mean = torch.empty(3000, device="cuda"), torch.empty(3000, device="cuda")
    lab.layer_norm(x, w, None, torch.empty_like(x), mean=mean, rstd=rstd)
    results = []
    for _ in range(10):
        grad_w, grad_b = torch.full_like(w, float("nan")), torch.full_like(w, float("nan"))
        if op == "layer_norm":
            lab.layer_norm_backward(dy, x, w, mean, rstd, torch.empty_like(x), grad_w, grad_b)
        else:
            lab.rms_norm_backward(dy, x, w, rstd, torch.empty_like(x), grad_w)
        results.append(torch.cat([grad_w, grad_b if op == "layer_norm" else grad_w]))
    for r in results[1:]:
        assert torch.equal(r, results[0])
    assert not results[0].isnan().any()


def test_no_rows_zero_the_weight_gradients():
    torch = pytest.importorskip("torch")
    grad_w, grad_b = torch.full((7,), float("nan"), device="cuda"), torch.full((7,), float("nan"), device="cuda")
    empty = torch.empty(0, 7, device="cuda")
    lab.layer_norm_backward(empty, empty, None, torch.empty(0, device="cuda"), torch.empty(0, device="cuda"),
                            torch.empty_like(empty), grad_w, grad_b)
    assert torch.equal(grad_w, torch.zeros(7, device="cuda")) and torch.equal(grad_b, torch.zeros(7, device="cuda"))


def test_empty_rows_have_nan_statistics():
    torch = pytest.importorskip("torch")
    x = torch.empty(3, 0, device="cuda")
    mean, rstd = torch.zeros(3, device="cuda"), torch.zeros(3, device="cuda")
    lab.layer_norm(x, None, None, torch.empty_like(x), mean=mean, rstd=rstd)
    assert mean.isnan().all() and rstd.isnan().all()  # 0/0, as torch.mean of nothing


def test_in_place_softmax_and_backward():
    torch = pytest.importorskip("torch")
    for n in (1000, 70000):  # registers, streamed
        x = torch.randn(7, n, device="cuda", dtype=torch.float64)
        want = torch.softmax(x, -1)
        lab.softmax(x, x)
        torch.testing.assert_close(x, want)
        dy = torch.randn_like(x)
        want = torch._softmax_backward_data(dy, x, -1, x.dtype)
        lab.softmax_backward(dy, x, dy)
        torch.testing.assert_close(dy, want)


@pytest.mark.parametrize("n", [4096, 65536])  # staged rows, streamed rows
def test_past_two_to_the_31_elements(n):
    """2^31 + n elements in place (4 GiB of bfloat16): the last row's offset needs 64 bits."""
    torch = pytest.importorskip("torch")
    rows = (1 << 31) // n + 1
    try:
        x = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
    except torch.cuda.OutOfMemoryError:
        pytest.skip("needs 4 GiB of GPU memory")
    x[:-2].fill_(0.0)
    x[-2:].copy_(torch.randn(2, n, device="cuda"))
    tail = x[-2:].clone()
    lab.softmax(x, x)
    torch.testing.assert_close(x[-2:].float(), torch.softmax(tail.float(), -1), rtol=1.6e-2, atol=1e-6)
    torch.testing.assert_close(x[0].float(), torch.full((n,), 1.0 / n, device="cuda"), rtol=1e-2, atol=0)
    del x


@pytest.mark.parametrize("producer_name", ["cupy", "numba"])
def test_every_producer(producer_name):
    p = producer_or_skip(producer_name, "float32")
    rng = np.random.default_rng(6)
    x, stored = p.from_host(values(rng, (33, 1000)), "float32")
    w, w_stored = p.from_host(values(rng, (1000,)), "float32")
    out = p.empty_poisoned((33, 1000), "float32")
    lab.log_softmax(x, out)
    check(p.to_host(out), numpy_softmax(stored, log=True), "float32", what=f"log_softmax on {producer_name}")
    lab.rms_norm(x, w, out, eps=1e-5)
    want, _, _ = numpy_norm(stored, w_stored, None, 1e-5, False)
    check(p.to_host(out), want, "float32", row_scale(want) * 3, f"rms_norm on {producer_name}")


def test_runs_on_torch_current_stream():
    torch = pytest.importorskip("torch")
    side = torch.cuda.Stream()
    x = torch.randn(4096, 4096, device="cuda")
    out = torch.empty_like(x)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # keeps the side stream busy: a launch elsewhere would finish first
        lab.softmax(x, out)
        want = torch.softmax(x, -1)
    side.synchronize()
    torch.testing.assert_close(out, want)
