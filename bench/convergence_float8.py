"""Does float8 training learn what bfloat16 training learns? 300 optimizer steps of bench_llama.py's
model (the 1 B shape, or the 8 B shape's 8 layers), from one initialization on one stream of
batches, once with lab.nn.patch in bfloat16 and once with lab.nn.patch(float8="tensorwise"), and
the two loss curves side by side.

The tokens come from a fixed random first-order Markov chain over 4096 of the vocabulary's tokens:
each token has 16 possible successors, drawn with Zipf-like weights (seeded, so every run sees the
same corpus). Its entropy - the loss a perfect model reaches - is printed; a model that learns falls
from ln(128256) ~ 11.76 toward it, so the comparison is made where the loss actually moves.

Reports each run's loss at steps 1, 10, 100 and the last, the mean of the last 10 steps and float8's
relative distance from bfloat16's there (the goal: within 1%), and whether any loss was NaN or inf.
Writes convergence-float8-<model>.json and .png into --out-dir.
    python3 bench/convergence_float8.py [--model 1b|8b] [--steps 300] [--out-dir DIR]
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

STATES, SUCCESSORS = 4096, 16


def markov_chain(torch, vocab, seed=0):
    """(tokens of the chain's states, successors[state] -> 16 state indices, their probabilities, entropy)."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randperm(vocab, generator=g)[:STATES]
    successors = torch.randint(0, STATES, (STATES, SUCCESSORS), generator=g)
    weights = 1.0 / torch.arange(1, SUCCESSORS + 1, dtype=torch.float64) ** 1.2
    weights = weights[torch.argsort(torch.rand(STATES, SUCCESSORS, generator=g), dim=1)]
    probs = weights / weights.sum(1, keepdim=True)
    # the stationary entropy rate: the rows' entropies weighted by how often each state is visited
    transition = torch.zeros(STATES, STATES, dtype=torch.float64)
    transition.scatter_add_(1, successors, probs)
    visits = torch.full((STATES,), 1.0 / STATES, dtype=torch.float64)
    for _ in range(200):
        visits = visits @ transition
    entropy = float((visits * -(probs * probs.log()).sum(1)).sum())
    return tokens, successors, probs, entropy


def batches(torch, chain, batch, positions, seed=1):
    """An endless stream of (batch x positions) token ids from the chain, the same for every run
    (drawn on the host, where a walk's step by step loop is cheap, then copied to the GPU)."""
    tokens, successors, probs = chain[:3]
    g = torch.Generator().manual_seed(seed)
    cumulative = probs.cumsum(1)
    while True:
        state = torch.randint(0, STATES, (batch,), generator=g)
        states = [state]
        draws = torch.rand(positions - 1, batch, 1, generator=g, dtype=torch.float64)
        for t in range(positions - 1):
            pick = (cumulative[state] < draws[t]).sum(1).clamp_max(SUCCESSORS - 1)
            state = successors[state, pick]
            states.append(state)
        yield tokens[torch.stack(states, dim=1)].cuda()


def train(torch, transformers, implementation, model_key, case, steps, chain):
    from bench_llama import CASES, build
    model = build(torch, transformers, implementation, model_key)
    batch, positions = CASES[case]
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    stream = batches(torch, chain, batch, positions)
    losses = []
    for _ in range(steps):
        input_ids = next(stream)
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach())
        if len(losses) % 50 == 0:  # progress, so a run cut short still says how far it got
            print(f"  {implementation}: step {len(losses)}, loss {losses[-1].item():.4f}", flush=True)
    return [float(v) for v in torch.stack(losses).cpu()]


def main():
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["1b", "8b"], default="1b")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out-dir")
    args = parser.parse_args()
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"convergence_float8.py: needs torch and transformers ({e})")
        return 1
    import lab
    if not lab.is_available():
        print("convergence_float8.py: needs a CUDA GPU")
        return 1
    from bench_llama import FLOAT8, MODELS
    config, cases, _ = MODELS[args.model]
    case = cases[0]
    chain = markov_chain(torch, config["vocab_size"])
    print(f"model {args.model}, {case} tokens a step, {args.steps} steps; the corpus's entropy rate "
          f"{chain[3]:.3f} nats a token (ln of the vocabulary: {math.log(config['vocab_size']):.3f})")
    curves = {}
    for name in ("lab.nn.patch", FLOAT8):
        curves[name] = train(torch, transformers, name, args.model, case, args.steps, chain)
        torch.cuda.empty_cache()
    bf16, fp8 = curves["lab.nn.patch"], curves[FLOAT8]
    tail = lambda curve: sum(curve[-10:]) / len(curve[-10:])  # noqa: E731
    print(f"\n{'run':28s} " + " ".join(f"{'step ' + str(s):>9s}" for s in (1, 10, 100, args.steps)) + f" {'last 10':>9s}")
    for name, curve in curves.items():
        print(f"{name:28s} " + " ".join(f"{curve[min(s, len(curve)) - 1]:9.4f}" for s in (1, 10, 100, args.steps))
              + f" {tail(curve):9.4f}")
    finite = all(math.isfinite(v) for v in fp8)
    distance = abs(tail(fp8) - tail(bf16)) / tail(bf16)
    print(f"\nfloat8's last-10 loss against bfloat16's: {distance:.2%} apart (goal: within 1%); "
          f"{'no NaN or inf' if finite else 'NaN or inf in the float8 run'}")
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        name = f"convergence-float8-{args.model}"
        with open(os.path.join(args.out_dir, f"{name}.json"), "w") as f:
            json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, model=args.model, case=case,
                           steps=args.steps, entropy_rate=chain[3], curves=curves, relative_distance=distance,
                           finite=finite), f, indent=1)
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(8, 4.5))
            for label, curve in curves.items():
                ax.plot(range(1, len(curve) + 1), curve, label=label)
            ax.axhline(chain[3], color="gray", linestyle=":", label="the corpus's entropy rate")
            ax.set_xlabel("step")
            ax.set_ylabel("loss")
            ax.set_title(f"{args.model} Llama shape, bf16 vs float8 (lab.nn.patch), {torch.cuda.get_device_name()}")
            ax.legend()
            fig.tight_layout()
            fig.savefig(os.path.join(args.out_dir, f"{name}.png"), dpi=110)
        except ImportError:
            pass
    return 0 if finite else 1


if __name__ == "__main__":
    sys.exit(main())
