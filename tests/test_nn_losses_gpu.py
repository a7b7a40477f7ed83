"""lab.nn's cross_entropy, swiglu and geglu on a GPU: against torch's own functions forward
and backward (ignore_index, label_smoothing, every reduction, classes in dimension 1, int32 targets),
gradcheck in float64, torch.library.opcheck, torch.compile(fullgraph=True), CUDA graph capture, and
a small pre-norm transformer (RMSNorm, SDPA attention, RMSNorm, SwiGLU MLP, cross-entropy head)
trained 50 steps with lab.nn tracking the same model in plain torch, eager and compiled - and, where
two GPUs are lent, under DistributedDataParallel."""
import os
import subprocess
import sys
from functools import partial

import pytest

torch = pytest.importorskip("torch")
import lab  # noqa: E402
from cuda_graphs import capture_and_replay  # noqa: E402
from test_nn_gpu import DTYPES, TOL  # noqa: E402  (one tolerance table for lab.nn's GPU tests)
from training import assert_tracks, losses_of_training  # noqa: E402

pytestmark = pytest.mark.gpu
F = torch.nn.functional


def _nn():
    import lab.nn
    return lab.nn


@pytest.mark.parametrize("vocab", [7, 1000, 50257, 131072, 262144])
@pytest.mark.parametrize("rows", [1, 300, 16384])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cross_entropy_matches_torch(dtype, rows, vocab):
    if rows * vocab > 2**28:
        pytest.skip("the reference's float32 copy would not fit comfortably: covered by smaller rows")
    g = torch.Generator(device="cuda").manual_seed(vocab)
    x = (torch.randn(rows, vocab, device="cuda", generator=g) * 2).to(dtype).requires_grad_()
    target = torch.randint(0, vocab, (rows,), device="cuda", generator=g)
    target[1::5] = -100  # not row 0: a single row ignored would make both means NaN
    ref = x.detach().float().requires_grad_()
    for reduction in ("mean", "sum", "none"):
        x.grad = ref.grad = None
        got = _nn().cross_entropy(x, target, reduction=reduction, label_smoothing=0.1)
        want = F.cross_entropy(ref, target, reduction=reduction, label_smoothing=0.1)
        upstream = torch.rand(want.shape, device="cuda", generator=g) + 0.5  # not 1: the backward scales
        got.backward(upstream.to(dtype))
        want.backward(upstream)
        assert got.dtype == dtype and got.shape == want.shape
        torch.testing.assert_close(got.float(), want.detach().to(dtype).float(), **TOL[dtype])  # sums may pass 65504
        scale = ref.grad.abs().amax()
        torch.testing.assert_close(x.grad.float() / scale, ref.grad / scale, **TOL[dtype])


def test_cross_entropy_torch_layouts_and_fallbacks():
    """Classes in dimension 1 of [batch, classes, time]; int32 targets; class weights go to torch."""
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(4, 50, 9, device="cuda", generator=g, requires_grad=True)
    target = torch.randint(0, 50, (4, 9), device="cuda", generator=g)
    for t in (target, target.int()):
        x.grad = None
        got = _nn().cross_entropy(x, t, reduction="none", ignore_index=3)
        got.sum().backward()
        grad = x.grad.clone()
        x.grad = None
        want = F.cross_entropy(x, target, reduction="none", ignore_index=3)
        want.sum().backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(grad, x.grad)
    weight = torch.rand(50, device="cuda")
    torch.testing.assert_close(_nn().cross_entropy(x, target, weight), F.cross_entropy(x, target, weight))


