"""lab.nn.functional: torch.nn.functional's signatures over lab's kernels. CUDA tensors go to lab;
anything else (CPU tensors) to torch's own function, so a model using these runs wherever torch does.

Under torch.compile the softmax and norms are the operators of lab/nn/_ops.py (traced, no graph
break); in eager mode they are the autograd.Functions of _eager.py, the same kernels with less host
time a call. So are the GLUs, the rotary embedding and the cross-entropies (operators in _loss_ops.py,
_rope_ops.py, _linear_loss_ops.py). Attention is its operators (_attention_ops.py) in both modes: its
kernels take far longer than the operators' host path."""
import collections.abc
import math
import types
import weakref
from typing import Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

import lab as _raw

from ._arguments import checked
from . import _attention_ops, _dropout_ops, _eager, _float8_ops, _linear_loss_ops, _loss_ops, _ops, _rope_ops  # noqa: F401  (registers torch.ops.lab.*)

_lab = torch.ops.lab

_Shape = Union[int, Sequence[int]]


def _on_lab(x: Tensor) -> bool:
    return x.is_cuda and x.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)


_compiling = torch.compiler.is_compiling


@checked
def softmax(x: Tensor, dim: int = -1) -> Tensor:
    if not _on_lab(x):
        return F.softmax(x, dim)
    return _lab.softmax.default(x, dim) if _compiling() else _eager.Softmax.run(x, dim, False)


@checked
def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    if not _on_lab(x):
        return F.log_softmax(x, dim)
    return _lab.log_softmax.default(x, dim) if _compiling() else _eager.Softmax.run(x, dim, True)


def _sequence(normalized_shape: _Shape) -> Tuple[int, ...]:
    """normalized_shape as torch's functions take it: an int is one dimension."""
    return tuple(normalized_shape) if isinstance(normalized_shape, collections.abc.Sequence) else (normalized_shape,)


def _rows(x: Tensor, normalized_shape: _Shape, what: str) -> Tuple[Tensor, Tuple[int, ...]]:
    """x with its normalized dimensions flattened into one (lab normalizes the last dimension)."""
    shape = _sequence(normalized_shape)
    if tuple(x.shape[x.dim() - len(shape):]) != shape:
        raise ValueError(f"{what}: normalized_shape {shape} does not match the input's trailing dimensions "
                         f"{tuple(x.shape)}")
    if len(shape) == 1:
        return x, shape
    return x.reshape(*x.shape[: x.dim() - len(shape)], math.prod(shape)), shape


def _flat(t: Optional[Tensor], x: Tensor) -> Optional[Tensor]:
    """A weight or bias as lab takes it: 1-dimensional, in x's dtype - the tensor itself when it is
    already, since every view adds an autograd node (~12 us of host time a step on the GPU machine,
    bench/host_cost.py)."""
    if t is None or (t.dim() == 1 and t.dtype == x.dtype):
        return t
    return t.reshape(-1).to(x.dtype)


def _shaped(out: Tensor, rows: Tensor, x: Tensor) -> Tensor:
    """A result over `rows` in x's shape: itself when rows is x (one normalized dimension)."""
    return out if rows is x else out.view(x.shape)


@checked
def layer_norm(x: Tensor, normalized_shape: _Shape, weight: Optional[Tensor] = None, bias: Optional[Tensor] = None,
               eps: float = 1e-5) -> Tensor:
    if not _on_lab(x):
        return F.layer_norm(x, _sequence(normalized_shape), weight, bias, eps)
    rows, _ = _rows(x, normalized_shape, "layer_norm")
    if not _compiling():
        return _shaped(_eager.LayerNorm.run(rows, _flat(weight, x), _flat(bias, x), eps), rows, x)
    out, _, _ = _lab.layer_norm.default(rows, _flat(weight, x), _flat(bias, x), eps)
    return _shaped(out, rows, x)


