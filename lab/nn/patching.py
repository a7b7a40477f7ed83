"""lab.nn.patch(model): lab's kernels in a Hugging Face model of the Llama family in one call.

What it replaces, in place, where the installed transformers defines it as lab expects:
  - each <Family>RMSNorm module: lab.nn's rms_norm (one pass, statistics in float32);
  - each <Family>MLP whose activation is SiLU: down_proj(lab.nn.swiglu(gate_proj(x), up_proj(x))),
    by default with the SwiGLU's output made again in the backward instead of kept
    (lab.nn.functional.swiglu_linear, where down_proj is a plain nn.Linear);
  - the rotary application: the family's module-level apply_rotary_pos_emb, which the attention
    calls by name, becomes lab.nn.apply_rotary_pos_emb (q and k in one launch). It is the one
    replacement that is not per instance - a module-level function cannot be - so it reaches every
    model of that family in the process; lab's function runs transformers' formula wherever lab's
    kernel does not apply, and undo() puts the original back once no patched model needs it;
  - attention: the model's attention implementation becomes "lab" (registered with transformers'
    AttentionInterface, _hf_attention.py), so every attention module runs lab's flash attention -
    causal, grouped heads and the config's sliding window - on plain, padded and padding-free
    batches (one row of samples back to back, position_ids restarting at 0); undo() restores the
    implementation the model had. A head_dim lab's kernels do not take leaves it as it was;
  - the causal-LM head (<Family>ForCausalLM): when the model is training and given labels, the loss
    comes from lab.nn.linear_cross_entropy on the last hidden states - the logits are never made,
    and the output's logits are None, as with Liger-Kernel's patch; in a padding-free row the token
    that ends one sample does not predict the next sample's first. Evaluation, generation and calls
    without labels run transformers' own forward.
  - with float8="tensorwise", the decoder's projections (q/k/v/o, gate/up/down) whose shapes gain
    from it (float8_gains) run lab.nn.float8_linear: their three products on float8 tensor cores,
    scaled per tensor by each operand's own amax. lm_head and the loss stay in the model's dtype.
The modules keep their classes, parameters and state_dict keys: each gets its own `forward`
attribute (the instance's, over the class's), which undo() deletes. Families: Llama, Mistral, Qwen2,
Qwen3. A model of any other family is left as it is, and the result says so."""
import types
from typing import Callable, List, Optional, Tuple

import torch

from . import _hf_attention, functional
from ._arguments import checked

_bodies = functional._unchecked  # lab's own calls on the model's tensors: no type checks on every layer

FAMILIES = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3"}


class Patched:
    """What lab.nn.patch did: `patched` and `left_alone` list (module name, what or why) pairs;
    undo() restores the model (and the module-level rotary function) as it was."""

    def __init__(self, family: str):
        self.family = family
        self.patched: List[Tuple[str, str]] = []
        self.left_alone: List[Tuple[str, str]] = []
        self._undo: List[Callable[[], None]] = []

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()
        self.patched = []

    def counts(self) -> dict:
        """How many modules of each kind were replaced, e.g. {'rms_norm': 17, 'swiglu': 8, ...}."""
        found: dict = {}
        for _, what in self.patched:
            found[what] = found.get(what, 0) + 1
        return found

    def __repr__(self) -> str:
        counts = ", ".join(f"{what} x{n}" for what, n in self.counts().items()) or "nothing"
        alone = "; ".join(f"{name or '<model>'}: {why}" for name, why in self.left_alone)
        return f"<lab.nn.patch of a {self.family or 'model'}: {counts}" + (f"; left alone: {alone}>" if alone else ">")


def _family(model: torch.nn.Module):
    """(key, its transformers modeling module) for the model's family, or None."""
    module = type(model).__module__
    for key in FAMILIES:
        if module == f"transformers.models.{key}.modeling_{key}":
            import importlib
            return key, importlib.import_module(module)
    return None


def _set_forward(module: torch.nn.Module, forward, result: Patched, name: str, what: str) -> None:
    module.forward = types.MethodType(forward, module)
    result.patched.append((name, what))
    result._undo.append(lambda: module.__dict__.pop("forward", None))


def _rms_norm_forward(self, hidden_states):
    if self.weight.dtype != hidden_states.dtype:  # transformers' result is then the weight's dtype
        return type(self).forward(self, hidden_states)
    return _bodies.rms_norm(hidden_states, (hidden_states.shape[-1],), self.weight, self.variance_epsilon)


def _swiglu_mlp_forward(self, x):
    return self.down_proj(_bodies.swiglu(self.gate_proj(x), self.up_proj(x)))


def _plain_linear(module) -> bool:
    """Whether calling `module` is exactly F.linear on its weight and bias: an nn.Linear itself (not
    a subclass, a LoRA wrapper or a module sharded by FSDP2, whose classes differ) with no hooks and
    its class's forward (not float8's, set by this patch)."""
    return (type(module) is torch.nn.Linear and "forward" not in module.__dict__
            and not module._forward_hooks and not module._forward_pre_hooks
            and not torch.nn.modules.module._global_forward_hooks
            and not torch.nn.modules.module._global_forward_pre_hooks)


PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
FLOAT8_RECIPES = ("tensorwise",)
# What a projection needs for float8 to pay: both sides at least FLOAT8_MIN_FEATURES. Smaller products
# gain less than their casts (a reduction and a cast pass over x and w, one of each over the gradient)
# and their calls' host time cost. Measured on an H100 (bench/results/2026-12-07-h100-*-1810bc2.json):
# the 8 B-shaped step with q, o and the MLP in float8 (this rule's choice there) ran 1.21x the bf16
# step's tokens a second; the 1 B step with the same in float8 (2048 wide), 0.92x. Alone at 8192 tokens the 8 B MLP's
# projections gained 1.47x and 1.31x; 4096 x 4096 measured 0.87x, but host-bound (the GPU waited on
# the calls), and 4096 -> 1024 0.38x.
FLOAT8_MIN_FEATURES = 4096


def float8_gains(in_features: int, out_features: int) -> bool:
    """The per-shape rule of patch(float8=...): whether a projection of this shape is converted -
    both sides at least FLOAT8_MIN_FEATURES and multiples of 16, as cuBLASLt's float8 kernels want."""
    return all(size >= FLOAT8_MIN_FEATURES and size % 16 == 0 for size in (in_features, out_features))


def _float8_linear_forward(casts: functional.Float8InputCasts):
    """A projection's forward in float8, sharing the cast of its input with the model's other
    projections that read the same tensor."""
    def forward(self, x):
        return functional._float8_linear_sharing(x, self.weight, self.bias, casts)
    return forward


def _patch_float8(model: torch.nn.Module, result: Patched) -> None:
    forward = _float8_linear_forward(functional.Float8InputCasts())
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] not in PROJECTIONS or not isinstance(module, torch.nn.Linear):
            continue
        if not _plain_linear(module):
            result.left_alone.append((name, "float8: not a plain nn.Linear (a subclass, a wrapper or hooks)"))
        elif not float8_gains(module.in_features, module.out_features):
            result.left_alone.append((name, f"float8: {module.in_features} -> {module.out_features} features "
                                            f"is below what gains ({FLOAT8_MIN_FEATURES} each way)"))
        else:
            _set_forward(module, forward, result, name, "float8_linear")


def _swiglu_mlp_forward_recomputed(self, x):
    """The MLP with down_proj's input made again in the backward instead of kept (swiglu_linear)."""
    down = self.down_proj
    if not _plain_linear(down):
        return _swiglu_mlp_forward(self, x)
    return _bodies.swiglu_linear(self.gate_proj(x), self.up_proj(x), down.weight, down.bias)


def _rotary(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    """transformers' apply_rotary_pos_emb signature over lab.nn's."""
    return _bodies.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)


# module -> [transformers' own function, how many patches use lab's]
_rotary_patches: dict = {}


def _patch_rotary(modeling, result: Patched) -> None:
    entry = _rotary_patches.get(modeling)
    if entry is None:
        entry = _rotary_patches[modeling] = [modeling.apply_rotary_pos_emb, 0]
        modeling.apply_rotary_pos_emb = _rotary
    entry[1] += 1
    result.patched.append((f"{modeling.__name__}.apply_rotary_pos_emb", "rope"))

    def undo():
        entry[1] -= 1
        if entry[1] == 0:
            modeling.apply_rotary_pos_emb = entry[0]
            del _rotary_patches[modeling]
    result._undo.append(undo)


def _patch_attention(model: torch.nn.Module, prefix: str, result: Patched) -> None:
    config = getattr(model, "config", None)
    if config is None or not hasattr(model, "set_attn_implementation"):
        result.left_alone.append(("", "attention: a model without transformers' attention interface"))
        return
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if head_dim not in _hf_attention.HEAD_DIMS:
        result.left_alone.append(("", f"attention: head_dim {head_dim}; lab's kernels take 64, 96 or 128"))
        return
    previous = getattr(config, "_attn_implementation", None) or "sdpa"
    _hf_attention.register()
    model.set_attn_implementation(_hf_attention.NAME)
    for name, module in model.named_modules():
        if type(module).__name__ == f"{prefix}Attention":
            result.patched.append((name, "attention"))
    result._undo.append(lambda: model.set_attn_implementation(previous))


def _sample_boundaries_ignored(labels, position_ids, shift_labels):
    """In a padding-free row (position_ids restarting at 0 at each sample), the label of the token
    before each restart - the next sample's first token - is not a target."""
    if position_ids is None or position_ids.shape[-1] != labels.shape[-1]:
        return shift_labels
    starts = position_ids.expand_as(labels)[..., 1:] == 0
    return shift_labels.masked_fill(torch.nn.functional.pad(starts, (0, 1), value=False).to(shift_labels.device),
                                    -100)


