"""lab.rope as torch operators (torch.library.custom_op): the rotation of q and k in one launch, its
backward (the rotation back, itself an operator), a fake implementation for tracing and autograd,
so torch.compile(fullgraph=True) traces lab.nn.apply_rotary_pos_emb without a graph break.

The outputs take the inputs' strides (torch.empty_like keeps a dense view's layout), so the
(batch, positions, heads, head_dim) projections viewed as (batch, heads, positions, head_dim) stay
in their memory order and the kernel walks them as they lie. cos and sin are constants here: the
rotary embedding makes them without autograd (lab.nn.functional falls back to torch's formula when
they require grad)."""
from typing import Tuple

import torch
from torch import Tensor

import lab


@torch.library.custom_op("lab::rope", mutates_args=())
def rope(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tuple[Tensor, Tensor]:
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    lab.rope(q.detach(), k.detach(), cos.detach(), sin.detach(), q_out, k_out, interleaved=interleaved)
    return q_out, k_out


@rope.register_fake
def _(q, k, cos, sin, interleaved):
    return torch.empty_like(q), torch.empty_like(k)


@torch.library.custom_op("lab::rope_backward", mutates_args=())
def rope_backward(grad_q: Tensor, grad_k: Tensor, cos: Tensor, sin: Tensor,
                  interleaved: bool) -> Tuple[Tensor, Tensor]:
    q_grad, k_grad = torch.empty_like(grad_q), torch.empty_like(grad_k)
    lab.rope_backward(grad_q.detach(), grad_k.detach(), cos.detach(), sin.detach(), q_grad, k_grad,
                      interleaved=interleaved)
    return q_grad, k_grad


@rope_backward.register_fake
def _(grad_q, grad_k, cos, sin, interleaved):
    return torch.empty_like(grad_q), torch.empty_like(grad_k)


def _setup(ctx, inputs, output):
    _, _, cos, sin, interleaved = inputs
    ctx.save_for_backward(cos, sin)
    ctx.interleaved = interleaved


def _grad(ctx, grad_q, grad_k):
    cos, sin = ctx.saved_tensors
    q_grad, k_grad = torch.ops.lab.rope_backward.default(grad_q, grad_k, cos, sin, ctx.interleaved)
    return q_grad, k_grad, None, None, None


rope.register_autograd(_grad, setup_context=_setup)
