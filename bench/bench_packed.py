"""Fine-tuning on samples of very different lengths: the Llama of bench_llama.py (1.03 B parameters,
bfloat16) trained on samples whose lengths are lognormal (median 512, sigma 1, at most 4096, one
seed; the distribution is printed), about 16 K real tokens a step. Each implementation runs in a
process of its own on the same weights and the same samples:
  - torch eager, padded: batches in the samples' order, padded to their longest (SDPA with the
    padding mask);
  - torch eager, length-grouped: the samples sorted by length before batching (what transformers'
    group_by_length does: the strongest padded baseline), and torch.compile per layer and
    Liger-Kernel (where importable) on the same batches;
  - lab.nn.patch, length-grouped (padded: lab's attention gathers the real tokens), and lab.nn.patch
    padding-free: each step's samples back to back in one row, position_ids restarting at 0.
Reports real (non-padding) tokens/s - the median, over steps spread evenly over the epoch, of real
tokens over step time, each step timed on its second run (the first compiles what the shape needs,
for torch.compile and Liger-Kernel's Triton kernels) - and the allocator's peak beyond weights and gradients; writes packed.json
and packed.png into --out-dir.
    python3 bench/bench_packed.py [--out-dir DIR] [--quick]
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TOKENS_PER_STEP = 16384
IMPLEMENTATIONS = ["torch eager, padded", "torch eager, length-grouped", "torch.compile, length-grouped",
                   "Liger-Kernel, length-grouped", "lab.nn.patch, length-grouped", "lab.nn.patch, padding-free"]


def lengths(count=2000, median=512, longest=4096, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    return [int(min(longest, max(2, round(x)))) for x in rng.lognormal(math.log(median), 1.0, count)]


def batches(sample_lengths, grouped):
    """Lists of sample indices of about TOKENS_PER_STEP real tokens each, in the samples' order or
    sorted by length (longest first, as group_by_length's megabatches put them)."""
    order = sorted(range(len(sample_lengths)), key=lambda i: -sample_lengths[i]) if grouped \
        else list(range(len(sample_lengths)))
    out, current, tokens = [], [], 0
    for i in order:
        current.append(i)
        tokens += sample_lengths[i]
        if tokens >= TOKENS_PER_STEP:
            out.append(current)
            current, tokens = [], 0
    return out


def measure(implementation, steps):
    """One implementation, in this process: a JSON line on stdout."""
    import statistics
    import torch
    import transformers
    import bench_llama
    base = {"torch eager": "torch eager", "torch.compile": "torch.compile per layer", "Liger-Kernel": "Liger-Kernel",
            "lab.nn.patch": "lab.nn.patch"}[implementation.split(",")[0]]
    model = bench_llama.build(torch, transformers, base)
    if model is None:
        return
    vocab = bench_llama.CONFIG["vocab_size"]
    sizes = lengths()
    g = torch.Generator().manual_seed(1)
    samples = [torch.randint(0, vocab, (n,), generator=g) for n in sizes]
    plan = batches(sizes, grouped="length-grouped" in implementation or "padding-free" in implementation)

    def inputs(indices):
        pieces = [samples[i] for i in indices]
        if "padding-free" in implementation:
            row = torch.cat(pieces)[None].cuda()
            positions = torch.cat([torch.arange(len(p)) for p in pieces])[None].cuda()
            labels = row.clone()
            return dict(input_ids=row, labels=labels, position_ids=positions)
        longest = max(len(p) for p in pieces)
        ids = torch.zeros(len(pieces), longest, dtype=torch.long)
        mask = torch.zeros(len(pieces), longest, dtype=torch.long)
        for r, p in enumerate(pieces):
            ids[r, :len(p)], mask[r, :len(p)] = p, 1
        labels = ids.masked_fill(mask == 0, -100)
        return dict(input_ids=ids.cuda(), attention_mask=mask.cuda(), labels=labels.cuda())

    def step(batch):
        model(**batch).loss.backward()

    try:
        step(inputs(plan[0]))  # gradients exist from here on
        torch.cuda.synchronize()
        weights_and_grads = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        rates, padded_share = [], []
        # Steps spread evenly over the epoch: length-grouped plans go from the longest samples to the
        # shortest, and their first steps alone (all 4096 tokens, no padding to save) would not say
        # what an epoch costs.
        for indices in plan[1:][::max(1, (len(plan) - 1) // steps)][:steps]:
            batch = inputs(indices)
            real = sum(sizes[i] for i in indices)
            # each batch has a shape of its own: run it once untimed, so that what a new shape costs
            # the first time (torch.compile's and Triton's compilation) stays out of the rate
            step(batch)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            step(batch)
            end.record()
            end.synchronize()
            rates.append(real / start.elapsed_time(end) * 1e3)
            padded_share.append(1 - real / batch["input_ids"].numel())
        peak = torch.cuda.max_memory_allocated() - weights_and_grads
    except torch.OutOfMemoryError:
        print(json.dumps(dict(implementation=implementation, out_of_memory=True)))
        return
    print(json.dumps(dict(implementation=implementation, real_tokens_per_s=statistics.median(rates),
                          peak_gib=peak / 2**30, padding=statistics.mean(padded_share), steps=len(rates))))


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out-dir")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--one", metavar="IMPLEMENTATION", help=argparse.SUPPRESS)
    args = parser.parse_args()
    steps = 4 if args.quick else 12
    if args.one:
        measure(args.one, steps)
        return
    import lab
    if not lab.is_available():
        print("bench_packed.py: needs a CUDA GPU")
        return
    sizes = lengths()
    ordered = sorted(sizes)
    print(f"{len(sizes)} samples, lognormal lengths (median 512, sigma 1, at most 4096, seed 0): min {ordered[0]}, "
          f"median {ordered[len(sizes) // 2]}, 90th percentile {ordered[int(0.9 * len(sizes))]}, max {ordered[-1]}; "
          f"~{TOKENS_PER_STEP} real tokens a step")
    from _peers import run_in_own_process
    rows = [row for row in (run_in_own_process(__file__, [name] + (["--quick"] if args.quick else []), name, 1200)
                            for name in IMPLEMENTATIONS) if row]
    print(f"\n{'implementation':32s} {'real tokens/s':>14s} {'padding':>8s} {'peak GiB':>9s}")
    for r in rows:
        if r.get("out_of_memory"):
            print(f"{r['implementation']:32s} {'out of memory':>33s}")
            continue
        print(f"{r['implementation']:32s} {r['real_tokens_per_s']:14.0f} {r['padding']:8.0%} {r['peak_gib']:9.2f}")
    by = {r["implementation"]: r for r in rows if not r.get("out_of_memory")}
    ours = by.get("lab.nn.patch, padding-free")
    goals = []
    baselines = [by[n] for n in IMPLEMENTATIONS[1:4] if n in by]
    if ours and baselines:
        best = max(baselines, key=lambda r: r["real_tokens_per_s"])
        ratio = ours["real_tokens_per_s"] / best["real_tokens_per_s"]
        goals.append((f"padding-free / best length-grouped ({best['implementation']}) >= 1.6", ratio, ratio >= 1.6))
    from _peers import print_met_goals
    print_met_goals(goals, width=64, digits=3)
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "packed.json"), "w") as f:
            json.dump(dict(lengths=sizes, tokens_per_step=TOKENS_PER_STEP, rows=rows, goals=[list(g) for g in goals]),
                      f, indent=1)
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        shown = [r for r in rows if not r.get("out_of_memory")]
        for ax, key, label in ((axes[0], "real_tokens_per_s", "real tokens/s (higher is better)"),
                               (axes[1], "peak_gib", "peak GiB beyond weights and grads")):
            ax.bar(range(len(shown)), [r[key] for r in shown])
            ax.set_xticks(range(len(shown)), [r["implementation"] for r in shown], rotation=20, ha="right", fontsize=8)
            ax.set_ylabel(label)
        fig.suptitle("Llama 1.03 B fine-tuning on lognormal-length samples, ~16 K real tokens a step, bf16")
        fig.tight_layout()
        fig.savefig(os.path.join(args.out_dir, "packed.png"), dpi=110)


if __name__ == "__main__":
    main()