@pytest.mark.parametrize("name", ["swiglu", "geglu"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_glu_matches_torch(name, dtype):
    act = F.silu if name == "swiglu" else (lambda v: F.gelu(v, approximate="tanh"))
    g = torch.Generator(device="cuda").manual_seed(1)
    z = (torch.randn(257, 2 * 1000, device="cuda", generator=g) * 2).to(dtype).requires_grad_()
    ref = z.detach().float().requires_grad_()
    got = getattr(_nn(), name)(z[:, :1000], z[:, 1000:])  # the halves of one up-projection
    want = act(ref[:, :1000]) * ref[:, 1000:]
    upstream = torch.randn(want.shape, device="cuda", generator=g)
    got.backward(upstream.to(dtype))
    want.backward(upstream)
    torch.testing.assert_close(got.float(), want.detach(), **TOL[dtype])
    torch.testing.assert_close(z.grad.float(), ref.grad, **TOL[dtype])


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_swiglu_linear_matches_torch_and_keeps_less(dtype, bias):
    """linear(swiglu(gate, up), weight, bias) with the SwiGLU's output made again in the backward:
    the same values and gradients as torch's composition, and the product is not among the tensors
    autograd keeps (gate, up and weight are)."""
    g = torch.Generator(device="cuda").manual_seed(4)
    make = lambda *s: (torch.randn(*s, device="cuda", generator=g) * 0.5).to(dtype).requires_grad_()  # noqa: E731
    gate, up, weight = make(3, 41, 96), make(3, 41, 96), make(40, 96)
    b = make(40) if bias else None
    refs = [t.detach().float().requires_grad_() if t is not None else None for t in (gate, up, weight, b)]
    kept = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: kept.append(t.numel()) or t, lambda t: t):
        got = _nn().functional.swiglu_linear(gate, up, weight, b)
    assert sorted(kept) == sorted([gate.numel(), up.numel(), weight.numel()])
    want = F.linear(F.silu(refs[0]) * refs[1], refs[2], refs[3])
    upstream = torch.randn(want.shape, device="cuda", generator=g)
    got.backward(upstream.to(dtype))
    want.backward(upstream)
    tol = {k: v * 4 for k, v in TOL[dtype].items()}  # sums over 41 x 3 rows and 96 columns
    torch.testing.assert_close(got.float(), want.detach(), **tol)
    for t, ref in zip((gate, up, weight, b), refs):
        if t is not None:
            torch.testing.assert_close(t.grad.float(), ref.grad, **tol)


def test_gradcheck_float64():
    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(6, 11, device="cuda", dtype=torch.float64, generator=g, requires_grad=True)
    target = torch.tensor([0, 3, -100, 10, 5, 5], device="cuda")
    for reduction in ("mean", "sum", "none"):
        assert torch.autograd.gradcheck(
            lambda v: _nn().cross_entropy(v, target, reduction=reduction, label_smoothing=0.2), (x,))
    gate, up = (torch.randn(5, 7, device="cuda", dtype=torch.float64, requires_grad=True) for _ in range(2))
    assert torch.autograd.gradcheck(_nn().swiglu, (gate, up))
    assert torch.autograd.gradcheck(_nn().geglu, (gate, up))
    weight, bias = (torch.randn(*s, device="cuda", dtype=torch.float64, requires_grad=True) for s in ((3, 7), (3,)))
    assert torch.autograd.gradcheck(_nn().functional.swiglu_linear, (gate, up, weight, bias))


def opcheck_cases():
    """name -> (operator, arguments), made on demand (the tensors need a GPU)."""
    ops = torch.ops.lab
    x = torch.randn(6, 40, device="cuda", requires_grad=True)
    target = torch.tensor([1, 2, -100, 39, 0, 7], device="cuda")
    grad = torch.randn(6, 40, device="cuda")
    return {
        "cross_entropy mean": (ops.cross_entropy, (x, target, -100, 0.0, "mean", True, False)),
        "cross_entropy none": (ops.cross_entropy, (x, target, -100, 0.1, "none", True, False)),
        # every target in range: with ignore_index 2, the -100 would be a bad target (a NaN loss)
        "cross_entropy no grad": (ops.cross_entropy, (x.detach(), target.clamp(min=0).int(), 2, 0.0, "sum", False,
                                                      False)),
        "swiglu": (ops.swiglu, (x, torch.randn_like(x, requires_grad=True))),
        "geglu": (ops.geglu, (x, torch.randn_like(x, requires_grad=True))),
        "cross_entropy_backward": (ops.cross_entropy_backward, (torch.rand(6, device="cuda"), grad)),
        "cross_entropy_backward_ number": (ops.cross_entropy_backward_, (torch.tensor(2.0, device="cuda"), grad)),
        "cross_entropy_backward_ rows": (ops.cross_entropy_backward_, (torch.rand(6, device="cuda"), grad)),
    }


OPCHECK_CASES = ["cross_entropy mean", "cross_entropy none", "cross_entropy no grad", "swiglu", "geglu",
                 "cross_entropy_backward", "cross_entropy_backward_ number", "cross_entropy_backward_ rows"]


@pytest.mark.parametrize("case", OPCHECK_CASES)
def test_opcheck(case):
    _nn()
    op, args = opcheck_cases()[case]
    torch.library.opcheck(op, args)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_inplace_backward(reduction):
    """inplace_backward scales the saved gradient in place: right once (upstream 1 and not 1), and a
    second backward through the same loss is autograd's in-place error, never a wrong gradient."""
    x = torch.randn(5, 30, device="cuda", requires_grad=True)
    target = torch.randint(0, 30, (5,), device="cuda")
    for upstream in (1.0, 3.0):
        x.grad = None
        loss = _nn().cross_entropy(x, target, reduction=reduction, inplace_backward=True)
        (loss * upstream).sum().backward(retain_graph=True)
        want = torch.autograd.grad((F.cross_entropy(x, target, reduction=reduction) * upstream).sum(), (x,))[0]
        torch.testing.assert_close(x.grad, want)
        with pytest.raises(RuntimeError, match=r"modified by an inplace operation"):
            loss.sum().backward()


def test_compile_and_cuda_graph():
    nn = _nn()

    def step(z, target):
        h = nn.swiglu(z[:, :64], z[:, 64:])
        return nn.cross_entropy(h, target, label_smoothing=0.05) + nn.geglu(h, h).mean()

    z = torch.randn(32, 128, device="cuda", requires_grad=True)
    target = torch.randint(0, 64, (32,), device="cuda")
    want = step(z, target)
    want.backward()
    want_grad, z.grad = z.grad.clone(), None
    got = torch.compile(step, fullgraph=True)(z, target)
    got.backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(z.grad, want_grad)

    logits = torch.randn(64, 500, device="cuda")
    capture_and_replay(torch, lambda: nn.cross_entropy(logits, target.repeat(2)),
                       lambda: logits.copy_(torch.randn_like(logits)),
                       lambda loss: torch.testing.assert_close(loss, F.cross_entropy(logits, target.repeat(2))))


# ---- a small pre-norm transformer, trained with lab.nn against plain torch ----

class Functions:
    """The four functions the model uses, from torch or from lab.nn."""

    def __init__(self, use_lab, inplace_backward=False):
        nn = _nn() if use_lab else None
        self.rms_norm = nn.rms_norm if use_lab else F.rms_norm
        self.swiglu = nn.swiglu if use_lab else (lambda g, u: F.silu(g) * u)
        self.cross_entropy = (partial(nn.cross_entropy, inplace_backward=inplace_backward) if use_lab
                              else F.cross_entropy)


class Block(torch.nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.Parameter(torch.ones(width)), torch.nn.Parameter(torch.ones(width))
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width, bias=False), torch.nn.Linear(width, width, bias=False)
        self.up = torch.nn.Linear(width, 2 * 4 * width, bias=False)  # gate and up in one projection
        self.down = torch.nn.Linear(4 * width, width, bias=False)

    def forward(self, h, fns):
        b, t, w = h.shape
        q, k, v = self.qkv(fns.rms_norm(h, (w,), self.norm1, 1e-6)).split(w, -1)
        q, k, v = (u.view(b, t, self.heads, -1).transpose(1, 2) for u in (q, k, v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.proj(attention.transpose(1, 2).reshape(b, t, w))
        gate, up = self.up(fns.rms_norm(h, (w,), self.norm2, 1e-6)).chunk(2, -1)
        return h + self.down(fns.swiglu(gate, up))


class TinyTransformer(torch.nn.Module):
    def __init__(self, fns, vocab=512, width=128, heads=4, layers=2):
        super().__init__()
        self.fns = fns
        self.embed = torch.nn.Embedding(vocab, width)
        self.blocks = torch.nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.norm = torch.nn.Parameter(torch.ones(width))
        self.head = torch.nn.Linear(width, vocab, bias=False)

    def forward(self, tokens, targets):
        h = self.embed(tokens)
        for block in self.blocks:
            h = block(h, self.fns)
        logits = self.head(self.fns.rms_norm(h, (h.shape[-1],), self.norm, 1e-6))
        return self.fns.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)


def batches(steps, vocab=512, seed=1):
    """Sequences where each token is a fixed function of the one before: learnable with attention."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    for _ in range(steps):
        tokens = torch.randint(0, vocab, (8, 64), device="cuda", generator=g)
        tokens[:, 1::2] = (tokens[:, 0::2] * 5 + 1) % vocab
        targets = tokens.roll(-1, 1)
        targets[:, -1] = -100
        yield tokens, targets


def train_transformer(use_lab, dtype, compiled, steps=50, inplace_backward=False):
    torch.manual_seed(0)
    model = TinyTransformer(Functions(use_lab, inplace_backward)).to("cuda", dtype)
    forward = torch.compile(model, fullgraph=True) if compiled else model
    return losses_of_training(forward, model.parameters(), batches(steps), lr=2e-3)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-4), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"])
def test_transformer_training_tracks_torch(dtype, tolerance, compiled):
    want = train_transformer(False, dtype, compiled)
    got = train_transformer(True, dtype, compiled, inplace_backward=dtype == torch.bfloat16)  # both backwards
    assert_tracks(got, want, tolerance)


DDP_SCRIPT = r"""
import os, sys, torch, torch.distributed as dist
sys.path.insert(0, os.environ["TESTS"])
from test_nn_losses_gpu import TinyTransformer, Functions, batches
from training import assert_tracks, losses_of_training
rank = int(os.environ["RANK"])
torch.cuda.set_device(rank)
dist.init_process_group("nccl")
losses = {}
for use_lab in (False, True):
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(TinyTransformer(Functions(use_lab)).cuda(), device_ids=[rank])
    losses[use_lab] = losses_of_training(model, model.parameters(), batches(30, seed=1 + rank), lr=2e-3)
assert_tracks(losses[True], losses[False], 1e-4, what=f"rank {rank}: losses")
dist.destroy_process_group()
print(f"rank {rank} ok")
"""


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs (nvidia-h200-x2)")
def test_transformer_under_ddp_on_two_gpus(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    env = dict(os.environ, TESTS=os.path.dirname(__file__), MASTER_ADDR="127.0.0.1", MASTER_PORT="29531",
               WORLD_SIZE="2", NCCL_NVLS_ENABLE="0")
    workers = [subprocess.Popen([sys.executable, str(script)], env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outputs = [w.communicate(timeout=300)[0] for w in workers]
    assert all(w.returncode == 0 for w in workers), "\n".join(outputs)
