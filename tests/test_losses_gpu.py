"""Cross-entropy and the GLUs on a GPU, against NumPy in float64 computed from the stored
inputs: every float dtype, vocabularies 7 .. 262144 (rows in registers and streamed rows), int32 and
int64 targets, ignore_index, label smoothing, the three reductions, the gradient written in the
same pass (also into the logits themselves), bad targets as NaN, determinism, strided logits and
targets, more than 2^31 logits; SwiGLU/GeGLU backwards with gate and up as the halves of one
array, in place; and the results against torch's own ops. Outputs are poisoned (NaN) first."""
import numpy as np
import pytest

import lab
from producers import FLOAT_DTYPES, producer_or_skip

pytestmark = pytest.mark.gpu

RTOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-5, "float64": 1e-11}
VOCABS = [(1, 7), (257, 7), (33, 1000), (5, 50257), (3, 20000), (3, 131072), (2, 262144), (4099, 32)]
VOCAB_IDS = [f"{r}x{v}" for r, v in VOCABS]
IGNORE = -100


def numpy_cross_entropy(x, target, ignore_index, smoothing, reduction):
    """(loss as the reduction gives it, d loss / d x) in float64."""
    rows, n = x.shape
    top = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - top)
    lse = top[:, 0] + np.log(np.sum(e, axis=-1))
    counted = target != ignore_index
    safe = np.where(counted, target, 0)
    picked = x[np.arange(rows), safe]
    loss = np.where(counted, lse - (1 - smoothing) * picked - smoothing * np.mean(x, axis=-1), 0.0)
    grad = e / np.sum(e, axis=-1, keepdims=True) - smoothing / n
    grad[np.arange(rows), safe] -= 1 - smoothing
    grad[~counted] = 0.0
    if reduction == "mean":
        return np.sum(loss) / np.sum(counted), grad / np.sum(counted)
    return (np.sum(loss) if reduction == "sum" else loss), grad


def check(got, want, dtype, scale=None, what=""):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, what
    assert not np.isnan(got).any(), f"{what}: NaN in the output (an element left unwritten?)"
    scale = np.abs(want) if scale is None else scale
    bad = np.abs(got - want) > RTOL[dtype] * (np.abs(want) + scale) + (3e-8 if dtype == "float16" else 0.0)
    assert not bad.any(), f"{what}: {bad.sum()} of {bad.size} elements off, worst {np.max(np.abs(got - want)):.3g}"


def targets_for(rng, rows, n, ignored_share=0.2):
    target = rng.integers(0, n, size=rows)
    target[rng.random(rows) < ignored_share] = IGNORE
    return target


@pytest.fixture
def torch_producer(request):
    return producer_or_skip("torch", request.node.callspec.params.get("dtype", "float32"))


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", VOCABS, ids=VOCAB_IDS)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_cross_entropy(dtype, shape, reduction, smoothing, torch_producer):
    p = torch_producer
    rng = np.random.default_rng(shape[1])
    rows, n = shape
    x, x_stored = p.from_host(rng.normal(0.0, 3.0, size=shape), dtype)
    target_host = targets_for(rng, rows, n)
    target, _ = p.from_host(target_host, "int64" if rows % 2 else "int32")
    loss = p.empty_poisoned((rows,) if reduction == "none" else (), dtype)
    grad = p.empty_poisoned(shape, dtype)
    got = lab.cross_entropy(x, target, loss, reduction=reduction, label_smoothing=smoothing, grad=grad)
    assert got is loss
    want_loss, want_grad = numpy_cross_entropy(x_stored, target_host, IGNORE, smoothing, reduction)
    # the loss: float32 sums over a row of terms of size |x| (a few): scale by the row's sum of |x|
    loss_scale = np.log(n) + np.mean(np.abs(x_stored)) * 1e-3
    check(p.to_host(loss), want_loss, dtype, loss_scale if reduction == "none" else None, "loss")
    # the gradient: softmax entries next to the row's typical magnitude
    scale = np.broadcast_to(np.mean(np.abs(want_grad), axis=-1, keepdims=True), want_grad.shape)
    check(p.to_host(grad), want_grad, dtype, scale, "grad")


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_misaligned_rows_with_targets_in_their_heads(dtype, smoothing, torch_producer):
    """An odd vocabulary: row r starts r * 50257 elements in, so each row has its own few columns before
    a 16-byte boundary (walked one a lane) and a body (walked in vectors). Targets in the first columns -
    inside a row's head or right after it - and at the row's end."""
    p = torch_producer
    rows, n = 17, 50257
    rng = np.random.default_rng(17)
    x, x_stored = p.from_host(rng.normal(0.0, 3.0, size=(rows, n)), dtype)
    target_host = np.array([r % 9 for r in range(rows)])
    target_host[[5, 11]] = n - 1
    target_host[13] = IGNORE
    target, _ = p.from_host(target_host, "int64")
    loss = p.empty_poisoned((rows,), dtype)
    grad = p.empty_poisoned((rows, n), dtype)
    lab.cross_entropy(x, target, loss, reduction="none", label_smoothing=smoothing, grad=grad)
    want_loss, want_grad = numpy_cross_entropy(x_stored, target_host, IGNORE, smoothing, "none")
    check(p.to_host(loss), want_loss, dtype, np.log(n) + np.mean(np.abs(x_stored)) * 1e-3, "loss")
    scale = np.broadcast_to(np.mean(np.abs(want_grad), axis=-1, keepdims=True), want_grad.shape)
    check(p.to_host(grad), want_grad, dtype, scale, "grad")


