"""lab.jax: lab's kernels inside jax.jit, through XLA's FFI (the handlers are C: src/binding/xla_ffi.c
and xla_ffi_ops.c).

    import lab.jax as ljax          # imports jax; `import lab` never does
    @jax.jit
    def step(params, x, t):
        h = ljax.rms_norm(x, params["w"], eps=1e-6)
        return ljax.cross_entropy(h @ params["head"], t)     # jax.grad works

Each function checks shapes and dtypes at trace time (a clear TypeError/ValueError naming the
argument), then emits an FFI call to one of lab's targets, registered with jax once on import. XLA
runs it on its own stream; the handler reads XLA's buffers into lab's arrays and runs lab's op driver,
exactly as a call from Python does. Gradients are jax.custom_vjp rules calling lab's backward kernels
(cross_entropy's gradient is made in the forward pass and only scaled in the backward).

Where the computation is not on a CUDA device (jax on a CPU), each function is the same formula in
jax.numpy (jax.lax.platform_dependent picks per platform at lowering), so code written with lab.jax
runs anywhere jax does; lab's kernels run only on the GPU. vmap: softmax, the GLUs and the norms
without a weight work over the last axis with any leading ones, so a mapped axis is one more leading
axis (vmap_method="broadcast_all", one launch); the norms with a weight, cross_entropy and the rotary
embedding run once per mapped element (vmap_method="sequential").

The elementwise ops (add, mul, ..., gelu, and those taking Python numbers: add's alpha, axpby,
fused_add_mul's scale) and the reductions (sum, mean, amax, argmax, var, std, logsumexp, the vector
norms, dot, ...) are here too, with jax.numpy's rules for shapes and dtypes (lab/_jax_ops.py): one FFI
call each, the numbers as its attributes, differentiable through their jax.numpy formulas.

Your own CUDA kernels go inside jit too: lab.jax.RawKernel and lab.jax.ElementwiseKernel
(lab/_jax_kernels.py) - on CUDA devices only, there being no formula to fall back on."""
from functools import partial
from typing import Optional, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from . import lab as _core
from ._jax_arguments import Array, checked

_FLOATS = (jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64)
_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}

for _name, _capsule in _core._xla_ffi_targets().items():
    jax.ffi.register_ffi_target(_name, _capsule, platform="CUDA")
jax.ffi.register_ffi_target("lab_kernel", _core._xla_ffi_elsewhere(), platform="cpu")

from ._jax_kernels import ElementwiseKernel, RawKernel  # noqa: E402 (after the targets they call)
from ._jax_ops import (abs, add, add_relu, amax, amin, argmax, argmin, axpby, div, dot, exp,  # noqa: E402,F401,A004
                       fused_add_mul, gelu, logsumexp, maximum, mean, minimum, mul, neg, norm, prod, relu, sigmoid,
                       silu, sqrt, std, sub, sum, var)
from ._jax_ops import elementwise_number as _elementwise_number  # noqa: E402


def _float(x, func, name):
    if jnp.dtype(x.dtype) not in [jnp.dtype(t) for t in _FLOATS]:
        raise TypeError(f"{func}(): argument '{name}' has dtype {x.dtype}; {func} takes float16, bfloat16, "
                        f"float32 or float64")


def _stats_dtype(dtype):
    return jnp.float64 if jnp.dtype(dtype) == jnp.float64 else jnp.float32


def _on_cuda(target, reference, *args):
    """target on CUDA devices, reference (jax.numpy, the same results) everywhere else."""
    return jax.lax.platform_dependent(*args, cuda=target, default=reference)


# ---- the norms' arguments ----

def _check_norm(func, x, columns, eps):
    """x float with an axis to normalize; each given column parameter (weight, bias) (x.shape[-1],) in
    x's dtype; eps >= 0 (None: the dtype's machine epsilon). Returns eps as a float."""
    _float(x, func, "x")
    if x.ndim == 0:
        raise ValueError(f"{func}(): argument 'x' is 0-dimensional; it needs an axis to normalize")
    for name, t in columns.items():
        if t is None:
            continue
        if t.shape != (x.shape[-1],):
            raise ValueError(f"{func}(): argument '{name}' has shape {t.shape}; it must have shape "
                             f"({x.shape[-1]},) (x's last axis)")
        if t.dtype != x.dtype:
            raise TypeError(f"{func}(): argument '{name}' has dtype {t.dtype}; it must have x's, {x.dtype}")
    eps = float(jnp.finfo(x.dtype).eps) if eps is None else float(eps)
    if not eps >= 0:
        raise ValueError(f"{func}(): argument 'eps' must be >= 0, got {eps}")
    return eps


