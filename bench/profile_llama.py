"""Where a Llama training step's GPU time goes: bench_llama.py's 4 x 2048 step (the same model, weights
and batch) under torch.profiler, for lab.nn.patch and Liger-Kernel's patch (where importable), each in
a process of its own. Every CUDA kernel of one step after warm-up is put in a class by its name -
matrix products (cuBLAS/cuBLASLt/CUTLASS), attention (flash/efficient SDPA), lab's kernels, Triton's
(Liger's), the rest (torch's elementwise, copies, reductions) - and the classes' totals are printed
side by side with the step's time between two events (the kernels' sum subtracted from it is the
time the GPU waited on the host), then each implementation's largest kernels. With --gaps N, the
same step is recorded with the host's side too (CPU ops, Python frames, CUDA runtime calls), and the N
longest stretches in which the GPU had no kernel are printed with what the host was doing: the
runtime calls made during the stretch other than launches (a synchronization, an allocation), and
the Python frames that launched the kernel which ended it.
    python3 bench/profile_llama.py [--top N] [--gaps N]
"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

IMPLEMENTATIONS = ["lab.nn.patch", "Liger-Kernel"]
CLASSES = [  # (class, pattern over the kernel's name), the first that matches
    ("matrix products", r"gemm|nvjet|sm90_xmma|cutlass|cublas|splitK"),
    ("attention", r"flash|fmha|attention|mha"),
    ("lab", r"\blab::"),
    ("Triton", r"^_|triton|liger"),
    ("rest", r"."),
]


def kind(name):
    return next(label for label, pattern in CLASSES if re.search(pattern, name))


DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")  # a chrome trace's events that run on the GPU


def device_gaps(trace_path, count):
    """The `count` longest stretches without a kernel on the GPU within a chrome trace of one step:
    a list of (gap us, kernel before, kernel after, runtime calls during the gap, frames launching
    the kernel after), and the sum of every gap."""
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    kernels = sorted((e for e in events if e.get("cat") in DEVICE_CATEGORIES),
                     key=lambda e: e["ts"])
    runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    launch_of = {e["args"].get("correlation"): e for e in runtime if "args" in e}
    host = [e for e in events if e.get("cat") in ("cpu_op", "python_function", "user_annotation") and "dur" in e]
    gaps, total = [], 0.0
    for before, after in zip(kernels, kernels[1:]):
        gap = after["ts"] - (before["ts"] + before["dur"])
        if gap <= 0:
            continue
        total += gap
        gaps.append((gap, before, after))
    gaps.sort(key=lambda g: -g[0])
    out = []
    for gap, before, after in gaps[:count]:
        start, end = before["ts"] + before["dur"], after["ts"]
        launch = launch_of.get(after.get("args", {}).get("correlation"))
        calls = {}
        for e in runtime:
            if e["ts"] < end and e["ts"] + e.get("dur", 0) > start and "Launch" not in e["name"]:
                calls[e["name"]] = calls.get(e["name"], 0.0) + e.get("dur", 0)
        frames = []
        if launch is not None:
            at = launch["ts"]
            around = [e for e in host if e.get("tid") == launch.get("tid") and e["ts"] <= at <= e["ts"] + e["dur"]]
            frames = [e["name"] for e in sorted(around, key=lambda e: e["ts"])]
        out.append((gap, before["name"], after["name"], calls, frames))
    return out, total


def profile(implementation, gaps=0):
    """One step of `implementation` under the profiler: a JSON line of per-kernel totals in ms (and,
    with `gaps`, the longest stretches the GPU waited on the host)."""
    import torch
    import transformers
    from torch.profiler import ProfilerActivity
    from bench_llama import prepared
    ready = prepared(torch, transformers, implementation, "4x2048", warmup=3)
    if ready is None:
        return
    _, _, step = ready
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    activities = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if gaps else [])
    with torch.profiler.profile(activities=activities, with_stack=bool(gaps)) as prof:
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
    kernels = {}
    result = dict(implementation=implementation, kernels=kernels, step_ms=start.elapsed_time(end))
    if gaps:  # the host's events are in key_averages() too: the kernels are taken from the trace
        import tempfile
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "trace.json")
            prof.export_chrome_trace(path)
            with open(path) as f:
                for e in json.load(f)["traceEvents"]:
                    if e.get("cat") in DEVICE_CATEGORIES:
                        kernels[e["name"]] = kernels.get(e["name"], 0.0) + e.get("dur", 0) / 1e3
            result["gaps"], result["gaps_us"] = device_gaps(path, gaps)
    else:
        for event in prof.key_averages():
            device_us = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
            if device_us and event.count and not event.key.startswith(("ProfilerStep", "cuda")):
                kernels[event.key] = kernels.get(event.key, 0.0) + device_us / 1e3
    print(json.dumps(result))


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--gaps", type=int, default=0, help="also print the N longest waits on the host")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        profile(args.one, args.gaps)
        return 0
    results = {}
    for name in IMPLEMENTATIONS:
        done = subprocess.run([sys.executable, __file__, "--one", name, "--gaps", str(args.gaps)], capture_output=True, text=True, timeout=600)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"{name}: failed or skipped\n{done.stderr[-1500:]}")
            continue
        results[name] = json.loads(lines[-1])
    if not results:
        return 1
    names = list(results)
    print(f"\nGPU time of one 4 x 2048 training step by kernel class (ms)\n{'class':18s}"
          + "".join(f"{n:>16s}" for n in names))
    kernels = {n: results[n]["kernels"] for n in names}
    for label, _ in CLASSES + [("all", None)]:
        totals = [sum(ms for k, ms in kernels[n].items() if label == "all" or kind(k) == label) for n in names]
        print(f"{label:18s}" + "".join(f"{t:16.2f}" for t in totals))
    steps = [results[n]["step_ms"] for n in names]
    print(f"{'step (events)':18s}" + "".join(f"{t:16.2f}" for t in steps))
    print(f"{'GPU waiting':18s}" + "".join(f"{t - sum(kernels[n].values()):16.2f}" for t, n in zip(steps, names)))
    for n in names:
        print(f"\n{n}: the {args.top} largest kernels (ms, class)")
        for k, ms in sorted(kernels[n].items(), key=lambda item: -item[1])[: args.top]:
            print(f"  {ms:8.2f}  {kind(k):16s} {k[:90]}")
    for n in names:
        if "gaps" not in results[n]:
            continue
        print(f"\n{n}: the GPU idle {results[n]['gaps_us'] / 1e3:.2f} ms between kernels; the longest stretches")
        for gap, before, after, calls, frames in results[n]["gaps"]:
            print(f"  {gap:8.1f} us  after {before[:50]}  before {after[:50]}")
            if calls:
                print("             runtime: " + ", ".join(f"{c} {us:.0f} us" for c, us in calls.items()))
            useful = [f for f in frames if not f.startswith(("<built-in", "torch/nn/modules/module.py"))]
            print("             launched from: " + " > ".join(f[:60] for f in useful[-6:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
