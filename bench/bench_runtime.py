"""lab's runtime pieces against torch's, side by side on the same tensors: (1) a loop of 100 small
calls (lab.add on 1024 float32) launched from Python and replayed from a lab.Graph, against the same
torch ops eager and replayed from torch.cuda.graph - the cost per op; (2) lab's random fills and
dropout against the device-to-device copy's bandwidth and torch's own; (3) dropout_add forward +
backward (residual + dropout(x) through autograd) with lab.nn against torch eager and torch.compile.
Medians of event-timed repeats after warm-up; ratios are the peer's time over lab's (> 1: lab is faster).
    python3 bench/bench_runtime.py [--out-dir DIR] [--quick] [--only graph random dropout]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import median_ms  # noqa: E402
from _peers import run_groups, time_bandwidths  # noqa: E402

LOOP = 100


def bench_graph(torch, timer, goals, results):
    x, y = torch.zeros(1024, device="cuda"), torch.ones(1024, device="cuda")
    stream = torch.cuda.current_stream()

    def lab_loop():
        for _ in range(LOOP):
            lab.add(x, y, x)

    def torch_loop():
        for _ in range(LOOP):
            x.add_(y)

    g = lab.Graph()
    lab_loop()  # warm-up outside the capture
    torch.cuda.synchronize()
    with lab.graph(g):
        lab_loop()
    torch_graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(stream)
    with torch.cuda.stream(side):
        torch_loop()
    stream.wait_stream(side)
    with torch.cuda.graph(torch_graph):
        torch_loop()
    cases = {"lab, launched from Python": lab_loop, "lab.Graph replay": lambda: g.replay(stream=stream.cuda_stream),
             "torch eager": torch_loop, "torch.cuda.graph replay": torch_graph.replay}
    per_op = {name: 1000 * median_ms(fn, *timer, repeats=30, warmup=5) / LOOP for name, fn in cases.items()}
    print(f"\n{LOOP} calls of add on 1024 float32, microseconds per op (host and GPU together)")
    for name, us in per_op.items():
        print(f"{name:28s} {us:8.3f}")
    ratio_loop = per_op["lab.Graph replay"] / per_op["lab, launched from Python"]
    ratio_torch = per_op["torch.cuda.graph replay"] / per_op["lab.Graph replay"]
    goals.append(("lab.Graph replay / lab from Python <= 0.25", ratio_loop, ratio_loop <= 0.25))
    goals.append(("torch.cuda.graph / lab.Graph replay >= 1.0", ratio_torch, ratio_torch >= 1.0))
    results["graph_us_per_op"] = per_op


def bench_random(torch, timer, goals, results, quick):
    n = (1 << 24) if quick else (1 << 28)
    out = torch.empty(n, device="cuda")
    x = torch.randn(n, device="cuda")
    copied = torch.empty_like(out)
    cases = {
        "copy (read + write)": (lambda: copied.copy_(x), 8 * n),
        "lab.uniform": (lambda: lab.uniform(out), 4 * n),
        "torch uniform_": (lambda: out.uniform_(), 4 * n),
        "lab.normal": (lambda: lab.normal(out), 4 * n),
        "torch normal_": (lambda: out.normal_(), 4 * n),
        "lab.dropout": (lambda: lab.dropout(x, 0.1, out), 8 * n),
        "torch dropout": (lambda: torch.nn.functional.dropout(x, 0.1), 8 * n),
    }
    rates = time_bandwidths(cases, timer, f"random numbers on {n} float32")
    copy_rate = rates["copy (read + write)"]
    for name in ("lab.uniform", "lab.normal", "lab.dropout"):
        share = rates[name] / copy_rate
        goals.append((f"{name} / copy bandwidth >= 0.9", share, share >= 0.9))
    results["random_gb_per_s"] = rates


def bench_dropout_add(torch, timer, goals, results, quick):
    import lab.nn.functional as LF
    rows, cols = (4096, 4096) if quick else (16384, 4096)
    gen = torch.Generator(device="cuda").manual_seed(0)
    residual, x, dy = (torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16, generator=gen)
                       for _ in range(3))
    residual.requires_grad_(), x.requires_grad_()

    def torch_step(r, a):
        return r + torch.nn.functional.dropout(a, 0.1)

    compiled = torch.compile(torch_step, dynamic=False)
    cases = {"lab.nn dropout_add": lambda r, a: LF.dropout_add(r, a, 0.1), "torch eager": torch_step,
             "torch.compile": compiled}
    times = {}
    for name, fn in cases.items():
        times[name] = median_ms(lambda: torch.autograd.grad(fn(residual, x), (residual, x), dy), *timer,
                                repeats=20, warmup=5)
    ours = times["lab.nn dropout_add"]
    print(f"\nresidual + dropout(x, 0.1), forward + backward, {rows}x{cols} bfloat16")
    for name, ms in times.items():
        print(f"{name:22s} {ms:8.3f} ms  {ms / ours:6.2f}x lab's time")
    goals.append(("torch eager / lab.nn dropout_add >= 1.5", times["torch eager"] / ours,
                  times["torch eager"] / ours >= 1.5))
    goals.append(("torch.compile / lab.nn dropout_add >= 1.0", times["torch.compile"] / ours,
                  times["torch.compile"] / ours >= 1.0))
    results["dropout_add_ms"] = times


def main():
    return run_groups("bench_runtime", __doc__.split("\n")[0],
                      {"graph": lambda torch, timer, goals, results, quick: bench_graph(torch, timer, goals, results),
                       "random": bench_random, "dropout": bench_dropout_add}, "runtime.json", width=48, digits=3)


if __name__ == "__main__":
    sys.exit(main())
