"""Reductions: lab against torch and CuPy on the same arrays, in one run.

Bytes read per second (the input read once; outputs are small), medians of event-timed repeats
after warm-up (lab/_timing.py); ratios are the peer's time over lab's (> 1: lab is faster).
    python3 bench/bench_reductions.py [--out-dir DIR] [--quick]
"""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import median_ms  # noqa: E402
from _peers import plot_bars, start  # noqa: E402
from bench_elementwise import per_call_us  # noqa: E402

# The goals: (case prefix, peer, at least this ratio of the peer's time over lab's).
GOALS = [("sum, 2^", "torch", 1.0), ("sum, 2^", "cupy", 1.0), ("sum(dim=1)", "torch", 1.0), ("sum(dim=1)", "cupy", 1.0),
         ("sum(dim=0)", "torch", 1.0), ("sum(dim=0)", "cupy", 1.7), ("rows of 32", "torch", 5.0),
         ("argmax", "torch", 1.25), ("var(dim=1)", "torch", 1.4), ("dot", "torch", 1.0)]


def cases(torch, cupy, quick):
    """(name, bytes read, lab call, torch call, cupy call or None)."""
    side = 4096 if quick else 16384
    n = 1 << (24 if quick else 28)
    x = torch.randn(n, device="cuda")
    xb = x.bfloat16()
    m = torch.randn(side, side, device="cuda")
    rows32 = torch.randn((1 << (20 if quick else 23)), 32, device="cuda")
    scalar, row_out, col_out = (torch.empty((), device="cuda"), torch.empty(side, device="cuda"),
                                torch.empty(side, device="cuda"))
    idx_out = torch.empty(side, dtype=torch.int64, device="cuda")
    r32_out = torch.empty(rows32.shape[0], device="cuda")
    cx = cm = None
    if cupy is not None:
        cx, cm = cupy.asarray(x), cupy.asarray(m)
        c_scalar, c_rows, c_cols = cupy.empty((), cupy.float32), cupy.empty(side, cupy.float32), cupy.empty(side, cupy.float32)
    yield ("sum, 2^%d float32" % (n.bit_length() - 1), 4 * n, lambda: lab.sum(x, scalar),
           lambda: torch.sum(x, dim=0, out=scalar), (lambda: cupy.sum(cx, out=c_scalar)) if cupy else None)
    yield ("sum, 2^%d bfloat16" % (n.bit_length() - 1), 2 * n, lambda: lab.sum(xb, scalar),
           lambda: torch.sum(xb, dim=0, dtype=torch.float32, out=scalar), None)
    yield (f"sum(dim=1), {side}^2", 4 * side * side, lambda: lab.sum(m, row_out, axis=1),
           lambda: torch.sum(m, dim=1, out=row_out), (lambda: cupy.sum(cm, axis=1, out=c_rows)) if cupy else None)
    yield (f"sum(dim=0), {side}^2", 4 * side * side, lambda: lab.sum(m, col_out, axis=0),
           lambda: torch.sum(m, dim=0, out=col_out), (lambda: cupy.sum(cm, axis=0, out=c_cols)) if cupy else None)
    yield (f"rows of 32, sum(dim=1)", 4 * rows32.numel(), lambda: lab.sum(rows32, r32_out, axis=1),
           lambda: torch.sum(rows32, dim=1, out=r32_out), None)
    yield (f"argmax(dim=1), {side}^2", 4 * side * side, lambda: lab.argmax(m, idx_out, axis=1),
           lambda: torch.argmax(m, dim=1, out=idx_out), None)
    yield (f"amax(dim=1), {side}^2", 4 * side * side, lambda: lab.amax(m, row_out, axis=1),
           lambda: torch.amax(m, dim=1, out=row_out), None)
    yield (f"var(dim=1), {side}^2", 4 * side * side, lambda: lab.var(m, row_out, axis=1),
           lambda: torch.var(m, dim=1, out=row_out), None)
    yield (f"norm(dim=1), {side}^2", 4 * side * side, lambda: lab.norm(m, row_out, axis=1),
           lambda: torch.linalg.vector_norm(m, dim=1, out=row_out), None)
    yield (f"logsumexp(dim=1), {side}^2", 4 * side * side, lambda: lab.logsumexp(m, row_out, axis=1),
           lambda: torch.logsumexp(m, dim=1, out=row_out), None)
    y = torch.randn(n, device="cuda")
    cy = cupy.asarray(y) if cupy is not None else None
    yield ("dot, 2^%d float32" % (n.bit_length() - 1), 8 * n, lambda: lab.dot(x, y, scalar),
           lambda: torch.dot(x, y, out=scalar), (lambda: cupy.dot(cx, cy, out=c_scalar)) if cupy else None)


