"""lab's row-wise kernels as torch operators (torch.library.custom_op), so torch.compile traces them
without a graph break and CUDA graphs capture them.

Each operator has three parts: the implementation (allocates outputs with torch, calls lab on the
current stream - lab reads torch's stream from the tensors), a fake implementation (shapes and dtypes
only, for tracing), and autograd (setup_context saves what the backward needs; the backward is
itself a custom op). The statistics a norm saves are float32 (float64 for float64 input).

Calls go through torch.ops.lab.<name>.default (C++ dispatch): the Python objects custom_op returns
add tens of microseconds a call (bench/sweep_rowwise.py measures host time per call).

The norms return their statistics as outputs nobody differentiates: setup_context turns off
materializing their gradients, which otherwise costs a zeros tensor per output per backward (the
torch profiler showed aten::zeros/fill_ taking most of a step's host time, 2026-11-30)."""
from typing import Optional, Tuple

import torch
from torch import Tensor

import lab


def _per_row(x: Tensor, dtype: torch.dtype) -> Tensor:
    """One value per row of x (x.shape[:-1]) in `dtype`. The sizes go in as separate ints: handed a
    torch.Size, new_empty spent 2.9 us of host time parsing it against 0.9 (8 rows, torch 2.13 on the
    CPU) - twice in every layer_norm forward."""
    rows = x.shape[:-1]
    return x.new_empty(*rows, dtype=dtype) if rows else x.new_empty((), dtype=dtype)


def _stats_like(x: Tensor) -> Tensor:
    """One statistic per row: float32 (float64 for float64 x)."""
    return _per_row(x, torch.float64 if x.dtype == torch.float64 else torch.float32)


def _plain(t: Optional[Tensor]) -> Optional[Tensor]:
    """The tensor without autograd history (a view), for handing to lab."""
    return None if t is None else t.detach()


# ---- softmax, log_softmax ----

def _softmax_pair(name, forward, backward):
    """Registers lab::<name>(x, dim) and lab::<name>_backward(grad, y, dim) with autograd."""

    @torch.library.custom_op(f"lab::{name}", mutates_args=())
    def op(x: Tensor, dim: int) -> Tensor:
        out = torch.empty_like(x)
        forward(_plain(x), out, axis=dim)
        return out

    @op.register_fake
    def _(x, dim):
        return torch.empty_like(x)

    @torch.library.custom_op(f"lab::{name}_backward", mutates_args=())
    def op_backward(grad: Tensor, y: Tensor, dim: int) -> Tensor:
        grad_x = torch.empty_like(y)
        backward(_plain(grad), _plain(y), grad_x, axis=dim)
        return grad_x

    @op_backward.register_fake
    def _(grad, y, dim):
        return torch.empty_like(y)

    def setup_context(ctx, inputs, output):
        ctx.dim = inputs[1]
        ctx.save_for_backward(output)

    def grad_of(ctx, grad):
        (y,) = ctx.saved_tensors
        return getattr(torch.ops.lab, f"{name}_backward").default(grad, y, ctx.dim), None

    op.register_autograd(grad_of, setup_context=setup_context)
    return op


softmax = _softmax_pair("softmax", lab.softmax, lab.softmax_backward)
log_softmax = _softmax_pair("log_softmax", lab.log_softmax, lab.log_softmax_backward)


# ---- layer_norm ----

@torch.library.custom_op("lab::layer_norm", mutates_args=())
def layer_norm(x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float) -> Tuple[Tensor, Tensor, Tensor]:
    out, mean, rstd = torch.empty_like(x), _stats_like(x), _stats_like(x)
    lab.layer_norm(_plain(x), _plain(weight), _plain(bias), out, eps=eps, mean=mean, rstd=rstd)
    return out, mean, rstd


@layer_norm.register_fake
def _(x, weight, bias, eps):
    return torch.empty_like(x), _stats_like(x), _stats_like(x)


@torch.library.custom_op("lab::layer_norm_backward", mutates_args=())
def layer_norm_backward(grad: Tensor, x: Tensor, weight: Optional[Tensor], mean: Tensor, rstd: Tensor,
                        weight_grad: bool, bias_grad: bool) -> Tuple[Tensor, Tensor, Tensor]:
    grad_x = torch.empty_like(x)
    n = x.shape[-1]
    grad_weight = x.new_empty((n,) if weight_grad else (0,))
    grad_bias = x.new_empty((n,) if bias_grad else (0,))
    lab.layer_norm_backward(_plain(grad), _plain(x), _plain(weight), mean, rstd, grad_x,
                            grad_weight if weight_grad else None, grad_bias if bias_grad else None)
    return grad_x, grad_weight, grad_bias


