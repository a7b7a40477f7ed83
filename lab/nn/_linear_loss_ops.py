"""The fused linear cross-entropy as torch operators (torch.library.custom_op): the loss of
hidden @ weight.T (+ bias) without the logits, its gradients computed in the same call.

For a reduced loss ('mean', 'sum') the forward computes the gradients with the loss and saves them;
the backward scales them by the incoming gradient in place - no pass at all where it is 1, as for
loss.backward() - so a second backward through the same graph (retain_graph=True) raises autograd's
in-place error instead of scaling twice. For 'none' the incoming gradient differs per row and the
weight's gradient sums over rows, so the forward computes the loss alone and the backward calls
lab again with the incoming gradients (the logits' product is made once more).

The scratch memory is a torch tensor: torch's allocator accounts for it and reuses it afterwards."""
import functools
from typing import List, Optional, Tuple

import torch
from torch import Tensor

import lab

from ._ops import _per_row, _plain

_DTYPE_NAMES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32",
                torch.float64: "float64"}


@functools.lru_cache(maxsize=256)
def _scratch_bytes(rows: int, classes: int, dtype: torch.dtype, reduction: str, bias_grad: bool,
                   max_scratch_bytes: int) -> int:
    """The scratch lab's plan asks for: a pure function of the problem, so asked once per problem
    rather than every call (the plan is a dict built in C)."""
    plan = lab.linear_cross_entropy_plan(rows, classes, _DTYPE_NAMES[dtype], reduction, bias_grad,
                                         None if max_scratch_bytes < 0 else max_scratch_bytes)
    return plan["scratch_bytes"]


def _scratch(hidden: Tensor, classes: int, reduction: str, bias_grad: bool, max_scratch_bytes: int) -> Tensor:
    rows = hidden.numel() // hidden.shape[-1] if hidden.shape[-1] else hidden[..., 0].numel()
    size = _scratch_bytes(rows, classes, hidden.dtype, reduction, bias_grad, max_scratch_bytes)
    return torch.empty(size, dtype=torch.uint8, device=hidden.device)


def _loss_like(hidden: Tensor, reduction: str) -> Tensor:
    return _per_row(hidden, torch.float32) if reduction == "none" else hidden.new_empty((), dtype=torch.float32)


def grad_buffers(hidden: Tensor, weight: Tensor, bias: Optional[Tensor], needs) -> tuple:
    """The gradient buffers lab writes - hidden's, weight's, bias's - each wanted one new, None for the rest."""
    return (torch.empty_like(hidden) if needs[0] else None,
            torch.empty_like(weight) if needs[1] else None,
            torch.empty_like(bias) if needs[2] and bias is not None else None)


def _as_outputs(hidden: Tensor, buffers) -> tuple:
    # an operator's output a gradient is not wanted for is empty - a new one each: outputs may not alias
    return tuple(hidden.new_empty(0) if grad is None else grad for grad in buffers)


def run(hidden, weight, target, bias, grad_output, grads, options, loss) -> None:
    """lab's call: grads are the buffers of hidden's, weight's and bias's gradients, None where one is
    not wanted; options (ignore_index, label_smoothing, reduction, softcap, z_loss, max_scratch_bytes)."""
    ignore_index, label_smoothing, reduction, softcap, z_loss, max_scratch_bytes = options
    lab.linear_cross_entropy(
        _plain(hidden), _plain(weight), target, loss, bias=_plain(bias),
        grad_hidden=grads[0], grad_weight=grads[1], grad_bias=grads[2],
        grad_output=None if grad_output is None else _plain(grad_output),
        ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction,
        softcap=None if softcap <= 0 else softcap, z_loss=z_loss,
        scratch=_scratch(hidden, weight.shape[0], reduction, grads[2] is not None, max_scratch_bytes))


