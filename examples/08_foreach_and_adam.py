"""Example 8 - many tensors, one launch: foreach ops and a fused Adam step.

An optimizer step touches every parameter tensor of a model. Launching one kernel per tensor costs
microseconds of host time each; lab.adam_step packs all of them into as few launches as the
kernel's parameter space allows (multi-tensor apply). Here it replaces torch.optim.Adam in a small
training loop and gives the same losses.
"""
from _common import need, need_gpu

torch = need("torch")
need_gpu()
import lab  # noqa: E402

torch.manual_seed(0)
x = torch.randn(1024, 32, device="cuda")
y = torch.sin(x[:, :1]) + x[:, 1:2] ** 2

losses = {}
for who in ("torch.optim.Adam", "lab.adam_step"):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)).cuda()
    params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=1e-2, foreach=False) if who.startswith("torch") else None
    exp_avgs = [torch.zeros_like(p) for p in params]
    exp_avg_sqs = [torch.zeros_like(p) for p in params]
    for step in range(1, 201):
        loss = torch.nn.functional.mse_loss(model(x), y)
        for p in params:
            p.grad = None
        loss.backward()
        if optimizer:
            optimizer.step()
        else:
            lab.adam_step(params, [p.grad for p in params], exp_avgs, exp_avg_sqs, step=step, lr=1e-2)
    losses[who] = loss.item()
    print(f"{who:18s} loss after 200 steps: {losses[who]:.5f}")
assert abs(losses["lab.adam_step"] - losses["torch.optim.Adam"]) <= 1e-3 * losses["torch.optim.Adam"] + 1e-6

norms = torch.empty(len(params), device="cuda")
lab.foreach_norm(params, norms)                     # every parameter's L2 norm, no host sync
lab.foreach_scale(params, 0.5, params)              # all parameters halved, in one launch
torch.cuda.synchronize()
print(f"foreach_norm of {len(params)} tensors: {[round(v, 3) for v in norms.tolist()]}")
