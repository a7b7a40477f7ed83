"""lab.nn: lab's row-wise kernels for PyTorch models - functions with torch.nn.functional's
signatures and drop-in modules, registered as torch operators (torch.library.custom_op, with fake
implementations and autograd) so they run inside torch.compile(fullgraph=True) and CUDA graphs.

Imported on first use (`lab.nn` or `import lab.nn`); `import lab` alone never imports torch.

    import lab.nn
    norm = lab.nn.RMSNorm(4096, device="cuda", dtype=torch.bfloat16)   # torch.nn.RMSNorm's arguments
    y = lab.nn.softmax(scores, dim=-1)
    loss = lab.nn.cross_entropy(logits, targets)   # the gradient computed in the same pass
    loss = lab.nn.linear_cross_entropy(hidden, lm_head.weight, targets)   # the logits never held
    q, k = lab.nn.apply_rotary_pos_emb(q, k, cos, sin)   # transformers' signature, one launch
    out = lab.nn.scaled_dot_product_attention(q, k, v, is_causal=True)   # lab's flash attention
    h = lab.nn.dropout_add(h, attn_out, p=0.1)   # residual + dropout in one pass, no mask kept
    y = lab.nn.float8_linear(x, weight)   # the three products on float8 tensor cores
    patched = lab.nn.patch(model)   # a Llama-family model's norms, MLPs, rotary and loss head at once
"""
from .functional import (add_rms_norm, apply_rotary_pos_emb, attention, cross_entropy, dropout, dropout_add,
                         float8_linear, geglu, layer_norm, linear_cross_entropy, log_softmax, rms_norm, scaled_dot_product_attention, softmax,
                         swiglu, swiglu_linear)
from .modules import Float8Linear, LayerNorm, LinearCrossEntropyLoss, RMSNorm
from .patching import Patched, patch

__all__ = ["add_rms_norm", "apply_rotary_pos_emb", "attention", "cross_entropy", "dropout", "dropout_add",
           "float8_linear", "Float8Linear", "geglu", "layer_norm", "LayerNorm",
           "linear_cross_entropy", "LinearCrossEntropyLoss", "log_softmax", "patch", "Patched", "rms_norm", "RMSNorm",
           "scaled_dot_product_attention", "softmax", "swiglu", "swiglu_linear"]