@layer_norm_backward.register_fake
def _(grad, x, weight, mean, rstd, weight_grad, bias_grad):
    n = x.shape[-1]
    return torch.empty_like(x), x.new_empty((n,) if weight_grad else (0,)), x.new_empty((n,) if bias_grad else (0,))


def _layer_norm_setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)
    x, weight, bias, _ = inputs
    _, mean, rstd = output
    ctx.weight_grad = weight is not None and ctx.needs_input_grad[1]
    ctx.bias_grad = bias is not None and ctx.needs_input_grad[2]
    ctx.save_for_backward(x, weight, mean, rstd)


def _layer_norm_grad(ctx, grad, _grad_mean, _grad_rstd):
    x, weight, mean, rstd = ctx.saved_tensors
    if grad is None:  # only the statistics were used downstream: nothing flows back
        return None, None, None, None
    grad_x, grad_weight, grad_bias = torch.ops.lab.layer_norm_backward.default(grad, x, weight, mean, rstd,
                                                                               ctx.weight_grad, ctx.bias_grad)
    return grad_x, grad_weight if ctx.weight_grad else None, grad_bias if ctx.bias_grad else None, None


layer_norm.register_autograd(_layer_norm_grad, setup_context=_layer_norm_setup)


# ---- rms_norm, and rms_norm of x + residual ----

@torch.library.custom_op("lab::rms_norm", mutates_args=())
def rms_norm(x: Tensor, weight: Optional[Tensor], eps: Optional[float]) -> Tuple[Tensor, Tensor]:
    out, rstd = torch.empty_like(x), _stats_like(x)
    lab.rms_norm(_plain(x), _plain(weight), out, eps=eps, rstd=rstd)
    return out, rstd


@rms_norm.register_fake
def _(x, weight, eps):
    return torch.empty_like(x), _stats_like(x)


@torch.library.custom_op("lab::add_rms_norm", mutates_args=())
def add_rms_norm(x: Tensor, residual: Tensor, weight: Optional[Tensor],
                 eps: Optional[float]) -> Tuple[Tensor, Tensor, Tensor]:
    out, h, rstd = torch.empty_like(x), torch.empty_like(x), _stats_like(x)
    lab.rms_norm(_plain(x), _plain(weight), out, eps=eps, rstd=rstd, residual=_plain(residual), residual_out=h)
    return out, h, rstd


@add_rms_norm.register_fake
def _(x, residual, weight, eps):
    return torch.empty_like(x), torch.empty_like(x), _stats_like(x)


@torch.library.custom_op("lab::rms_norm_backward", mutates_args=())
def rms_norm_backward(grad: Tensor, x: Tensor, weight: Optional[Tensor], rstd: Tensor,
                      weight_grad: bool) -> Tuple[Tensor, Tensor]:
    grad_x = torch.empty_like(x)
    grad_weight = x.new_empty((x.shape[-1],) if weight_grad else (0,))
    lab.rms_norm_backward(_plain(grad), _plain(x), _plain(weight), rstd, grad_x, grad_weight if weight_grad else None)
    return grad_x, grad_weight


@rms_norm_backward.register_fake
def _(grad, x, weight, rstd, weight_grad):
    return torch.empty_like(x), x.new_empty((x.shape[-1],) if weight_grad else (0,))


def _rms_norm_setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)
    x, weight, _ = inputs
    ctx.weight_grad = weight is not None and ctx.needs_input_grad[1]
    ctx.save_for_backward(x, weight, output[1])


def _rms_norm_grad(ctx, grad, _grad_rstd):
    x, weight, rstd = ctx.saved_tensors
    if grad is None:
        return None, None, None
    grad_x, grad_weight = torch.ops.lab.rms_norm_backward.default(grad, x, weight, rstd, ctx.weight_grad)
    return grad_x, grad_weight if ctx.weight_grad else None, None


rms_norm.register_autograd(_rms_norm_grad, setup_context=_rms_norm_setup)


def _add_rms_norm_setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)
    _, _, weight, _ = inputs
    _, h, rstd = output
    ctx.weight_grad = weight is not None and ctx.needs_input_grad[2]
    ctx.save_for_backward(h, weight, rstd)


def _add_rms_norm_grad(ctx, grad, grad_h, _grad_rstd):
    # h = x + residual feeds both the norm and the next residual: its gradient is the norm's plus h's own
    h, weight, rstd = ctx.saved_tensors
    if grad is None:  # only h was used: its gradient passes straight to x and residual
        return grad_h, grad_h, None, None
    grad_x, grad_weight = torch.ops.lab.rms_norm_backward.default(grad, h, weight, rstd, ctx.weight_grad)
    if grad_h is not None:
        grad_x = grad_x + grad_h
    return grad_x, grad_x, grad_weight if ctx.weight_grad else None, None


add_rms_norm.register_autograd(_add_rms_norm_grad, setup_context=_add_rms_norm_setup)