def plot(rows, path):
    """Bytes read per second of lab, torch and CuPy for each case, side by side."""
    plot_bars(rows, [("lab", "lab_ms", "tab:blue"), ("torch", "torch_ms", "tab:orange"), ("cupy", "cupy_ms", "tab:green")],
              "Reductions on one GPU, one run (bench/bench_reductions.py)", path, "TB/s read (higher is better)")


def main():
    started = start("bench_reductions", __doc__.split("\n")[0])
    if started is None:
        return 1
    args, torch, cupy, timer = started
    rows = []
    for name, nbytes, lab_fn, torch_fn, cupy_fn in cases(torch, cupy, args.quick):
        lab_ms = median_ms(lab_fn, *timer, repeats=20)
        torch_ms = median_ms(torch_fn, *timer, repeats=20)
        cupy_ms = median_ms(cupy_fn, *timer, repeats=20) if cupy_fn else None
        rows.append(dict(case=name, bytes=nbytes, lab_ms=lab_ms, torch_ms=torch_ms, cupy_ms=cupy_ms))
    print(f"\n{'reduction':30s} {'lab ms':>8s} {'torch ms':>9s} {'cupy ms':>8s} {'vs torch':>9s} {'vs cupy':>8s} "
          f"{'lab TB/s':>9s}")
    for r in rows:
        vs_cupy = f"{r['cupy_ms'] / r['lab_ms']:8.2f}" if r["cupy_ms"] else f"{'-':>8s}"
        cupy_ms = f"{r['cupy_ms']:8.3f}" if r["cupy_ms"] else f"{'-':>8s}"
        print(f"{r['case']:30s} {r['lab_ms']:8.3f} {r['torch_ms']:9.3f} {cupy_ms} {r['torch_ms'] / r['lab_ms']:9.2f} "
              f"{vs_cupy} {r['bytes'] / r['lab_ms'] / 1e9:9.2f}")
    small, scalar = torch.randn(1024, device="cuda"), torch.empty((), device="cuda")
    lab_us = per_call_us(lambda: lab.sum(small, scalar), torch.cuda.synchronize)
    torch_us = per_call_us(lambda: torch.sum(small, dim=0, out=scalar), torch.cuda.synchronize)
    print(f"\nper call, sum of 1024 float32: lab {lab_us:.2f} us, torch.sum(out=) {torch_us:.2f} us "
          f"({lab_us / torch_us:.2f}x; goal <= 0.8x)")
    print(f"\n{'goal':45s} {'measured':>9s}  met")
    for prefix, peer, target in GOALS:
        for r in rows:
            if r["case"].startswith(prefix) and r.get(f"{peer}_ms") and "bfloat16" not in r["case"]:
                ratio = r[f"{peer}_ms"] / r["lab_ms"]
                print(f"{r['case'] + ' >= ' + str(target) + 'x ' + peer:45s} {ratio:9.2f}  {'yes' if ratio >= target else 'NO'}")
    bf16 = next(r for r in rows if "bfloat16" in r["case"])
    print(f"{'bfloat16 sum >= 1.1x torch':45s} {bf16['torch_ms'] / bf16['lab_ms']:9.2f}  "
          f"{'yes' if bf16['torch_ms'] / bf16['lab_ms'] >= 1.1 else 'NO'}")
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "reductions.json"), "w") as f:
            json.dump(dict(gpu=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), rows=rows,
                           per_call_us=dict(lab=lab_us, torch=torch_us)), f, indent=1)
        try:
            plot(rows, os.path.join(args.out_dir, "reductions.png"))
        except ImportError:
            print("(matplotlib is not installed: no plot)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
