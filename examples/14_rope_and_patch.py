"""Example 14 - the rotary embedding, and a whole Hugging Face model in one call.

lab.rope rotates q and k - the transposed views attention makes, k with fewer heads - by the angles
in a rotary embedding's cos/sin tables, both tensors in one launch; lab.rope_backward is its exact
transpose. lab.nn.patch then puts lab's RMSNorm, SwiGLU, rope and fused loss head into a small
random Llama from transformers (where installed), and a training step gives the loss and gradients
the unpatched model gives. Run: python3 examples/14_rope_and_patch.py
"""
import copy

from _common import need, need_gpu

torch = need("torch")
need_gpu()
import lab  # noqa: E402
import lab.nn  # noqa: E402

g = torch.Generator(device="cuda").manual_seed(0)
batch, positions, heads, kv_heads, head_dim = 2, 128, 8, 2, 64

# q and k as a Llama's attention has them: (batch, positions, heads, head_dim) viewed as (batch, heads, ...)
q = torch.randn(batch, positions, heads, head_dim, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
k = torch.randn(batch, positions, kv_heads, head_dim, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device="cuda", dtype=torch.float32) / head_dim))
angles = torch.arange(positions, device="cuda", dtype=torch.float32)[:, None] * inv_freq[None]
emb = torch.cat((angles, angles), dim=-1)[None]                    # (1, positions, head_dim), each angle twice
cos, sin = emb.cos().to(torch.bfloat16), emb.sin().to(torch.bfloat16)

q_out, k_out = torch.empty_like(q), torch.empty_like(k)
lab.rope(q, k, cos, sin, q_out, k_out)


def rotate_half(x):
    return torch.cat((-x[..., head_dim // 2:], x[..., : head_dim // 2]), dim=-1)


c, s = cos.float().unsqueeze(1), sin.float().unsqueeze(1)
torch.testing.assert_close(q_out.float(), q.float() * c + rotate_half(q.float()) * s, rtol=2e-2, atol=2e-2)
torch.testing.assert_close(k_out.float(), k.float() * c + rotate_half(k.float()) * s, rtol=2e-2, atol=2e-2)
print("lab.rope: q (8 heads) and k (2 heads), transposed views, in one launch, match transformers' formula")

back_q, back_k = torch.empty_like(q), torch.empty_like(k)
lab.rope_backward(q_out, k_out, cos, sin, back_q, back_k)  # rotating back undoes the rotation
torch.testing.assert_close(back_q.float(), q.float(), rtol=3e-2, atol=3e-2)
print("lab.rope_backward (the transpose) rotates them back")

try:
    import transformers
except ImportError:
    print("skipped: lab.nn.patch (transformers is not installed)")
    raise SystemExit(0)

config = transformers.LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
torch.manual_seed(0)
original = transformers.LlamaForCausalLM(config).to("cuda", torch.bfloat16)
model = copy.deepcopy(original)
patched = lab.nn.patch(model)
print(patched)

input_ids = torch.randint(0, 1000, (2, 128), device="cuda", generator=g)
losses = []
for m in (original, model):
    m.train()
    loss = m(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    losses.append(loss.item())
assert abs(losses[0] - losses[1]) <= 2e-2 * abs(losses[0]), losses
grad_a, grad_b = original.lm_head.weight.grad.float(), model.lm_head.weight.grad.float()
assert (grad_a - grad_b).norm() <= 5e-2 * grad_a.norm()
print(f"a training step, patched and not: loss {losses[1]:.4f} and {losses[0]:.4f}, lm_head gradients agree")
patched.undo()
print("patched.undo(): the model is transformers' own again")