@torch.library.custom_op("lab::linear_cross_entropy", mutates_args=())
def linear_cross_entropy(hidden: Tensor, weight: Tensor, target: Tensor, bias: Optional[Tensor], ignore_index: int,
                         label_smoothing: float, reduction: str, softcap: float, z_loss: float,
                         max_scratch_bytes: int, needs: List[bool]) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """(loss, grad_hidden, grad_weight, grad_bias); a gradient not in `needs` is empty, and for
    'none' all are (the backward computes them)."""
    loss = _loss_like(hidden, reduction)
    wanted = needs if reduction != "none" else (False, False, False)
    buffers = grad_buffers(hidden, weight, bias, wanted)
    run(hidden, weight, target, bias, None, buffers,
        (ignore_index, label_smoothing, reduction, softcap, z_loss, max_scratch_bytes), loss)
    return (loss,) + _as_outputs(hidden, buffers)


@linear_cross_entropy.register_fake
def _(hidden, weight, target, bias, ignore_index, label_smoothing, reduction, softcap, z_loss, max_scratch_bytes,
      needs):
    wanted = needs if reduction != "none" else (False, False, False)
    return (_loss_like(hidden, reduction),) + _as_outputs(hidden, grad_buffers(hidden, weight, bias, wanted))


@torch.library.custom_op("lab::linear_cross_entropy_backward", mutates_args=())
def linear_cross_entropy_backward(grad_loss: Tensor, hidden: Tensor, weight: Tensor, target: Tensor,
                                  bias: Optional[Tensor], ignore_index: int, label_smoothing: float,
                                  softcap: float, z_loss: float, max_scratch_bytes: int,
                                  needs: List[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    """The gradients of reduction='none' for one upstream gradient per row: the call again, its loss
    thrown away."""
    buffers = grad_buffers(hidden, weight, bias, needs)
    run(hidden, weight, target, bias, grad_loss, buffers,
        (ignore_index, label_smoothing, "none", softcap, z_loss, max_scratch_bytes), _loss_like(hidden, "none"))
    return _as_outputs(hidden, buffers)


@linear_cross_entropy_backward.register_fake
def _(grad_loss, hidden, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss, max_scratch_bytes,
      needs):
    return _as_outputs(hidden, grad_buffers(hidden, weight, bias, needs))


@torch.library.custom_op("lab::scale_saved_grads_", mutates_args=("grad_hidden", "grad_weight", "grad_bias"))
def scale_saved_grads_(grad_loss: Tensor, grad_hidden: Tensor, grad_weight: Tensor, grad_bias: Tensor) -> None:
    """The saved gradients *= grad_loss (one number) in place; nothing is touched where it is 1
    (checked on the device: lab.cross_entropy_backward skips such rows)."""
    scale_in_place(grad_loss, (grad_hidden, grad_weight, grad_bias))


def scale_in_place(grad_loss: Tensor, grads) -> None:
    """Each non-empty gradient of grads (None for none) *= grad_loss, in place."""
    for grad in grads:
        if grad is not None and grad.numel():
            lab.cross_entropy_backward(_plain(grad_loss), grad.view(1, -1) if grad.dim() < 2 else grad)


@scale_saved_grads_.register_fake
def _(grad_loss, grad_hidden, grad_weight, grad_bias):
    return None


def _setup(ctx, inputs, output):
    hidden, weight, target, bias = inputs[:4]
    ctx.options = inputs[4:]
    ctx.set_materialize_grads(False)
    ctx.reduced = inputs[6] != "none"
    if ctx.reduced:
        ctx.save_for_backward(*output[1:])
    else:
        ctx.save_for_backward(hidden, weight, target, bias)


def _grad(ctx, grad_loss, *_grads_of_grads):
    none = (None,) * 7
    if grad_loss is None:
        return (None, None, None, None) + none
    ignore_index, label_smoothing, reduction, softcap, z_loss, max_scratch_bytes, needs = ctx.options
    if ctx.reduced:
        grads = list(ctx.saved_tensors)
        torch.ops.lab.scale_saved_grads_.default(grad_loss, *grads)
    else:
        hidden, weight, target, bias = ctx.saved_tensors
        grads = list(torch.ops.lab.linear_cross_entropy_backward.default(
            grad_loss, hidden, weight, target, bias, ignore_index, label_smoothing, softcap, z_loss,
            max_scratch_bytes, needs))
    grads = [g if need else None for g, need in zip(grads, needs)]
    return (grads[0], grads[1], None, grads[2]) + none


linear_cross_entropy.register_autograd(_grad, setup_context=_setup)
