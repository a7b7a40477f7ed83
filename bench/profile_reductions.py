"""The reductions of bench_reductions.py once each, lab's then torch's (and CuPy's where it has one),
for Nsight Compute (make profile-reductions): the benchmark's arrays, one call per case.
    ncu ... python3 bench/profile_reductions.py [case prefix ...]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402

from bench_reductions import cases  # noqa: E402

try:
    import cupy
except ImportError:
    cupy = None


def main():
    wanted = sys.argv[1:]
    for name, _, lab_fn, torch_fn, cupy_fn in cases(torch, cupy, quick=False):
        if wanted and not any(name.startswith(w) for w in wanted):
            continue
        for who, fn in (("lab", lab_fn), ("torch", torch_fn), ("cupy", cupy_fn)):
            if fn is not None:
                torch.cuda.synchronize()
                print(f"case: {name} / {who}", file=sys.stderr, flush=True)
                fn()
                torch.cuda.synchronize()


if __name__ == "__main__":
    main()
