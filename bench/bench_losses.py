"""Cross-entropy and the GLUs: lab against torch eager and torch.compile on the same tensors, in one
run: cross_entropy forward + backward on 4096 x 131072 bfloat16 logits (time and
extra peak memory), SwiGLU / GeGLU forward and backward on 16384 x 4096 bfloat16.

Cross-entropy: lab's kernel writes the loss and d loss / d logits in one pass - into the logits
themselves (`grad=logits`: no extra memory) or a separate buffer - and lab.nn.cross_entropy is the
torch face (autograd; the backward scales the saved gradient). Extra peak memory: torch's allocator
peak during one forward + backward over what was allocated before, plus lab's own scratch.
Bytes a perfect kernel moves per second; medians of event-timed repeats after warm-up; ratios are
the peer's time over lab's (> 1: lab is faster).
    python3 bench/bench_losses.py [--out-dir DIR] [--quick]   (LAB_BENCH_NO_COMPILE=1: no torch.compile column)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import median_ms  # noqa: E402
from _peers import extra_peak_mib, print_goals, print_ratio_table, save_eager_compile_results, start  # noqa: E402

MEMORY_GOAL_MIB = 64


def cross_entropy_cases(torch, rows, vocab):
    """(name, bytes, lab call, torch eager call, the step torch.compile takes, its arguments)."""
    import lab.nn
    F = torch.nn.functional
    logits = torch.randn(rows, vocab, device="cuda", dtype=torch.bfloat16)
    target = torch.randint(0, vocab, (rows,), device="cuda")
    leaf = logits.clone().requires_grad_()
    loss, grad = torch.empty((), device="cuda", dtype=torch.bfloat16), torch.empty_like(logits)
    moved = 2 * logits.numel() * 2  # logits read once, the gradient written once
    shape = f"{rows}x{vocab}"

    def torch_step(x, t):
        return torch.autograd.grad(F.cross_entropy(x, t), (x,))

    def lab_nn_step(x=leaf, t=target, inplace_backward=False):
        return torch.autograd.grad(lab.nn.cross_entropy(x, t, inplace_backward=inplace_backward), (x,))

    # in place: the gradient overwrites the logits (the values change run to run; the work does not)
    yield (f"cross_entropy fwd+bwd, grad=logits, {shape}", moved,
           lambda: lab.cross_entropy(logits, target, loss, grad=logits),
           lambda: torch_step(leaf, target), torch_step, (leaf, target))
    yield (f"cross_entropy fwd+bwd, grad buffer, {shape}", moved,
           lambda: lab.cross_entropy(logits, target, loss, grad=grad), lambda: torch_step(leaf, target), None, None)
    yield (f"cross_entropy fwd+bwd (lab.nn), {shape}", moved, lab_nn_step, lambda: torch_step(leaf, target),
           None, None)
    yield (f"cross_entropy fwd+bwd (lab.nn, inplace_backward), {shape}", moved,
           lambda: lab_nn_step(inplace_backward=True), lambda: torch_step(leaf, target), None, None)


def glu_cases(torch, rows, n):
    F = torch.nn.functional
    bf16 = torch.bfloat16
    gate, up = torch.randn(rows, n, device="cuda", dtype=bf16), torch.randn(rows, n, device="cuda", dtype=bf16)
    dy, out = torch.randn_like(gate), torch.empty_like(gate)
    grad_gate, grad_up = torch.empty_like(gate), torch.empty_like(gate)
    gate_leaf, up_leaf = gate.clone().requires_grad_(), up.clone().requires_grad_()
    shape = f"{rows}x{n}"
    for name, act in (("swiglu", F.silu), ("geglu", lambda v: F.gelu(v, approximate="tanh"))):
        def forward(g, u, act=act):
            return act(g) * u

        def backward(g, u, d, act=act):
            return torch.autograd.grad(act(g) * u, (g, u), d)

        yield (f"{name} forward, {shape}", 3 * gate.numel() * 2,
               lambda name=name: getattr(lab, name)(gate, up, out), lambda f=forward: f(gate, up), forward, (gate, up))
        yield (f"{name} backward, {shape}", 5 * gate.numel() * 2,
               lambda name=name: getattr(lab, f"{name}_backward")(dy, gate, up, grad_gate, grad_up),
               lambda b=backward: b(gate_leaf, up_leaf, dy), backward, (gate_leaf, up_leaf, dy))


def main():
    started = start("bench_losses", __doc__.split("\n")[0])
    if started is None:
        return 1
    args, torch, _, timer = started
    ce_rows, vocab, glu_rows = (512, 131072, 2048) if args.quick else (4096, 131072, 16384)
    with_compile = not os.environ.get("LAB_BENCH_NO_COMPILE")  # compiling takes most of the run's time
    rows = []
    for name, nbytes, lab_fn, eager_fn, compile_fn, compile_args in [*cross_entropy_cases(torch, ce_rows, vocab),
                                                                      *glu_cases(torch, glu_rows, 4096)]:
        row = dict(case=name, bytes=nbytes, lab_ms=median_ms(lab_fn, *timer, repeats=20),
                   eager_ms=median_ms(eager_fn, *timer, repeats=20), compile_ms=None)
        if with_compile and compile_fn is not None:
            compiled = torch.compile(compile_fn, dynamic=False)
            row["compile_ms"] = median_ms(lambda: compiled(*compile_args), *timer, repeats=20)
            if name.startswith("cross_entropy"):
                row["compile_extra_mib"] = extra_peak_mib(torch, lambda: compiled(*compile_args))
        if name.startswith("cross_entropy"):
            scratch = 4 * (2 + ce_rows) / 2**20  # lab's own pool: 1 / count, the count, one loss per row
            row["lab_extra_mib"] = extra_peak_mib(torch, lab_fn) + scratch
            row["eager_extra_mib"] = extra_peak_mib(torch, eager_fn)
        rows.append(row)
        torch.cuda.empty_cache()
    print_ratio_table(rows, "cross-entropy and GLUs (bfloat16)")
    print(f"\n{'extra peak memory (MiB)':58s} {'lab':>8s} {'eager':>9s} {'compile':>8s}")
    for r in rows:
        if "lab_extra_mib" in r:
            compiled = f"{r['compile_extra_mib']:8.0f}" if r.get("compile_extra_mib") is not None else f"{'-':>8s}"
            print(f"{r['case']:58s} {r['lab_extra_mib']:8.1f} {r['eager_extra_mib']:9.0f} {compiled}")
    ce = f"cross_entropy fwd+bwd, grad=logits, {ce_rows}x{vocab}"
    goals = [(ce, "eager", 4.0), (ce, "compile", 2.7)]
    for name in ("swiglu", "geglu"):
        goals += [(f"{name} forward, {glu_rows}x4096", "compile", 1.15), (f"{name} forward, {glu_rows}x4096", "eager", 3.0),
                  (f"{name} backward, {glu_rows}x4096", "compile", 1.0)]
    print_goals(rows, goals)
    extra = next(r["lab_extra_mib"] for r in rows if r["case"] == ce)
    print(f"{ce + ' extra peak <= ' + str(MEMORY_GOAL_MIB) + ' MiB':60s} {extra:9.1f}  "
          f"{'yes' if extra <= MEMORY_GOAL_MIB else 'NO'}")
    save_eager_compile_results(args.out_dir, "losses", torch, rows,
                               "Cross-entropy and GLUs, bfloat16, one GPU, one run (bench/bench_losses.py)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
