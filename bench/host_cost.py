"""Where host time goes in two calls that measured slower than their kernels (GPU machine):
lab.nn's rms_norm forward + backward and lab.RawKernel with and without a signature, alternated so
that drift hits both alike.

For the forward + backward: each way (lab.nn, lab's two kernels, torch eager) timed one step per
pair of events after a sync, as bench_rowwise.py does (the host time before the first kernel shows
as idle GPU), and ten steps back to back per pair (the host runs ahead, as in a training loop), with
its host time a step; each layer of the path on a tiny input; then torch's profiler, CPU self time
per op.
    python3 bench/host_cost.py
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import median_ms, torch_timer  # noqa: E402
from _peers import peers  # noqa: E402
from bench_elementwise import median, per_call_rounds  # noqa: E402
from bench_jit import ADD  # noqa: E402


def host_us_a_call(torch, fn, calls):
    """Host microseconds a call of fn, `calls` calls after a warm-up and a sync, none between them."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host_us = (time.perf_counter() - start) / calls * 1e6
    torch.cuda.synchronize()
    return host_us


def main():
    found = peers("host_cost")
    if found is None:
        return 1
    torch = found[0]
    import lab.nn
    x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)

    grad_x, grad_w, out, rstd = torch.empty_like(x), torch.empty_like(w), torch.empty_like(x), \
        torch.empty(16384, device="cuda")
    xd, wd = x.detach(), w.detach()

    def step():
        return torch.autograd.grad(lab.nn.functional.rms_norm(x, (4096,), w), (x, w), dy)

    def kernels():
        lab.rms_norm(xd, wd, out, rstd=rstd)
        lab.rms_norm_backward(dy, xd, wd, rstd, grad_x, grad_w)

    def eager():
        return torch.autograd.grad(torch.nn.functional.rms_norm(x, (4096,), w), (x, w), dy)

    timer = torch_timer(torch)
    print("rms_norm forward + backward, bf16 16384x4096, ms a step (median of 20 event-timed samples):")
    print(f"  {'':10s} {'1 a sample':>11s} {'10 a sample':>12s} {'host us':>8s}")
    for name, fn in (("lab.nn", step), ("kernels", kernels), ("torch", eager)):
        single = median_ms(fn, *timer)
        ten = median_ms(lambda fn=fn: [fn() for _ in range(10)], *timer) / 10
        print(f"  {name:10s} {single:11.3f} {ten:12.3f} {host_us_a_call(torch, fn, 10):8.1f}")
    # Each layer of lab.nn's path on a tiny input, where the host's time is all there is
    small = torch.randn(8, 64, device="cuda", requires_grad=True)
    ws, dys, outs, rs = torch.randn(64, device="cuda", requires_grad=True), torch.randn(8, 64, device="cuda"), \
        torch.empty(8, 64, device="cuda"), torch.empty(8, device="cuda")
    pieces = {"lab.rms_norm (C call)": lambda: lab.rms_norm(small.detach(), ws.detach(), outs, rstd=rs),
              "torch.ops.lab.rms_norm, no grad": lambda: torch.ops.lab.rms_norm(small.detach(), ws.detach(), None),
              "lab.nn.rms_norm forward": lambda: lab.nn.functional.rms_norm(small, (64,), ws),
              "lab.nn.rms_norm fwd+bwd": lambda: torch.autograd.grad(lab.nn.functional.rms_norm(small, (64,), ws),
                                                                     (small, ws), dys),
              "F.rms_norm fwd+bwd": lambda: torch.autograd.grad(torch.nn.functional.rms_norm(small, (64,), ws),
                                                                (small, ws), dys)}
    for name, fn in pieces.items():
        print(f"host time, {name:34s} {host_us_a_call(torch, fn, 200):8.1f} us a call")
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(50):
            step()
        torch.cuda.synchronize()
    print("lab.nn rms_norm forward + backward, bf16 16384x4096, 50 steps (CPU self time):")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))

    untyped = lab.RawKernel(ADD, "add3")
    typed = lab.RawKernel(ADD, "add3", signature="const float*, const float*, float*, int")
    a, b, out = (torch.rand(1024, device="cuda") for _ in range(3))
    n32, sync = np.int32(1024), torch.cuda.synchronize
    la, lb, lo = lab.empty(1024), lab.empty(1024), lab.empty(1024)
    samples = per_call_rounds([("untyped, torch", lambda: untyped(4, 256, (a, b, out, n32)), sync),
                               ("typed, torch", lambda: typed(4, 256, (a, b, out, 1024)), sync),
                               ("untyped, lab.Array", lambda: untyped(4, 256, (la, lb, lo, n32)), lab.synchronize),
                               ("typed, lab.Array", lambda: typed(4, 256, (la, lb, lo, 1024)), lab.synchronize)],
                              calls=20000)
    print("RawKernel per call, us, five alternating rounds:")
    for what, values in samples.items():
        print(f"  {what:22s} " + " ".join(f"{v:5.2f}" for v in values) + f"   median {median(values):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
