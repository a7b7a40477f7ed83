"""A training step of a Hugging Face Llama end to end: forward + backward of the causal-LM loss of a
random-weight model of 1.03 B parameters (8 layers, hidden 2048, 16 query heads over 8 key heads,
MLP 8192, vocabulary 128256, untied head), bfloat16, batch 4 x 2048 tokens - and a second case of 4 x
4096 tokens, where memory decides what fits. Each implementation runs in a process of its own on the
same weights (one seed) and batch, so patches and allocator peaks do not leak between them:
  - torch eager (transformers as installed, sdpa attention);
  - torch.compile of each decoder layer;
  - Liger-Kernel's apply_liger_kernel_to_llama (rope, RMSNorm, SwiGLU, fused linear cross-entropy),
    where importable (carried as a wheel: make bench-llama);
  - lab.nn.patch (RMSNorm, SwiGLU, rope, lab's attention, fused linear cross-entropy), the same
    keeping the SwiGLU's output for the backward (recompute_mlp=False) instead of making it again
    there, and the same with torch's SDPA attention (attention=False).
With --model 8b the model is 8 B-shaped (hidden 4096, MLP 14336, 32 query heads over 8 key heads,
vocabulary 128256; 8 layers, 2.8 B parameters, so that it fits one GPU beside its gradients) at
1 x 8192 tokens, and the implementations are the float8 ones beside their bfloat16 baselines:
lab.nn.patch in bfloat16 and with float8="tensorwise", torch.compile per layer, and torchao's float8
training (tensorwise, lm_head left in bfloat16) with torch.compile per layer, where torchao is
importable (a wheel: make bench-llama-float8).
Prints ms/step (median of event-timed steps after warm-up, each after the previous one's
synchronization), tokens/s, the allocator's peak beyond the model's weights and gradients, and two
diagnostics (measure() says how they are made): the step after the GPU rested ~0.1 s (its clocks
then not held down by its power limit) and the same with the step queued while the GPU rested (the
GPU then never waits on the host's Python) - and the median SM clock and power nvidia-smi read during
the steps back to back, with the share of its samples in which the driver held the clocks down for
the power cap (bench/_gpu_sampler.py), where it is installed. Writes llama.json and
llama.png (tokens/s and memory by implementation) into --out-dir. --case runs one case only.
    python3 bench/bench_llama.py [--out-dir DIR] [--quick] [--case 4x2048] [--model 1b|8b]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=8,
              num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=8192, rope_theta=500000.0,
              tie_word_embeddings=False, attn_implementation="sdpa")
CONFIG_8B = dict(CONFIG, hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8)
CASES = {"4x2048": (4, 2048), "4x4096": (4, 4096), "1x8192": (1, 8192)}
REST_CYCLES = 200_000_000  # torch.cuda._sleep's spin: ~0.1 s at the H200's ~1.98 GHz
KEEPING = "lab.nn.patch, MLP output kept"
TORCH_ATTENTION = "lab.nn.patch, SDPA attention"
IMPLEMENTATIONS = ["torch eager", "torch.compile per layer", "Liger-Kernel", "lab.nn.patch", KEEPING, TORCH_ATTENTION]
FLOAT8 = "lab.nn.patch, float8"
TORCHAO = "torchao float8 + torch.compile per layer"
# model -> (its config, its cases, the implementations it compares)
MODELS = {"1b": (CONFIG, ["4x2048", "4x4096"], IMPLEMENTATIONS + [FLOAT8]),
          "8b": (CONFIG_8B, ["1x8192"], ["torch.compile per layer", "lab.nn.patch", FLOAT8, TORCHAO])}


def build(torch, transformers, implementation, model_key="1b"):
    """The model on the GPU with the implementation applied; None when it cannot be applied here."""
    config, _, implementations = MODELS[model_key]
    if implementation not in implementations:  # a misspelt name must not measure plain torch under it
        raise SystemExit(f"bench_llama.py: no implementation {implementation!r}; one of {implementations}")
    convert = None
    if implementation == TORCHAO:
        try:
            from torchao.float8 import convert_to_float8_training as convert
        except ImportError as e:
            print(json.dumps(dict(skipped=f"torchao is not importable: {e}")))
            return None
    config = transformers.LlamaConfig(**config)
    if implementation == "Liger-Kernel":
        try:
            from liger_kernel.transformers import apply_liger_kernel_to_llama
        except ImportError as e:
            print(json.dumps(dict(skipped=f"Liger-Kernel is not importable: {e}")))
            return None
        apply_liger_kernel_to_llama()  # before the model exists: its classes are replaced in the module
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
    model.train()
    if convert is not None:  # the decoder's projections; lm_head stays bfloat16, as lab's patch keeps it
        convert(model, module_filter_fn=lambda module, name: name != "lm_head")
    if implementation in ("torch.compile per layer", TORCHAO):
        for layer in model.model.layers:
            layer.compile()
    elif implementation in ("lab.nn.patch", KEEPING, TORCH_ATTENTION, FLOAT8):
        import lab.nn
        lab.nn.patch(model, recompute_mlp=implementation != KEEPING, attention=implementation != TORCH_ATTENTION,
                     float8="tensorwise" if implementation == FLOAT8 else None)
    return model


def training_step(torch, model, case):
    """The batch of `case` (one seed: the same tokens for every implementation and tool) and a step()
    that runs the forward and backward of the model's causal-LM loss on it."""
    batch, positions = CASES[case]
    g = torch.Generator(device="cuda").manual_seed(1)
    input_ids = torch.randint(0, model.config.vocab_size, (batch, positions), device="cuda", generator=g)

    def step():
        model(input_ids=input_ids, labels=input_ids).loss.backward()
    return input_ids, step