def _causal_lm_forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                       inputs_embeds=None, labels=None, use_cache=None, logits_to_keep=0, **kwargs):
    """transformers' causal-LM forward, with the loss of a training step fused with the head."""
    if labels is None or not self.training:
        return type(self).forward(self, input_ids=input_ids, attention_mask=attention_mask,
                                  position_ids=position_ids, past_key_values=past_key_values,
                                  inputs_embeds=inputs_embeds, labels=labels, use_cache=use_cache,
                                  logits_to_keep=logits_to_keep, **kwargs)
    from transformers.modeling_outputs import CausalLMOutputWithPast
    num_items_in_batch = kwargs.pop("num_items_in_batch", None)
    shift_labels = kwargs.pop("shift_labels", None)
    return_dict = kwargs.pop("return_dict", None)
    outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=past_key_values, inputs_embeds=inputs_embeds, use_cache=use_cache, **kwargs)
    hidden = outputs.last_hidden_state
    if shift_labels is None:  # token t predicts token t + 1; the last one predicts nothing
        shift_labels = torch.nn.functional.pad(labels, (0, 1), value=-100)[..., 1:]
        shift_labels = _sample_boundaries_ignored(labels, position_ids, shift_labels)
    reduction = "mean" if num_items_in_batch is None else "sum"
    loss = _bodies.linear_cross_entropy(hidden.reshape(-1, hidden.shape[-1]), self.lm_head.weight,
                                        shift_labels.reshape(-1).to(hidden.device), self.lm_head.bias,
                                        reduction=reduction)
    if num_items_in_batch is not None:
        loss = loss / (num_items_in_batch.to(loss.device) if torch.is_tensor(num_items_in_batch)
                       else num_items_in_batch)
    out = CausalLMOutputWithPast(loss=loss, logits=None, past_key_values=outputs.past_key_values,
                                 hidden_states=outputs.hidden_states, attentions=outputs.attentions)
    return out.to_tuple() if return_dict is False else out


@checked
def patch(model: torch.nn.Module, *, rms_norm: bool = True, swiglu: bool = True, rope: bool = True,
          attention: bool = True, loss: bool = True, recompute_mlp: bool = True,
          float8: Optional[str] = None) -> Patched:
    """Replaces what lab does better in `model` (see this module's docstring); each of the first five
    keywords turns one replacement off. recompute_mlp: the SwiGLU's output, down_proj's input, is
    made again in the backward rather than kept from the forward (lab.nn.functional.swiglu_linear) -
    one more SwiGLU pass a layer for tokens x intermediate elements less memory a layer (a float8
    down_proj keeps its input in float8 instead). float8: None, or "tensorwise" to run the decoder's
    projections that gain from it on float8 tensor cores.
    Returns a Patched: what was replaced, what was left alone and why, and undo()."""
    if float8 is not None and float8 not in FLOAT8_RECIPES:
        raise ValueError(f"lab.nn.patch(): float8 must be None or one of {', '.join(map(repr, FLOAT8_RECIPES))}; "
                         f"got {float8!r}")
    found = _family(model)
    if found is None:
        result = Patched("")
        result.left_alone.append(("", f"{type(model).__name__} (from {type(model).__module__}) is not a family "
                                      f"lab.nn.patch knows: {', '.join(FAMILIES.values())}"))
        return result
    key, modeling = found
    prefix = FAMILIES[key]
    result = Patched(prefix)
    norm_class = getattr(modeling, f"{prefix}RMSNorm", None)
    mlp_class = getattr(modeling, f"{prefix}MLP", None)
    for name, module in model.named_modules():
        if rms_norm and norm_class is not None and type(module) is norm_class:
            if hasattr(module, "variance_epsilon") and isinstance(getattr(module, "weight", None), torch.Tensor):
                _set_forward(module, _rms_norm_forward, result, name, "rms_norm")
            else:
                result.left_alone.append((name, "an RMSNorm without weight and variance_epsilon"))
        elif swiglu and mlp_class is not None and type(module) is mlp_class:
            act = getattr(getattr(module, "config", model.config if hasattr(model, "config") else None), "hidden_act",
                          None)
            parts = all(isinstance(getattr(module, p, None), torch.nn.Module) for p in ("gate_proj", "up_proj",
                                                                                          "down_proj"))
            if act in ("silu", "swish") and parts:
                _set_forward(module, _swiglu_mlp_forward_recomputed if recompute_mlp else _swiglu_mlp_forward, result,
                             name, "swiglu")
            else:
                result.left_alone.append((name, f"an MLP with activation {act!r}: lab fuses SiLU's (SwiGLU)"))
    if rope:
        if callable(getattr(modeling, "apply_rotary_pos_emb", None)):
            _patch_rotary(modeling, result)
        else:
            result.left_alone.append((modeling.__name__, "no module-level apply_rotary_pos_emb to replace"))
    if attention:
        _patch_attention(model, prefix, result)
    if float8 is not None:
        _patch_float8(model, result)
    head_class = getattr(modeling, f"{prefix}ForCausalLM", None)
    if loss and head_class is not None and type(model) is head_class:
        if isinstance(getattr(model, "lm_head", None), torch.nn.Linear) and hasattr(model, "model"):
            _set_forward(model, _causal_lm_forward, result, "", "linear_cross_entropy")
        else:
            result.left_alone.append(("", "a causal LM without an nn.Linear lm_head"))
    return result
