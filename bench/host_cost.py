"""Where host time goes in two calls that measured slower than their kernels (GPU machine):
lab.nn's rms_norm forward + backward (torch profiler, CPU self time per op) and lab.RawKernel with
and without a signature, alternated so that drift hits both alike.
    python3 bench/host_cost.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from _peers import peers  # noqa: E402
from bench_elementwise import median, per_call_rounds  # noqa: E402
from bench_jit import ADD  # noqa: E402


def main():
    found = peers("host_cost")
    if found is None:
        return 1
    torch = found[0]
    import lab.nn
    x = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn_like(x)

    def step():
        return torch.autograd.grad(lab.nn.functional.rms_norm(x, (4096,), w), (x, w), dy)
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
