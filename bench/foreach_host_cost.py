"""Where a foreach call's host time goes, on 300 torch tensors: lab.foreach_add on empty tensors
(reading and checking the lists, no CUDA call), on 64-element tensors (plus the launches), and
torch._foreach_add_ beside it. Microseconds per call, wall clock over 500 calls.

    python3 bench/foreach_host_cost.py"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import lab  # noqa: E402
from bench_elementwise import per_call_us  # noqa: E402


def main(count=300):
    for label, n in (("empty tensors (no launch)", 0), ("64-element tensors", 64)):
        xs = [torch.rand(n, device="cuda") for _ in range(count)]
        ys = [torch.rand(n, device="cuda") for _ in range(count)]
        lab_us = per_call_us(lambda: lab.foreach_add(xs, ys, xs), torch.cuda.synchronize, 500, 1)
        torch_us = per_call_us(lambda: torch._foreach_add_(xs, ys), torch.cuda.synchronize, 500, 1)
        print(f"{count} {label:28s} lab.foreach_add {lab_us:8.1f} us   torch._foreach_add_ {torch_us:8.1f} us")
    one = [torch.rand(64, device="cuda") for _ in range(3)]
    print(f"one lab.add on 64 elements: {per_call_us(lambda: lab.add(*one), torch.cuda.synchronize, 5000):.2f} us")


if __name__ == "__main__":
    main()
