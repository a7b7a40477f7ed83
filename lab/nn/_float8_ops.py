"""A linear layer on float8 tensor cores, as torch operators (torch.library.custom_op): y = x @ w.T + b
with its three products - the forward, the input gradient, the weight gradient - run by lab.matmul
on float8 operands, and nothing but float8 copies kept from the forward to the backward.

Every operand is scaled by its own amax (per-tensor *current* scaling), found on the device: a
reduction (lab.norm, ord=inf), the scale amax / largest (lab.axpby), then one cast pass
(lab.cast_float8) that writes the operand in both layouts Hopper's float8 products read (its
float8 GEMM takes only "TN": both operands K-major, docs/float8.md):

    forward          y  = x8 @ w8.T          x8 (m x k), w8 (n x k): as cast
    input gradient   dx = g8 @ w8_t.T        g8 (m x n), w8_t (k x n): w's transpose from the same cast
    weight gradient  dw = g8_t @ x8_t.T      g8_t (n x m), x8_t (k x m): the transposes

x and w go to float8_e4m3fn (3 mantissa bits: precision), the output gradient g to float8_e5m2 (2
mantissa bits, 5 exponent bits: range - gradients span more of it). The forward's product lets the
tensor cores keep their partial sums in their own precision (fast_accum); the gradients' products
promote them to float32, as torchao and TransformerEngine do.

What the backward keeps: x8_t and w8_t (one byte an element) and two scalars - where a bfloat16
linear keeps x (two bytes an element) and a view of w. The weight is cast once a forward, in both
layouts, and its transpose waits for the backward: one cast of w per training step, not one per
product.

In eager mode lab.nn.functional runs the same two bodies (forward_products, backward_products)
through one autograd.Function (_eager.Float8Linear) instead: the operators' custom_op layers cost
more host time than a small projection's kernels take.

The operators take what they need as flags (which gradients the caller wants), so an inference
forward casts no transposes; the caller (functional.float8_linear) decides, before the call, from
requires_grad. Projections that read one input - a layer's q, k and v; gate and up - can share its
cast: lab::float8_cast makes it once, and each lab::float8_linear takes it instead of casting x
again (the backward then keeps one x8_t for all of them)."""
from typing import Optional, Tuple

import torch
from torch import Tensor

import lab

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
_LARGEST = {E4M3: 448.0, E5M2: 57344.0}

# cuBLASLt's float8 kernels want every dimension of a product a multiple of 16 - k of the forward,
# and the token count m, which is the weight gradient's k.
ALIGNMENT = 16


def _nothing(like: Tensor, dtype: torch.dtype) -> Tensor:
    """An empty tensor standing for an output the caller did not ask for (operators return tensors)."""
    return like.new_empty((0,), dtype=dtype)


