"""Kernels for Nsight Compute to read: lab's and torch's add / relu / gelu on 2^26 elements in
float32, float16 and bfloat16, and (with --casts, or only those with --casts-only) the mixed-dtype
adds and casting copies - one launch each (ncu replays a kernel to collect its counters).

    ncu --clock-control none --kernel-name regex:'elementwise|vectorized' --csv --metrics ... \\
        python3 bench/profile_ops.py

`make profile` runs it with the metrics that tell a memory-bound kernel's story: time, DRAM
throughput and bytes, issue-slot use, achieved occupancy, registers, grid."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import lab  # noqa: E402

N = 1 << 26


def casts():
    """f16 + f32, i32 + f32 into f32, and copy f32 -> f16, lab then torch, on 2^26 elements."""
    x = torch.rand(N, device="cuda")
    x16, xi32, out, out16 = x.half(), (x * 1000).int(), torch.empty_like(x), torch.empty_like(x).half()
    for name, lab_call, torch_call in (("add f16 + f32", lambda: lab.add(x16, x, out), lambda: torch.add(x16, x, out=out)),
                                       ("add i32 + f32", lambda: lab.add(xi32, x, out), lambda: torch.add(xi32, x, out=out)),
                                       ("copy f32 -> f16", lambda: lab.copy(x, out16), lambda: out16.copy_(x))):
        lab_call()
        torch_call()
        torch.cuda.synchronize()
        print(f"profiled {name}: lab, then torch", flush=True)


def main():
    if "--casts-only" in sys.argv:
        return casts()
    if "--casts" in sys.argv:
        casts()
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        a, b, out = (torch.rand(N, device="cuda").to(dtype) for _ in range(3))
        for name in ("add", "relu", "gelu"):
            args = (a, b) if name == "add" else (a,)
            getattr(lab, name)(*args, out)
            if name == "add":
                torch.add(a, b, out=out)
            else:
                getattr(torch.nn.functional, name)(a)
            torch.cuda.synchronize()
            print(f"profiled {name} {dtype}: lab, then torch", flush=True)


if __name__ == "__main__":
    main()
