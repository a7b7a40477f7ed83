"""Example 12 - cross-entropy with its gradient in one pass, SwiGLU, and a small transformer trained
with lab.nn: first the array ops (the loss and d loss / d logits written together, into the logits
themselves; the GLU and its two gradients), then a pre-norm transformer - RMSNorm, attention, RMSNorm,
SwiGLU MLP, cross-entropy head - trained beside the same model in plain torch from the same seed.

Run: python3 examples/12_transformer_training.py
"""
from _common import need, need_gpu

need_gpu()
import lab  # noqa: E402

torch = need("torch")
F = torch.nn.functional

# ---- array level: the loss and its gradient in one pass ----
logits = torch.randn(256, 50257, device="cuda", dtype=torch.bfloat16)
target = torch.randint(0, 50257, (256,), device="cuda")
target[::8] = -100  # ignored rows: no loss, no gradient, not counted by the mean
leaf = logits.float().requires_grad_()
want = F.cross_entropy(leaf, target, label_smoothing=0.1)
want.backward()
loss = torch.empty((), device="cuda")
lab.cross_entropy(logits, target, loss, label_smoothing=0.1, grad=logits)  # the gradient overwrites the logits
torch.testing.assert_close(loss, want.detach(), rtol=1e-4, atol=1e-4)
torch.testing.assert_close(logits.float(), leaf.grad, rtol=2e-2, atol=2e-2 * float(leaf.grad.abs().max()))
print(f"cross_entropy: loss {loss.item():.4f} (torch {want.item():.4f}); gradient written into the logits")

# SwiGLU on the two halves of one up-projection, and both gradients in one pass
z = torch.randn(1024, 2 * 2048, device="cuda", dtype=torch.bfloat16)
gate, up = z[:, :2048], z[:, 2048:]
out = torch.empty_like(gate)
lab.swiglu(gate, up, out)
torch.testing.assert_close(out, F.silu(gate) * up, rtol=2e-2, atol=2e-2)
dz = torch.empty_like(z)
lab.swiglu_backward(torch.ones_like(out), gate, up, dz[:, :2048], dz[:, 2048:])
# With product=, the same pass writes the forward's output again: a down projection that kept gate and
# up instead of their product gets its input for the weight gradient without a forward of its own.
again = torch.empty_like(out)
lab.swiglu_backward(torch.ones_like(out), gate, up, dz[:, :2048], dz[:, 2048:], product=again)
torch.testing.assert_close(again, out, rtol=2e-2, atol=2e-2)
print("swiglu: forward and both gradients on the halves of one array; the forward's output again in the backward")

# ---- torch level: a small transformer trained with lab.nn ----
import lab.nn  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, width, heads, functions):
        super().__init__()
        self.heads, self.f = heads, functions
        self.norm1, self.norm2 = torch.nn.Parameter(torch.ones(width)), torch.nn.Parameter(torch.ones(width))
        self.qkv = torch.nn.Linear(width, 3 * width, bias=False)
        self.proj = torch.nn.Linear(width, width, bias=False)
        self.up = torch.nn.Linear(width, 8 * width, bias=False)  # gate and up in one projection
        self.down = torch.nn.Linear(4 * width, width, bias=False)

    def forward(self, h):
        b, t, w = h.shape
        q, k, v = self.qkv(self.f["rms_norm"](h, (w,), self.norm1, 1e-6)).split(w, -1)
        q, k, v = (u.view(b, t, self.heads, -1).transpose(1, 2) for u in (q, k, v))
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        h = h + self.proj(attention.transpose(1, 2).reshape(b, t, w))
        gate, up = self.up(self.f["rms_norm"](h, (w,), self.norm2, 1e-6)).chunk(2, -1)
        return h + self.down(self.f["swiglu"](gate, up))


def train(functions, steps=60, vocab=512, width=128):
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList([Block(width, 4, functions) for _ in range(2)])
    embed, head = torch.nn.Embedding(vocab, width), torch.nn.Linear(width, vocab, bias=False)
    model = torch.nn.ModuleList([embed, blocks, head]).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
    g = torch.Generator(device="cuda").manual_seed(1)
    losses = []
    for _ in range(steps):
        tokens = torch.randint(0, vocab, (8, 64), device="cuda", generator=g)
        tokens[:, 1::2] = (tokens[:, 0::2] * 5 + 1) % vocab  # every other token follows from the one before
        h = embed(tokens)
        for block in blocks:
            h = block(h)
        logits = head(functions["rms_norm"](h, (width,), None, 1e-6))
        loss = functions["cross_entropy"](logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


theirs = train({"rms_norm": F.rms_norm, "swiglu": lambda g, u: F.silu(g) * u, "cross_entropy": F.cross_entropy})
ours = train({"rms_norm": lab.nn.rms_norm, "swiglu": lab.nn.swiglu,
              "cross_entropy": lambda x, t: lab.nn.cross_entropy(x, t, inplace_backward=True)})
worst = max(abs(a - b) / b for a, b in zip(ours, theirs))
print(f"transformer, 60 steps: loss {theirs[0]:.3f} -> {theirs[-1]:.3f} with torch, {ours[-1]:.3f} with lab.nn "
      f"(largest relative difference {worst:.1e})")
assert theirs[-1] < 0.8 * theirs[0] and worst < 1e-3