def cast(rows: Tensor, dtype: torch.dtype, plain: bool, transposed: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """rows (a contiguous matrix) cast to float8 `dtype` by its own amax, with no host sync:
    (the cast, its transpose, the scale), each layout only where asked for (else an empty tensor).
    The scale is what the product multiplies back: amax / the format's largest value."""
    scale = rows.new_empty((), dtype=torch.float32)
    lab.norm(rows, scale, ord=float("inf"))  # amax, into the scale's own memory
    lab.axpby(1.0 / _LARGEST[dtype], scale, 0.0, scale, scale)
    out = rows.new_empty(rows.shape, dtype=dtype) if plain else None
    out_t = rows.new_empty((rows.shape[1], rows.shape[0]), dtype=dtype) if transposed else None
    lab.cast_float8(rows, scale, out, out_t=out_t)
    return (out if plain else _nothing(rows, dtype), out_t if transposed else _nothing(rows, dtype), scale)


def _rows(x: Tensor) -> Tensor:
    """x (..., k) as a contiguous (m x k) matrix, without autograd history."""
    return x.detach().reshape(-1, x.shape[-1]).contiguous()


@torch.library.custom_op("lab::float8_cast", mutates_args=())
def float8_cast(x: Tensor, transposed: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """(x8, x8_t, scale): x (..., k) as an (m x k) e4m3fn matrix by its own amax, and its transpose
    when asked for - what lab::float8_linear takes as a shared cast of its input."""
    return cast(_rows(x), E4M3, plain=True, transposed=transposed)


@float8_cast.register_fake
def _(x, transposed):
    k = x.shape[-1]
    m = x.numel() // k
    return (x.new_empty((m, k), dtype=E4M3), x.new_empty((k, m) if transposed else (0,), dtype=E4M3),
            x.new_empty((), dtype=torch.float32))


def forward_products(x: Tensor, weight: Tensor, bias: Optional[Tensor], keep_x: bool, keep_weight: bool,
                     x8: Optional[Tensor], x_scale: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The forward's work, for the operator and for the eager path's Function (_eager.Float8Linear):
    (y, x8_t, x's scale, w8_t, w's scale), as lab::float8_linear returns them."""
    if x8 is None:
        x8, kept_x8_t, kept_scale = cast(_rows(x), E4M3, plain=True, transposed=keep_x)
        x_scale = kept_scale
    else:  # the shared cast is kept from the caller's tensors (operator outputs may not alias inputs)
        kept_x8_t, kept_scale = _nothing(x, E4M3), _nothing(x, torch.float32)
    w8, w8_t, w_scale = cast(weight.detach().contiguous(), E4M3, plain=True, transposed=keep_weight)
    out = x.new_empty(*x.shape[:-1], weight.shape[0])
    lab.matmul(x8, w8.t(), out.view(-1, weight.shape[0]), scale_a=x_scale, scale_b=w_scale,
               bias=None if bias is None else bias.detach(), fast_accum=True)
    return out, kept_x8_t, kept_scale, w8_t, w_scale


def backward_products(grad: Tensor, x8_t: Tensor, x_scale: Tensor, w8_t: Tensor, w_scale: Tensor, x_grad: bool,
                      weight_grad: bool, bias_grad: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """The backward's work (the operator's and the Function's): (dx, dw, db), an empty tensor for each
    gradient not asked for. The gradient is cast to e5m2 once, in both layouts where both products
    need it."""
    rows = _rows(grad)
    m, n = rows.shape
    g8, g8_t, g_scale = cast(rows, E5M2, plain=x_grad, transposed=weight_grad)
    grad_x = _nothing(grad, grad.dtype)
    if x_grad:
        k = w8_t.shape[0]
        grad_x = grad.new_empty(*grad.shape[:-1], k)
        lab.matmul(g8, w8_t.t(), grad_x.view(m, k), scale_a=g_scale, scale_b=w_scale)
    grad_weight = _nothing(grad, grad.dtype)
    if weight_grad:
        grad_weight = grad.new_empty(n, x8_t.shape[0])
        lab.matmul(g8_t, x8_t.t(), grad_weight, scale_a=g_scale, scale_b=x_scale)
    grad_bias = rows.sum(0) if bias_grad else _nothing(grad, grad.dtype)
    return grad_x, grad_weight, grad_bias


@torch.library.custom_op("lab::float8_linear", mutates_args=())
def float8_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor], keep_x: bool, keep_weight: bool,
                  x8: Optional[Tensor] = None, x8_t: Optional[Tensor] = None,
                  x_scale: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(y, x8_t, x's scale, w8_t, w's scale): y = linear(x, weight, bias) from float8 operands;
    x8_t when keep_x (the weight gradient needs it), w8_t when keep_weight (the input gradient's).
    Given x's cast (x8, with x8_t where keep_x, and x_scale: lab::float8_cast's), x is not cast
    again and the x8_t and scale returned are empty: the backward keeps the ones given."""
    return forward_products(x, weight, bias, keep_x, keep_weight, x8, x_scale)


@float8_linear.register_fake
def _(x, weight, bias, keep_x, keep_weight, x8=None, x8_t=None, x_scale=None):
    (n, k), m = weight.shape, x.numel() // x.shape[-1]
    scalar = x.new_empty((), dtype=torch.float32)
    shared = x8 is not None
    return (x.new_empty(*x.shape[:-1], n), x.new_empty((k, m) if keep_x and not shared else (0,), dtype=E4M3),
            x.new_empty((0,) if shared else (), dtype=torch.float32),
            x.new_empty((k, n) if keep_weight else (0,), dtype=E4M3), scalar)


@torch.library.custom_op("lab::float8_linear_backward", mutates_args=())
def float8_linear_backward(grad: Tensor, x8_t: Tensor, x_scale: Tensor, w8_t: Tensor, w_scale: Tensor,
                           x_grad: bool, weight_grad: bool, bias_grad: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """(dx, dw, db) from the output gradient and what the forward kept (backward_products)."""
    return backward_products(grad, x8_t, x_scale, w8_t, w_scale, x_grad, weight_grad, bias_grad)


@float8_linear_backward.register_fake
def _(grad, x8_t, x_scale, w8_t, w_scale, x_grad, weight_grad, bias_grad):
    n = grad.shape[-1]
    nothing = grad.new_empty((0,))
    return (grad.new_empty(*grad.shape[:-1], w8_t.shape[0]) if x_grad else nothing,
            grad.new_empty(n, x8_t.shape[0]) if weight_grad else nothing.clone(),
            grad.new_empty(n) if bias_grad else nothing.clone())


def _setup(ctx, inputs, output):
    ctx.set_materialize_grads(False)
    _, _, bias, keep_x, keep_weight, shared_x8, shared_x8_t, shared_scale = (inputs + (None,) * 3)[:8]
    _, x8_t, x_scale, w8_t, w_scale = output
    ctx.mark_non_differentiable(x8_t, x_scale, w8_t, w_scale)
    if shared_x8 is not None:  # x's cast came in: the backward keeps that one
        x8_t, x_scale = (shared_x8_t if keep_x else x8_t), shared_scale
    # what the forward kept decides what the backward can make; needs_input_grad narrows it further
    ctx.wanted = (keep_weight and ctx.needs_input_grad[0], keep_x and ctx.needs_input_grad[1],
                  bias is not None and ctx.needs_input_grad[2])
    ctx.save_for_backward(x8_t, x_scale, w8_t, w_scale)


def _grad(ctx, grad, *_unused):
    if grad is None:
        return (None,) * 8
    x8_t, x_scale, w8_t, w_scale = ctx.saved_tensors
    x_grad, weight_grad, bias_grad = ctx.wanted
    grads = torch.ops.lab.float8_linear_backward.default(grad, x8_t, x_scale, w8_t, w_scale, x_grad, weight_grad,
                                                         bias_grad)
    return tuple(g if wanted else None for g, wanted in zip(grads, ctx.wanted)) + (None,) * 5


float8_linear.register_autograd(_grad, setup_context=_setup)
