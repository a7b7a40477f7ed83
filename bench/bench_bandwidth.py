"""The memory-bound kernels against the copy: each of lab's row-wise kernels and reductions as a
fraction of a device-to-device copy moving the same bytes, measured side by side in one run.

A copy (torch's `copy_`) is the most a kernel that reads and writes device memory can reach on the
GPU; a kernel's bytes are the ones it must move (every input read once, every output written once).
Both are timed the same way: ten calls back to back per event-timed sample, the median of twenty
samples after a warm-up - a kernel's own time, with the host's launch cost hidden behind the GPU's
work as in a training loop (bench_rowwise.py times one call after a sync, which adds the host's
time). The goals: forwards >= 90% of the copy, backwards and argmax >= 85%, the bf16 sum >= 1.05x
torch's and the float32 sum >= 1.0x CuPy's.
    python3 bench/bench_bandwidth.py [--out-dir DIR] [--quick]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import median_ms  # noqa: E402
from _peers import print_met_goals, save_json, start  # noqa: E402

BACK_TO_BACK = 10
FORWARD_GOAL, BACKWARD_GOAL = 0.90, 0.85  # fractions of the copy
SUM_BF16_GOAL, SUM_F32_GOAL = 1.05, 1.0  # ratios of the peer's time over lab's


def per_call_ms(fn, timer):
    return median_ms(lambda: [fn() for _ in range(BACK_TO_BACK)], *timer, repeats=20) / BACK_TO_BACK


def row_cases(torch, quick):
    """(name, bytes moved, lab call, fraction-of-copy goal) for the row-wise kernels on bf16 rows of
    2^26 elements (2^22 with --quick) at each row length."""
    F = torch.nn.functional
    elements = 1 << (22 if quick else 26)
    for n in (1024, 4096, 8192, 16384):
        rows = elements // n
        x = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        w, b = torch.randn(n, device="cuda", dtype=x.dtype), torch.randn(n, device="cuda", dtype=x.dtype)
        dy, out, gx = torch.randn_like(x), torch.empty_like(x), torch.empty_like(x)
        gw, gb = torch.empty_like(w), torch.empty_like(b)
        mean, rstd = torch.empty(rows, device="cuda"), torch.empty(rows, device="cuda")
        y = F.softmax(x.float(), -1).to(x.dtype)
        lab.layer_norm(x, w, b, out, mean=mean, rstd=rstd)  # the statistics the backwards read
        two, three = 2 * x.numel() * 2, 3 * x.numel() * 2
        shape = f"{rows}x{n}"
        yield f"softmax, {shape}", two, lambda x=x, out=out: lab.softmax(x, out), FORWARD_GOAL
        yield (f"rms_norm, {shape}", two, lambda x=x, w=w, out=out, rstd=rstd: lab.rms_norm(x, w, out, rstd=rstd),
               FORWARD_GOAL)
        yield (f"layer_norm, {shape}", two,
               lambda x=x, w=w, b=b, out=out, mean=mean, rstd=rstd: lab.layer_norm(x, w, b, out, mean=mean, rstd=rstd),
               FORWARD_GOAL)
        yield (f"softmax_backward, {shape}", three, lambda dy=dy, y=y, gx=gx: lab.softmax_backward(dy, y, gx),
               BACKWARD_GOAL)
        yield (f"rms_norm_backward, {shape}", three,
               lambda dy=dy, x=x, w=w, rstd=rstd, gx=gx, gw=gw: lab.rms_norm_backward(dy, x, w, rstd, gx, gw),
               BACKWARD_GOAL)
        yield (f"layer_norm_backward+bias, {shape}", three,
               lambda dy=dy, x=x, w=w, mean=mean, rstd=rstd, gx=gx, gw=gw, gb=gb:
               lab.layer_norm_backward(dy, x, w, mean, rstd, gx, gw, gb), BACKWARD_GOAL)


def other_cases(torch, quick):
    """argmax along rows, and cross-entropy's forward with its gradient (one read and one write of
    the logits): (name, bytes moved, lab call, fraction-of-copy goal)."""
    side = 4096 if quick else 16384
    m = torch.randn(side, side, device="cuda")
    idx = torch.empty(side, dtype=torch.int64, device="cuda")
    yield f"argmax(dim=1) float32, {side}^2", 4 * m.numel(), lambda: lab.argmax(m, idx, axis=1), BACKWARD_GOAL
    # Llama 3's vocabulary, and GPT-2's: an odd row length, so seven rows in eight start off a 16-byte boundary
    for vocab in (128256, 50257):
        rows = 1024 if quick else 4096
        logits = torch.randn(rows, vocab, device="cuda", dtype=torch.bfloat16)
        target = torch.randint(0, vocab, (rows,), device="cuda")
        loss, grad = torch.empty((), device="cuda", dtype=torch.bfloat16), torch.empty_like(logits)
        yield (f"cross_entropy fwd+grad, {rows}x{vocab}", 2 * logits.numel() * 2,
               lambda logits=logits, target=target, loss=loss, grad=grad:
               lab.cross_entropy(logits, target, loss, grad=grad), BACKWARD_GOAL)


def copy_tbps(torch, nbytes, timer, cache):
    """TB/s of torch's copy_ moving nbytes (half read, half written), measured once per size."""
    if nbytes not in cache:
        src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda").random_()
        dst = torch.empty_like(src)
        cache[nbytes] = nbytes / per_call_ms(lambda: dst.copy_(src), timer) / 1e9
        del src, dst
    return cache[nbytes]


