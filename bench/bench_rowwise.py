"""Row-wise training kernels: lab against torch eager and torch.compile on the same tensors, in one
run: softmax, layer_norm and rms_norm forward, rms_norm forward + backward, at
bfloat16 16384 x 4096, and short rows (128, 1024) where a fixed cost per call decides.

Bytes a perfect kernel moves per second (each input read once, each output written once); medians of
event-timed repeats after warm-up (lab/_timing.py); ratios are the peer's time over lab's (> 1: lab
is faster). A forward + backward sample is ten training steps back to back, as in a training loop,
where the host queues the next step while the GPU runs this one; one row also times a single step
after a sync, where the host time before the first kernel shows as idle GPU (bench/host_cost.py
measures both).
    python3 bench/bench_rowwise.py [--out-dir DIR] [--quick]   (LAB_BENCH_NO_COMPILE=1: no torch.compile column)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import median_ms  # noqa: E402
from _peers import print_goals, print_ratio_table, save_eager_compile_results, start  # noqa: E402

# The goals: (case, peer, at least this ratio of the peer's time over lab's).
GOALS = [("softmax, 16384x4096", "eager", 2.5), ("softmax, 16384x4096", "compile", 2.5),
         ("layer_norm, 16384x4096", "eager", 1.5), ("rms_norm, 16384x4096", "eager", 1.25),
         ("rms_norm fwd+bwd (lab.nn), 16384x4096", "eager", 1.3), ("rms_norm fwd+bwd (lab.nn), 16384x4096", "compile", 1.3)]
SMALL_ROWS_GOAL = 1.0  # short rows: never below torch eager
BACK_TO_BACK = 10  # training steps a sample for the forward + backward cases


def cases(torch, quick):
    """(name, bytes, lab call, torch eager call, the function torch.compile takes, its arguments, steps
    a sample)."""
    import lab.nn
    F = torch.nn.functional
    bf16 = torch.bfloat16
    rows = 2048 if quick else 16384
    for n in (4096, 1024, 128):
        x = torch.randn(rows, n, device="cuda", dtype=bf16)
        w, b = torch.randn(n, device="cuda", dtype=bf16), torch.randn(n, device="cuda", dtype=bf16)
        out, stats = torch.empty_like(x), torch.empty(rows, device="cuda")
        moved = 2 * x.numel() * 2
        shape = f"{rows}x{n}"
        yield (f"softmax, {shape}", moved, lambda x=x, out=out: lab.softmax(x, out),
               lambda x=x: F.softmax(x, -1), lambda x: F.softmax(x, -1), (x,), 1)
        yield (f"layer_norm, {shape}", moved,
               lambda x=x, w=w, b=b, out=out, stats=stats: lab.layer_norm(x, w, b, out, rstd=stats),
               lambda x=x, w=w, b=b, n=n: F.layer_norm(x, (n,), w, b),
               lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), (x, w, b), 1)
        yield (f"rms_norm, {shape}", moved, lambda x=x, w=w, out=out, stats=stats: lab.rms_norm(x, w, out, rstd=stats),
               lambda x=x, w=w, n=n: F.rms_norm(x, (n,), w), lambda x, w: F.rms_norm(x, (x.shape[-1],), w), (x, w), 1)
        if n != 4096:
            continue
        # forward + backward: x read, y written; grad_out and x read, grad_x written
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        dy, grad_x, grad_w = torch.randn_like(x), torch.empty_like(x), torch.empty_like(w)

        def lab_kernels(x=x, w=w, out=out, stats=stats, dy=dy, grad_x=grad_x, grad_w=grad_w):
            lab.rms_norm(x, w, out, rstd=stats)
            lab.rms_norm_backward(dy, x, w, stats, grad_x, grad_w)

        def train_step(norm):
            def step(x, w, dy):
                return torch.autograd.grad(norm(x, (x.shape[-1],), w), (x, w), dy)
            return step

        yield (f"rms_norm fwd+bwd (lab.nn), {shape}", 5 * x.numel() * 2,
               lambda xg=xg, wg=wg, dy=dy: train_step(lab.nn.rms_norm)(xg, wg, dy),
               lambda xg=xg, wg=wg, dy=dy: train_step(F.rms_norm)(xg, wg, dy), train_step(F.rms_norm), (xg, wg, dy),
               BACK_TO_BACK)
        yield (f"rms_norm fwd+bwd (lab.nn, one step a sample), {shape}", 5 * x.numel() * 2,
               lambda xg=xg, wg=wg, dy=dy: train_step(lab.nn.rms_norm)(xg, wg, dy),
               lambda xg=xg, wg=wg, dy=dy: train_step(F.rms_norm)(xg, wg, dy), None, None, 1)
        yield (f"rms_norm fwd+bwd (kernels), {shape}", 5 * x.numel() * 2, lab_kernels,
               lambda xg=xg, wg=wg, dy=dy: train_step(F.rms_norm)(xg, wg, dy), None, None, BACK_TO_BACK)
        yield (f"layer_norm fwd+bwd (lab.nn), {shape}", 5 * x.numel() * 2,
               lambda xg=xg, wg=wg, dy=dy: torch.autograd.grad(lab.nn.layer_norm(xg, (n,), wg), (xg, wg), dy),
               lambda xg=xg, wg=wg, dy=dy: torch.autograd.grad(F.layer_norm(xg, (n,), wg), (xg, wg), dy), None, None,
               BACK_TO_BACK)
        yield (f"softmax fwd+bwd (lab.nn), {shape}", 5 * x.numel() * 2,
               lambda xg=xg, dy=dy: torch.autograd.grad(lab.nn.softmax(xg, -1), (xg,), dy),
               lambda xg=xg, dy=dy: torch.autograd.grad(F.softmax(xg, -1), (xg,), dy), None, None, BACK_TO_BACK)


def per_step_ms(fn, timer, steps):
    """Median milliseconds a call of fn, `steps` calls back to back per event-timed sample."""
    return median_ms(lambda: [fn() for _ in range(steps)], *timer, repeats=20) / steps


def main():
    started = start("bench_rowwise", __doc__.split("\n")[0])
    if started is None:
        return 1
    args, torch, _, timer = started
    rows = []
    for name, nbytes, lab_fn, eager_fn, compile_fn, compile_args, steps in cases(torch, args.quick):
        compile_ms = None
        with_compile = not os.environ.get("LAB_BENCH_NO_COMPILE")  # compiling takes most of the run's time
        if with_compile and compile_fn is not None and name.endswith("x4096"):  # the headline size only
            compiled = torch.compile(compile_fn, dynamic=False)
            compile_ms = per_step_ms(lambda: compiled(*compile_args), timer, steps)
        rows.append(dict(case=name, bytes=nbytes, lab_ms=per_step_ms(lab_fn, timer, steps),
                         eager_ms=per_step_ms(eager_fn, timer, steps), compile_ms=compile_ms))
    print_ratio_table(rows, "row-wise op (bfloat16)")
    size = str(2048 if args.quick else 16384)
    goals = [(case.replace("16384", size), peer, target) for case, peer, target in GOALS]
    goals += [(r["case"], "eager", SMALL_ROWS_GOAL) for r in rows if r["case"].endswith(("x128", "x1024"))]
    print_goals(rows, goals)
    save_eager_compile_results(args.out_dir, "rowwise", torch, rows,
                               "Row-wise ops, bfloat16, one GPU, one run (bench/bench_rowwise.py)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
