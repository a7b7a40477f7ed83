"""lab.matmul on a GPU: every dtype, layout (transposed and sliced views), epilogue, batch broadcast,
odd and prime sizes, k = 1, empty dimensions, alpha/beta with c (and c as out), out=None, side
streams, CUDA graph capture and several producers - against NumPy in float64 computed from the
stored inputs. Outputs are poisoned (NaN) first, so an unwritten element fails. Errors are measured
as ||out - ref|| / ||ref||, per dtype."""
import numpy as np
import pytest

import lab
from producers import producer_or_skip

pytestmark = pytest.mark.gpu

# float32 accumulation of products of rounded inputs, then one rounding to the output dtype
TOLERANCE = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 2e-6, "float64": 1e-13}
SHAPES = [(1, 1, 1), (5, 7, 3), (64, 128, 32), (127, 61, 131), (257, 1, 33), (1024, 512, 768)]


def torch_or_skip():
    return producer_or_skip("torch").torch


def make(torch, shape, dtype, transposed=False, rng=None, scale=1.0):
    """A random tensor of `shape` (a transposed view of contiguous storage when asked) and its stored
    values in float64."""
    rng = rng or np.random.default_rng(0)
    stored_shape = shape[:-2] + (shape[-1], shape[-2]) if transposed else shape
    host = rng.standard_normal(stored_shape) * scale
    t = torch.tensor(host, dtype=getattr(torch, dtype), device="cuda")
    if transposed:
        t = t.transpose(-1, -2)
    return t, t.double().cpu().numpy()


def poisoned(torch, shape, dtype):
    return torch.full(shape, float("nan"), dtype=getattr(torch, dtype), device="cuda")


def relative_error(got, want):
    got = np.asarray(got, dtype=np.float64)
    assert not np.isnan(got).any(), "NaN in the output: an element was not written"
    scale = np.linalg.norm(want)
    return np.linalg.norm(got - want) / (scale if scale else 1.0)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def gelu_tanh_grad(x):
    inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)
    t = np.tanh(inner)
    return 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * x**2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
@pytest.mark.parametrize("a_t, b_t", [(False, False), (True, False), (False, True), (True, True)],
                         ids=["nn", "tn", "nt", "tt"])
def test_matmul_matches_numpy(dtype, shape, a_t, b_t):
    torch = torch_or_skip()
    m, k, n = shape
    a, ha = make(torch, (m, k), dtype, a_t, np.random.default_rng(1))
    b, hb = make(torch, (k, n), dtype, b_t, np.random.default_rng(2))
    out = poisoned(torch, (m, n), dtype)
    assert lab.matmul(a, b, out) is out
    assert relative_error(out.double().cpu().numpy(), ha @ hb) < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_inputs_into_a_float32_out(dtype):
    torch = torch_or_skip()
    a, ha = make(torch, (96, 200), dtype)
    b, hb = make(torch, (200, 40), dtype, rng=np.random.default_rng(3))
    out = poisoned(torch, (96, 40), "float32")
    lab.matmul(a, b, out)
    assert relative_error(out.double().cpu().numpy(), ha @ hb) < 1e-5


def test_column_major_out_is_written_in_place():
    torch = torch_or_skip()
    a, ha = make(torch, (33, 20), "float32")
    b, hb = make(torch, (20, 17), "float32", rng=np.random.default_rng(4))
    out = poisoned(torch, (17, 33), "float32").t()  # a transposed view: columns contiguous
    lab.matmul(a, b, out)
    assert relative_error(out.double().cpu().numpy(), ha @ hb) < TOLERANCE["float32"]


