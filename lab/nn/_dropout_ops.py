"""lab's dropout as torch operators and as an eager autograd.Function: dropout(x) and the fused
residual + dropout(x).

The backward needs no mask. An element is kept where its number from the generator state (seed,
offset) is at least p, and that number depends on the state and the element's index alone; so the
forward keeps the state it drew from and the backward is the same kernel run on the gradient with
that state: the same elements kept, scaled by the same 1 / (1 - p). Saved for the backward: two
ints, against a mask of one byte per element. The residual's gradient is the incoming one itself.

Under torch.compile the operators carry the state as a 2-element int64 CPU tensor (an operator's
outputs are tensors); the eager Function keeps it as ints. Inside torch's own CUDA graph capture
lab's generator cannot advance between replays (lab refuses to draw there), so lab.nn.functional
hands those calls to torch's dropout, whose generator torch's graphs update."""
from typing import Optional, Tuple

import torch
from torch import Tensor

import lab

from ._eager import _first_order, _Function
from ._ops import _plain


def _drop(x: Tensor, p: float, residual: Optional[Tensor]) -> Tuple[Tensor, Tuple[int, int]]:
    """(residual +) dropout(x) into a new tensor, and the generator state it drew from."""
    state = lab.get_rng_state(x.device.index)
    out = torch.empty_like(x)
    if residual is None:
        lab.dropout(_plain(x), p, out)
    else:
        lab.dropout_add(_plain(residual), _plain(x), p, out)
    return out, state


def _drop_gradient(grad: Tensor, p: float, state) -> Tensor:
    grad_x = torch.empty_like(grad)
    lab.dropout(grad, p, grad_x, rng_state=(int(state[0]), int(state[1])))
    return grad_x


# ---- the operators torch.compile traces ----

@torch.library.custom_op("lab::dropout_add", mutates_args=())
def dropout_add_op(residual: Optional[Tensor], x: Tensor, p: float) -> Tuple[Tensor, Tensor]:
    out, state = _drop(x, p, residual)
    return out, torch.tensor(state, dtype=torch.int64)


@dropout_add_op.register_fake
def _(residual, x, p):
    return torch.empty_like(x), torch.empty(2, dtype=torch.int64)


@torch.library.custom_op("lab::dropout_backward", mutates_args=())
def dropout_backward_op(grad: Tensor, state: Tensor, p: float) -> Tensor:
    return _drop_gradient(grad, p, state.tolist())


@dropout_backward_op.register_fake
def _(grad, state, p):
    return torch.empty_like(grad)


def _setup_context(ctx, inputs, output):
    residual, _, p = inputs
    ctx.p, ctx.with_residual = p, residual is not None
    ctx.save_for_backward(output[1])
    ctx.mark_non_differentiable(output[1])


def _backward(ctx, grad, _grad_state):
    (state,) = ctx.saved_tensors
    grad_x = torch.ops.lab.dropout_backward.default(grad, state, ctx.p)
    return (grad if ctx.with_residual else None), grad_x, None


dropout_add_op.register_autograd(_backward, setup_context=_setup_context)


# ---- the eager path: the same kernels, one autograd node ----

class DropoutAdd(_Function):
    """(residual +) dropout(x, p); the backward reruns the kernel on the gradient with the state."""

    @staticmethod
    def forward(ctx, residual: Optional[Tensor], x: Tensor, p: float) -> Tensor:
        out, ctx.state = _drop(x, p, residual)
        ctx.p, ctx.with_residual = p, residual is not None
        return out

    @staticmethod
    @_first_order
    def backward(ctx, grad: Tensor):
        return (grad if ctx.with_residual else None), _drop_gradient(grad, ctx.p, ctx.state), None
