"""Cross-entropy and the GLUs as torch operators (torch.library.custom_op), as _ops.py registers the
norms: an implementation on lab's kernels, a fake implementation for tracing, and autograd.

Cross-entropy computes its gradient in the forward pass (the kernel writes d loss / d logits while
the row is in registers or in L2): the forward saves it, and the backward scales it by the incoming
gradient, where torch's backward recomputes the softmax. By default into a new tensor; with
inplace_backward, in place - nothing at all where the incoming gradient is 1, as for loss.backward()
- at the price of one backward per forward (retain_graph=True then raises autograd's in-place
error, and gradcheck, which differentiates a graph many times, cannot run). When autograd will not
ask for the gradient (no input requires grad), the forward writes none."""
from typing import Tuple

import torch
from torch import Tensor

import lab

from ._ops import _per_row, _plain


# ---- cross_entropy ----

def _loss_like(logits: Tensor, reduction: str) -> Tensor:
    """The loss: one per row for 'none', else one number; logits' dtype, as torch's."""
    return _per_row(logits, logits.dtype) if reduction == "none" else logits.new_empty(())


@torch.library.custom_op("lab::cross_entropy", mutates_args=())
def cross_entropy(logits: Tensor, target: Tensor, ignore_index: int, label_smoothing: float, reduction: str,
                  with_grad: bool, inplace_backward: bool) -> Tuple[Tensor, Tensor]:
    loss = _loss_like(logits, reduction)
    grad = torch.empty_like(logits) if with_grad else logits.new_empty(0)
    lab.cross_entropy(_plain(logits), target, loss, ignore_index=ignore_index, label_smoothing=label_smoothing,
                      reduction=reduction, grad=grad if with_grad else None)
    return loss, grad


@cross_entropy.register_fake
def _(logits, target, ignore_index, label_smoothing, reduction, with_grad, inplace_backward):
    return _loss_like(logits, reduction), torch.empty_like(logits) if with_grad else logits.new_empty(0)


@torch.library.custom_op("lab::cross_entropy_backward", mutates_args=())
def cross_entropy_backward(grad_loss: Tensor, grad: Tensor) -> Tensor:
    """The saved d loss / d logits times the incoming gradient (a number, or one per row), new."""
    grad_logits = torch.empty_like(grad)
    lab.mul(grad, _plain(grad_loss).unsqueeze(-1), grad_logits)
    return grad_logits


@cross_entropy_backward.register_fake
def _(grad_loss, grad):
    return torch.empty_like(grad)


@torch.library.custom_op("lab::cross_entropy_backward_", mutates_args=("grad",))
def cross_entropy_backward_(grad_loss: Tensor, grad: Tensor) -> None:
    """The same in place; rows whose grad_loss is 1 are skipped on the device (no pass over memory
    for loss.backward() on a mean or a sum)."""
    lab.cross_entropy_backward(_plain(grad_loss), grad)


@cross_entropy_backward_.register_fake
def _(grad_loss, grad):
    return None


def _cross_entropy_setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)
    ctx.inplace = inputs[6]
    ctx.save_for_backward(output[1])


def _cross_entropy_grad(ctx, grad_loss, _grad_of_grad):
    (grad,) = ctx.saved_tensors
    if grad_loss is None:
        return None, None, None, None, None, None, None
    if grad.numel() == 0 and grad_loss.numel() > 0:
        raise RuntimeError("lab::cross_entropy ran with with_grad=False, so it computed no gradient to pass back; "
                           "call it with with_grad=True when its logits need one (lab.nn.cross_entropy does)")
    if ctx.inplace:  # a second backward through this loss (retain_graph) is autograd's in-place error
        torch.ops.lab.cross_entropy_backward_.default(grad_loss, grad)
    else:
        grad = torch.ops.lab.cross_entropy_backward.default(grad_loss, grad)
    return grad, None, None, None, None, None, None


cross_entropy.register_autograd(_cross_entropy_grad, setup_context=_cross_entropy_setup)


class CrossEntropyIntoLogits(torch.autograd.Function):
    """Cross-entropy whose gradient overwrites the logits' own storage in the forward pass (what
    Liger-Kernel's does): no logits-sized tensor beyond the logits at all. The logits' values are
    gone afterwards, so their version is bumped: a node that saved them (softcap's tanh, say) raises
    autograd's in-place error at its backward instead of reading the gradient. Eager only: under
    torch.compile lab.nn.cross_entropy uses the operator above."""

    @staticmethod
    def forward(ctx, logits, target, ignore_index, label_smoothing, reduction):
        loss = _loss_like(logits, reduction)
        grad = logits.detach()
        lab.cross_entropy(grad, target, loss, ignore_index=ignore_index, label_smoothing=label_smoothing,
                          reduction=reduction, grad=grad)
        torch.autograd.graph.increment_version(logits)
        ctx.save_for_backward(logits)
        ctx.set_materialize_grads(False)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        (grad,) = ctx.saved_tensors
        if grad_loss is None:
            return None, None, None, None, None
        lab.cross_entropy_backward(_plain(grad_loss), grad.detach())
        return grad, None, None, None, None


# ---- swiglu, geglu ----

def _glu_pair(name, forward, backward):
    """Registers lab::<name>(gate, up) and lab::<name>_backward(grad, gate, up) with autograd."""

    @torch.library.custom_op(f"lab::{name}", mutates_args=())
    def op(gate: Tensor, up: Tensor) -> Tensor:
        out = torch.empty_like(gate)
        forward(_plain(gate), _plain(up), out)
        return out

    @op.register_fake
    def _(gate, up):
        return torch.empty_like(gate)

    @torch.library.custom_op(f"lab::{name}_backward", mutates_args=())
    def op_backward(grad: Tensor, gate: Tensor, up: Tensor) -> Tuple[Tensor, Tensor]:
        grad_gate, grad_up = torch.empty_like(gate), torch.empty_like(up)
        backward(_plain(grad), _plain(gate), _plain(up), grad_gate, grad_up)
        return grad_gate, grad_up

    @op_backward.register_fake
    def _(grad, gate, up):
        return torch.empty_like(gate), torch.empty_like(up)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def grad_of(ctx, grad):
        gate, up = ctx.saved_tensors
        return getattr(torch.ops.lab, f"{name}_backward").default(grad, gate, up)

    op.register_autograd(grad_of, setup_context=setup_context)
    return op


swiglu = _glu_pair("swiglu", lab.swiglu, lab.swiglu_backward)
geglu = _glu_pair("geglu", lab.geglu, lab.geglu_backward)