def test_sliced_views_keep_their_leading_dimension():
    torch = torch_or_skip()
    big_a, hbig_a = make(torch, (70, 90), "float32")
    big_b, hbig_b = make(torch, (80, 60), "float32", rng=np.random.default_rng(5))
    a, ha = big_a[3:40, 5:50], hbig_a[3:40, 5:50]
    b, hb = big_b[10:55, 7:30], hbig_b[10:55, 7:30]
    canvas = poisoned(torch, (50, 40), "float32")
    out = canvas[2:39, 4:27]
    lab.matmul(a, b, out)
    assert relative_error(out.double().cpu().numpy(), ha @ hb) < TOLERANCE["float32"]
    assert torch.isnan(canvas[0]).all() and torch.isnan(canvas[:, 0]).all()  # nothing outside the view


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_views_with_no_contiguous_dimension_are_copied_first(dtype):
    torch = torch_or_skip()
    big_a, hbig_a = make(torch, (3, 80, 90), dtype)
    big_b, hbig_b = make(torch, (60, 70), dtype, rng=np.random.default_rng(22))
    a, ha = big_a[:, ::2, ::3], hbig_a[:, ::2, ::3]  # (3, 40, 30), no unit stride
    b, hb = big_b[::2, 1::2], hbig_b[::2, 1::2]     # (30, 35), no unit stride
    import lab.lab as core
    out = poisoned(torch, (3, 40, 35), dtype)
    assert core._matmul_plan(a, b, out)["staged"] == (True, True)
    lab.matmul(a, b, out, bias=None)
    assert relative_error(out.double().cpu().numpy(), ha @ hb) < TOLERANCE[dtype]
    before = torch.cuda.memory_allocated()
    for _ in range(3):  # the copies' scratch goes back to lab's pool, not torch's: nothing grows
        lab.matmul(a, b, out)
    assert torch.cuda.memory_allocated() == before


