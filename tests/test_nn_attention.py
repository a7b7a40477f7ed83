"""lab.nn's attention operators on the CPU, with stand-in kernels: lab.attention and
lab.attention_backward replaced by torch's arithmetic (tests/test_attention_gpu.py tests the real
ones), so what is checked here is the torch face itself - the operators' options in the right
places, what the forward saves for the backward, the gradient of each input (grouped heads summed,
a packed batch's sequences apart), the fake implementations under torch.compile(fullgraph=True),
and lse kept out of autograd."""
import math

import pytest

torch = pytest.importorskip("torch")
import lab.nn  # noqa: E402
from lab.nn import _attention_ops  # noqa: E402


def dense(q, k, v, causal, window, softcap, scale):
    """(out, lse) of one fixed batch (B, H, Sq, D) by launch.h's rule, with autograd."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(-1, -2) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    sq, sk = q.shape[2], k.shape[2]
    i, j = torch.arange(sq)[:, None] + (sk - sq), torch.arange(sk)[None, :]
    left, right = (-1, -1) if window is None else window
    right = 0 if causal else right
    seen = torch.ones(sq, sk, dtype=torch.bool)
    if left is not None and left >= 0:
        seen &= j >= i - left
    if right is not None and right >= 0:
        seen &= j <= i + right
    s = s.masked_fill(~seen, float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def by_sequence(q, k, v, cu_q, cu_k, options):
    """A packed batch's (out, lse), each sequence alone."""
    outs, lses = [], []
    for i in range(cu_q.numel() - 1):
        a, b, c, d = cu_q[i].item(), cu_q[i + 1].item(), cu_k[i].item(), cu_k[i + 1].item()
        out, lse = dense(*(x.transpose(0, 1)[None] for x in (q[a:b], k[c:d], v[c:d])), **options)
        outs.append(out[0].transpose(0, 1))
        lses.append(lse[0])
    return torch.cat(outs), torch.cat(lses, 1)


def reference(q, k, v, causal=False, window=None, softcap=0.0, scale=None, cu_seqlens_q=None, cu_seqlens_k=None,
              max_seqlen_q=None, max_seqlen_k=None, stream=None):
    options = dict(causal=causal, window=window, softcap=softcap, scale=scale or 1 / math.sqrt(q.shape[-1]))
    if cu_seqlens_q is not None:
        return by_sequence(q, k, v, cu_seqlens_q, cu_seqlens_k, options)
    return dense(q, k, v, **options)


class StandInKernels:
    calls = []

    @staticmethod
    def attention(q, k, v, out, lse=None, **options):
        StandInKernels.calls.append(("attention", options))
        got, got_lse = reference(q, k, v, **options)
        out.copy_(got)
        if lse is not None:
            lse.copy_(got_lse)
        return out, lse

    @staticmethod
    def attention_backward(grad_out, q, k, v, out, lse, grad_q, grad_k, grad_v, **options):
        StandInKernels.calls.append(("attention_backward", options))
        # an operator's implementation runs below autograd: the reference's own vjp, by torch.func
        _, vjp = torch.func.vjp(lambda q, k, v: reference(q, k, v, **options)[0], q, k, v)
        grads = vjp(grad_out)
        for target, grad in zip((grad_q, grad_k, grad_v), grads):
            target.copy_(grad)
        return grad_q, grad_k, grad_v


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setattr(_attention_ops.lab, "attention", StandInKernels.attention)
    monkeypatch.setattr(_attention_ops.lab, "attention_backward", StandInKernels.attention_backward)
    StandInKernels.calls = []
    return StandInKernels


def leaves(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, dtype=torch.float64, requires_grad=True) for s in shapes]


@pytest.mark.parametrize("options", [{}, {"causal": True}, {"window": (3, 1)}, {"softcap": 2.0, "scale": 0.5}],
                         ids=["full", "causal", "window", "softcap"])
def test_the_operators_take_their_options_and_every_gradient(stand_in, options):
    q, k, v = leaves((2, 4, 9, 8), (2, 2, 11, 8), (2, 2, 11, 8))
    got = lab.nn.functional.attention(q, k, v, **options)
    want, _ = reference(q, k, v, **options)
    torch.testing.assert_close(got, want)
    weights = torch.randn_like(got)
    grads = torch.autograd.grad((got * weights).sum(), (q, k, v))
    wanted = torch.autograd.grad((want * weights).sum(), (q, k, v))
    for a, b in zip(grads, wanted):
        torch.testing.assert_close(a, b)
    forward, backward = [o for name, o in stand_in.calls if name == "attention"], \
        [o for name, o in stand_in.calls if name == "attention_backward"]
    assert len(forward) == 1 and len(backward) == 1 and forward[0] == backward[0]
    assert forward[0]["causal"] == bool(options.get("causal")) and forward[0]["softcap"] == options.get("softcap", 0.0)


def test_a_packed_batch_keeps_its_sequences_apart(stand_in):
    q, k, v = leaves((12, 4, 8), (12, 2, 8), (12, 2, 8))
    cu = torch.tensor([0, 5, 5, 12], dtype=torch.int32)
    got = lab.nn.functional.attention(q, k, v, causal=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=7,
                                      max_seqlen_k=7)
    want, _ = by_sequence(q, k, v, cu, cu, dict(causal=True, window=None, softcap=0.0, scale=1 / math.sqrt(8)))
    torch.testing.assert_close(got, want)
    grads = torch.autograd.grad(got.square().sum(), (q, k, v))
    wanted = torch.autograd.grad(want.square().sum(), (q, k, v))
    for a, b in zip(grads, wanted):
        torch.testing.assert_close(a, b)
    assert stand_in.calls[-1][1]["cu_seqlens_q"] is not None and stand_in.calls[-1][1]["max_seqlen_k"] == 7


def test_compiled_fullgraph_with_fake_implementations(stand_in):
    q, k, v = leaves((1, 4, 6, 8), (1, 1, 6, 8), (1, 1, 6, 8))

    def loss(q, k, v):
        return lab.nn.functional.attention(q, k, v, causal=True).square().sum()
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    got = torch.autograd.grad(compiled(q, k, v), (q, k, v))
    want = torch.autograd.grad(loss(q, k, v), (q, k, v))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


def test_lse_is_not_differentiable(stand_in):
    q, k, v = leaves((1, 2, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8))
    out, lse = torch.ops.lab.attention.default(q, k, v, False, -1, -1, 0.0, 0.125, None, None, 0, 0)
    assert out.requires_grad and not lse.requires_grad