@checked
def rms_norm(x: Tensor, normalized_shape: _Shape, weight: Optional[Tensor] = None,
             eps: Optional[float] = None) -> Tensor:
    if not _on_lab(x):
        return F.rms_norm(x, _sequence(normalized_shape), weight, eps)
    rows, _ = _rows(x, normalized_shape, "rms_norm")
    if not _compiling():
        return _shaped(_eager.RmsNorm.run(rows, None, _flat(weight, x), eps), rows, x)
    out, _ = _lab.rms_norm.default(rows, _flat(weight, x), eps)
    return _shaped(out, rows, x)


@checked
def add_rms_norm(x: Tensor, residual: Tensor, normalized_shape: _Shape, weight: Optional[Tensor] = None,
                 eps: Optional[float] = None) -> Tuple[Tensor, Tensor]:
    """(rms_norm(h), h) with h = x + residual: the pre-norm residual block in one pass over memory."""
    if not _on_lab(x):
        h = x + residual
        return F.rms_norm(h, _sequence(normalized_shape), weight, eps), h
    rows, _ = _rows(x, normalized_shape, "add_rms_norm")
    residual_rows, _ = _rows(residual.to(x.dtype), normalized_shape, "add_rms_norm")
    if not _compiling():
        out, h = _eager.RmsNorm.run(rows, residual_rows, _flat(weight, x), eps)
    else:
        out, h, _ = _lab.add_rms_norm.default(rows, residual_rows, _flat(weight, x), eps)
    return _shaped(out, rows, x), _shaped(h, rows, x)


@checked
def cross_entropy(input: Tensor, target: Tensor, weight: Optional[Tensor] = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean", label_smoothing: float = 0.0,
                  *, inplace_backward: bool = False, grad_into_logits: bool = False) -> Tensor:
    """torch.nn.functional.cross_entropy with class-index targets, the gradient computed in the
    forward pass. Class weights, probability targets and the deprecated size_average/reduce go to
    torch's own function, as CPU tensors do. inplace_backward=True scales the saved gradient in place
    (no pass at all for loss.backward() of a mean or a sum), allowing one backward per forward.
    grad_into_logits=True (eager mode) also writes the gradient into the logits' own storage: no
    logits-sized tensor beyond the logits, whose values are gone after the call."""
    lab_can = (_on_lab(input) and weight is None and size_average is None and reduce is None and input.dim() >= 1
               and target.dtype in (torch.int64, torch.int32) and target.dim() == input.dim() - 1
               and reduction in ("mean", "sum", "none"))
    if not lab_can:
        return F.cross_entropy(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
    logits = input.movedim(1, -1) if input.dim() > 2 else input  # torch's classes are dimension 1
    with_grad = torch.is_grad_enabled() and input.requires_grad
    if not _compiling():
        if grad_into_logits and with_grad:
            return _loss_ops.CrossEntropyIntoLogits.apply(logits, target, ignore_index, float(label_smoothing),
                                                          reduction)
        return _eager.CrossEntropy.run(logits, target, ignore_index, float(label_smoothing), reduction,
                                       inplace_backward)
    loss, _ = _lab.cross_entropy.default(logits, target, ignore_index, float(label_smoothing), reduction, with_grad,
                                         inplace_backward)
    return loss


def _torch_linear_cross_entropy(hidden, weight, target, bias, ignore_index, label_smoothing, reduction, softcap,
                                z_loss):
    """What linear_cross_entropy computes, in torch's own ops (float32 logits): for tensors lab does
    not take, and the reference the tests compare with."""
    logits = F.linear(hidden, weight, bias).float()
    if softcap:
        logits = softcap * torch.tanh(logits / softcap)
    logits = logits.reshape(-1, logits.shape[-1])
    flat_target = target.reshape(-1)
    loss = F.cross_entropy(logits, flat_target, ignore_index=ignore_index, reduction="none",
                           label_smoothing=label_smoothing)
    if z_loss:
        counted = flat_target != ignore_index
        loss = loss + z_loss * torch.logsumexp(logits, -1).square() * counted
    if reduction == "mean":
        return loss.sum() / (flat_target != ignore_index).sum()
    return loss.sum() if reduction == "sum" else loss.reshape(target.shape)


@checked
def linear_cross_entropy(hidden: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor] = None, *,
                         ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean",
                         softcap: Optional[float] = None, z_loss: float = 0.0,
                         max_scratch_bytes: Optional[int] = None) -> Tensor:
    """cross_entropy(hidden @ weight.T + bias, target) without the logits: lab computes them a chunk
    of rows at a time within max_scratch_bytes (default 256 MiB), with the gradients of hidden,
    weight and bias in the same call. softcap: Gemma's logit softcap; z_loss: PaLM's. The loss is
    float32."""
    if weight.dim() != 2:  # torch would take a vector as one class's weights, and assert on the device
        raise ValueError(f"linear_cross_entropy(): argument 'weight' must be 2-D (classes, hidden), got shape "
                         f"{tuple(weight.shape)}")
    lab_can = (_on_lab(hidden) and weight.dtype == hidden.dtype and weight.device == hidden.device
               and weight.dim() == 2 and (bias is None or (bias.dtype == hidden.dtype and bias.device == hidden.device))
               and target.dtype in (torch.int64, torch.int32) and target.device == hidden.device
               and reduction in ("mean", "sum", "none"))
    if not lab_can:
        return _torch_linear_cross_entropy(hidden, weight, target, bias, ignore_index, label_smoothing, reduction,
                                           softcap, z_loss)
    max_scratch = -1 if max_scratch_bytes is None else int(max_scratch_bytes)
    if not _compiling():
        return _eager.LinearCrossEntropy.run(hidden, weight, target, bias, (
            ignore_index, float(label_smoothing), reduction, float(softcap or 0.0), float(z_loss), max_scratch))
    grad = torch.is_grad_enabled()
    needs = [grad and hidden.requires_grad, grad and weight.requires_grad,
             grad and bias is not None and bias.requires_grad]
    loss, _, _, _ = _lab.linear_cross_entropy.default(
        hidden, weight, target, bias, ignore_index, float(label_smoothing), reduction, float(softcap or 0.0),
        float(z_loss), max_scratch, needs)
    return loss


