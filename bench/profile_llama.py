"""Where a Llama training step's GPU time goes: bench_llama.py's 4 x 2048 step (the same model, weights
and batch) under torch.profiler, for lab.nn.patch and Liger-Kernel's patch (where importable), each in
a process of its own. Every CUDA kernel of one step after warm-up is put in a class by its name -
matrix products (cuBLAS/cuBLASLt/CUTLASS), attention (flash/efficient SDPA), lab's kernels, Triton's
(Liger's), the rest (torch's elementwise, copies, reductions) - and the classes' totals are printed
side by side with the step's time between two events (the kernels' sum subtracted from it is the
time the GPU waited on the host), then each implementation's largest kernels.
    python3 bench/profile_llama.py [--top N]
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


def profile(implementation):
    """One step of `implementation` under the profiler: a JSON line of per-kernel totals in ms."""
    import torch
    import transformers
    from torch.profiler import ProfilerActivity
    from bench_llama import CONFIG, build
    model = build(torch, transformers, implementation)
    if model is None:
        return
    g = torch.Generator(device="cuda").manual_seed(1)
    input_ids = torch.randint(0, CONFIG["vocab_size"], (4, 2048), device="cuda", generator=g)
    for _ in range(3):
        model(input_ids=input_ids, labels=input_ids).loss.backward()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
        start.record()
        model(input_ids=input_ids, labels=input_ids).loss.backward()
        end.record()
        torch.cuda.synchronize()
    kernels = {}
    for event in prof.key_averages():
        device_us = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if device_us and event.count and not event.key.startswith(("ProfilerStep", "cuda")):
            kernels[event.key] = kernels.get(event.key, 0.0) + device_us / 1e3
    print(json.dumps(dict(implementation=implementation, kernels=kernels, step_ms=start.elapsed_time(end))))


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        profile(args.one)
        return 0
    results = {}
    for name in IMPLEMENTATIONS:
        done = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True, text=True, timeout=600)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
