"""lab.nn's cross-entropies in eager mode without a GPU: the autograd.Functions of lab/nn/_eager.py
over stand-in kernels (torch's own formulas on CPU tensors, with the calls lab's kernels take) - the
values, every gradient each input is handed, the forward writing no gradient where none is wanted,
and a second backward through an in-place-scaled gradient refused by autograd, never scaled twice."""
import pytest

torch = pytest.importorskip("torch")
import lab  # noqa: E402
import lab.nn  # noqa: E402
from lab.nn import _eager  # noqa: E402

F = torch.nn.functional


class TorchLosses:
    """lab.cross_entropy, cross_entropy_backward, mul and linear_cross_entropy in torch, with lab's
    arguments; `calls` records which gradient buffers each forward was given."""
    calls = []

    @classmethod
    def cross_entropy(cls, logits, target, loss, *, ignore_index, label_smoothing, reduction, grad=None):
        cls.calls.append(("cross_entropy", grad is not None))
        with torch.enable_grad():  # called inside Function.forward, where autograd is off
            x = logits.detach().requires_grad_()
            value = F.cross_entropy(x, target, ignore_index=ignore_index, label_smoothing=label_smoothing,
                                    reduction=reduction)
            if grad is not None:  # d (sum of the losses) / d logits, as lab's kernel writes it
                grad.copy_(torch.autograd.grad(value.sum(), x)[0])
        loss.copy_(value.detach())

    @staticmethod
    def cross_entropy_backward(grad_loss, grad):
        # through .data, whose version counter is its own: lab writes through the pointer, and autograd
        # sees nothing unless the caller bumps the version
        grad.data.mul_(grad_loss.reshape(-1, 1) if grad_loss.dim() else grad_loss)

    @staticmethod
    def mul(a, b, out):
        out.copy_(a * b)

    @classmethod
    def linear_cross_entropy(cls, hidden, weight, target, loss, *, bias=None, grad_hidden=None, grad_weight=None,
                             grad_bias=None, grad_output=None, ignore_index, label_smoothing, reduction, softcap,
                             z_loss, scratch):
        cls.calls.append(("linear_cross_entropy", grad_hidden is not None, grad_weight is not None,
                          grad_bias is not None))
        with torch.enable_grad():  # called inside Function.forward and backward, where autograd is off
            leaves = [t.detach().requires_grad_() for t in (hidden, weight)] + \
                ([bias.detach().requires_grad_()] if bias is not None else [])
            value = lab.nn.functional._torch_linear_cross_entropy(
                leaves[0], leaves[1], target, leaves[2] if bias is not None else None, ignore_index, label_smoothing,
                reduction, softcap, z_loss)
            wanted = [(g, leaf) for g, leaf in zip((grad_hidden, grad_weight, grad_bias), leaves) if g is not None]
            if wanted:
                upstream = torch.ones_like(value) if grad_output is None else grad_output
                for (g, _), got in zip(wanted, torch.autograd.grad(value, [leaf for _, leaf in wanted], upstream)):
                    g.copy_(got)
        loss.copy_(value.detach())


@pytest.fixture
def stand_ins(monkeypatch):
    for name in ("cross_entropy", "cross_entropy_backward", "mul", "linear_cross_entropy"):
        monkeypatch.setattr(lab, name, getattr(TorchLosses, name))
    monkeypatch.setattr(lab.nn.functional, "_on_lab", lambda x: True)
    TorchLosses.calls.clear()
    return TorchLosses.calls


def inputs(rows=6, classes=11, width=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, classes, dtype=torch.float64, generator=g, requires_grad=True)
    target = torch.randint(0, classes, (rows,), generator=g)
    target[1] = -100  # an ignored row
    hidden = torch.randn(rows, width, dtype=torch.float64, generator=g, requires_grad=True)
    weight = torch.randn(classes, width, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(classes, dtype=torch.float64, generator=g, requires_grad=True)
    return logits, target, hidden, weight, bias


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("inplace", [False, True])
def test_cross_entropy_function(stand_ins, reduction, inplace):
    logits, target, *_ = inputs()
    loss = lab.nn.cross_entropy(logits, target, reduction=reduction, label_smoothing=0.1, inplace_backward=inplace)
    want = F.cross_entropy(logits, target, reduction=reduction, label_smoothing=0.1)
    torch.testing.assert_close(loss, want)
    upstream = torch.rand(want.shape, dtype=want.dtype, generator=torch.Generator().manual_seed(3)) + 0.5
    got = torch.autograd.grad(loss, logits, upstream, retain_graph=True)[0]
    torch.testing.assert_close(got, torch.autograd.grad(want, logits, upstream)[0])
    assert stand_ins == [("cross_entropy", True)]
    if inplace:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            torch.autograd.grad(loss, logits, upstream)
    else:  # the saved gradient is untouched: a second backward is the same
        torch.testing.assert_close(torch.autograd.grad(loss, logits, upstream)[0], got)
    with torch.no_grad():
        lab.nn.cross_entropy(logits, target, reduction=reduction)
    assert stand_ins[-1] == ("cross_entropy", False)  # no gradient written where none is asked for


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("wanted", [(True, True, True), (True, False, False), (False, True, True)])
def test_linear_cross_entropy_function(stand_ins, reduction, wanted):
    _, target, hidden, weight, bias = inputs()
    for leaf, want_grad in zip((hidden, weight, bias), wanted):
        leaf.requires_grad_(want_grad)
    loss = lab.nn.linear_cross_entropy(hidden, weight, target, bias, reduction=reduction, label_smoothing=0.1,
                                       z_loss=1e-3)
    want = lab.nn.functional._torch_linear_cross_entropy(hidden, weight, target, bias, -100, 0.1, reduction, None,
                                                         1e-3)
    torch.testing.assert_close(loss, want)
    leaves = [leaf for leaf in (hidden, weight, bias) if leaf.requires_grad]
    upstream = torch.rand(want.shape, generator=torch.Generator().manual_seed(3)) + 0.5
    # the loss is float32 (its logits are made in float32), so the gradients agree to float32's rounding:
    # the Function scales the saved gradients by the upstream one, the reference differentiates with it
    for got, ref in zip(torch.autograd.grad(loss, leaves, upstream, retain_graph=True),
                        torch.autograd.grad(want, leaves, upstream)):
        torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    # reduced: the forward computed exactly the wanted gradients; 'none': the backward did
    assert stand_ins[0] == ("linear_cross_entropy",) + (wanted if reduction == "mean" else (False,) * 3)
    if reduction == "none":
        assert stand_ins[1] == ("linear_cross_entropy",) + wanted
        torch.autograd.grad(loss, leaves, upstream)  # recomputed from the saved inputs: allowed again
    else:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            torch.autograd.grad(loss, leaves, upstream)


def test_eager_mode_takes_the_functions_not_the_operators(stand_ins, monkeypatch):
    logits, target, hidden, weight, _ = inputs()
    applied = []
    for function in (_eager.CrossEntropy, _eager.LinearCrossEntropy):
        real = function.apply
        monkeypatch.setattr(function, "apply", lambda *a, real=real, name=function.__name__: applied.append(name)
                            or real(*a))
    lab.nn.cross_entropy(logits, target)
    lab.nn.linear_cross_entropy(hidden, weight, target)
    assert applied == ["CrossEntropy", "LinearCrossEntropy"]