# ---- rms_norm ----

def _vmap_method(weight):
    """Under vmap the mapped axis becomes a leading axis of every argument ("broadcast_all"): right for
    x and its statistics, wrong for a weight, which must stay one row - so with a weight, vmap runs
    the call once per mapped element ("sequential")."""
    return "broadcast_all" if weight is None else "sequential"


def _rms_norm_reference(x, weight, eps):
    xf = x.astype(_stats_dtype(x.dtype))
    rstd = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1) + eps)
    out = xf * rstd[..., None]
    if weight is not None:
        out = out * weight.astype(xf.dtype)
    return out.astype(x.dtype), rstd


def _rms_norm_call(x, weight, eps):
    results = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(x.shape[:-1], _stats_dtype(x.dtype)))
    args = (x,) if weight is None else (x, weight)

    def target(*args):
        return tuple(jax.ffi.ffi_call("lab_rms_norm", results, vmap_method=_vmap_method(weight))(
            *args, eps=np.float64(eps)))
    return _on_cuda(target, lambda *args: _rms_norm_reference(args[0], args[1] if len(args) > 1 else None, eps),
                    *args)


def _rms_norm_backward_reference(grad, x, rstd, weight):
    f = rstd.dtype
    xhat = x.astype(f) * rstd[..., None]
    g = grad.astype(f) * (1.0 if weight is None else weight.astype(f))
    grad_x = rstd[..., None] * (g - xhat * jnp.mean(g * xhat, axis=-1, keepdims=True))
    grad_w = None if weight is None else jnp.sum((grad.astype(f) * xhat).reshape(-1, x.shape[-1]), axis=0)
    return grad_x.astype(x.dtype), None if grad_w is None else grad_w.astype(weight.dtype)


def _rms_norm_backward_call(grad, x, rstd, weight):
    results = [jax.ShapeDtypeStruct(x.shape, x.dtype)]
    args = (grad, x, rstd)
    if weight is not None:
        results.append(jax.ShapeDtypeStruct(weight.shape, weight.dtype))
        args = args + (weight,)

    def target(*args):
        out = jax.ffi.ffi_call("lab_rms_norm_backward", tuple(results), vmap_method=_vmap_method(weight))(*args)
        return (out[0], out[1] if len(out) > 1 else None)
    return _on_cuda(target, lambda *args: _rms_norm_backward_reference(args[0], args[1], args[2],
                                                                      args[3] if len(args) > 3 else None), *args)


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def _rms_norm(x, weight, eps):
    return _rms_norm_call(x, weight, eps)[0]


def _rms_norm_forward(x, weight, eps):
    out, rstd = _rms_norm_call(x, weight, eps)
    return out, (x, weight, rstd)


def _rms_norm_backward(eps, saved, grad):
    x, weight, rstd = saved
    return _rms_norm_backward_call(grad, x, rstd, weight)


_rms_norm.defvjp(_rms_norm_forward, _rms_norm_backward)


@checked
def rms_norm(x: Array, weight: Optional[Array] = None, eps: Optional[float] = None):
    """x / sqrt(mean(x**2) + eps) * weight over the last axis (torch.nn.functional.rms_norm's formula;
    eps=None is the dtype's machine epsilon). weight: (x.shape[-1],) in x's dtype, or None."""
    eps = _check_norm("rms_norm", x, {"weight": weight}, eps)
    return _rms_norm(x, weight, eps)


# ---- layer_norm ----

def _layer_norm_reference(x, weight, bias, eps):
    xf = x.astype(_stats_dtype(x.dtype))
    mean = jnp.mean(xf, axis=-1)
    rstd = jax.lax.rsqrt(jnp.mean(jnp.square(xf - mean[..., None]), axis=-1) + eps)
    out = (xf - mean[..., None]) * rstd[..., None]
    if weight is not None:
        out = out * weight.astype(xf.dtype)
    if bias is not None:
        out = out + bias.astype(xf.dtype)
    return out.astype(x.dtype), mean, rstd


def _layer_norm_call(x, weight, bias, eps):
    stats = jax.ShapeDtypeStruct(x.shape[:-1], _stats_dtype(x.dtype))
    results = (jax.ShapeDtypeStruct(x.shape, x.dtype), stats, stats)
    args = (x,) + tuple(t for t in (weight, bias) if t is not None)

    def target(*args):
        return tuple(jax.ffi.ffi_call("lab_layer_norm", results, vmap_method=_vmap_method(weight))(
            *args, eps=np.float64(eps)))
    return _on_cuda(target, lambda *args: _layer_norm_reference(x=args[0], weight=weight if weight is None else args[1],
                                                                bias=None if bias is None else args[-1], eps=eps),
                    *args)


