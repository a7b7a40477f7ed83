"""Example 11 - the row-wise training kernels: softmax, layer_norm and rms_norm with their
backwards as array ops on any producer, then lab.nn - the same kernels as torch operators with
autograd - in a small pre-norm model trained a few steps beside the same model in plain torch.

Array ops write into the outputs you pass (the statistics too); lab.nn allocates with torch and
works under torch.compile. Run: python3 examples/11_rowwise_training.py
"""
from _common import need, need_gpu

need_gpu()
import lab  # noqa: E402

torch = need("torch")
F = torch.nn.functional

# ---- array level: any producer, outputs passed in ----
x = torch.randn(512, 1000, device="cuda", dtype=torch.bfloat16)
w = torch.randn(1000, device="cuda", dtype=torch.bfloat16)
out, rstd = torch.empty_like(x), torch.empty(512, device="cuda")  # rstd: float32, one per row
lab.rms_norm(x, w, out, eps=1e-6, rstd=rstd)
torch.testing.assert_close(out.float(), F.rms_norm(x, (1000,), w, eps=1e-6).float(), rtol=1.6e-2, atol=1.6e-2)
lab.softmax(x, out)
torch.testing.assert_close(out.float(), F.softmax(x.float(), -1), rtol=1.6e-2, atol=1e-4)

# the pre-norm residual block in one pass: h = x + residual, normalized; h written for the next block
residual, h = torch.randn_like(x), torch.empty_like(x)
lab.rms_norm(x, w, out, eps=1e-6, residual=residual, residual_out=h)
torch.testing.assert_close(h, x + residual)

# backward: grad_x and the weight's gradient, summed over rows in a fixed order (the same bits every run)
dy, grad_x, grad_w = torch.randn_like(x), torch.empty_like(x), torch.empty_like(w)
lab.rms_norm(x, w, out, eps=1e-6, rstd=rstd)
lab.rms_norm_backward(dy, x, w, rstd, grad_x, grad_w)
xr, wr = x.float().requires_grad_(), w.float().requires_grad_()
want_x, want_w = torch.autograd.grad(F.rms_norm(xr, (1000,), wr, eps=1e-6), (xr, wr), dy.float())
torch.testing.assert_close(grad_x.float(), want_x, rtol=2e-2, atol=2e-2)
torch.testing.assert_close(grad_w.float() / want_w.abs().max(), want_w / want_w.abs().max(), rtol=2e-2, atol=2e-2)

# ---- torch level: lab.nn modules are torch.nn's, with lab's kernels in forward ----
import lab.nn  # noqa: E402  (imported on first use: `import lab` alone never imports torch)


def model(norm, layer_norm):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Embedding(64, 128), norm(128), torch.nn.Linear(128, 512), torch.nn.SiLU(),
                               torch.nn.Linear(512, 128), layer_norm(128), torch.nn.Linear(128, 64)).cuda()


def train(net, log_softmax, steps=30):
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
    g = torch.Generator(device="cuda").manual_seed(1)
    for _ in range(steps):
        tokens = torch.randint(0, 64, (32, 16), device="cuda", generator=g)
        loss = F.nll_loss(log_softmax(net(tokens), -1).flatten(0, 1), ((tokens * 7 + 3) % 64).flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


theirs = train(model(torch.nn.RMSNorm, torch.nn.LayerNorm), F.log_softmax)
ours = train(model(lab.nn.RMSNorm, lab.nn.LayerNorm), lab.nn.log_softmax)
assert abs(ours - theirs) <= 1e-4 * abs(theirs), (ours, theirs)
print(f"array ops match torch; lab.nn model after 30 steps: loss {ours:.5f} (torch's modules: {theirs:.5f})")
