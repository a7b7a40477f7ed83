"""SwiGLU forward + backward through autograd, as a model's MLP runs it: lab.nn.swiglu against torch
eager, torch.compile and Liger-Kernel's LigerSiLUMulFunction (where importable: carried as a wheel),
on gate and up of 16384 x 4096 bfloat16, in two modes - one step after a synchronization (the host's
time to issue it shows) and ten steps back to back (the GPU's time per step shows). The kernels alone
(lab.swiglu + lab.swiglu_backward on buffers made once) are the floor; lab.swiglu_backward with
`product=` moves the same bytes in one pass (the backward writing the forward's output again, as
lab.nn.swiglu_linear's backward does). A step reads gate, up and the incoming gradient and writes the
output and two gradients: six tensors' bytes.
Medians of event-timed repeats after warm-up; ratios are the peer's time over lab.nn's (> 1: lab is faster).
    python3 bench/bench_swiglu.py [--out-dir DIR] [--quick]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import median_ms  # noqa: E402
from _peers import print_met_goals, save_json, start  # noqa: E402

BACK_TO_BACK = 10


def liger_or_none():
    try:
        from liger_kernel.ops.swiglu import LigerSiLUMulFunction
        return LigerSiLUMulFunction.apply
    except ImportError as e:
        print(f"Liger-Kernel is not importable ({e}): its row is left out")
        return None


def main():
    started = start("bench_swiglu", __doc__.split("\n")[0])
    if started is None:
        return 1
    args, torch, _, timer = started
    import lab.nn
    rows, n = (2048, 4096) if args.quick else (16384, 4096)
    g = torch.Generator(device="cuda").manual_seed(0)
    gate, up, dy = (torch.randn(rows, n, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    gate.requires_grad_(), up.requires_grad_()

    def step_of(apply):
        # Each implementation gets its own copies: Liger's backward writes its gradients into the saved
        # gate and up in place, and kernels timed on those values afterwards measured twice as slow.
        a, b = gate.detach().clone().requires_grad_(), up.detach().clone().requires_grad_()
        return lambda: torch.autograd.grad(apply(a, b), (a, b), dy)

    plain = step_of(lambda a, b: torch.nn.functional.silu(a) * b)
    impls = [("lab.nn.swiglu", step_of(lab.nn.swiglu)), ("torch eager", plain),
             ("torch.compile", step_of(torch.compile(lambda a, b: torch.nn.functional.silu(a) * b, dynamic=False)))]
    liger = liger_or_none()
    if liger is not None:
        impls.append(("Liger-Kernel", step_of(liger)))
    out, grad_gate, grad_up = (torch.empty_like(gate) for _ in range(3))
    g_, u_ = gate.detach().clone(), up.detach().clone()

    def kernels():
        lab.swiglu(g_, u_, out)
        lab.swiglu_backward(dy, g_, u_, grad_gate, grad_up)
    impls.append(("lab.swiglu + swiglu_backward", kernels))
    # The same bytes in one pass: the backward writing the forward's product too, as lab.nn's
    # swiglu_linear does where a Llama MLP's down projection needs its input again.
    impls.append(("lab.swiglu_backward, product=",
                  lambda: lab.swiglu_backward(dy, g_, u_, grad_gate, grad_up, product=out)))

    moved = 6 * gate.numel() * 2
    times = {}
    for name, step in impls:
        one = median_ms(step, *timer, repeats=30, warmup=5)
        many = median_ms(lambda: [step() for _ in range(BACK_TO_BACK)], *timer, repeats=10, warmup=2) / BACK_TO_BACK
        times[name] = (one, many)
    ours = times["lab.nn.swiglu"]
    print(f"\nSwiGLU forward + backward, {rows}x{n} bfloat16 ({moved / 2**20:.0f} MiB moved a step)")
    print(f"{'implementation':32s} {'one call ms':>12s} {'/ lab.nn':>9s} {'back to back ms':>16s} {'/ lab.nn':>9s} "
          f"{'TB/s':>6s}")
    for name, (one, many) in times.items():
        print(f"{name:32s} {one:12.3f} {one / ours[0]:9.2f} {many:16.3f} {many / ours[1]:9.2f} "
              f"{moved / many / 1e9:6.2f}")
    goals = []
    for peer in ("Liger-Kernel", "torch.compile"):
        if peer in times:
            for mode, k in (("one call", 0), ("back to back", 1)):
                ratio = times[peer][k] / ours[k]
                goals.append((f"{peer} / lab.nn, {mode} >= 1.1", ratio, ratio >= 1.1))
    print_met_goals(goals, width=44, digits=3)
    save_json(args.out_dir, "swiglu.json", torch, shape=[rows, n], bytes_moved=moved,
              times_ms={k: {"one_call": v[0], "back_to_back": v[1]} for k, v in times.items()},
              goals=[list(g) for g in goals])
    return 0


if __name__ == "__main__":
    sys.exit(main())