@pytest.mark.parametrize("shape", [(64, 4096), (3, 131072), (9, 50257)], ids=["registers", "streamed", "misaligned"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_gradient_overwrites_the_logits(dtype, shape, torch_producer):
    p = torch_producer
    rng = np.random.default_rng(5)
    x, x_stored = p.from_host(rng.normal(0.0, 2.0, size=shape), dtype)
    target_host = targets_for(rng, shape[0], shape[1])
    target, _ = p.from_host(target_host, "int64")
    loss = p.empty_poisoned((), "float32")
    lab.cross_entropy(x, target, loss, grad=x)
    want_loss, want_grad = numpy_cross_entropy(x_stored, target_host, IGNORE, 0.0, "mean")
    check(p.to_host(loss), want_loss, "float32" if dtype == "float32" else "float16", None, "loss")
    scale = np.broadcast_to(np.mean(np.abs(want_grad), axis=-1, keepdims=True), want_grad.shape)
    check(p.to_host(x), want_grad, dtype, scale, "grad in the logits")


# Long rows walked through a window of shared memory: a window of one step, of two (fewer than a bf16
# row of 20000 has), the default (which leaves rows of six steps or fewer streamed: the 20000 rows), the
# deepest (8, one block an SM; the whole of a 20000 row in the window) and none; a row whose last
# 16-byte vector is partial (padded rows, still aligned) reads that vector from device memory.
WINDOW_SHAPES = [(300, 20000, 20000), (140, 131072, 131072), (200, 20001, 20008)]


@pytest.mark.parametrize("window_depth", [1, 2, -1, 8, 0], ids=["window1", "window2", "default", "window8",
                                                                "streamed"], indirect=True)
@pytest.mark.parametrize("shape", WINDOW_SHAPES, ids=["20000", "131072", "padded20001"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_window_rows(dtype, shape, window_depth, torch_producer):
    p = torch_producer
    rows, n, width = shape
    rng = np.random.default_rng(n)
    x_full, x_full_stored = p.from_host(rng.normal(0.0, 3.0, size=(rows, width)), dtype)
    x, x_stored = x_full[:, :n], x_full_stored[:, :n]
    target_host = targets_for(rng, rows, n)
    target, _ = p.from_host(target_host, "int64")
    loss = p.empty_poisoned((rows,), dtype)
    grad_full = p.empty_poisoned((rows, width), dtype)
    smoothing = 0.1 if width != n else 0.0
    lab.cross_entropy(x, target, loss, reduction="none", label_smoothing=smoothing, grad=grad_full[:, :n])
    want_loss, want_grad = numpy_cross_entropy(x_stored, target_host, IGNORE, smoothing, "none")
    check(p.to_host(loss), want_loss, dtype, np.log(n) + np.mean(np.abs(x_stored)) * 1e-3, "loss")
    scale = np.broadcast_to(np.mean(np.abs(want_grad), axis=-1, keepdims=True), want_grad.shape)
    grad_host = p.to_host(grad_full)
    check(grad_host[:, :n], want_grad, dtype, scale, "grad")
    assert np.isnan(grad_host[:, n:].astype(np.float64)).all(), "the padding past each row was written"


@pytest.mark.parametrize("window_depth", [1, -1], ids=["window1", "default"], indirect=True)
def test_window_rows_in_place_with_softcap_and_z_loss(window_depth):
    """The gradient into the logits themselves (the window's copies of steps before the one written are
    in flight while it is written), with softcap and z-loss, against torch in float64."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    g = torch.Generator(device="cuda").manual_seed(0)
    logits = torch.randn(200, 32000, device="cuda", generator=g) * 4
    target = torch.randint(0, 32000, (200,), device="cuda", generator=g)
    x = logits.double().requires_grad_()
    loss = torch.empty((), device="cuda")
    lab.cross_entropy(logits, target, loss, softcap=5.0, z_loss=1e-3, grad=logits)
    capped = 5.0 * torch.tanh(x / 5.0)
    want = (F.cross_entropy(capped, target, reduction="none") + 1e-3 * torch.logsumexp(capped, -1) ** 2).mean()
    want.backward()
    torch.testing.assert_close(loss.double(), want.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits.double(), x.grad, rtol=1e-4, atol=1e-7)


def test_loss_without_gradient_and_other_dtypes():
    """No grad: only the loss; a float32 loss for bfloat16 logits; ignore_index inside [0, n)."""
    torch = pytest.importorskip("torch")
    x = torch.randn(300, 1000, device="cuda", dtype=torch.bfloat16)
    target = torch.randint(0, 1000, (300,), device="cuda")
    target[::3] = 5
    loss = torch.full((), float("nan"), device="cuda")
    lab.cross_entropy(x, target, loss, ignore_index=5)
    want = torch.nn.functional.cross_entropy(x.double(), target, ignore_index=5)
    torch.testing.assert_close(loss.double(), want, rtol=1e-5, atol=0)


def test_bad_targets_give_nan_for_their_row_only():
    torch = pytest.importorskip("torch")
    x = torch.randn(6, 50, device="cuda")
    target = torch.tensor([1, 50, 2, -1, IGNORE, 3], device="cuda")
    loss, grad = torch.full((6,), 7.0, device="cuda"), torch.full_like(x, 7.0)
    lab.cross_entropy(x, target, loss, reduction="none", grad=grad)
    assert loss[[1, 3]].isnan().all() and grad[[1, 3]].isnan().all()
    assert not loss[[0, 2, 4, 5]].isnan().any() and not grad[[0, 2, 4, 5]].isnan().any()
    assert loss[4] == 0 and (grad[4] == 0).all()
    mean = torch.zeros((), device="cuda")
    lab.cross_entropy(x, target, mean)
    assert mean.isnan()  # a bad target cannot pass unnoticed through the mean


def test_every_row_ignored():
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 9, device="cuda")
    target = torch.full((4,), IGNORE, device="cuda")
    loss, total, grad = torch.zeros((), device="cuda"), torch.full((), 7.0, device="cuda"), torch.full_like(x, 7.0)
    lab.cross_entropy(x, target, loss, grad=grad)
    lab.cross_entropy(x, target, total, reduction="sum")
    assert loss.isnan() and total == 0 and (grad == 0).all()  # 0 / 0 as torch's mean; nothing to learn
    empty, none_total = torch.empty(0, 9, device="cuda"), torch.full((), 7.0, device="cuda")
    lab.cross_entropy(empty, torch.empty(0, dtype=torch.long, device="cuda"), none_total, reduction="sum")
    assert none_total == 0


def test_reduced_loss_is_deterministic():
    torch = pytest.importorskip("torch")
    x = torch.randn(16384, 512, device="cuda")
    target = torch.randint(0, 512, (16384,), device="cuda")
    results = []
    for _ in range(3):
        loss = torch.empty((), device="cuda")
        lab.cross_entropy(x, target, loss, label_smoothing=0.1)
        results.append(loss.item())
    assert results[0] == results[1] == results[2]


@pytest.mark.parametrize("layout", ["transposed", "every_other_class", "strided_targets", "leading_dims"])
def test_cross_entropy_layouts(layout):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    g = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(40, 300, device="cuda", generator=g)
    target = torch.randint(0, 150, (40,), device="cuda", generator=g)
    if layout == "transposed":
        x = x.t().contiguous().t()
    elif layout == "every_other_class":
        x = x[:, ::2]
    elif layout == "strided_targets":
        target = torch.stack([target, target]).t()[:, 0]
    grad = torch.full(x.shape, float("nan"), device="cuda")
    if layout == "leading_dims":  # [batch, time, vocab] logits and [batch, time] targets
        x3, t3 = x.reshape(4, 10, 300), target.reshape(4, 10)
        loss = torch.full((4, 10), float("nan"), device="cuda")
        lab.cross_entropy(x3, t3, loss, reduction="none", grad=grad.reshape(4, 10, 300))
        torch.testing.assert_close(loss.reshape(40), F.cross_entropy(x, target, reduction="none"))
        return
    loss = torch.full((), float("nan"), device="cuda")
    lab.cross_entropy(x, target, loss, grad=grad)
    leaf = x.detach().clone().requires_grad_()
    want = F.cross_entropy(leaf, target)
    want.backward()
    torch.testing.assert_close(loss, want.detach())
    torch.testing.assert_close(grad, leaf.grad)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_matches_torch(dtype, reduction):
    """Against F.cross_entropy with ignore_index and label_smoothing, forward and backward."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(512, 32000, device="cuda", generator=g).to(getattr(torch, dtype))
    target = torch.randint(0, 32000, (512,), device="cuda", generator=g).int()
    target[::7] = IGNORE
    leaf = x.detach().clone().requires_grad_()
    want = F.cross_entropy(leaf.float(), target.long(), label_smoothing=0.05, reduction=reduction)
    want.sum().backward() if reduction == "none" else want.backward()
    loss = torch.empty(want.shape, device="cuda")
    grad = torch.empty_like(x)
    lab.cross_entropy(x, target, loss, label_smoothing=0.05, reduction=reduction, grad=grad)
    torch.testing.assert_close(loss, want.detach(), rtol=2e-5, atol=2e-5)
    tol = {"bfloat16": 1.6e-2, "float16": 2e-3, "float32": 2e-5}[dtype]
    torch.testing.assert_close(grad.float(), leaf.grad.float(), rtol=tol, atol=tol * float(leaf.grad.abs().max()))


def test_more_than_2_31_logits():
    """16385 rows of 131072 bfloat16 logits (2^31 + 2^17 elements), the gradient into the logits."""
    torch = pytest.importorskip("torch")
    rows, n = 16385, 131072
    x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
    target = torch.randint(0, n, (rows,), device="cuda")
    check_rows = [0, rows // 2, rows - 1]
    x_check = x[check_rows].double().cpu().numpy()
    loss = torch.full((rows,), float("nan"), device="cuda")
    lab.cross_entropy(x, target, loss, reduction="none", grad=x)
    want_loss, want_grad = numpy_cross_entropy(x_check, target[check_rows].cpu().numpy(), IGNORE, 0.0, "none")
    check(loss[check_rows].cpu().numpy(), want_loss, "float32", np.log(n), "loss")
    scale = np.broadcast_to(np.mean(np.abs(want_grad), axis=-1, keepdims=True), want_grad.shape)
    check(x[check_rows].float().cpu().numpy(), want_grad, "bfloat16", scale, "grad")
    assert not loss.isnan().any()
    del x


@pytest.mark.parametrize("shape", [(300, 1000), (3, 131072)], ids=["registers", "streamed"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_backward_scales_in_place_and_skips_ones(dtype, shape):
    """grad *= grad_loss in place: per row (rows with 1 are skipped on the device: unchanged) or one
    number for every row. That the skip saves the pass shows in bench_losses (lab.nn's backward)."""
    torch = pytest.importorskip("torch")
    tdtype = getattr(torch, dtype)
    grad = torch.randn(shape, device="cuda").to(tdtype)
    upstream = torch.rand(shape[0], device="cuda").to(tdtype) + 2
    upstream[::2] = 1
    want = grad.float() * upstream.float()[:, None]
    assert lab.cross_entropy_backward(upstream, grad) is grad
    torch.testing.assert_close(grad.float(), want, rtol=RTOL[dtype], atol=0)
    before = grad.clone()
    lab.cross_entropy_backward(torch.ones((), device="cuda", dtype=tdtype), grad)
    assert torch.equal(grad, before)
    lab.cross_entropy_backward(torch.full((), 0.5, device="cuda"), grad)
    torch.testing.assert_close(grad.float(), want * 0.5, rtol=RTOL[dtype], atol=0)


# ---- SwiGLU / GeGLU ----

def numpy_glu_backward(dy, gate, up, gelu):
    """(grad_gate, grad_up, the forward's product act(gate) * up) in float64."""
    if gelu:
        k0, k1 = np.sqrt(2.0 / np.pi), 0.044715
        t = np.tanh(k0 * (gate + k1 * gate ** 3))
        act = 0.5 * gate * (1 + t)
        slope = 0.5 * (1 + t) + 0.5 * gate * (1 - t * t) * k0 * (1 + 3 * k1 * gate * gate)
    else:
        s = 1.0 / (1.0 + np.exp(-gate))
        act, slope = gate * s, s * (1 + gate * (1 - s))
    return dy * up * slope, dy * act, act * up


GLU_SHAPES = [(1, 1), (5, 7), (257, 128), (64, 4096), (3, 50257), (2, 262144)]


@pytest.mark.parametrize("with_product", [False, True], ids=["", "product"])
@pytest.mark.parametrize("shape", GLU_SHAPES, ids=[f"{r}x{n}" for r, n in GLU_SHAPES])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", ["swiglu", "geglu"])
def test_glu_backward(op, dtype, shape, with_product, torch_producer):
    """Both gradients, and with `product` the forward's output made again in the same pass - through
    the packets (rows of whole 16-byte packets), rows in registers (5 x 7) and streamed rows (3 x 50257)."""
    p = torch_producer
    rng = np.random.default_rng(11)
    dy, dy_s = p.from_host(rng.uniform(-2, 2, shape), dtype)
    gate, gate_s = p.from_host(rng.uniform(-6, 6, shape), dtype)
    up, up_s = p.from_host(rng.uniform(-2, 2, shape), dtype)
    grad_gate, grad_up = p.empty_poisoned(shape, dtype), p.empty_poisoned(shape, dtype)
    product = p.empty_poisoned(shape, dtype) if with_product else None
    got = getattr(lab, f"{op}_backward")(dy, gate, up, grad_gate, grad_up, product=product)
    assert got[0] is grad_gate and got[1] is grad_up
    want_gate, want_up, want_product = numpy_glu_backward(dy_s, gate_s, up_s, op == "geglu")
    # act'(gate) has terms that cancel (1 - tanh^2, 1 - sigmoid): float32's error is relative to dy * up
    check(p.to_host(grad_gate), want_gate, dtype, np.abs(dy_s * up_s) * (1.0 if dtype == "float32" else 1e-3),
          "grad_gate")
    check(p.to_host(grad_up), want_up, dtype, np.abs(dy_s * gate_s) * (1.0 if dtype == "float32" else 1e-3), "grad_up")
    if with_product:
        check(p.to_host(product), want_product, dtype, np.abs(gate_s * up_s), "product")


@pytest.mark.parametrize("h", [1000, 1001], ids=["packets", "rows"])
@pytest.mark.parametrize("op", ["swiglu", "geglu"])
def test_glu_on_the_halves_of_one_array(op, h):
    """gate, up = z[:, :h], z[:, h:] and the gradients into the halves of one [rows, 2h] array, as a
    fused up-projection produces them; the forward too."""
    torch = pytest.importorskip("torch")
    z = torch.randn(300, 2 * h, device="cuda", dtype=torch.bfloat16)
    gate, up = z[:, :h], z[:, h:]
    dy = torch.randn(300, h, device="cuda", dtype=torch.bfloat16)
    out = torch.full_like(dy, float("nan"))
    getattr(lab, op)(gate, up, out)
    dz = torch.full_like(z, float("nan"))
    getattr(lab, f"{op}_backward")(dy, gate, up, dz[:, :h], dz[:, h:])
    leaf = z.float().requires_grad_()
    g, u = leaf[:, :h], leaf[:, h:]
    act = torch.nn.functional.silu(g) if op == "swiglu" else torch.nn.functional.gelu(g, approximate="tanh")
    want = act * u
    want.backward(dy.float())
    torch.testing.assert_close(out.float(), want.detach(), rtol=1.6e-2, atol=1e-2)
    torch.testing.assert_close(dz.float(), leaf.grad, rtol=1.6e-2, atol=1e-2)


@pytest.mark.parametrize("with_product", [False, True], ids=["", "product"])
@pytest.mark.parametrize("n", [333, 4096], ids=["rows", "packets"])
def test_glu_backward_in_place(n, with_product):
    """grad_gate over grad_out, grad_up over up and, with the product, the product over gate."""
    torch = pytest.importorskip("torch")
    dy, gate, up = (torch.randn(77, n, device="cuda") for _ in range(3))
    want = numpy_glu_backward(*(t.double().cpu().numpy() for t in (dy, gate, up)), False)
    dy_copy, gate_copy, up_copy = dy.clone(), gate.clone(), up.clone()
    lab.swiglu_backward(dy, gate, up, dy, up, product=gate if with_product else None)
    dy_up = np.abs(dy_copy.double().cpu().numpy() * up_copy.double().cpu().numpy())  # see test_glu_backward
    check(dy.cpu().numpy(), want[0], "float32", dy_up, "grad_gate in grad_out")
    check(up.cpu().numpy(), want[1], "float32", None, "grad_up in up")
    assert not torch.equal(dy, dy_copy) and not torch.equal(up, up_copy)
    if with_product:
        check(gate.cpu().numpy(), want[2], "float32", None, "product in gate")
    else:
        assert torch.equal(gate, gate_copy)
