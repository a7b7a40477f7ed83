"""Host time of every lab.nn function against torch eager's own ops for the same result - forward,
forward + backward, and forward under torch.no_grad() - on inputs small enough that the GPU waits on
the host (8 rows of 4096 bfloat16, and the like): the wall time of a call is then the host's. Goal:
lab.nn's time <= 1.25x torch's for each function and every mode.

Each row is timed in rounds of `CALLS` calls with no sync between them (a sync after each round,
outside the timing), lab and torch alternated round by round so that drift hits both alike; the
median round is reported. The inputs require grad, as they do in training (no_grad: as in evaluation). Last, the
parts of lab.nn.softmax's forward timed alone (the C call, an allocation, an empty autograd.Function).
    python3 bench/nn_host_cost.py [--out-dir DIR] [--quick]
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from _peers import bench_args, peers  # noqa: E402

GOAL = 1.25  # lab.nn's host time over torch eager's, at most
CALLS = 200  # a round: few enough that the launch queue never fills (a call queues at most ~10 kernels)


def cases(torch):
    """(name, lab.nn call, torch eager call, inputs that require grad); each call takes no
    arguments and returns its output(s)."""
    import lab.nn
    F = torch.nn.functional
    bf16, dev = torch.bfloat16, "cuda"

    def leaf(*shape, dtype=bf16):
        return torch.randn(*shape, device=dev, dtype=dtype, requires_grad=True)

    x, w, b, r = leaf(8, 4096), leaf(4096), leaf(4096), leaf(8, 4096)
    gate, up = leaf(8, 4096), leaf(8, 4096)
    down = leaf(2048, 4096)
    logits = leaf(8, 32000)
    target = torch.randint(0, 32000, (8,), device=dev)
    hidden, head = leaf(8, 2048), leaf(32000, 2048)
    q, k = leaf(1, 32, 8, 128), leaf(1, 8, 8, 128)
    cos, sin = torch.randn(1, 8, 128, device=dev, dtype=bf16), torch.randn(1, 8, 128, device=dev, dtype=bf16)

    def hf_rope(q, k):  # transformers' apply_rotary_pos_emb (rotate_half)
        c, s = cos.unsqueeze(1), sin.unsqueeze(1)

        def rotate_half(t):
            return torch.cat((-t[..., 64:], t[..., :64]), dim=-1)
        return q * c + rotate_half(q) * s, k * c + rotate_half(k) * s

    def torch_add_rms_norm():
        h = x + r
        return F.rms_norm(h, (4096,), w, 1e-6), h

    return [
        ("softmax 8x4096", lambda: lab.nn.softmax(x, -1), lambda: torch.softmax(x, -1), (x,)),
        ("log_softmax 8x4096", lambda: lab.nn.log_softmax(x, -1), lambda: torch.log_softmax(x, -1), (x,)),
        ("layer_norm 8x4096", lambda: lab.nn.layer_norm(x, (4096,), w, b), lambda: F.layer_norm(x, (4096,), w, b),
         (x, w, b)),
        ("rms_norm 8x4096", lambda: lab.nn.rms_norm(x, (4096,), w, 1e-6), lambda: F.rms_norm(x, (4096,), w, 1e-6),
         (x, w)),
        ("add_rms_norm 8x4096", lambda: lab.nn.add_rms_norm(x, r, (4096,), w, 1e-6), torch_add_rms_norm, (x, r, w)),
        ("swiglu 8x4096", lambda: lab.nn.swiglu(gate, up), lambda: F.silu(gate) * up, (gate, up)),
        ("geglu 8x4096", lambda: lab.nn.geglu(gate, up), lambda: F.gelu(gate, approximate="tanh") * up, (gate, up)),
        ("swiglu_linear 8x4096 -> 2048", lambda: lab.nn.swiglu_linear(gate, up, down),
         lambda: F.linear(F.silu(gate) * up, down), (gate, up, down)),
        ("cross_entropy 8x32000", lambda: lab.nn.cross_entropy(logits, target),
         lambda: F.cross_entropy(logits, target), (logits,)),
        ("linear_cross_entropy 8x2048 @ 32000", lambda: lab.nn.linear_cross_entropy(hidden, head, target),
         lambda: F.cross_entropy(F.linear(hidden, head).float(), target), (hidden, head)),
        ("apply_rotary_pos_emb q 1x32x8x128", lambda: lab.nn.apply_rotary_pos_emb(q, k, cos, sin),
         lambda: hf_rope(q, k), (q, k)),
    ]


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def with_backward(torch, call, inputs):
    """call, then the gradients of its outputs with respect to inputs (each output's gradient made once,
    outside the timing), as one training step's forward + backward of that op."""
    grads = [torch.randn_like(o) for o in as_tuple(call())]
    return lambda: torch.autograd.grad(as_tuple(call()), inputs, grads)