@pytest.mark.parametrize("allow_tf32, tolerance", [(False, 2e-6), (True, 3e-3)])
def test_tf32_only_when_allowed(allow_tf32, tolerance):
    torch = torch_or_skip()
    a, ha = make(torch, (256, 1024), "float32")
    b, hb = make(torch, (1024, 256), "float32", rng=np.random.default_rng(6))
    out = poisoned(torch, (256, 256), "float32")
    lab.matmul(a, b, out, allow_tf32=allow_tf32)
    error = relative_error(out.double().cpu().numpy(), ha @ hb)
    assert error < tolerance
    if allow_tf32:
        assert error > 1e-6  # TF32's 10-bit mantissa shows; float32 math would be far below this


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_alpha_beta_and_c(dtype):
    torch = torch_or_skip()
    a, ha = make(torch, (48, 64), dtype)
    b, hb = make(torch, (64, 24), dtype, rng=np.random.default_rng(7))
    c, hc = make(torch, (48, 24), dtype, rng=np.random.default_rng(8))
    out = poisoned(torch, (48, 24), dtype)
    lab.matmul(a, b, out, c=c, alpha=0.5, beta=-2.0)
    assert relative_error(out.double().cpu().numpy(), 0.5 * ha @ hb - 2.0 * hc) < TOLERANCE[dtype]
    lab.matmul(a, b, c, c=c)  # c is out: c += a @ b
    assert relative_error(c.double().cpu().numpy(), hc + ha @ hb) < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("epilogue", [None, "relu", "gelu_tanh"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_epilogues(dtype, epilogue, with_bias):
    torch = torch_or_skip()
    m, k, n = 200, 96, 136
    a, ha = make(torch, (m, k), dtype, scale=0.3)
    b, hb = make(torch, (k, n), dtype, rng=np.random.default_rng(9), scale=0.3)
    bias, hbias = make(torch, (1, n), dtype, rng=np.random.default_rng(10))
    bias, hbias = bias[0], hbias[0]
    out = poisoned(torch, (m, n), dtype)
    aux = poisoned(torch, (m, n), dtype) if epilogue == "gelu_tanh" else None
    lab.matmul(a, b, out, bias=bias if with_bias else None, epilogue=epilogue, aux_out=aux)
    pre = ha @ hb + (hbias if with_bias else 0)
    want = {None: pre, "relu": np.maximum(pre, 0), "gelu_tanh": gelu_tanh(pre)}[epilogue]
    assert relative_error(out.double().cpu().numpy(), want) < 2 * TOLERANCE[dtype]
    if aux is not None:
        assert relative_error(aux.double().cpu().numpy(), pre) < 2 * TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("with_bias_grad, fused", [(False, False), (True, False), (True, True)],
                         ids=["no-bias-grad", "bias-grad-summed-by-lab", "bias-grad-in-cublaslt"])
def test_dgelu_backward_epilogue(dtype, with_bias_grad, fused):
    """A Linear + GELU layer's backward: grad_pre = (grad_y @ W) * gelu'(pre), and its bias gradient
    (summed by lab's reduction after the product, or by cuBLASLt's DGELU_BGRAD epilogue)."""
    import lab.lab as core
    torch = torch_or_skip()
    previous = core._matmul_fuse_dgelu_bias_grad(fused)
    m, k, n = 128, 64, 96
    g, hg = make(torch, (m, k), dtype, scale=0.5)
    w, hw = make(torch, (k, n), dtype, rng=np.random.default_rng(11), scale=0.5)
    pre, hpre = make(torch, (m, n), dtype, rng=np.random.default_rng(12))
    out = poisoned(torch, (m, n), dtype)
    bias_grad = poisoned(torch, (n,), dtype) if with_bias_grad else None
    try:
        lab.matmul(g, w, out, epilogue="dgelu", aux=pre, bias_grad_out=bias_grad)
    finally:
        core._matmul_fuse_dgelu_bias_grad(previous)
    want = (hg @ hw) * gelu_tanh_grad(hpre)
    assert relative_error(out.double().cpu().numpy(), want) < 3 * TOLERANCE[dtype]
    if with_bias_grad:
        assert relative_error(bias_grad.double().cpu().numpy(), want.sum(axis=0)) < 3 * TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_bias_gradient_of_a_linear_layer(dtype):
    """dW = g^T @ x with db = g.sum(0) from the same call: a is g^T, a transposed view."""
    torch = torch_or_skip()
    g, hg = make(torch, (256, 64), dtype)
    x, hx = make(torch, (256, 48), dtype, rng=np.random.default_rng(13))
    dw = poisoned(torch, (64, 48), dtype)
    db = poisoned(torch, (64,), dtype)
    lab.matmul(g.t(), x, dw, bias_grad_out=db)
    assert relative_error(dw.double().cpu().numpy(), hg.T @ hx) < TOLERANCE[dtype]
    assert relative_error(db.double().cpu().numpy(), hg.sum(axis=0)) < TOLERANCE[dtype]


@pytest.mark.parametrize("a_shape, b_shape", [
    ((3, 20, 30), (30, 10)),          # one weight for every batch
    ((20, 30), (4, 30, 10)),
    ((2, 3, 20, 30), (3, 30, 10)),    # broadcast over the leading dimension
    ((2, 1, 20, 30), (1, 3, 30, 10)),
    ((5, 17, 1), (5, 1, 13)),         # k = 1
])
def test_batches_broadcast_like_numpy(a_shape, b_shape):
    torch = torch_or_skip()
    a, ha = make(torch, a_shape, "float32")
    b, hb = make(torch, b_shape, "float32", rng=np.random.default_rng(14))
    want = ha @ hb
    out = poisoned(torch, want.shape, "float32")
    lab.matmul(a, b, out)
    assert relative_error(out.double().cpu().numpy(), want) < TOLERANCE["float32"]


def test_batches_that_do_not_collapse_run_one_product_each():
    torch = torch_or_skip()
    base, hbase = make(torch, (4, 6, 20, 30), "float32")
    a, ha = base[:, ::2], hbase[:, ::2]  # batch strides that are not one stride apart
    b, hb = make(torch, (3, 30, 10), "float32", rng=np.random.default_rng(15))
    out = poisoned(torch, (4, 3, 20, 10), "float32")
    import lab.lab as core
    assert not core._matmul_plan(a, b, out)["collapsed"]
    lab.matmul(a, b, out)
    assert relative_error(out.double().cpu().numpy(), ha @ hb) < TOLERANCE["float32"]


@pytest.mark.parametrize("m, k, n", [(0, 5, 4), (3, 5, 0), (0, 0, 0)])
def test_empty_outputs_launch_nothing(m, k, n):
    torch = torch_or_skip()
    a, b = torch.ones(m, k, device="cuda"), torch.ones(k, n, device="cuda")
    out = torch.empty(m, n, device="cuda")
    assert lab.matmul(a, b, out) is out


@pytest.mark.parametrize("with_c", [False, True])
def test_k_zero_is_beta_c_or_zeros(with_c):
    torch = torch_or_skip()
    a, b = torch.ones(6, 0, device="cuda"), torch.ones(0, 5, device="cuda")
    c, hc = make(torch, (6, 5), "float32")
    out = poisoned(torch, (6, 5), "float32")
    lab.matmul(a, b, out, c=c if with_c else None, beta=0.5 if with_c else None)
    want = 0.5 * hc if with_c else np.zeros((6, 5))
    np.testing.assert_allclose(out.double().cpu().numpy(), want, rtol=1e-6, atol=0)


def test_out_none_allocates_a_lab_array():
    torch = torch_or_skip()
    a, ha = make(torch, (2, 40, 30), "bfloat16")
    b, hb = make(torch, (30, 20), "bfloat16", rng=np.random.default_rng(16))
    out = lab.matmul(a, b)
    assert isinstance(out, lab.Array) and out.shape == (2, 40, 20) and out.dtype == "bfloat16"
    got = torch.from_dlpack(out).double().cpu().numpy()
    assert relative_error(got, ha @ hb) < TOLERANCE["bfloat16"]


@pytest.mark.parametrize("producer", ["cupy", "numba"])
def test_other_producers(producer):
    p = producer_or_skip(producer, "float32")
    rng = np.random.default_rng(17)
    ha, hb = rng.standard_normal((45, 31)), rng.standard_normal((31, 27))
    a, ha = p.from_host(ha, "float32")
    b, hb = p.from_host(hb, "float32")
    out = p.empty_poisoned((45, 27), "float32")
    lab.matmul(a, b, out)
    assert relative_error(p.to_host(out), ha @ hb) < TOLERANCE["float32"]


def test_lab_arrays():
    rng = np.random.default_rng(21)
    ha, hb = rng.standard_normal((45, 31)), rng.standard_normal((31, 27))
    a, b = lab.asarray(ha), lab.asarray(hb)  # float64
    out = lab.asarray(np.full((45, 27), np.nan))
    lab.matmul(a, b, out)
    assert relative_error(out.numpy(), ha @ hb) < TOLERANCE["float64"]


def test_side_stream_and_graph_capture():
    torch = torch_or_skip()
    a, ha = make(torch, (128, 64), "bfloat16")
    b, hb = make(torch, (64, 96), "bfloat16", rng=np.random.default_rng(18))
    out = poisoned(torch, (128, 96), "bfloat16")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        lab.matmul(a, b, out)  # torch's current stream (the side one) through the exchange API
        graph = torch.cuda.CUDAGraph()
        graph2_out = poisoned(torch, (128, 96), "bfloat16")
        with torch.cuda.graph(graph):
            lab.matmul(a, b, graph2_out)
    torch.cuda.current_stream().wait_stream(side)
    assert relative_error(out.double().cpu().numpy(), ha @ hb) < TOLERANCE["bfloat16"]
    graph2_out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert relative_error(graph2_out.double().cpu().numpy(), ha @ hb) < TOLERANCE["bfloat16"]


def test_a_repeated_problem_reuses_its_plan_and_stays_right():
    torch = torch_or_skip()
    a, ha = make(torch, (64, 64), "float32")
    b, hb = make(torch, (64, 64), "float32", rng=np.random.default_rng(19))
    outs = [poisoned(torch, (64, 64), "float32") for _ in range(3)]
    for out in outs:
        lab.matmul(a, b, out)
    for out in outs:
        assert relative_error(out.double().cpu().numpy(), ha @ hb) < TOLERANCE["float32"]


def test_unsupported_combination_is_a_cuda_error_naming_the_status():
    """A GELU epilogue on float64: where cuBLASLt has none, its heuristic says so and lab names the
    status; where it has one (cuBLASLt 13.0 on the H200, 2026-12-01), it must compute it - its GELU
    is not float64-exact (1e-8 relative seen), so the bound is float32's."""
    torch = torch_or_skip()
    a, ha = make(torch, (16, 16), "float64")
    b, hb = make(torch, (16, 16), "float64", rng=np.random.default_rng(20))
    out = poisoned(torch, (16, 16), "float64")
    try:
        lab.matmul(a, b, out, epilogue="gelu_tanh")
    except lab.CudaError as error:
        assert error.name == "CUBLAS_STATUS_NOT_SUPPORTED" and "matmul(): cuBLASLt error" in str(error)
    else:  # a library that does support it must compute it right
        assert relative_error(out.cpu().numpy(), gelu_tanh(ha @ hb)) < 1e-6
