"""lab.nn's argument rules (lab/_arguments.py): a tensor is a torch.Tensor, and torch.compile's
symbolic sizes pass for ints and floats. `@checked` on every public function of lab.nn."""
import torch

from .._arguments import Rules

RULES = Rules("lab.nn", {torch.Tensor: (lambda value: isinstance(value, torch.Tensor), "a torch.Tensor")},
              symbolic_ints=(torch.SymInt,), symbolic_reals=(torch.SymFloat,), not_reals=(torch.Tensor,))
checked = RULES.checked
