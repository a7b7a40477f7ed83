"""How the row-wise kernels' layouts were chosen: each op at a few row lengths as lab launches it (rows
staged in shared memory where the op and row allow), then staged with 4, 8 and 16 16-byte vectors a
thread (lab.lab._rowwise_staged_vectors_per_thread: more make smaller blocks, more of them an SM), then
with staging off and the cap on 16-byte chunks a lane holds at 4, 2 and 1 (lab.lab._rowwise_max_chunks),
TB/s moved. Cross-entropy with its gradient (asked for by name, `cross_entropy`) as launched and with
its window of copies in flight (lab.lab._rowwise_window_depth) 2 to 8 steps deep and off; the norms'
backward on streamed rows (asked for by name, `buffered`) with its rows buffered in shared memory and
without, and (`clusters`) with its rows cut across clusters of 2, 4 and 8 blocks and not; and (`long_staged`) the
staged ops on rows past 47 KB staged (opting in to more shared memory) and not. Where lab.nn's host time goes is bench/host_cost.py's.
    python3 bench/sweep_rowwise.py [name ...]   (only the ops whose names contain one of these)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import median_ms, torch_timer  # noqa: E402
from _peers import peers  # noqa: E402


def main():
    found = peers("sweep_rowwise")
    if found is None:
        return 1
    torch, _ = found
    timer = torch_timer(torch)
    # The library's own settings, read from the knobs (each returns the value it replaces) and put back
    # after every op. Columns (name, fewest vectors a staged row needs, chunk cap, staged vectors a
    # thread): as lab launches; every aligned row staged, at 4, 8 and 16 vectors a thread; staging off,
    # the register-held layout at each chunk cap.
    knobs = (lab.lab._rowwise_staged_min_vectors, lab.lab._rowwise_max_chunks,
             lab.lab._rowwise_staged_vectors_per_thread)
    defaults = tuple(knob(value) for knob, value in zip(knobs, (1, 4, 0)))
    settings = [("as launched", *defaults)] + \
        [(f"staged/{v}", 1, defaults[1], v) for v in (4, 8, 16)] + \
        [(f"chunks<={c}", 1 << 62, c, defaults[2]) for c in (4, 2, 1)]
    if "cross_entropy" in sys.argv[1:]:
        sweep_cross_entropy(torch, timer)
        if sys.argv[1:] == ["cross_entropy"]:
            return 0
    for name, sweep in (("buffered", sweep_buffered_rows), ("clusters", sweep_clusters),
                        ("long_staged", sweep_long_staged_rows)):
        if name in sys.argv[1:]:
            sweep(torch, timer)
            if sys.argv[1:] == [name]:
                return 0
    print(f"{'op':34s} " + " ".join(f"{setting[0]:>11s}" for setting in settings) + "   (TB/s)")
    for dtype, n in ((torch.bfloat16, 4096), (torch.bfloat16, 1024), (torch.float32, 4096), (torch.bfloat16, 16384),
                     (torch.bfloat16, 8192), (torch.float32, 2048)):
        rows = (1 << 26) // n
        x, ops = row_ops(torch, dtype, rows, n)
        wanted = sys.argv[1:]
        for name, (fn, passes) in ops.items():
            if wanted and not any(part in name for part in wanted):
                continue
            speeds = []
            for _, *values in settings:
                for knob, value in zip(knobs, values):
                    knob(value)
                speeds.append(passes * x.numel() * x.element_size() / median_ms(fn, *timer, repeats=20) / 1e9)
            for knob, value in zip(knobs, defaults):
                knob(value)
            label = f"{name} {str(dtype)[6:]} {rows}x{n}"
            print(f"{label:34s} " + " ".join(f"{s:11.2f}" for s in speeds))
    return 0


def row_ops(torch, dtype, rows, n):
    """x (rows x n) and each op on it: name -> (call, the row's passes over memory)."""
    x = torch.randn(rows, n, device="cuda", dtype=dtype)
    w, dy = torch.randn(n, device="cuda", dtype=dtype), torch.randn_like(x)
    out, gx, gw, gb = torch.empty_like(x), torch.empty_like(x), torch.empty_like(w), torch.empty_like(w)
    # the statistics the backwards read (the forwards overwrite them): rstd near 1, any mean
    stats, means = torch.rand(rows, device="cuda") + 0.5, torch.randn(rows, device="cuda")
    return x, {"softmax": (lambda: lab.softmax(x, out), 2), "softmax_backward": (lambda: lab.softmax_backward(dy, x, gx), 3),
               "layer_norm": (lambda: lab.layer_norm(x, w, w, out, rstd=stats, mean=means), 2),
               "rms_norm": (lambda: lab.rms_norm(x, w, out, rstd=stats), 2),
               "rms_norm+residual": (lambda: lab.rms_norm(x, w, out, rstd=stats, residual=dy, residual_out=gx), 4),
               "rms_norm_backward": (lambda: lab.rms_norm_backward(dy, x, w, stats, gx, gw), 3),
               "layer_norm_backward+bias": (lambda: lab.layer_norm_backward(dy, x, w, means, stats, gx, gw, gb), 3)}


def sweep_long_staged_rows(torch, timer):
    """The staged ops on rows whose copies pass the 47 KB a kernel has without opting in, as launched (staged up
    to half of what a block may opt in to), with staging held to 47 KB (lab.lab._rowwise_staged_most_bytes:
    streamed instead), and up to 75 KB (three blocks an SM)."""
    sweep_knob("staged rows past 47 KB", torch, timer, lab.lab._rowwise_staged_most_bytes,
               (("launched", -1), ("47KB", 47 * 1024), ("75KB", 75 * 1024)),
               ((torch.bfloat16, 4096, 16384), (torch.bfloat16, 2048, 32768), (torch.float32, 4096, 16384),
                (torch.float32, 8192, 8192), (torch.bfloat16, 4096, 24576), (torch.float16, 4096, 16384)),
               ("softmax", "softmax_backward", "rms_norm", "rms_norm+residual", "layer_norm"))


def sweep_cross_entropy(torch, timer):
    """Cross-entropy writing its gradient, TB/s on one read and one write of the logits, as launched and
    with the window's depth set (lab.lab._rowwise_window_depth; 0: the streamed walk, one step of copies
    in flight a thread); then the loss alone (no gradient: one read) on three of the shapes."""
    settings = [("launched", -1), ("window2", 2), ("window4", 4), ("window5", 5), ("window6", 6),
                ("window7", 7), ("window8", 8), ("streamed", 0)]
    print(f"{'cross_entropy':34s} " + " ".join(f"{label:>9s}" for label, _ in settings) + "   (TB/s)")
    with_grad = ((torch.bfloat16, 4096, 128256), (torch.bfloat16, 8192, 32000), (torch.bfloat16, 4096, 50257),
                 (torch.bfloat16, 4096, 50256), (torch.float32, 4096, 32000), (torch.bfloat16, 4096, 65536),
                 (torch.bfloat16, 4096, 98304),
                 (torch.bfloat16, 4096, 151936), (torch.float32, 4096, 50000), (torch.bfloat16, 2048, 256000),
                 (torch.bfloat16, 2048, 262144))
    loss_only = ((torch.bfloat16, 4096, 128256), (torch.float32, 4096, 32000), (torch.bfloat16, 4096, 65536))
    for dtype, rows, n, wants_grad in [case + (True,) for case in with_grad] + [case + (False,) for case in loss_only]:
        x = torch.randn(rows, n, device="cuda", dtype=dtype)
        target = torch.randint(0, n, (rows,), device="cuda")
        loss = torch.empty((), device="cuda", dtype=dtype)
        grad = torch.empty_like(x) if wants_grad else None
        speeds = []
        for _, depth in settings:
            default = lab.lab._rowwise_window_depth(depth)
            try:
                ms = median_ms(lambda: lab.cross_entropy(x, target, loss, grad=grad), *timer, repeats=20)
            finally:
                lab.lab._rowwise_window_depth(default)
            speeds.append((2 if wants_grad else 1) * x.numel() * x.element_size() / ms / 1e9)
        label = f"{str(dtype)[6:]} {rows}x{n}" + ("" if wants_grad else ", loss only")
        print(f"{label:34s} " + " ".join(f"{s:9.2f}" for s in speeds))
        del x, grad


def sweep_buffered_rows(torch, timer):
    """The norms' backward on streamed rows (longer than the registers hold) as launched - rms_norm's x and
    grad_out in the block's shared memory where they fit beside the column sums - and with that off
    (lab.lab._rowwise_window_depth(0)); clusters off, as they would take most of these rows."""
    default = lab.lab._rowwise_cluster_blocks(0)
    try:
        sweep_norm_backward("norms backward, streamed rows", torch, timer, lab.lab._rowwise_window_depth,
                            (("launched", -1), ("off", 0)),
                            ((torch.bfloat16, 4096, 16384), (torch.bfloat16, 4096, 20000), (torch.bfloat16, 2048, 32768),
                             (torch.float32, 4096, 16384), (torch.bfloat16, 1024, 65536)))
    finally:
        lab.lab._rowwise_cluster_blocks(default)


def sweep_clusters(torch, timer):
    """The norms' backward with its rows cut across a cluster of 2, 4 or 8 blocks
    (lab.lab._rowwise_cluster_blocks; by default the fewest whose slices fit, for rows the registers do not
    hold), and with clusters off: rows in registers at two chunks a lane (8192 bf16), or streamed."""
    sweep_norm_backward("backwards, clusters", torch, timer, lab.lab._rowwise_cluster_blocks,
                        (("launched", -1), ("off", 0), ("2", 2), ("4", 4), ("8", 8)),
                        ((torch.bfloat16, 16384, 4096), (torch.bfloat16, 8192, 8192), (torch.bfloat16, 4096, 12288),
                         (torch.bfloat16, 4096, 16384), (torch.float32, 8192, 4096), (torch.float32, 4096, 16384)))


def sweep_norm_backward(title, torch, timer, knob, settings, shapes):
    """rms_norm's and layer_norm's (with the bias) backward, through sweep_knob."""
    sweep_knob(title, torch, timer, knob, settings, shapes, ("rms_norm_backward", "layer_norm_backward+bias"))


def sweep_knob(title, torch, timer, knob, settings, shapes, names):
    """The ops `names` of row_ops on each (dtype, rows, n) of `shapes` at each (label, value) of `settings`
    given to `knob` (put back after each), TB/s on the bytes each moves."""
    print(f"{title:40s} " + " ".join(f"{label:>9s}" for label, _ in settings) + "   (TB/s)")
    for dtype, rows, n in shapes:
        x, ops = row_ops(torch, dtype, rows, n)
        for name in names:
            fn, passes = ops[name]
            speeds = []
            for _, value in settings:
                default = knob(value)
                try:
                    speeds.append(passes * x.numel() * x.element_size() / median_ms(fn, *timer, repeats=20) / 1e9)
                finally:
                    knob(default)
            label = f"{name} {str(dtype)[6:]} {rows}x{n}"
            print(f"{label:40s} " + " ".join(f"{v:9.2f}" for v in speeds))
        del x, ops


if __name__ == "__main__":
    sys.exit(main())