def _layer_norm_backward_reference(grad, x, mean, rstd, weight, with_bias):
    f = rstd.dtype
    xhat = (x.astype(f) - mean[..., None]) * rstd[..., None]
    g = grad.astype(f) * (1.0 if weight is None else weight.astype(f))
    grad_x = rstd[..., None] * (g - jnp.mean(g, -1, keepdims=True) - xhat * jnp.mean(g * xhat, -1, keepdims=True))
    rows = grad.astype(f).reshape(-1, x.shape[-1])
    grad_w = None if weight is None else jnp.sum(rows * xhat.reshape(rows.shape), 0).astype(weight.dtype)
    grad_b = jnp.sum(rows, 0).astype(x.dtype) if with_bias else None
    return grad_x.astype(x.dtype), grad_w, grad_b


def _layer_norm_backward_call(grad, x, mean, rstd, weight, with_bias):
    results = [jax.ShapeDtypeStruct(x.shape, x.dtype)]
    args = (grad, x, mean, rstd) + (() if weight is None else (weight,))
    if weight is not None:  # with a weight, lab writes the bias gradient beside its own (a bias comes with one)
        results += [jax.ShapeDtypeStruct(weight.shape, weight.dtype)] * 2

    def target(*args):
        out = jax.ffi.ffi_call("lab_layer_norm_backward", tuple(results), vmap_method=_vmap_method(weight))(*args)
        return out[0], (out[1] if weight is not None else None), (out[2] if weight is not None and with_bias else None)
    return _on_cuda(target, lambda *a: _layer_norm_backward_reference(a[0], a[1], a[2], a[3], weight if weight is None
                                                                      else a[4], with_bias), *args)


@partial(jax.custom_vjp, nondiff_argnums=(3,))
def _layer_norm(x, weight, bias, eps):
    return _layer_norm_call(x, weight, bias, eps)[0]


def _layer_norm_forward(x, weight, bias, eps):
    out, mean, rstd = _layer_norm_call(x, weight, bias, eps)
    return out, (x, weight, bias is not None, mean, rstd)


def _layer_norm_backward(eps, saved, grad):
    x, weight, with_bias, mean, rstd = saved
    grad_x, grad_w, grad_b = _layer_norm_backward_call(grad, x, mean, rstd, weight, with_bias)
    return grad_x, grad_w, (grad_b.astype(x.dtype) if with_bias else None)


_layer_norm.defvjp(_layer_norm_forward, _layer_norm_backward)