def prepared(torch, transformers, implementation, case, warmup, model_key="1b"):
    """(model, batch, step) - build() and training_step() - after `warmup` steps and a
    synchronization; None where the implementation cannot be applied here."""
    model = build(torch, transformers, implementation, model_key)
    if model is None:
        return None
    input_ids, step = training_step(torch, model, case)
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    return model, input_ids, step


def measure(implementation, case, steps, model_key="1b"):
    """One implementation on one case, in this process: a JSON line on stdout."""
    import torch
    import transformers
    from lab._timing import median_ms, torch_timer
    from _gpu_sampler import GpuSampler, nvidia_smi_id
    ready = prepared(torch, transformers, implementation, case, warmup=0, model_key=model_key)
    if ready is None:
        return
    model, _, step = ready
    batch, positions = CASES[case]
    parameters = sum(p.numel() for p in model.parameters())
    try:
        step()  # gradients exist from here on, so the peak below is the step's own
        torch.cuda.synchronize()
        weights_and_grads = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        with GpuSampler(nvidia_smi_id(torch)) as back_to_back:  # the SM clock and power those steps ran at
            ms = median_ms(step, *torch_timer(torch), repeats=steps, warmup=2)
        peak = torch.cuda.max_memory_allocated() - weights_and_grads
        # Two diagnostics, each step after ~0.1 s in which the GPU only waits (torch.cuda._sleep: one
        # thread spinning). Rested: the wait synchronized before the step - steps back to back keep the
        # GPU at its power limit, and `ms` - rested is what that costs in clock speed. Host ahead: the
        # step queued during the wait, so the GPU never waits on the host's Python - rested - ahead is
        # what those waits cost.
        def rest():
            torch.cuda._sleep(REST_CYCLES)
            torch.cuda.synchronize()
        rested = median_ms(step, *torch_timer(torch), repeats=steps, warmup=0, before=rest)
        ahead = median_ms(step, *torch_timer(torch), repeats=steps, warmup=0,
                          before=lambda: torch.cuda._sleep(REST_CYCLES))
    except torch.OutOfMemoryError:
        print(json.dumps(dict(implementation=implementation, case=case, out_of_memory=True)))
        return
    clocks = {f"back_to_back_{key}": value for key, value in back_to_back.summary().items()}
    print(json.dumps(dict(implementation=implementation, case=case, gpu=torch.cuda.get_device_name(), ms=ms, tokens_per_s=batch * positions / ms * 1e3,
                          peak_gib=peak / 2**30, parameters=parameters, ms_rested=rested,
                          ms_host_ahead=ahead, **clocks)))


