"""lab.linear_cross_entropy and lab.nn.linear_cross_entropy on a GPU: loss and gradients against a
float64 torch reference for odd and prime vocabularies, row counts that do not fill a chunk (several
chunks forced through a small max_scratch_bytes), every option, every reduction, 3-D hidden and
transposed weights, accumulation, bitwise determinism, the memory bound under torch's allocator,
and lab.nn under autograd, torch.compile(fullgraph=True) and a short training loop."""
import pytest

torch = pytest.importorskip("torch")
import lab  # noqa: E402
from training import assert_tracks, losses_of_training  # noqa: E402

pytestmark = pytest.mark.gpu
F = torch.nn.functional

# relative to the largest magnitude of what is compared: the logits are stored in the inputs' dtype
# (as torch's own F.linear would), so half types carry their rounding into every result
TOL = {torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _nn():
    import lab.nn
    return lab.nn


def reference(hidden, weight, target, bias=None, ignore_index=-100, label_smoothing=0.0, reduction="mean",
              softcap=None, z_loss=0.0, upstream=None):
    """Loss and (grad_hidden, grad_weight, grad_bias) in float64 from the same inputs."""
    h = hidden.detach().double().requires_grad_()
    w = weight.detach().double().requires_grad_()
    b = None if bias is None else bias.detach().double().requires_grad_()
    from lab.nn.functional import _torch_linear_cross_entropy
    loss = _torch_linear_cross_entropy(h, w, target, b, ignore_index, label_smoothing, reduction, softcap, z_loss)
    loss.backward(torch.ones_like(loss) if upstream is None else upstream.double())
    return loss.detach(), h.grad, w.grad, None if b is None else b.grad


def inputs(rows, depth, classes, dtype, seed=0, ignored=True, lead=None):
    g = torch.Generator(device="cuda").manual_seed(seed)
    hidden = torch.randn(rows, depth, device="cuda", generator=g).to(dtype)
    weight = (torch.randn(classes, depth, device="cuda", generator=g) / depth ** 0.5 * 3).to(dtype)
    target = torch.randint(0, classes, (rows,), device="cuda", generator=g)
    if ignored and rows > 2:
        target[1::7] = -100
    if lead is not None:
        hidden, target = hidden.view(*lead, depth), target.view(*lead)
    return hidden, weight, target, g


def close(got, want, dtype, what):
    scale = want.abs().max().clamp_min(1e-30)
    err = ((got.double() - want) / scale).abs().max().item()
    assert err <= TOL[dtype], f"{what}: {err:.2e} relative to its largest magnitude (allowed {TOL[dtype]})"


def run(hidden, weight, target, reduction="mean", bias=None, grads=True, **kw):
    loss = torch.empty(target.shape if reduction == "none" else (), device="cuda", dtype=torch.float32)
    out = dict(grad_hidden=torch.full_like(hidden, float("nan")), grad_weight=torch.full_like(weight, float("nan")),
               grad_bias=None if bias is None else torch.full_like(bias, float("nan"))) if grads else {}
    lab.linear_cross_entropy(hidden, weight, target, loss, bias=bias, reduction=reduction, **out, **kw)
    return loss, out


@pytest.mark.parametrize("rows, depth, classes, scratch", [
    (1, 64, 7, None), (37, 128, 1009, 64 * 1009 * 2 + 4096), (300, 96, 4099, 100 * 4099 * 4),
    (1000, 256, 32000, 4 << 20), (64, 4096, 128256, None)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_matches_a_float64_reference(rows, depth, classes, scratch, dtype, reduction):
    hidden, weight, target, g = inputs(rows, depth, classes, dtype, seed=rows)
    upstream = torch.rand(target.shape, device="cuda", generator=g) + 0.5 if reduction == "none" else None
    loss, grads = run(hidden, weight, target, reduction, max_scratch_bytes=scratch,
                      grad_output=upstream)
    want = reference(hidden, weight, target, reduction=reduction, upstream=upstream)
    close(loss, want[0], dtype, "loss")
    close(grads["grad_hidden"], want[1], dtype, "grad_hidden")
    close(grads["grad_weight"], want[2], dtype, "grad_weight")


OPTIONS = [dict(label_smoothing=0.1), dict(softcap=30.0), dict(softcap=2.0), dict(z_loss=1e-3),
           dict(ignore_index=3), dict(softcap=15.0, z_loss=1e-4, label_smoothing=0.05)]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("with_bias", [False, True])
def test_every_option_and_the_bias(options, dtype, with_bias):
    hidden, weight, target, g = inputs(257, 64, 5003, dtype, seed=5)
    target[target == -100] = options.get("ignore_index", -100)
    target[::11] = 3
    bias = (torch.randn(5003, device="cuda", generator=g)).to(dtype) if with_bias else None
    loss, grads = run(hidden, weight, target, bias=bias, max_scratch_bytes=(100 * 5003 * 4 + 80000), **options)
    want = reference(hidden, weight, target, bias=bias, **options)
    close(loss, want[0], dtype, "loss")
    close(grads["grad_hidden"], want[1], dtype, "grad_hidden")
    close(grads["grad_weight"], want[2], dtype, "grad_weight")
    if with_bias:
        close(grads["grad_bias"], want[3], dtype, "grad_bias")


def test_cross_entropy_softcap_and_z_loss_match_torch():
    g = torch.Generator(device="cuda").manual_seed(0)
    for classes in (7, 1000, 50257):  # rows in registers and streamed
        logits = torch.randn(64, classes, device="cuda", generator=g) * 4
        target = torch.randint(0, classes, (64,), device="cuda", generator=g)
        loss, grad = torch.empty((), device="cuda"), torch.empty_like(logits)
        lab.cross_entropy(logits, target, loss, softcap=5.0, z_loss=1e-3, grad=grad)
        x = logits.double().requires_grad_()
        capped = 5.0 * torch.tanh(x / 5.0)
        want = (F.cross_entropy(capped, target, reduction="none") + 1e-3 * torch.logsumexp(capped, -1) ** 2).mean()
        want.backward()
        torch.testing.assert_close(loss.double(), want.detach(), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(grad.double(), x.grad, rtol=1e-4, atol=1e-7)


def test_ignored_rows_count_for_nothing_and_a_bad_target_is_nan():
    hidden, weight, target, _ = inputs(50, 32, 101, torch.float32, ignored=False)
    target[:10] = -100
    loss, grads = run(hidden, weight, target, "none")
    assert (loss[:10] == 0).all() and (grads["grad_hidden"][:10] == 0).all()
    target[20] = 101
    loss, grads = run(hidden, weight, target, "mean")
    assert loss.isnan() and grads["grad_hidden"][20].isnan().all()
    assert not grads["grad_hidden"][21].isnan().any()


def test_no_rows_gives_nan_mean_zero_sum_and_zero_gradients():
    hidden, weight, target, _ = inputs(0, 16, 9, torch.float32)
    loss, grads = run(hidden, weight, target, "mean", bias=torch.zeros(9, device="cuda"))
    assert loss.isnan() and (grads["grad_weight"] == 0).all() and (grads["grad_bias"] == 0).all()
    loss, _ = run(hidden, weight, target, "sum")
    assert loss.item() == 0


def test_3d_hidden_transposed_weight_and_int32_targets():
    hidden, weight, target, _ = inputs(2 * 45, 64, 777, torch.bfloat16, lead=(2, 45))
    weight_t = weight.t().contiguous().t()  # (classes, depth) with its columns contiguous
    loss, grads = run(hidden, weight_t, target.int(), max_scratch_bytes=20 * 777 * 2 + 4096)
    want = reference(hidden, weight, target)
    close(loss, want[0], torch.bfloat16, "loss")
    close(grads["grad_hidden"], want[1], torch.bfloat16, "grad_hidden")
    close(grads["grad_weight"], want[2], torch.bfloat16, "grad_weight")


def test_accumulate_adds_and_float32_gradients_of_half_inputs():
    hidden, weight, target, _ = inputs(300, 64, 999, torch.bfloat16)
    base = torch.randn(999, 64, device="cuda")
    grad_weight = base.clone()
    loss = torch.empty((), device="cuda")
    lab.linear_cross_entropy(hidden, weight, target, loss, grad_weight=grad_weight, accumulate=True,
                             max_scratch_bytes=50 * 999 * 2 + 4096)
    want = reference(hidden, weight, target)
    close(grad_weight - base, want[2], torch.bfloat16, "accumulated grad_weight")


def test_the_same_bits_every_run():
    hidden, weight, target, _ = inputs(2048, 512, 32000, torch.bfloat16)
    first = run(hidden, weight, target, max_scratch_bytes=16 << 20)
    for _ in range(3):
        again = run(hidden, weight, target, max_scratch_bytes=16 << 20)
        assert torch.equal(first[0], again[0])
        for name in ("grad_hidden", "grad_weight"):
            assert torch.equal(first[1][name], again[1][name]), name


@pytest.mark.parametrize("budget", [64 << 20, 256 << 20])
def test_memory_beyond_the_gradients_stays_within_the_scratch_bound(budget):
    hidden, weight, target, _ = inputs(8192, 1024, 32000, torch.bfloat16)
    hidden.requires_grad_()
    weight.requires_grad_()
    torch.cuda.synchronize()
    grads = torch.empty_like(hidden), torch.empty_like(weight)  # what any implementation must hold
    del grads
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    loss = _nn().linear_cross_entropy(hidden, weight, target, max_scratch_bytes=budget)
    loss.backward()
    torch.cuda.synchronize()
    beyond = torch.cuda.max_memory_allocated() - before - hidden.numel() * 2 - weight.numel() * 2
    assert beyond <= budget + (8 << 20), f"{beyond / 2**20:.1f} MiB beyond dh and dW"


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nn_autograd_matches_torch(reduction):
    hidden, weight, target, g = inputs(333, 128, 3001, torch.float32)
    bias = torch.randn(3001, device="cuda", generator=g)
    for t in (hidden, weight, bias):
        t.requires_grad_()
    loss = _nn().linear_cross_entropy(hidden, weight, target, bias, reduction=reduction, label_smoothing=0.1,
                                      max_scratch_bytes=100 * 3001 * 4 + 80000)
    upstream = torch.rand(loss.shape, device="cuda", generator=g) + 0.5
    loss.backward(upstream)
    want = reference(hidden, weight, target, bias=bias, reduction=reduction, label_smoothing=0.1, upstream=upstream)
    close(loss.detach(), want[0], torch.float32, "loss")
    for got, ref, name in zip((hidden.grad, weight.grad, bias.grad), want[1:], ("hidden", "weight", "bias")):
        close(got, ref, torch.float32, name)


def test_nn_a_second_backward_is_refused_not_scaled_twice():
    hidden, weight, target, _ = inputs(64, 32, 100, torch.float32)
    hidden.requires_grad_()
    loss = _nn().linear_cross_entropy(hidden, weight, target) * 2
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_nn_under_torch_compile_fullgraph():
    module = _nn().LinearCrossEntropyLoss(label_smoothing=0.1)
    hidden, weight, target, _ = inputs(200, 64, 1000, torch.float32)
    hidden.requires_grad_()
    weight.requires_grad_()
    compiled = torch.compile(module, fullgraph=True)
    loss = compiled(hidden, weight, target)
    loss.backward()
    want = reference(hidden, weight, target, label_smoothing=0.1)
    close(loss.detach(), want[0], torch.float32, "loss")
    close(hidden.grad, want[1], torch.float32, "grad_hidden")
    close(weight.grad, want[2], torch.float32, "grad_weight")


def test_a_training_loop_tracks_plain_torch():
    g = torch.Generator(device="cuda").manual_seed(1)
    batches = [(torch.randn(256, 64, device="cuda", generator=g), torch.randint(0, 50, (256,), device="cuda",
                                                                                  generator=g)) for _ in range(30)]
    teacher = torch.randn(64, 50, device="cuda", generator=g)
    batches = [(x, (x @ teacher).argmax(-1)) for x, _ in batches]

    def train(loss_fn):
        torch.manual_seed(0)
        head = torch.nn.Linear(64, 50, device="cuda")
        return losses_of_training(lambda x, t: loss_fn(x, head.weight, t, head.bias), head.parameters(), batches,
                                  lr=1e-2)

    want = train(lambda x, w, t, b: F.cross_entropy(F.linear(x, w, b), t))
    got = train(lambda x, w, t, b: _nn().linear_cross_entropy(x, w, t, b, max_scratch_bytes=64 * 50 * 4 + 4096))
    assert_tracks(got, want, 1e-4)


def test_cross_entropy_grad_into_logits_needs_no_second_logits_tensor():
    hidden, weight, target, _ = inputs(1024, 256, 32000, torch.bfloat16)
    hidden.requires_grad_()
    logits = hidden @ weight.T
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    loss = _nn().cross_entropy(logits, target, grad_into_logits=True)
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() - before < 1 << 20  # the loss: not another 64 MiB of logits
    loss.backward()
    want = reference(hidden, weight, target)
    close(loss.detach().float(), want[0], torch.bfloat16, "loss")
    close(hidden.grad, want[1], torch.bfloat16, "grad_hidden")


def test_cross_entropy_grad_into_logits_refuses_when_another_node_saved_them():
    hidden, weight, target, _ = inputs(64, 32, 100, torch.float32)
    hidden.requires_grad_()
    capped = torch.tanh(hidden @ weight.T)  # tanh's backward reads its output: the logits here
    loss = _nn().cross_entropy(capped, target, grad_into_logits=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
