"""The eager path of lab.nn's softmax, norms, GLUs, rotary embedding and cross-entropies:
torch.autograd.Functions that call lab directly.

The operators of _ops.py are what torch.compile traces and what torch.ops.lab users call; in eager
mode their custom_op layers (Python wrappers around dispatch, and around autograd) cost more host
time than the kernels take on a 16384 x 4096 bfloat16 input (bench_rowwise.py: lab.nn's rms_norm
forward + backward at 0.53x torch eager while the two kernels alone ran at 0.98x). These Functions
do the same work - the same kernels, the same saved tensors and statistics - with one autograd node
and no dispatch. lab.nn.functional picks them when torch is not compiling. (The rotary embedding's
forward + backward through the operators took 0.53 ms on the GPU machine, 2026-12-02, against 0.15 ms
for its two kernels alone: bench_rope.py; on this repository's CPU-only CI machine the operators' host
path measured 188 us a step and a Function's 53 us, with the kernels stubbed out. The cross-entropy
operator's forward took 161 us of host time on 8 x 32000 logits against torch's 27, the fused linear
one's 178 against 48: bench/nn_host_cost.py, 2026-12-03.)"""
import functools
from typing import Optional

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

import lab

from . import _float8_ops, _linear_loss_ops
from ._loss_ops import _loss_like
from ._ops import _plain, _stats_like


def _first_order(backward):
    """once_differentiable's guarantee - differentiating this backward again is an error, never a
    silent zero - paid only where a graph of the gradient is being built (create_graph=True, the one
    case autograd runs a backward with grad mode on). once_differentiable's own wrapper runs on every
    backward and cost 2-8 us of host time a call (forward + backward with stand-in kernels on this
    repository's CI machine: softmax 29.1 -> 27.2 us, rms_norm 39.2 -> 35.8, layer_norm 47.0 -> 42.0)."""
    guarded = once_differentiable(backward)

    @functools.wraps(backward)
    def first_order(ctx, *grads):
        return guarded(ctx, *grads) if torch.is_grad_enabled() else backward(ctx, *grads)
    return first_order


