"""lab.attention as torch operators (torch.library.custom_op): the forward, which also returns each
row's log-sum-exp, and the backward, which takes it; fake implementations for tracing and the
autograd formula, so torch.compile(fullgraph=True) traces lab.nn.scaled_dot_product_attention and
lab.nn.functional.attention without a graph break.

One operator pair serves fixed batches - q (batch, heads, positions, head_dim) - and packed ones -
q (tokens, heads, head_dim) with cu_seqlens_q/cu_seqlens_k - as lab.attention does. The output takes
q's strides (torch.empty_like keeps a dense view's layout: the (batch, positions, heads, head_dim)
projections viewed as (batch, heads, ...) stay as they lie); the gradients take their inputs'."""
from typing import Optional, Tuple

import torch
from torch import Tensor

import lab


def ready(x: Tensor) -> Tensor:
    """x as lab.attention copies it: head_dim contiguous, other strides multiples of 8 elements, data
    16-byte aligned - x itself where it already is (any dense view), else a contiguous copy. Inside the
    operators only: a traced (fake) tensor has no address."""
    aligned = (x.stride(-1) == 1 and x.data_ptr() % 16 == 0
               and all(s % 8 == 0 or n == 1 for s, n in zip(x.stride()[:-1], x.shape[:-1])))
    return x if aligned else x.contiguous()


def _lse_like(q: Tensor, packed: bool) -> Tensor:
    shape = (q.shape[1], q.shape[0]) if packed else (q.shape[0], q.shape[1], q.shape[2])
    return q.new_empty(shape, dtype=torch.float32)


def _options(causal, window_left, window_right, softcap, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
             max_seqlen_k):
    options = {"causal": causal, "window": (window_left, window_right), "softcap": softcap, "scale": scale}
    if cu_seqlens_q is not None:
        options.update(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                       max_seqlen_k=max_seqlen_k)
    return options


@torch.library.custom_op("lab::attention", mutates_args=())
def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, window_left: int, window_right: int, softcap: float,
              scale: float, cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], max_seqlen_q: int,
              max_seqlen_k: int) -> Tuple[Tensor, Tensor]:
    q, k, v = ready(q.detach()), ready(k.detach()), ready(v.detach())
    out, lse = torch.empty_like(q), _lse_like(q, cu_seqlens_q is not None)
    if cu_seqlens_q is not None:
        out.zero_()  # rows no sequence covers: zeros, not whatever the allocator held
    lab.attention(q, k, v, out, lse,
                  **_options(causal, window_left, window_right, softcap, scale, cu_seqlens_q, cu_seqlens_k,
                             max_seqlen_q, max_seqlen_k))
    return out, lse


@attention.register_fake
def _(q, k, v, causal, window_left, window_right, softcap, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
      max_seqlen_k):
    return torch.empty_like(q), _lse_like(q, cu_seqlens_q is not None)


@torch.library.custom_op("lab::attention_backward", mutates_args=())
def attention_backward(grad_out: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, causal: bool,
                       window_left: int, window_right: int, softcap: float, scale: float,
                       cu_seqlens_q: Optional[Tensor], cu_seqlens_k: Optional[Tensor], max_seqlen_q: int,
                       max_seqlen_k: int) -> Tuple[Tensor, Tensor, Tensor]:
    grad_q, grad_k, grad_v = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if cu_seqlens_q is not None:
        grad_q.zero_(), grad_k.zero_(), grad_v.zero_()
    lab.attention_backward(*(ready(x.detach()) for x in (grad_out, q, k, v, out)), lse.detach(), grad_q, grad_k, grad_v,
                           **_options(causal, window_left, window_right, softcap, scale, cu_seqlens_q,
                                      cu_seqlens_k, max_seqlen_q, max_seqlen_k))
    return grad_q, grad_k, grad_v


@attention_backward.register_fake
def _(grad_out, q, k, v, out, lse, causal, window_left, window_right, softcap, scale, cu_seqlens_q, cu_seqlens_k,
      max_seqlen_q, max_seqlen_k):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup(ctx, inputs, output):
    q, k, v, *options = inputs  # causal, window_left, window_right, softcap, scale, cu_q, cu_k, max_q, max_k
    out, lse = output
    cu_seqlens_q, cu_seqlens_k = options[5], options[6]
    ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k)
    ctx.mark_non_differentiable(lse)  # a statistic for the backward; lab.nn returns only out
    ctx.options = options


def _grad(ctx, grad_out, grad_lse):
    q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
    causal, window_left, window_right, softcap, scale, _, _, max_seqlen_q, max_seqlen_k = ctx.options
    grad_q, grad_k, grad_v = torch.ops.lab.attention_backward.default(
        grad_out, q, k, v, out, lse, causal, window_left,
        window_right, softcap, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    return grad_q, grad_k, grad_v, None, None, None, None, None, None, None, None, None


attention.register_autograd(_grad, setup_context=_setup)