def plot(rows, path, model_key="1b"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, key, label in ((axes[0], "tokens_per_s", "tokens/s (higher is better)"),
                           (axes[1], "peak_gib", "peak GiB beyond weights and grads (lower is better)")):
        _, model_cases, implementations = MODELS[model_key]
        cases = [case for case in model_cases if any(r["case"] == case for r in rows)]
        width = 0.8 / len(cases)
        for k, case in enumerate(cases):
            xs, heights = [], []
            for i, name in enumerate(implementations):
                row = next((r for r in rows if r["implementation"] == name and r["case"] == case and key in r), None)
                if row:
                    xs.append(i + (k - (len(cases) - 1) / 2) * width)
                    heights.append(row[key])
            ax.bar(xs, heights, width, label=case)
        ax.set_xticks(range(len(implementations)), implementations, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(label)
        ax.legend()
    shape = {"1b": "Llama 1.03 B", "8b": "8 B-shaped Llama (8 layers)"}[model_key]
    fig.suptitle(f"{shape} training step (forward + backward), {rows[0].get('gpu', 'GPU') if rows else 'GPU'}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out-dir")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--case", choices=list(CASES), help="this case only")
    parser.add_argument("--model", choices=list(MODELS), default="1b", help="the model's shape (default 1b)")
    parser.add_argument("--one", nargs=2, metavar=("IMPLEMENTATION", "CASE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    steps = 3 if args.quick else 10
    config, model_cases, implementations = MODELS[args.model]
    if args.one:
        measure(args.one[0], args.one[1], steps, args.model)
        return
    import lab
    try:
        import transformers  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print(f"bench_llama.py: needs torch and transformers ({e})")
        return
    if not lab.is_available():
        print("bench_llama.py: needs a CUDA GPU")
        return
    from _peers import run_in_own_process
    rows = []
    for case in [args.case] if args.case else model_cases:
        for name in implementations:
            row = run_in_own_process(__file__, [name, case, "--model", args.model] + (["--quick"] if args.quick else []),
                                     f"{name}, {case}", 900)
            if row:
                rows.append(row)
    print(f"\n{'case':8s} {'implementation':30s} {'ms/step':>9s} {'tokens/s':>10s} {'peak GiB':>9s} {'rested':>7s}"
          f" {'host ahead':>10s} {'SM MHz':>7s} {'W':>5s} {'capped':>6s}")
    for r in rows:
        if r.get("out_of_memory"):
            print(f"{r['case']:8s} {r['implementation']:30s} {'out of memory':>30s}")
            continue
        clocks = "" if "back_to_back_sm_mhz" not in r else \
            f" {r['back_to_back_sm_mhz']:7.0f} {r['back_to_back_watts']:5.0f}" + \
            (f" {r['back_to_back_power_capped']:6.0%}" if "back_to_back_power_capped" in r else "")
        print(f"{r['case']:8s} {r['implementation']:30s} {r['ms']:9.1f} {r['tokens_per_s']:10.0f} {r['peak_gib']:9.2f}"
              f" {r['ms_rested']:7.1f} {r['ms_host_ahead']:10.1f}{clocks}")
    by = {(r["implementation"], r["case"]): r for r in rows if not r.get("out_of_memory")}
    ours = by.get(("lab.nn.patch", "4x2048"))
    goals = []
    float8 = by.get((FLOAT8, "1x8192"))
    if float8:
        for peer, key, target, higher in (("lab.nn.patch", "tokens_per_s", 1.3, True),
                                          (TORCHAO, "tokens_per_s", 1.15, True),
                                          (TORCHAO, "peak_gib", 1.0, False)):
            theirs = by.get((peer, "1x8192"))
            if theirs:
                ratio = float8[key] / theirs[key]
                goals.append((f"1x8192: float8 {key} / {peer} {'>=' if higher else '<='} {target}", ratio,
                              ratio >= target if higher else ratio <= target))
    if ours:
        for peer, key, target, higher in (("torch eager", "tokens_per_s", 1.4, True),
                                          ("Liger-Kernel", "tokens_per_s", 1.15, True),
                                          ("Liger-Kernel", "peak_gib", 0.9, False)):
            theirs = by.get((peer, "4x2048"))
            if theirs:
                ratio = ours[key] / theirs[key]
                goals.append((f"4x2048: lab {key} / {peer} {'>=' if higher else '<='} {target}", ratio,
                              ratio >= target if higher else ratio <= target))
    from _peers import print_met_goals
    print_met_goals(goals, width=70, digits=3)
    if args.out_dir:
        name = "llama" if args.model == "1b" else f"llama-{args.model}"
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, f"{name}.json"), "w") as f:
            json.dump(dict(config=config, rows=rows, goals=[list(g) for g in goals]), f, indent=1)
        plot(rows, os.path.join(args.out_dir, f"{name}.png"), args.model)


if __name__ == "__main__":
    main()