def _dropout_on_lab(x: Tensor, p: float, training: bool) -> bool:
    """Whether lab draws this dropout: a CUDA float tensor, training, 0 < p < 1, and no CUDA graph
    capture of torch's running on the current stream (lab's generator cannot advance between the
    replays of another framework's graph; torch's can)."""
    if not (training and _on_lab(x) and 0.0 < p < 1.0):
        return False
    return _compiling() or not torch.cuda.is_current_stream_capturing()


def _check_probability(p: float) -> float:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return float(p)


@checked
def dropout(x: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """torch.nn.functional.dropout on lab's generator: x / (1 - p) where kept, 0 where dropped; the
    backward reruns the kernel with the forward's generator state instead of reading a mask."""
    p, training, inplace = _check_probability(p), bool(training), bool(inplace)
    if inplace or not _dropout_on_lab(x, p, training):
        return F.dropout(x, p, training, inplace)
    if _compiling():
        return _lab.dropout_add.default(None, x, p)[0]
    return _dropout_ops.DropoutAdd.run(None, x, p)


@checked
def dropout_add(residual: Tensor, x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """residual + dropout(x, p) in one pass (a transformer block's residual connection); the residual's
    gradient is the incoming one, x's the dropout's backward."""
    p, training = _check_probability(p), bool(training)
    if not _dropout_on_lab(x, p, training) or residual.shape != x.shape or residual.dtype != x.dtype:
        return residual + F.dropout(x, p, training)
    if _compiling():
        return _lab.dropout_add.default(residual, x, p)[0]
    return _dropout_ops.DropoutAdd.run(residual, x, p)


def _glu_on_lab(gate: Tensor, up: Tensor) -> bool:
    """Whether lab's GLU kernels take gate and up: CUDA, a float dtype, one shape and dtype."""
    return _on_lab(gate) and up.dtype == gate.dtype and up.shape == gate.shape


@checked
def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    """silu(gate) * up in one pass (SwiGLU); gate and up may be the halves of one tensor."""
    if not _glu_on_lab(gate, up):
        return F.silu(gate) * up
    if _compiling():
        return _lab.swiglu.default(gate, up)
    return _eager.Glu.run(gate, up, _raw.swiglu, _raw.swiglu_backward)


@checked
def swiglu_linear(gate: Tensor, up: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """linear(swiglu(gate, up), weight, bias) - a Llama MLP's down projection of its SwiGLU - without
    keeping the SwiGLU's output for the backward: it is made again there (one more pass over gate
    and up) instead of held from forward to backward (tokens x intermediate elements a layer).
    Under torch.compile, and for tensors lab does not take, it is the two calls composed."""
    lab_can = (_glu_on_lab(gate, up) and weight.device == gate.device and weight.dtype == gate.dtype
               and (bias is None or bias.dtype == gate.dtype) and not torch.is_autocast_enabled("cuda"))
    if not lab_can or _compiling():
        return F.linear(swiglu(gate, up), weight, bias)
    return _eager.GluLinear.run(gate, up, weight, bias, _raw.swiglu, _raw.swiglu_backward)


_float8_devices: dict = {}


@torch.compiler.assume_constant_result
def _float8_device(device: torch.device) -> bool:
    """Whether the device has float8 tensor cores (compute capability 8.9 or newer), asked once (and
    a constant to torch.compile, which does not trace into the question)."""
    if device not in _float8_devices:
        _float8_devices[device] = torch.cuda.get_device_capability(device) >= (8, 9)
    return _float8_devices[device]


def _float8_on_lab(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> bool:
    """Whether float8_linear's products can run on float8 tensor cores: CUDA tensors of one 16-bit
    or float32 dtype (a bias only with 16-bit ones: the product's epilogue adds it in out's dtype),
    every dimension of the three products - in_features, out_features and the token count - a
    multiple of 16, no autocast, and a GPU with float8 tensor cores."""
    if not (x.is_cuda and x.dtype in (torch.float16, torch.bfloat16, torch.float32) and weight.dtype == x.dtype
            and weight.device == x.device and weight.dim() == 2 and x.dim() >= 1):
        return False
    if bias is not None and (bias.dtype != x.dtype or x.dtype == torch.float32):
        return False
    n, k = weight.shape
    rows = x.numel() // k if k else 0
    aligned = all(size % _float8_ops.ALIGNMENT == 0 and size > 0 for size in (n, k, rows))
    return (aligned and x.shape[-1] == k and not torch.is_autocast_enabled("cuda")
            and _float8_device(x.device))


@checked
def float8_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """linear(x, weight, bias) with its three products - the forward and both gradients - on float8
    tensor cores: x and weight cast to float8_e4m3fn, the output gradient to float8_e5m2, each by its
    own amax (per-tensor current scaling, on the device), and only float8 copies kept for the
    backward (lab/nn/_float8_ops.py). The result has x's dtype. Where the products cannot run in
    float8 (see _float8_on_lab) it is torch's linear. Eager: one autograd.Function
    (_eager.Float8Linear); under torch.compile: the operators."""
    return _float8_linear_sharing(x, weight, bias, None)


class Float8InputCasts:
    """One input's float8 cast (lab::float8_cast), shared by the float8 projections that read that
    same tensor - a layer's q, k and v; gate and up: made by the first, taken by the others, dropped
    with the tensor itself (a weak reference's callback). The backward then keeps one x8_t for all of
    them, and x is read by one reduction and one cast instead of three. Eager only: under
    torch.compile each projection casts its own input (the compiler sees the same operator calls)."""

    def __init__(self):
        self.source, self.version, self.cast = None, None, None

    def lookup(self, x: Tensor, transposed: bool) -> Tuple[Tensor, Tensor, Tensor]:
        if (self.source is not None and self.source() is x and self.version == x._version
                and (self.cast[1].numel() > 0 or not transposed)):
            return self.cast
        self.cast = _lab.float8_cast.default(x.detach(), transposed)
        self.source, self.version = weakref.ref(x, self._dropped), x._version
        return self.cast

    def _dropped(self, reference) -> None:
        if self.source is reference:
            self.source = self.cast = None


def _float8_linear_sharing(x: Tensor, weight: Tensor, bias: Optional[Tensor],
                           casts: Optional[Float8InputCasts]) -> Tensor:
    """float8_linear's body, taking x's cast from `casts` where given (lab.nn.patch's projections)."""
    if not _float8_on_lab(x, weight, bias):
        return F.linear(x, weight, bias)
    grad = torch.is_grad_enabled()
    keep_x, keep_weight = grad and weight.requires_grad, grad and x.requires_grad
    if _compiling():
        return _lab.float8_linear.default(x, weight, bias, keep_x, keep_weight)[0]
    x8, x8_t, scale = casts.lookup(x, keep_x) if casts is not None else (None, None, None)
    return _eager.Float8Linear.run(x, weight, bias, keep_x, keep_weight, x8, x8_t, scale)


@checked
def geglu(gate: Tensor, up: Tensor) -> Tensor:
    """gelu(gate, approximate="tanh") * up in one pass (GeGLU)."""
    if not _glu_on_lab(gate, up):
        return F.gelu(gate, approximate="tanh") * up
    if _compiling():
        return _lab.geglu.default(gate, up)
    return _eager.Glu.run(gate, up, _raw.geglu, _raw.geglu_backward)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rotate_interleaved(x: Tensor) -> Tensor:
    pairs = x.unflatten(-1, (-1, 2))
    return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)


def _rope_reference(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool) -> Tensor:
    """Hugging Face's formula, x * cos + rotate(x) * sin, over the first cos.shape[-1] elements of
    each row (the rest passed through, as the partial-rotary models do); cos already broadcasts."""
    rotary_dim = cos.shape[-1]
    rotated, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    turn = _rotate_interleaved if interleaved else _rotate_half
    out = rotated * cos + turn(rotated) * sin
    return out if rest.shape[-1] == 0 else torch.cat((out, rest), dim=-1)


@checked
def apply_rotary_pos_emb(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, position_ids: Optional[Tensor] = None,
                         unsqueeze_dim: int = 1, interleaved: bool = False) -> Tuple[Tensor, Tensor]:
    """Hugging Face's apply_rotary_pos_emb: (q * cos + rotate_half(q) * sin, the same for k), both in
    one launch of lab.rope. q (batch, heads, positions, head_dim) with unsqueeze_dim=1 - or (batch,
    positions, heads, head_dim) with unsqueeze_dim=2 - and k with its own number of heads; cos and sin
    (batch or 1, positions, rotary_dim) as the model's rotary embedding returns them. A rotary_dim below
    head_dim rotates the first rotary_dim elements and keeps the rest; interleaved=True pairs (2i, 2i+1)
    (GPT-J) instead of (i, i + rotary_dim/2). position_ids is ignored, as in transformers. Anything lab
    does not take (CPU tensors, tables that require grad, other shapes) runs the same formula in torch."""
    unsqueeze = unsqueeze_dim % 4 if q.dim() == 4 else unsqueeze_dim
    on_lab = (_on_lab(q) and k.dtype == q.dtype and q.dim() == 4 and k.dim() == 4 and unsqueeze in (1, 2)
              and cos.dim() == 3 and sin.shape == cos.shape and cos.dtype == sin.dtype
              and cos.dtype in (q.dtype, torch.float32) and not (cos.requires_grad or sin.requires_grad)
              and cos.shape[-1] % 2 == 0 and 0 < cos.shape[-1] <= q.shape[-1])
    if not on_lab:
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return _rope_reference(q, cos, sin, interleaved), _rope_reference(k, cos, sin, interleaved)
    rope = _lab.rope.default if _compiling() else _eager.Rope.run
    if unsqueeze == 2:  # (batch, positions, heads, head_dim): rotated as its (batch, heads, ...) view
        q_out, k_out = rope(q.transpose(1, 2), k.transpose(1, 2), cos, sin, interleaved)
        return q_out.transpose(1, 2), k_out.transpose(1, 2)
    return rope(q, k, cos, sin, interleaved)


_ATTENTION_HEAD_DIMS = (64, 96, 128)


def _attention_call(q, k, v, causal, window, softcap, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                    max_seqlen_k) -> Tensor:
    left, right = (-1, -1) if window is None else (-1 if window[0] is None else int(window[0]),
                                                   -1 if window[1] is None else int(window[1]))
    if scale is None:  # 1/sqrt(head_dim); a head_dim of 0 is the operator's to refuse, by name
        scale = 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] > 0 else 1.0
    scale = float(scale)
    out, _ = _lab.attention.default(q, k, v, bool(causal), left, right, float(softcap), scale, cu_seqlens_q,
                                    cu_seqlens_k, int(max_seqlen_q or 0), int(max_seqlen_k or 0))
    return out


@checked
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Optional[Tensor] = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> Tensor:
    """torch.nn.functional.scaled_dot_product_attention's signature on lab's flash attention: query
    (batch, heads, L, head_dim), key and value (batch, heads_k, S, head_dim), float16 or bfloat16 CUDA
    tensors, head_dim 64, 96 or 128; grouped queries with enable_gqa=True. What lab does not run - an
    attn_mask, dropout, other dtypes or head dims, CPU tensors or tensors on different devices, is_causal
    with L != S (torch aligns that diagonal at the top left, lab at the bottom right) - runs torch's own
    function."""
    on_lab = (query.is_cuda and key.device == query.device and value.device == query.device
              and query.dim() == 4 and key.dim() == 4 and value.dim() == 4
              and query.dtype in (torch.float16, torch.bfloat16) and key.dtype == query.dtype
              and value.dtype == query.dtype and attn_mask is None and dropout_p == 0.0
              and query.shape[-1] in _ATTENTION_HEAD_DIMS and key.shape[-1] == query.shape[-1]
              and value.shape == key.shape and key.shape[0] == query.shape[0]
              and (key.shape[1] == query.shape[1] or (enable_gqa and query.shape[1] % key.shape[1] == 0))
              and not (is_causal and query.shape[2] != key.shape[2]))
    if not on_lab:
        extra = {"enable_gqa": enable_gqa} if enable_gqa else {}
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                              is_causal=is_causal, scale=scale, **extra)
    return _attention_call(query, key, value, is_causal, None, 0.0, scale, None, None, 0, 0)


@checked
def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False,
              window: Optional[Tuple[Optional[int], Optional[int]]] = None,
              softcap: float = 0.0, scale: Optional[float] = None, cu_seqlens_q: Optional[Tensor] = None,
              cu_seqlens_k: Optional[Tensor] = None, max_seqlen_q: Optional[int] = None,
              max_seqlen_k: Optional[int] = None) -> Tensor:
    """lab.attention with autograd: q (batch, heads, positions, head_dim), or a packed batch q (tokens,
    heads, head_dim) with cu_seqlens_q, cu_seqlens_k (int32 cumulative lengths) and max_seqlen_q,
    max_seqlen_k (flash-attn's varlen arguments); k and v with a number of heads dividing q's; causal
    (the diagonal at the bottom right), a sliding window=(left, right) (-1 or None: no bound), a logit
    softcap, a scale (default 1/sqrt(head_dim)). float16 or bfloat16 CUDA tensors, head_dim 64, 96 or
    128. A packed output's rows that no sequence covers are zeros. lab.attention's errors otherwise."""
    return _attention_call(q, k, v, causal, window, softcap, scale, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                           max_seqlen_k)


# The bodies without their type checks, for lab.nn's own callers - the patched models' forwards and
# the attention function registered with transformers - whose arguments are the model's tensors and
# numbers: every layer of a training step would otherwise pay the checks again.
_unchecked = types.SimpleNamespace(**{name: value.__wrapped__ for name, value in list(globals().items())
                                      if getattr(value, "__lab_checked__", False)})