def sums(torch, cupy, quick, timer):
    """The whole-array sums: (name, lab ms, peer name, peer ms, goal)."""
    n = 1 << (24 if quick else 28)
    x = torch.randn(n, device="cuda")
    xb, scalar = x.bfloat16(), torch.empty((), device="cuda")
    exponent = n.bit_length() - 1
    yield (f"sum, 2^{exponent} bfloat16", per_call_ms(lambda: lab.sum(xb, scalar), timer), "torch",
           per_call_ms(lambda: torch.sum(xb, dim=0, dtype=torch.float32, out=scalar), timer), SUM_BF16_GOAL)
    lab_ms = per_call_ms(lambda: lab.sum(x, scalar), timer)
    yield (f"sum, 2^{exponent} float32", lab_ms, "torch", per_call_ms(lambda: torch.sum(x, dim=0, out=scalar), timer),
           SUM_F32_GOAL)
    if cupy is not None:
        cx, c_scalar = cupy.asarray(x), cupy.empty((), cupy.float32)
        yield (f"sum, 2^{exponent} float32", lab_ms, "cupy", per_call_ms(lambda: cupy.sum(cx, out=c_scalar), timer),
               SUM_F32_GOAL)


def main():
    started = start("bench_bandwidth", __doc__.split("\n")[0])
    if started is None:
        return 1
    args, torch, cupy, timer = started
    copies, rows, goals = {}, [], []
    print(f"\n{'kernel (bfloat16 unless named)':42s} {'ms':>8s} {'TB/s':>6s} {'copy TB/s':>9s} {'of copy':>8s}")
    for cases in (row_cases(torch, args.quick), other_cases(torch, args.quick)):
        for name, nbytes, fn, goal in cases:
            ms = per_call_ms(fn, timer)
            tbps, copy = nbytes / ms / 1e9, copy_tbps(torch, nbytes, timer, copies)
            rows.append(dict(case=name, bytes=nbytes, lab_ms=ms, copy_tbps=copy))
            print(f"{name:42s} {ms:8.4f} {tbps:6.2f} {copy:9.2f} {tbps / copy:8.1%}")
            goals.append((f"{name} >= {goal:.0%} of copy", 100 * tbps / copy, tbps / copy >= goal))
    sum_rows = []
    print(f"\n{'sum':30s} {'lab ms':>8s} {'peer':>6s} {'peer ms':>8s} {'ratio':>6s}")
    for name, lab_ms, peer, peer_ms, goal in sums(torch, cupy, args.quick, timer):
        sum_rows.append(dict(case=name, lab_ms=lab_ms, peer=peer, peer_ms=peer_ms))
        print(f"{name:30s} {lab_ms:8.4f} {peer:>6s} {peer_ms:8.4f} {peer_ms / lab_ms:6.2f}")
        goals.append((f"{name} >= {goal}x {peer}", peer_ms / lab_ms, peer_ms / lab_ms >= goal))
    print_met_goals(goals, width=62)
    save_json(args.out_dir, "bandwidth.json", torch, back_to_back=BACK_TO_BACK, rows=rows, sums=sum_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