class _Unrecorded:
    """The ctx a Function's forward gets when it runs without autograd (_Function.run): no input
    wants a gradient, and what the forward would save is dropped - the norms then make no statistics
    for a backward (_statistics)."""
    needs_input_grad = (False,) * 8

    def save_for_backward(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        pass


def _statistics(ctx, x: Tensor, count: int):
    """`count` per-row statistics for the backward (_stats_like), or Nones where no backward will
    read them (torch.no_grad()): each one an allocation and an array for lab to read fewer."""
    if isinstance(ctx, _Unrecorded):
        return (None,) * count
    first = _stats_like(x)
    return (first,) if count == 1 else (first, _stats_like(x))


class _Function(torch.autograd.Function):
    """An autograd.Function that autograd records only where it has to: run() is apply() where grad
    mode is on and a tensor argument requires grad, and the forward alone otherwise (inference,
    torch.no_grad()) - apply() costs ~5 us of host time a call even when it records nothing, more than
    the forward's own Python (CPU, no-op kernels: softmax 5.1 us through apply, 0.8 without)."""

    @classmethod
    def run(cls, *args):
        if torch.is_grad_enabled():
            for arg in args:  # a loop, not any(generator): half the host time (0.39 against 0.73 us)
                if isinstance(arg, Tensor) and arg.requires_grad:
                    return cls.apply(*args)
        return cls.forward(_Unrecorded(), *args)


class Softmax(_Function):
    """softmax or log_softmax (`log`) along `dim`; the backward reads the saved output."""

    @staticmethod
    def forward(ctx, x: Tensor, dim: int, log: bool) -> Tensor:
        out = torch.empty_like(x)
        (lab.log_softmax if log else lab.softmax)(_plain(x), out, axis=dim)
        ctx.dim, ctx.log = dim, log
        ctx.save_for_backward(out)
        return out

    @staticmethod
    @_first_order
    def backward(ctx, grad: Tensor):
        (y,) = ctx.saved_tensors
        grad_x = torch.empty_like(y)
        (lab.log_softmax_backward if ctx.log else lab.softmax_backward)(grad, y, grad_x, axis=ctx.dim)
        return grad_x, None, None


class LayerNorm(_Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float) -> Tensor:
        out, (mean, rstd) = torch.empty_like(x), _statistics(ctx, x, 2)
        x, weight = _plain(x), _plain(weight)
        lab.layer_norm(x, weight, _plain(bias), out, eps=eps, mean=mean, rstd=rstd)
        ctx.weight_grad = weight is not None and ctx.needs_input_grad[1]
        ctx.bias_grad = bias is not None and ctx.needs_input_grad[2]
        ctx.save_for_backward(x, weight, mean, rstd)
        return out

    @staticmethod
    @_first_order
    def backward(ctx, grad: Tensor):
        x, weight, mean, rstd = ctx.saved_tensors
        grad_x = torch.empty_like(x)
        grad_weight = torch.empty_like(weight) if ctx.weight_grad else None  # 1-D, x's dtype (_flat)
        grad_bias = x.new_empty(x.shape[-1]) if ctx.bias_grad else None
        lab.layer_norm_backward(grad, x, weight, mean, rstd, grad_x, grad_weight, grad_bias)
        return grad_x, grad_weight, grad_bias, None


class RmsNorm(_Function):
    """rms_norm(x), or with `residual` rms_norm(h) and h = x + residual (two outputs)."""

    @staticmethod
    def forward(ctx, x: Tensor, residual: Optional[Tensor], weight: Optional[Tensor], eps: Optional[float]):
        out, (rstd,) = torch.empty_like(x), _statistics(ctx, x, 1)
        weight = _plain(weight)
        if residual is None:
            h = _plain(x)
            lab.rms_norm(h, weight, out, eps=eps, rstd=rstd)
        else:
            h = torch.empty_like(x)
            lab.rms_norm(_plain(x), weight, out, eps=eps, rstd=rstd, residual=_plain(residual), residual_out=h)
        ctx.set_materialize_grads(False)
        ctx.weight_grad = weight is not None and ctx.needs_input_grad[2]
        ctx.with_residual = residual is not None
        ctx.save_for_backward(h, weight, rstd)
        return (out, h) if residual is not None else out

    @staticmethod
    @_first_order
    def backward(ctx, grad: Optional[Tensor], grad_h: Optional[Tensor] = None):
        h, weight, rstd = ctx.saved_tensors
        if grad is None:  # only h was used downstream: its gradient passes straight to x and residual
            return grad_h, grad_h, None, None
        grad_x = torch.empty_like(h)
        grad_weight = torch.empty_like(weight) if ctx.weight_grad else None
        lab.rms_norm_backward(grad, h, weight, rstd, grad_x, grad_weight)
        if grad_h is not None:  # h also fed the next residual: its own gradient adds
            grad_x += grad_h
        return grad_x, grad_x if ctx.with_residual else None, grad_weight, None


def _glu_product(gate: Tensor, up: Tensor, forward) -> Tensor:
    """act(gate) * up in a new tensor, by `forward` (lab.swiglu or lab.geglu)."""
    out = torch.empty_like(gate)
    forward(gate, up, out)
    return out


class Glu(_Function):
    """act(gate) * up for a GLU (`forward`: lab.swiglu or lab.geglu; `backward`: its backward)."""

    @staticmethod
    def forward(ctx, gate: Tensor, up: Tensor, forward, backward) -> Tensor:
        gate, up = _plain(gate), _plain(up)
        out = _glu_product(gate, up, forward)
        ctx.backward = backward
        ctx.save_for_backward(gate, up)
        return out

    @staticmethod
    @_first_order
    def backward(ctx, grad: Tensor):
        gate, up = ctx.saved_tensors
        grad_gate, grad_up = torch.empty_like(gate), torch.empty_like(up)
        ctx.backward(grad, gate, up, grad_gate, grad_up)
        return grad_gate, grad_up, None, None


class GluLinear(_Function):
    """linear(act(gate) * up, weight, bias), keeping gate and up but not their product: the GLU's
    backward kernel makes the product again, in the same pass as the two gradients (it reads
    nothing more), for weight's gradient. A Llama MLP's down projection keeps its input (tokens x
    intermediate) for its backward; this keeps nothing the GLU does not keep already."""

    @staticmethod
    def forward(ctx, gate: Tensor, up: Tensor, weight: Tensor, bias: Optional[Tensor], forward, backward) -> Tensor:
        gate, up = _plain(gate), _plain(up)
        product = _glu_product(gate, up, forward)
        ctx.glu = (forward, backward)
        ctx.bias_grad = bias is not None and ctx.needs_input_grad[3]
        ctx.save_for_backward(gate, up, weight)
        return torch.nn.functional.linear(product, weight, bias)

    @staticmethod
    @_first_order
    def backward(ctx, grad: Tensor):
        gate, up, weight = ctx.saved_tensors
        forward, backward = ctx.glu
        rows = grad.reshape(-1, grad.shape[-1])
        grad_bias = rows.sum(0) if ctx.bias_grad else None
        weight_grad_wanted = ctx.needs_input_grad[2]
        if not (ctx.needs_input_grad[0] or ctx.needs_input_grad[1]):
            grad_weight = rows.t().mm(_glu_product(gate, up, forward).reshape(-1, gate.shape[-1])) \
                if weight_grad_wanted else None
            return None, None, grad_weight, grad_bias, None, None
        grad_product = torch.matmul(grad, weight)
        # One pass makes both gradients and, for weight's gradient, the product again: every read
        # before any write, so grad_gate goes over grad_product.
        grad_up = torch.empty_like(up)
        product = torch.empty_like(gate) if weight_grad_wanted else None
        backward(grad_product, gate, up, grad_product, grad_up, product=product)
        grad_weight = rows.t().mm(product.reshape(-1, product.shape[-1])) if weight_grad_wanted else None
        return grad_product, grad_up, grad_weight, grad_bias, None, None


class Float8Linear(_Function):
    """linear(x, weight, bias) on float8 tensor cores (lab/nn/_float8_ops.py's forward_products and
    backward_products, the operators' own bodies) as one autograd node. Given x's shared cast (x8,
    x8_t, x_scale), the backward keeps that x8_t itself - a Function's output may be anything."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Optional[Tensor], keep_x: bool, keep_weight: bool,
                x8: Optional[Tensor], x8_t: Optional[Tensor], x_scale: Optional[Tensor]) -> Tensor:
        ctx.set_materialize_grads(False)
        out, kept_x8_t, kept_scale, w8_t, w_scale = _float8_ops.forward_products(x, weight, bias, keep_x,
                                                                                 keep_weight, x8, x_scale)
        if x8 is not None:
            kept_x8_t, kept_scale = x8_t, x_scale
        ctx.wanted = (keep_weight and ctx.needs_input_grad[0], keep_x and ctx.needs_input_grad[1],
                      bias is not None and ctx.needs_input_grad[2])
        ctx.save_for_backward(kept_x8_t, kept_scale, w8_t, w_scale)
        return out

    @staticmethod
    @_first_order
    def backward(ctx, grad: Optional[Tensor]):
        if grad is None:
            return (None,) * 8
        grads = _float8_ops.backward_products(grad, *ctx.saved_tensors, *ctx.wanted)
        return tuple(g if wanted else None for g, wanted in zip(grads, ctx.wanted)) + (None,) * 5


class Rope(_Function):
    """q and k rotated in one launch of lab.rope; the backward rotates the gradients back (lab.rope_backward).
    The outputs take the inputs' strides, as the operator's do (_rope_ops.py)."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, interleaved: bool):
        q, k = _plain(q), _plain(k)
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        lab.rope(q, k, cos, sin, q_out, k_out, interleaved=interleaved)
        ctx.interleaved = interleaved
        ctx.save_for_backward(cos, sin)
        return q_out, k_out

    @staticmethod
    @_first_order
    def backward(ctx, grad_q: Tensor, grad_k: Tensor):
        cos, sin = ctx.saved_tensors
        q_grad, k_grad = torch.empty_like(grad_q), torch.empty_like(grad_k)
        lab.rope_backward(grad_q, grad_k, cos, sin, q_grad, k_grad, interleaved=ctx.interleaved)
        return q_grad, k_grad, None, None, None


class CrossEntropy(_Function):
    """Cross-entropy with d loss / d logits written by the forward's kernel and saved (only where
    autograd will ask for it); the backward scales it by the incoming gradient - into a new tensor,
    or with `inplace` in place (nothing at all where the incoming gradient is 1), the saved tensor's
    version bumped so that a second backward is autograd's in-place error, not a gradient scaled twice."""

    @staticmethod
    def forward(ctx, logits: Tensor, target: Tensor, ignore_index: int, label_smoothing: float, reduction: str,
                inplace: bool) -> Tensor:
        loss = _loss_like(logits, reduction)
        grad = torch.empty_like(logits) if ctx.needs_input_grad[0] else None
        lab.cross_entropy(_plain(logits), target, loss, ignore_index=ignore_index, label_smoothing=label_smoothing,
                          reduction=reduction, grad=grad)
        ctx.set_materialize_grads(False)
        ctx.inplace = inplace
        ctx.save_for_backward(grad)
        return loss

    @staticmethod
    @_first_order
    def backward(ctx, grad_loss: Optional[Tensor]):
        (grad,) = ctx.saved_tensors
        if grad_loss is None:
            return None, None, None, None, None, None
        if ctx.inplace:
            lab.cross_entropy_backward(_plain(grad_loss), grad)
            torch.autograd.graph.increment_version(grad)
        else:
            scaled = torch.empty_like(grad)
            lab.mul(grad, _plain(grad_loss).unsqueeze(-1), scaled)
            grad = scaled
        return grad, None, None, None, None, None


class LinearCrossEntropy(_Function):
    """The fused linear cross-entropy (the operator of _linear_loss_ops.py, same calls): for a reduced
    loss the forward computes the gradients the inputs need and saves them, and the backward scales
    them in place (their versions bumped: a second backward is autograd's in-place error); for 'none'
    the backward calls lab again with the incoming gradient of each row. options: (ignore_index,
    label_smoothing, reduction, softcap, z_loss, max_scratch_bytes)."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor], options: tuple) -> Tensor:
        needs = (ctx.needs_input_grad[0], ctx.needs_input_grad[1], ctx.needs_input_grad[3])
        reduced = options[2] != "none"
        loss = _linear_loss_ops._loss_like(hidden, options[2])
        grads = _linear_loss_ops.grad_buffers(hidden, weight, bias, needs if reduced else (False, False, False))
        _linear_loss_ops.run(hidden, weight, target, bias, None, grads, options, loss)
        ctx.set_materialize_grads(False)
        ctx.options, ctx.needs, ctx.reduced = options, needs, reduced
        if reduced:
            ctx.save_for_backward(*grads)
        else:
            ctx.save_for_backward(hidden, weight, target, bias)
        return loss

    @staticmethod
    @_first_order
    def backward(ctx, grad_loss: Optional[Tensor]):
        if grad_loss is None:
            return None, None, None, None, None
        if ctx.reduced:
            grads = ctx.saved_tensors
            _linear_loss_ops.scale_in_place(grad_loss, grads)
            for grad in grads:
                if grad is not None:
                    torch.autograd.graph.increment_version(grad)
        else:
            hidden, weight, target, bias = ctx.saved_tensors
            grads = _linear_loss_ops.grad_buffers(hidden, weight, bias, ctx.needs)
            _linear_loss_ops.run(hidden, weight, target, bias, grad_loss, grads, ctx.options,
                                 _linear_loss_ops._loss_like(hidden, "none"))
        return grads[0], grads[1], None, grads[2], None
