"""lab.nn.LayerNorm and lab.nn.RMSNorm: torch.nn.LayerNorm and torch.nn.RMSNorm with lab's kernels
in forward. Subclasses, so the constructor arguments, parameters, state_dict keys, initialisation and
repr are torch's own: swap the class, keep the checkpoint."""
import torch

from . import functional


class LayerNorm(torch.nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(torch.nn.RMSNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return functional.rms_norm(x, self.normalized_shape, self.weight, self.eps)
