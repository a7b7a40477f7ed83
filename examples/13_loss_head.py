"""Example 13 - matrix products and the loss head without its logits.

lab.matmul binds cuBLASLt from C (loaded at the first product): out = gelu(a @ b + bias) in one
call on torch or CuPy arrays, a transposed view read as it is. lab.linear_cross_entropy is the loss
of hidden @ weight.T against target, with the gradients of hidden and weight, made a chunk of rows
at a time: the 8192 x 32000 logits (a Llama-2-sized vocabulary) are never held whole - the call
takes at most max_scratch_bytes beyond its outputs. lab.nn.linear_cross_entropy is the same as a
torch operator with autograd. Run: python3 examples/13_loss_head.py
"""
from _common import need, need_gpu

torch = need("torch")
need_gpu()
import lab  # noqa: E402
import lab.nn  # noqa: E402

F = torch.nn.functional
g = torch.Generator(device="cuda").manual_seed(0)

# a linear layer with its GELU in the product's epilogue; w.T is a layout, not a copy
x = torch.randn(512, 1024, device="cuda", dtype=torch.bfloat16, generator=g)
w = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16, generator=g) / 32
bias = torch.randn(4096, device="cuda", dtype=torch.bfloat16, generator=g)
out = torch.empty(512, 4096, device="cuda", dtype=torch.bfloat16)
lab.matmul(x, w.T, out, bias=bias, epilogue="gelu_tanh")
want = F.gelu(F.linear(x.float(), w.float(), bias.float()), approximate="tanh")
torch.testing.assert_close(out.float(), want, rtol=2e-2, atol=2e-2)
print("lab.matmul(x, w.T, out, bias=bias, epilogue='gelu_tanh') matches torch's Linear + GELU")

# the loss head: 8192 tokens, 32000 classes, gradients in the same call
hidden = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16, generator=g)
head = torch.randn(32000, 1024, device="cuda", dtype=torch.bfloat16, generator=g) / 32
target = torch.randint(0, 32000, (8192,), device="cuda", generator=g)
loss = torch.empty((), device="cuda")
grad_hidden, grad_head = torch.empty_like(hidden), torch.empty_like(head)
plan = lab.linear_cross_entropy_plan(8192, 32000, "bfloat16", max_scratch_bytes=64 << 20)
lab.linear_cross_entropy(hidden, head, target, loss, grad_hidden=grad_hidden, grad_weight=grad_head,
                         max_scratch_bytes=64 << 20)

h, W = hidden.float().requires_grad_(), head.float().requires_grad_()
reference = F.cross_entropy(h @ W.T, target)
reference.backward()
torch.testing.assert_close(loss, reference.detach(), rtol=1e-2, atol=1e-2)
scale = W.grad.abs().max()
torch.testing.assert_close(grad_head.float() / scale, W.grad / scale, rtol=3e-2, atol=3e-2)
print(f"lab.linear_cross_entropy: loss {loss.item():.4f} (torch {reference.item():.4f}), in {plan['chunks']} "
      f"chunks of {plan['chunk_rows']} rows - {plan['scratch_bytes'] / 2**20:.0f} MiB of scratch where the "
      f"logits alone are {8192 * 32000 * 2 / 2**20:.0f} MiB")

# the torch face: autograd, the same kernels
hidden.requires_grad_()
lab.nn.linear_cross_entropy(hidden, head, target).backward()
torch.testing.assert_close(hidden.grad.float(), h.grad, rtol=3e-2, atol=3e-2 * h.grad.abs().max().item())
print("lab.nn.linear_cross_entropy(hidden, weight, target).backward() matches torch's gradient")
