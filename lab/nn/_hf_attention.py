"""The attention function lab.nn.patch registers with transformers (AttentionInterface and
AttentionMaskInterface, under the name "lab"): a model whose attention implementation is "lab" calls
it from every attention module with q, k, v (batch, heads, positions, head_dim) after the rotary
embedding, and gets (batch, positions, heads, head_dim) back, as from transformers' own functions.

A plain batch (no padding, no packing) with neither a window nor a softcap runs transformers' SDPA
function unmasked - torch's flash or cuDNN kernel, faster there than lab's (docs/attention.md has the
numbers). lab's flash attention runs the rest:
  - a plain one with a sliding window or a softcap: the transposed views as they are;
  - a padded one: the model gives a (batch, positions) padding mask (the mask function registered
    with it is transformers' flash-attention one), and the real tokens are gathered into a packed
    batch, run, and scattered back;
  - a padding-free one: one row of samples back to back, told by flash-attention kwargs
    (cu_seq_lens_q/k, max_length_q/k: DataCollatorWithFlattening(return_flash_attn_kwargs=True)) or
    by position_ids that restart at 0 - run as a packed batch, no sample seeing another.
A sliding window (Mistral's) and a softcap pass through. Whatever lab does not run - CPU tensors,
float32, head dims other than 64, 96 and 128, dropout, a key length other than the query's with a
mask - runs transformers' SDPA function with an equivalent mask."""
import weakref
from typing import Callable, Optional

import torch
from torch import Tensor

from . import functional

_bodies = functional._unchecked  # lab's own calls on the model's tensors: no type checks on every layer

NAME = "lab"
HEAD_DIMS = (64, 96, 128)


def _on_lab(query: Tensor, key: Tensor, dropout: float) -> bool:
    return (query.is_cuda and query.dtype in (torch.float16, torch.bfloat16) and key.dtype == query.dtype
            and query.shape[-1] in HEAD_DIMS and key.shape[-1] == query.shape[-1] and dropout == 0.0)


def _cumulative(lengths: Tensor) -> Tensor:
    return torch.nn.functional.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))


