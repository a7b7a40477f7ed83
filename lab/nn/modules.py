"""lab.nn.LayerNorm and lab.nn.RMSNorm: torch.nn.LayerNorm and torch.nn.RMSNorm with lab's kernels
in forward. Subclasses, so the constructor arguments, parameters, state_dict keys, initialisation and
repr are torch's own: swap the class, keep the checkpoint. lab.nn.Float8Linear: torch.nn.Linear with its
three products on float8 tensor cores. lab.nn.LinearCrossEntropyLoss: the loss head's module, called
with the hidden states and the head's weight."""
from typing import Optional

import torch

from . import functional


class LayerNorm(torch.nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(torch.nn.RMSNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.rms_norm(x, self.normalized_shape, self.weight, self.eps)


class Float8Linear(torch.nn.Linear):
    """torch.nn.Linear whose forward and both gradients run on float8 tensor cores, each operand
    scaled by its own amax (lab.nn.functional.float8_linear). The parameters stay in their own dtype:
    float8 is only the products' operands and what the backward keeps. from_linear(linear) wraps an
    existing layer's parameters (shared, not copied)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.float8_linear(x, self.weight, self.bias)

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear) -> "Float8Linear":
        layer = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta")
        layer.weight, layer.bias = linear.weight, linear.bias
        return layer


class LinearCrossEntropyLoss(torch.nn.Module):
    """loss = cross_entropy(hidden @ weight.T + bias, target), the logits never held: call it with
    (hidden, lm_head.weight, target[, lm_head.bias]). The options are linear_cross_entropy's."""

    def __init__(self, ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean",
                 softcap: Optional[float] = None, z_loss: float = 0.0, max_scratch_bytes: Optional[int] = None):
        super().__init__()
        self.ignore_index, self.label_smoothing, self.reduction = ignore_index, label_smoothing, reduction
        self.softcap, self.z_loss, self.max_scratch_bytes = softcap, z_loss, max_scratch_bytes

    def forward(self, hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        return functional.linear_cross_entropy(
            hidden, weight, target, bias, ignore_index=self.ignore_index, label_smoothing=self.label_smoothing,
            reduction=self.reduction, softcap=self.softcap, z_loss=self.z_loss,
            max_scratch_bytes=self.max_scratch_bytes)

    def extra_repr(self) -> str:
        return (f"ignore_index={self.ignore_index}, label_smoothing={self.label_smoothing}, "
                f"reduction={self.reduction!r}, softcap={self.softcap}, z_loss={self.z_loss}")