@checked
def layer_norm(x: Array, weight: Optional[Array] = None, bias: Optional[Array] = None, eps: float = 1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis (the population variance, as
    torch.nn.functional.layer_norm and flax's LayerNorm). weight, bias: (x.shape[-1],) in x's dtype, or
    None."""
    eps = _check_norm("layer_norm", x, {"weight": weight, "bias": bias}, eps)
    if bias is not None and weight is None:
        weight = jnp.ones_like(bias)  # lab's kernel takes a bias with a weight
    return _layer_norm(x, weight, bias, eps)


# ---- softmax, log_softmax ----

def _softmax_reference(x, log):
    f = x.astype(_stats_dtype(x.dtype))
    return (jax.nn.log_softmax(f, axis=-1) if log else jax.nn.softmax(f, axis=-1)).astype(x.dtype)


def _softmax_backward_reference(grad, y, log):
    g, yf = grad.astype(_stats_dtype(y.dtype)), y.astype(_stats_dtype(y.dtype))
    out = g - jnp.exp(yf) * jnp.sum(g, -1, keepdims=True) if log else yf * (g - jnp.sum(g * yf, -1, keepdims=True))
    return out.astype(y.dtype)


@partial(jax.custom_vjp, nondiff_argnums=(1,))
def _softmax(x, log):
    result = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return _on_cuda(lambda x: jax.ffi.ffi_call("lab_softmax", result, vmap_method="broadcast_all")(x, log=np.int32(log)),
                    lambda x: _softmax_reference(x, log), x)


def _softmax_forward(x, log):
    y = _softmax(x, log)
    return y, y


def _softmax_backward(log, y, grad):
    result = jax.ShapeDtypeStruct(y.shape, y.dtype)
    target = lambda g, y: jax.ffi.ffi_call("lab_softmax_backward", result,  # noqa: E731
                                           vmap_method="broadcast_all")(g, y, log=np.int32(log))
    return (_on_cuda(target, lambda g, y: _softmax_backward_reference(g, y, log), grad, y),)


_softmax.defvjp(_softmax_forward, _softmax_backward)


def _along_last(x, axis, func, log):
    _float(x, func, "x")
    if x.ndim == 0:
        raise ValueError(f"{func}(): argument 'x' is 0-dimensional; it needs an axis")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{func}(): axis {axis} is out of range for {x.ndim} dimensions")
    moved = jnp.moveaxis(x, axis, -1)
    return jnp.moveaxis(_softmax(moved, log), -1, axis)


@checked
def softmax(x: Array, axis: int = -1):
    """exp(x - max) / sum(exp(x - max)) along axis, computed in float32 (float64 for float64)."""
    return _along_last(x, axis, "softmax", False)


@checked
def log_softmax(x: Array, axis: int = -1):
    """x - max - log(sum(exp(x - max))) along axis."""
    return _along_last(x, axis, "log_softmax", True)


# ---- swiglu, geglu ----

def _activation(f, act):
    return jax.nn.gelu(f, approximate=True) if act else f * jax.nn.sigmoid(f)


def _glu_reference(gate, up, act):
    f = _stats_dtype(gate.dtype)
    return (_activation(gate.astype(f), act) * up.astype(f)).astype(gate.dtype)


def _glu_backward_reference(grad, gate, up, act):
    f = _stats_dtype(gate.dtype)
    g, u, d = gate.astype(f), up.astype(f), grad.astype(f)
    activated, slope = jax.vjp(lambda g: _activation(g, act), g)
    return slope(d * u)[0].astype(gate.dtype), (d * activated).astype(up.dtype)


def _glu_call(gate, up, act):
    result = jax.ShapeDtypeStruct(gate.shape, gate.dtype)
    number = _elementwise_number("geglu" if act else "swiglu")
    target = lambda g, u: jax.ffi.ffi_call("lab_elementwise", result, vmap_method="broadcast_all")(  # noqa: E731
        g, u, op=np.int32(number))
    return _on_cuda(target, lambda g, u: _glu_reference(g, u, act), gate, up)


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def _glu(gate, up, act):
    return _glu_call(gate, up, act)


def _glu_forward(gate, up, act):
    return _glu_call(gate, up, act), (gate, up)


def _glu_backward(act, saved, grad):
    gate, up = saved
    results = (jax.ShapeDtypeStruct(gate.shape, gate.dtype), jax.ShapeDtypeStruct(up.shape, up.dtype))
    target = lambda d, g, u: tuple(jax.ffi.ffi_call("lab_glu_backward", results,  # noqa: E731
                                                    vmap_method="broadcast_all")(d, g, u, act=np.int32(act)))
    return _on_cuda(target, lambda d, g, u: _glu_backward_reference(d, g, u, act), grad, gate, up)


_glu.defvjp(_glu_forward, _glu_backward)


def _check_glu(func, gate, up):
    _float(gate, func, "gate")
    if up.shape != gate.shape or up.dtype != gate.dtype:
        raise ValueError(f"{func}(): argument 'up' has shape {up.shape} and dtype {up.dtype}; it must have gate's, "
                         f"{gate.shape} and {gate.dtype}")
    return gate.reshape(1) if gate.ndim == 0 else gate, up.reshape(1) if up.ndim == 0 else up


@checked
def swiglu(gate: Array, up: Array):
    """silu(gate) * up in one pass (a transformer MLP's SwiGLU), computed in float32 for half types;
    differentiable (lab.swiglu_backward's kernel). gate and up: one shape and float dtype."""
    g, u = _check_glu("swiglu", gate, up)
    return _glu(g, u, 0).reshape(gate.shape)


@checked
def geglu(gate: Array, up: Array):
    """gelu(gate, approximate=True) * up in one pass (GeGLU); as swiglu."""
    g, u = _check_glu("geglu", gate, up)
    return _glu(g, u, 1).reshape(gate.shape)


# ---- cross_entropy ----

def _cross_entropy_reference(logits, target, ignore_index, smoothing, reduction):
    def loss_of(logits):
        f = logits.astype(jnp.float32 if logits.dtype != jnp.float64 else jnp.float64)
        lse = jax.nn.logsumexp(f, axis=-1)
        keep = target != ignore_index
        picked = jnp.take_along_axis(f, jnp.where(keep, target, 0)[..., None].astype(jnp.int32), -1)[..., 0]
        rows = jnp.where(keep, lse - (1 - smoothing) * picked - smoothing * jnp.mean(f, -1), 0.0)
        if reduction == "none":
            return rows, rows
        total = jnp.sum(rows)
        return (total / jnp.sum(keep) if reduction == "mean" else total), rows
    if reduction == "none":
        rows, _ = loss_of(logits)
        return rows.astype(logits.dtype), None
    (loss, _), grad = jax.value_and_grad(loss_of, has_aux=True)(logits)
    return loss.astype(jnp.float32), grad.astype(logits.dtype)


@partial(jax.custom_vjp, nondiff_argnums=(2, 3, 4))
def _cross_entropy(logits, target, ignore_index, smoothing, reduction):
    return _cross_entropy_with_grad(logits, target, ignore_index, smoothing, reduction)[0]


def _cross_entropy_with_grad(logits, target, ignore_index, smoothing, reduction):
    loss = jax.ShapeDtypeStruct((), jnp.float32)
    grad = jax.ShapeDtypeStruct(logits.shape, logits.dtype)

    def call(logits, target):
        return tuple(jax.ffi.ffi_call("lab_cross_entropy", (loss, grad), vmap_method="sequential")(
            logits, target, ignore_index=np.int64(ignore_index), label_smoothing=np.float64(smoothing),
            reduction=np.int32(_REDUCTIONS[reduction])))
    return _on_cuda(call, lambda l, t: _cross_entropy_reference(l, t, ignore_index, smoothing, reduction),
                    logits, target)


def _cross_entropy_forward(logits, target, ignore_index, smoothing, reduction):
    loss, grad = _cross_entropy_with_grad(logits, target, ignore_index, smoothing, reduction)
    return loss, (grad, target)


def _cross_entropy_backward(ignore_index, smoothing, reduction, saved, upstream):
    grad, target = saved
    return (grad * upstream.astype(grad.dtype), np.zeros(target.shape, dtype=jax.dtypes.float0))


_cross_entropy.defvjp(_cross_entropy_forward, _cross_entropy_backward)


@checked
def cross_entropy(logits: Array, target: Array, ignore_index: int = -100, label_smoothing: float = 0.0,
                  reduction: str = "mean"):
    """The cross-entropy of each row of logits (the last axis: the classes) against its target class,
    as optax/torch define it with class indices; 'mean' over the rows whose target is not
    ignore_index, or 'sum'. A float32 number; its gradient is made in the same pass as the loss and
    only scaled by jax.grad's upstream value."""
    _float(logits, "cross_entropy", "logits")
    if logits.ndim == 0 or target.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy(): argument 'target' has shape {target.shape}; it must have shape "
                         f"{logits.shape[:-1]} (logits' shape without the classes)")
    if jnp.dtype(target.dtype) not in (jnp.dtype(jnp.int32), jnp.dtype(jnp.int64)):
        raise TypeError(f"cross_entropy(): argument 'target' has dtype {target.dtype}; class indices are "
                        f"int32 or int64")
    if reduction not in ("mean", "sum"):
        raise ValueError(f"cross_entropy(): reduction must be 'mean' or 'sum', got {reduction!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy(): label_smoothing must be in [0, 1], got {label_smoothing}")
    return _cross_entropy(logits, target, int(ignore_index), float(label_smoothing), reduction)


# ---- the rotary embedding ----

def _rope_reference(q, k, cos, sin, interleaved, backward):
    def turn(x):
        rotary_dim = cos.shape[-1]
        j = np.arange(rotary_dim)
        if interleaved:
            partner, sign = j ^ 1, np.where(j % 2 == 0, -1.0, 1.0)
        else:
            half = rotary_dim // 2
            partner, sign = np.where(j < half, j + half, j - half), np.where(j < half, -1.0, 1.0)
        f = _stats_dtype(x.dtype)
        c = cos.astype(f).reshape((cos.shape[0] if cos.ndim == 3 else 1, 1) + cos.shape[-2:])
        s = sin.astype(f).reshape(c.shape)
        head = x[..., :rotary_dim].astype(f)
        turned = head * c - sign * head[..., partner] * s[..., partner] if backward \
            else head * c + sign * head[..., partner] * s
        return jnp.concatenate([turned.astype(x.dtype), x[..., rotary_dim:]], axis=-1)
    return turn(q), turn(k)


def _rope_call(q, k, cos, sin, interleaved, backward):
    results = (jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct(k.shape, k.dtype))

    def target(q, k, cos, sin):
        return tuple(jax.ffi.ffi_call("lab_rope", results, vmap_method="sequential")(
            q, k, cos, sin, interleaved=np.int32(interleaved), backward=np.int32(backward)))
    return _on_cuda(target, lambda q, k, c, s: _rope_reference(q, k, c, s, interleaved, backward), q, k, cos, sin)


@partial(jax.custom_vjp, nondiff_argnums=(4,))
def _rope(q, k, cos, sin, interleaved):
    return _rope_call(q, k, cos, sin, interleaved, False)


def _rope_forward(q, k, cos, sin, interleaved):
    return _rope_call(q, k, cos, sin, interleaved, False), (cos, sin)


def _rope_backward(interleaved, saved, grads):
    cos, sin = saved
    grad_q, grad_k = _rope_call(grads[0], grads[1], cos, sin, interleaved, True)
    return grad_q, grad_k, jnp.zeros_like(cos), jnp.zeros_like(sin)


_rope.defvjp(_rope_forward, _rope_backward)


@checked
def apply_rotary_pos_emb(q: Array, k: Array, cos: Array, sin: Array, interleaved: bool = False):
    """q and k (batch, heads, positions, head_dim) - k with its own number of heads - rotated by the
    angles in cos/sin (batch or 1, positions, rotary_dim), as transformers' apply_rotary_pos_emb; a
    rotary_dim below head_dim keeps the rest. The tables are constants (their gradient is zero)."""
    for name, x in (("q", q), ("k", k)):
        _float(x, "apply_rotary_pos_emb", name)
        if x.ndim != 4:
            raise ValueError(f"apply_rotary_pos_emb(): argument '{name}' has {x.ndim} dimensions; it must have 4: "
                             f"(batch, heads, positions, head_dim)")
    if k.dtype != q.dtype or k.shape[0] != q.shape[0] or k.shape[2:] != q.shape[2:]:
        raise ValueError(f"apply_rotary_pos_emb(): argument 'k' has shape {k.shape} and dtype {k.dtype}; it must "
                         f"have q's batch, positions, head_dim and dtype ({q.shape}, {q.dtype})")
    want = f"(batch or 1, {q.shape[2]}, C) with C even and at most {q.shape[3]}"
    if cos.ndim != 3 or cos.shape[0] not in (1, q.shape[0]) or cos.shape[1] != q.shape[2] \
            or cos.shape[2] % 2 or not 0 < cos.shape[2] <= q.shape[3] or sin.shape != cos.shape:
        raise ValueError(f"apply_rotary_pos_emb(): cos and sin have shapes {cos.shape} and {sin.shape}; they "
                         f"must have one shape, {want}")
    if cos.dtype != sin.dtype or jnp.dtype(cos.dtype) not in (jnp.dtype(q.dtype), jnp.dtype(jnp.float32)):
        raise TypeError(f"apply_rotary_pos_emb(): cos and sin have dtypes {cos.dtype} and {sin.dtype}; they must "
                        f"have q's ({q.dtype}) or float32")
    return _rope(q, k, cos, sin, bool(interleaved))


# ---- attention ----

def _attention_reference(q, k, v, cu_q, cu_k, causal, left, right, softcap, scale, sequence_major):
    """(out, lse) in jax.numpy with lab.attention's rule (the diagonal at the bottom right); a packed
    batch as one sequence with a mask that keeps each token within its own."""
    f = jnp.float32
    if cu_q is not None:  # (tokens, heads, d): tokens of sequence i are [cu[i], cu[i+1])
        seq_q = jnp.searchsorted(cu_q, jnp.arange(q.shape[0]), side="right") - 1
        seq_k = jnp.searchsorted(cu_k, jnp.arange(k.shape[0]), side="right") - 1
        pos_q, pos_k = jnp.arange(q.shape[0]) - cu_q[seq_q], jnp.arange(k.shape[0]) - cu_k[seq_k]
        len_q, len_k = (cu_q[seq_q + 1] - cu_q[seq_q])[:, None], (cu_k[seq_k + 1] - cu_k[seq_k])[None, :]
        same = seq_q[:, None] == seq_k[None, :]
        qh, kh, vh = (x.transpose(1, 0, 2)[None] for x in (q, k, v))
    else:
        if sequence_major:
            q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
        pos_q, pos_k = jnp.arange(q.shape[2]), jnp.arange(k.shape[2])
        len_q, len_k, same = q.shape[2], k.shape[2], True
        qh, kh, vh = q, k, v
    group = qh.shape[1] // kh.shape[1]
    kh, vh = jnp.repeat(kh, group, axis=1), jnp.repeat(vh, group, axis=1)
    s = jnp.einsum("bhqd,bhkd->bhqk", qh.astype(f), kh.astype(f)) * scale
    if softcap > 0:
        s = softcap * jnp.tanh(s / softcap)
    i, j = pos_q[:, None], pos_k[None, :]
    seen = same & (j < len_k)
    if left >= 0:
        seen = seen & (j >= i + len_k - len_q - left)
    if right >= 0:
        seen = seen & (j <= i + len_k - len_q + right)
    s = jnp.where(seen, s, -jnp.inf)
    any_seen = seen.any(-1)
    lse = jnp.where(any_seen, jax.nn.logsumexp(jnp.where(any_seen[..., None], s, 0.0), -1), jnp.inf)
    p = jnp.where(any_seen[..., None], jnp.exp(s - jnp.where(any_seen, lse, 0.0)[..., None]), 0.0)
    out = jnp.einsum("bhqk,bhkd->bhqd", p, vh.astype(f)).astype(q.dtype)
    if cu_q is not None:
        return out[0].transpose(1, 0, 2), lse[0]
    return (out.transpose(0, 2, 1, 3) if sequence_major else out), lse


def _attention_call(arrays, backward, options):
    causal, left, right, softcap, scale, max_q, max_k, sequence_major = options
    packed = len(arrays) == (8 if backward else 5)
    q, k, v = arrays[1:4] if backward else arrays[:3]
    if backward:
        results = tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in (q, k, v))
    else:
        lse_shape = (q.shape[1], q.shape[0]) if packed else \
            ((q.shape[0], q.shape[2], q.shape[1]) if sequence_major else q.shape[:3])
        results = (jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct(lse_shape, jnp.float32))
    attributes = dict(backward=np.int32(backward), causal=np.int32(causal), window_left=np.int64(left),
                      window_right=np.int64(right), softcap=np.float64(softcap), scale=np.float64(scale),
                      max_seqlen_q=np.int64(max_q), max_seqlen_k=np.int64(max_k),
                      sequence_major=np.int32(sequence_major))

    def target(*xs):
        return tuple(jax.ffi.ffi_call("lab_attention", results, vmap_method="sequential")(*xs, **attributes))

    def reference(*xs):
        if not backward:
            q, k, v, *cu = xs
            return _attention_reference(q, k, v, *(cu or (None, None)), causal, left, right, softcap, scale,
                                        sequence_major)
        grad_out, q, k, v, _, _, *cu = xs
        cu = cu or (None, None)

        def out_of(q, k, v):
            return _attention_reference(q, k, v, *cu, causal, left, right, softcap, scale, sequence_major)[0]
        _, pullback = jax.vjp(out_of, q, k, v)
        return pullback(grad_out)
    return _on_cuda(target, reference, *arrays)


@partial(jax.custom_vjp, nondiff_argnums=(5,))
def _attention(q, k, v, cu_q, cu_k, options):
    return _attention_forward(q, k, v, cu_q, cu_k, options)[0]


def _attention_forward(q, k, v, cu_q, cu_k, options):
    packing = (cu_q, cu_k) if cu_q is not None else ()
    out, lse = _attention_call((q, k, v) + packing, False, options)
    return out, (q, k, v, out, lse, cu_q, cu_k)


def _attention_backward(options, saved, grad_out):
    q, k, v, out, lse, cu_q, cu_k = saved
    packing = (cu_q, cu_k) if cu_q is not None else ()
    grad_q, grad_k, grad_v = _attention_call((grad_out, q, k, v, out, lse) + packing, True, options)
    zeros = None if cu_q is None else np.zeros(cu_q.shape, jax.dtypes.float0)
    return grad_q, grad_k, grad_v, zeros, zeros


_attention.defvjp(_attention_forward, _attention_backward)


def _check_bias_and_mask(query, key, value, bias, mask):
    """What jax.nn.dot_product_attention asserts rather than checks, before it runs: query, key and
    value of one rank, 4 (batch, positions, heads, head_dim) or 3 (no batch), and a bias and a mask
    that broadcast to (batch, heads, positions, key positions) (no batch with rank 3)."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        if x.ndim != query.ndim or x.ndim not in (3, 4):
            raise ValueError(f"dot_product_attention(): argument '{name}' has shape {x.shape}; with a bias or a "
                             f"mask, query, key and value are (batch, positions, heads, head_dim), or that without "
                             f"the batch")
    full = query.shape[:-3] + (query.shape[-2], query.shape[-3], key.shape[-3])
    for name, x in (("bias", bias), ("mask", mask)):
        if x is not None and (jnp.ndim(x) != len(full) or any(n not in (1, f) for n, f in zip(jnp.shape(x), full))):
            raise ValueError(f"dot_product_attention(): argument '{name}' has shape {jnp.shape(x)}; it must "
                             f"broadcast to {full} (batch, heads, positions, key positions)")


@checked
def dot_product_attention(query: Array, key: Array, value: Array, bias: Optional[Array] = None,
                          mask: Optional[Array] = None, *, scale: Optional[float] = None, is_causal: bool = False,
                          local_window_size: Optional[Union[int, Tuple[Optional[int], Optional[int]]]] = None,
                          softcap: float = 0.0, cu_seqlens_q: Optional[Array] = None,
                          cu_seqlens_k: Optional[Array] = None, max_seqlen_q: Optional[int] = None,
                          max_seqlen_k: Optional[int] = None):
    """jax.nn.dot_product_attention on lab's flash attention: query (batch, positions, heads, head_dim)
    - jax.nn's layout, read in place - key and value with a number of heads dividing query's, float16
    or bfloat16, head_dim 64, 96 or 128; is_causal (the diagonal at the bottom right when the lengths
    differ), local_window_size (an int for both sides, or (left, right)), a logit softcap. A packed
    batch: query (tokens, heads, head_dim) with cu_seqlens_q, cu_seqlens_k (int32 cumulative lengths)
    and max_seqlen_q, max_seqlen_k (Python ints). jax.grad works (lab's backward kernels); bias and
    mask are not lab's: given one, jax.nn.dot_product_attention runs instead."""
    if bias is not None or mask is not None:
        _check_bias_and_mask(query, key, value, bias, mask)
        return jax.nn.dot_product_attention(query, key, value, bias, mask, scale=scale, is_causal=is_causal,
                                            local_window_size=local_window_size)
    packed = cu_seqlens_q is not None
    if packed != (cu_seqlens_k is not None):
        raise TypeError("dot_product_attention(): arguments 'cu_seqlens_q' and 'cu_seqlens_k' go together: give "
                        "both or neither")
    want_ndim = 3 if packed else 4
    for name, x in (("query", query), ("key", key), ("value", value)):
        if jnp.dtype(x.dtype) not in (jnp.dtype(jnp.float16), jnp.dtype(jnp.bfloat16)):
            raise TypeError(f"dot_product_attention(): argument '{name}' has dtype {x.dtype}; lab's attention "
                            f"takes float16 or bfloat16")
        if x.ndim != want_ndim:
            raise ValueError(f"dot_product_attention(): argument '{name}' has {x.ndim} dimensions; it must have "
                             f"{want_ndim}: " + ("(tokens, heads, head_dim) with cu_seqlens" if packed
                                                 else "(batch, positions, heads, head_dim)"))
    heads_axis = 1 if packed else 2
    if key.dtype != query.dtype or value.dtype != query.dtype or value.shape != key.shape \
            or key.shape[-1] != query.shape[-1] or query.shape[heads_axis] % key.shape[heads_axis] \
            or (not packed and key.shape[0] != query.shape[0]):
        raise ValueError(f"dot_product_attention(): key {key.shape} {key.dtype} and value {value.shape} "
                         f"{value.dtype} must have query's dtype, batch and head_dim ({query.shape}, {query.dtype}) "
                         f"and a number of heads dividing query's")
    if query.shape[-1] not in (64, 96, 128):
        raise ValueError(f"dot_product_attention(): head_dim {query.shape[-1]}; lab's attention takes 64, 96 or 128")
    if packed and (max_seqlen_q is None or max_seqlen_k is None):
        raise TypeError("dot_product_attention(): a packed batch needs arguments 'max_seqlen_q' and 'max_seqlen_k' "
                        "(Python ints)")
    if local_window_size is None:
        left = right = -1
    elif isinstance(local_window_size, int):
        left = right = local_window_size
    else:
        left, right = (-1 if side is None else int(side) for side in local_window_size)
    scale = 1.0 / float(np.sqrt(query.shape[-1])) if scale is None else float(scale)
    options = (bool(is_causal), left, 0 if is_causal else right, float(softcap), scale,
               int(max_seqlen_q or 0) if packed else -1, int(max_seqlen_k or 0) if packed else -1, not packed)
    return _attention(query, key, value, cu_seqlens_q, cu_seqlens_k, options)