def _sdpa(module, query, key, value, attention_mask, dropout, scaling, causal, packing, sliding_window):
    """transformers' SDPA function, with what lab's function was told - a padding mask, a padding-free
    row's samples, causality, a sliding window - made the 4-D mask it takes."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    sq, sk = query.shape[2], key.shape[2]
    i = torch.arange(sq, device=query.device)[:, None] + (sk - sq)  # each query's own key
    j = torch.arange(sk, device=query.device)[None, :]
    keep = torch.ones(sq, sk, dtype=torch.bool, device=query.device)
    if causal:
        keep = keep & (j <= i)
    if sliding_window:
        keep = keep & (j > i - sliding_window)
        if not causal:
            keep = keep & (j < i + sliding_window)
    keep = keep[None, None]
    if attention_mask is not None and attention_mask.dim() == 2:
        keep = keep & attention_mask.bool()[:, None, None, :]
    elif attention_mask is not None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=False)
    elif packing is not None:  # each token sees its own sample's keys only
        cu_q, cu_k = packing[0].long(), packing[1].long()
        sample_q = torch.searchsorted(cu_q, torch.arange(sq, device=cu_q.device), right=True)
        sample_k = torch.searchsorted(cu_k, torch.arange(sk, device=cu_k.device), right=True)
        keep = keep & (sample_q[:, None] == sample_k[None, :])[None, None]
    keep = keep | ~keep.any(-1, keepdim=True)  # a padding row that sees nothing: anything but NaN
    return sdpa_attention_forward(module, query, key, value, keep, dropout=dropout, scaling=scaling, is_causal=False)


# What the layers of one forward pass share: every attention module gets the same mask, position_ids
# or flash kwargs, and turning them into cumulative lengths costs a host synchronisation (a longest
# length read back) - once per forward pass, not once per layer.
_last_derived: dict = {}


def _derived_once(source: Tensor, derive: Callable):
    """derive(), remembered for `source` (the same tensor, unchanged) until another source comes."""
    if torch.compiler.is_compiling():
        return derive()
    key = (source.data_ptr(), source._version, tuple(source.shape), source.device)
    last = _last_derived.get("entry")
    if last is not None and last[0]() is source and last[1] == key:
        return last[2]
    value = derive()
    _last_derived["entry"] = (weakref.ref(source), key, value)
    return value


def _packing_from_positions(position_ids: Optional[Tensor], batch: int, positions: int):
    """(cu_seqlens, longest) for one row whose position_ids restart at 0 at each sample, else None."""
    if position_ids is None or batch != 1 or position_ids.shape[-1] != positions:
        return None
    row = position_ids.reshape(-1)
    starts = (row == 0).nonzero().reshape(-1).to(torch.int32)
    if starts.numel() <= 1:
        return None  # one sample: a plain batch
    if starts[0].item() != 0:
        return None
    cu = torch.cat([starts, torch.tensor([positions], dtype=torch.int32, device=starts.device)])
    return cu, int((cu[1:] - cu[:-1]).max().item())


def lab_attention_forward(module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Optional[Tensor],
                          dropout: float = 0.0, scaling: Optional[float] = None, sliding_window: Optional[int] = None,
                          softcap: Optional[float] = None, is_causal: Optional[bool] = None, **kwargs):
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    batch, heads, positions, head_dim = query.shape
    causal = bool(causal) and positions > 1
    packing = None
    if attention_mask is None:
        cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
        if cu_q is not None and cu_k is not None and batch == 1:
            packing = _derived_once(cu_q, lambda: (cu_q.to(query.device, torch.int32),
                                                   cu_k.to(query.device, torch.int32), int(kwargs["max_length_q"]),
                                                   int(kwargs["max_length_k"])))
        else:
            position_ids = kwargs.get("position_ids")
            found = None if position_ids is None else _derived_once(
                position_ids, lambda: _packing_from_positions(position_ids, batch, positions))
            packing = None if found is None else (found[0], found[0], found[1], found[1])
    if not _on_lab(query, key, dropout) or kwargs.get("position_bias") is not None or (
            attention_mask is not None and (attention_mask.dim() != 2 or key.shape[2] != positions)):
        return _sdpa(module, query, key, value, attention_mask, dropout, scaling, causal, packing, sliding_window)
    if attention_mask is None and packing is None and not sliding_window and not softcap and key.shape[2] == positions:
        # A plain batch needs no mask, so SDPA's flash and cuDNN kernels (wgmma on Hopper) run it, and
        # measured faster than lab's mma.sync kernel (docs/attention.md): lab's attention is for what
        # they would need a dense mask for - padding, packed samples, a window, a softcap - and for
        # queries that continue a cache (SDPA's is_causal aligns them to the first key, not the last).
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        return sdpa_attention_forward(module, query, key, value, None, dropout=dropout, scaling=scaling,
                                      is_causal=causal)
    window = None if not sliding_window else (sliding_window - 1, 0 if causal else sliding_window - 1)
    options = dict(causal=causal, window=window, softcap=float(softcap or 0.0), scale=scaling)

    def as_tokens(x):  # (batch, heads, positions, d) -> (batch * positions, heads, d): a view where it can be
        return x.transpose(1, 2).reshape(-1, x.shape[1], head_dim)

    if attention_mask is not None:  # padded: gather the real tokens, run them packed, scatter back
        def unpadding():
            keep = attention_mask.bool()
            lengths = keep.sum(1, dtype=torch.int32)
            return keep.reshape(-1).nonzero().reshape(-1), _cumulative(lengths), int(lengths.max().item())
        tokens, cu, longest = _derived_once(attention_mask, unpadding)
        q, k, v = (as_tokens(x)[tokens] for x in (query, key, value))
        packed = _bodies.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=longest,
                                   max_seqlen_k=longest, **options)
        out = packed.new_zeros(batch * positions, heads, head_dim).index_copy(0, tokens, packed)
        return out.view(batch, positions, heads, head_dim), None
    if packing is not None:  # padding-free: the row's samples as a packed batch
        cu_q, cu_k, longest_q, longest_k = packing
        out = _bodies.attention(query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1),
                                cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=longest_q,
                                max_seqlen_k=longest_k, **options)
        return out[None], None
    out = _bodies.attention(query, key, value, **options)
    return out.transpose(1, 2), None


_registered = False


def register() -> None:
    """Registers the function and transformers' flash-attention mask function under NAME, once."""
    global _registered
    if _registered:
        return
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask
    AttentionInterface.register(NAME, lab_attention_forward)
    AttentionMaskInterface.register(NAME, flash_attention_mask)
    _registered = True