def without_grad(torch, call):
    """call under torch.no_grad(), as inference and evaluation run it."""
    def unrecorded():
        with torch.no_grad():
            return call()
    return unrecorded


def host_us(torch, calls, rounds):
    """Microseconds a call, median over rounds, of each of `calls` (timed alternately, round by round)."""
    for fn in calls:
        for _ in range(10):
            fn()
    torch.cuda.synchronize()
    samples = [[] for _ in calls]
    for _ in range(rounds):
        for fn, times in zip(calls, samples):
            start = time.perf_counter()
            for _ in range(CALLS):
                fn()
            times.append((time.perf_counter() - start) / CALLS * 1e6)
            torch.cuda.synchronize()
    return [sorted(times)[len(times) // 2] for times in samples]


def breakdown(torch, rounds):
    """Where lab.nn.softmax's forward spends its host time: its parts timed alone on the same input."""
    import lab.nn

    class Bare(torch.autograd.Function):  # the floor of any autograd.Function: a node and an allocation
        @staticmethod
        def forward(ctx, x):
            return torch.empty_like(x)

        @staticmethod
        def backward(ctx, grad):
            return grad

    x = torch.randn(8, 4096, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    xd, out = x.detach(), torch.empty_like(x)
    parts = [("torch.softmax", lambda: torch.softmax(x, -1)),
             ("lab.nn.softmax", lambda: lab.nn.softmax(x, -1)),
             ("lab.softmax, the C call alone", lambda: lab.softmax(xd, out)),
             ("torch.empty_like", lambda: torch.empty_like(x)),
             ("an empty autograd.Function", lambda: Bare.apply(x))]
    times = host_us(torch, [fn for _, fn in parts], rounds)
    print("softmax forward on 8x4096 bf16 (requires grad), its parts: us a call")
    for (name, _), us in zip(parts, times):
        print(f"  {name:32s} {us:8.1f}")
    return dict(zip((name for name, _ in parts), times))


def main():
    args = bench_args(__doc__.splitlines()[0])
    found = peers("nn_host_cost")
    if found is None:
        return 1
    torch = found[0]
    rounds = 3 if args.quick else 9
    rows = []
    print(f"lab.nn's host time a call against torch eager's (us, median of {rounds} rounds of {CALLS} calls)")
    print(f"{'function':38s} {'mode':8s} {'lab.nn':>8s} {'torch':>8s} {'ratio':>6s}  goal <= {GOAL}")
    for name, ours, theirs, inputs in cases(torch):
        for mode in ("forward", "fwd+bwd", "no_grad"):
            calls = {"forward": (ours, theirs), "no_grad": (without_grad(torch, ours), without_grad(torch, theirs)),
                     "fwd+bwd": (with_backward(torch, ours, inputs), with_backward(torch, theirs, inputs))}[mode]
            lab_us, torch_us = host_us(torch, calls, rounds)
            ratio = lab_us / torch_us
            rows.append(dict(case=name, mode=mode, lab_us=lab_us, torch_us=torch_us, ratio=ratio, met=ratio <= GOAL))
            print(f"{name:38s} {mode:8s} {lab_us:8.1f} {torch_us:8.1f} {ratio:6.2f}  {'met' if ratio <= GOAL else 'MISSED'}")
    parts = breakdown(torch, rounds)
    missed = [r for r in rows if not r["met"]]
    print(f"nn_host_cost: {len(rows) - len(missed)} of {len(rows)} rows within {GOAL}x torch eager's host time")
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "nn_host_cost.json"), "w") as f:
            json.dump(dict(torch=torch.__version__, lab=lab.__version__, calls=CALLS, rounds=rounds, goal=GOAL,
                           rows=rows, softmax_parts_us=parts), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
