"""lab's benchmark suite: lab against torch, torch.compile, CuPy and Numba on the same GPU, in one run.

- Bandwidth (2^28 elements): achieved TB/s counting each array read or written once, next to a
  device-to-device copy measured in the same run.
- Layouts (8192 x 8192): transposed copy, bias-row broadcast, strided add, a dtype mix.
- Size curve (2^10 .. 2^26): time per call of back-to-back calls, where small sizes are host-bound.
- Per-call cost (1024 elements): host wall time of many back-to-back calls, against the floor - a
  launch of the same kernel from raw pointers (lab.lab._bare_add) - in rounds that visit every case
  in turn; ratios are medians over the rounds of the two cases' ratio in one round.
Times are medians of event-timed repeats after warm-up (lab/_timing.py); ratios are the peer's
time over lab's (> 1: lab is faster). Writes results.json and results.png to --out-dir.
    python3 bench/bench_elementwise.py [--out-dir DIR] [--quick]
    python3 bench/bench_elementwise.py --per-call      # the per-call table alone (an A/B of the binding)
"""
import argparse
import json
import os
import platform
import sys
import time

import numpy as np

if not hasattr(np, "row_stack"):  # numba-cuda on the GPU machine still imports it (NumPy 2.5 removed it)
    np.row_stack = np.vstack

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import cupy_timer, median_ms, torch_timer  # noqa: E402


def optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


def per_call_us(fn, sync, calls=20000, warmup=200):
    """Host microseconds per call: wall time of `calls` calls, synchronizing once at the end (when the
    GPU work is shorter than the host's, this is the host's cost)."""
    for _ in range(warmup):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def per_call_rounds(cases, rounds=5, calls=8000):
    """{name: [host microseconds per call, one a round]} for cases [(name, fn, sync)], measured in
    rounds that visit every case in turn. Between rounds one launch drifts from 5.2 to 7.5 us on the
    GPU machine (bench/host_cost.py, 2026-11-30), so cases measured minutes apart are not comparable;
    within a round they see the same machine, and a ratio per round cancels the drift."""
    samples = {name: [] for name, _, _ in cases}
    for _ in range(rounds):
        for name, fn, sync in cases:
            samples[name].append(per_call_us(fn, sync, calls=calls))
    return samples


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def median_ratio(samples, ours, theirs):
    """The median over rounds of ours / theirs (per_call_rounds' samples)."""
    return median([a / b for a, b in zip(samples[ours], samples[theirs])])


def compile_fused(torch):
    """torch.compile of (a + b) * s (Inductor fuses it into one Triton kernel), or None if it fails."""
    try:
        return torch.compile(lambda a, b, s: (a + b) * s, fullgraph=True)
    except Exception:
        return None


def bandwidth_rows(torch, cupy, n, repeats):
    rows = []
    ttimer = torch_timer(torch)
    ctimer = cupy_timer(cupy) if cupy else None
    x = torch.rand(n, device="cuda")
    y = torch.empty_like(x)
    copy_ms = median_ms(lambda: y.copy_(x), *ttimer, repeats=repeats)
    copy_tbs = 2 * n * 4 / copy_ms / 1e9
    rows.append(dict(op="copy (torch D2D)", dtype="float32", n=n, lab_ms=None, torch_ms=copy_ms, cupy_ms=None,
                     arrays=2, tbs=copy_tbs))
    del x, y
    for dtype in ("float32", "float16", "bfloat16"):
        tdtype = getattr(torch, dtype)
        a, b, s = (torch.rand(n, device="cuda").to(tdtype) for _ in range(3))
        out = torch.empty_like(a)
        compiled = compile_fused(torch) if dtype == "float32" else None  # each dtype recompiles: float32 only
        ca = cb = cs = cout = None
        if cupy is not None and dtype != "bfloat16":
            ca, cb, cs = (cupy.random.rand(n, dtype=cupy.float32).astype(dtype) for _ in range(3))
            cout = cupy.empty_like(ca)
        cases = [
            ("add", 3, lambda: lab.add(a, b, out), lambda: torch.add(a, b, out=out),
             (lambda: lab.add(ca, cb, cout)) if ca is not None else None,
             (lambda: cupy.add(ca, cb, out=cout)) if ca is not None else None),
            ("fused_add_mul", 4, lambda: lab.fused_add_mul(a, b, s, out), lambda: torch.mul(torch.add(a, b), s, out=out),
             (lambda: lab.fused_add_mul(ca, cb, cs, cout)) if ca is not None else None,
             (lambda: cupy.multiply(cupy.add(ca, cb), cs, out=cout)) if ca is not None else None),
            ("relu", 2, lambda: lab.relu(a, out), lambda: torch.clamp_min(a, 0, out=out),
             None, None),
            ("gelu", 2, lambda: lab.gelu(a, out), lambda: torch._C._nn.gelu(a, out=out), None, None),
        ]
        for name, arrays, lab_fn, torch_fn, lab_cupy_fn, cupy_fn in cases:
            lab_ms = median_ms(lab_fn, *ttimer, repeats=repeats)
            torch_ms = median_ms(torch_fn, *ttimer, repeats=repeats)
            compile_ms = None
            if name == "fused_add_mul" and compiled is not None:
                compile_ms = median_ms(lambda: compiled(a, b, s), *ttimer, repeats=repeats)
            cupy_ms = median_ms(cupy_fn, *ctimer, repeats=repeats) if cupy_fn else None
            lab_cupy_ms = median_ms(lab_cupy_fn, *ctimer, repeats=repeats) if lab_cupy_fn else None
            itemsize = a.element_size()
            rows.append(dict(op=name, dtype=dtype, n=n, lab_ms=lab_ms, torch_ms=torch_ms, cupy_ms=cupy_ms,
                             lab_on_cupy_ms=lab_cupy_ms, compile_ms=compile_ms, arrays=arrays,
                             tbs=arrays * n * itemsize / lab_ms / 1e9))
        del a, b, s, out, ca, cb, cs, cout
        torch.cuda.empty_cache()
        if cupy is not None:
            cupy.get_default_memory_pool().free_all_blocks()
    return rows, copy_tbs


def layout_rows(torch, side, repeats):
    """Views and broadcasts on (side, side) float32 matrices, lab against torch on the same arrays.
    Bytes count each logical element read or written once."""
    timer = torch_timer(torch)
    x = torch.rand(side, side, device="cuda")
    y = torch.rand(side, side, device="cuda")
    bias = torch.rand(side, device="cuda")
    out = torch.empty(side, side, device="cuda")
    half_out = torch.empty(side, side // 2, device="cuda")
    x16, xb16, xi32 = x.half(), x.bfloat16(), (x * 1000).int()
    out16 = torch.empty(side, side, device="cuda", dtype=torch.float16)
    elems = side * side
    cases = [
        ("copy(x.T)", 2 * elems * 4, lambda: lab.copy(x.T, out), lambda: out.copy_(x.T)),
        ("add bias row", 2 * elems * 4 + side * 4, lambda: lab.add(x, bias, out), lambda: torch.add(x, bias, out=out)),
        ("add x[:, ::2]", 3 * elems * 2, lambda: lab.add(x[:, ::2], y[:, ::2], half_out),
         lambda: torch.add(x[:, ::2], y[:, ::2], out=half_out)),
        ("add f16 + f32", elems * (2 + 4 + 4), lambda: lab.add(x16, y, out), lambda: torch.add(x16, y, out=out)),
        ("add bf16 + f32", elems * (2 + 4 + 4), lambda: lab.add(xb16, y, out), lambda: torch.add(xb16, y, out=out)),
        ("add i32 + f32", elems * (4 + 4 + 4), lambda: lab.add(xi32, y, out), lambda: torch.add(xi32, y, out=out)),
        ("copy f32 -> f16", elems * (4 + 2), lambda: lab.copy(x, out16), lambda: out16.copy_(x)),
        ("copy f16 -> f32", elems * (2 + 4), lambda: lab.copy(x16, out), lambda: out.copy_(x16)),
    ]
    rows = []
    for name, nbytes, lab_fn, torch_fn in cases:
        lab_ms = median_ms(lab_fn, *timer, repeats=repeats)
        torch_ms = median_ms(torch_fn, *timer, repeats=repeats)
        rows.append(dict(op=name, shape=f"{side}x{side}", lab_ms=lab_ms, torch_ms=torch_ms,
                         lab_tbs=nbytes / lab_ms / 1e9, torch_tbs=nbytes / torch_ms / 1e9))
    return rows


def log_uniform_sizes(rng, count, low, high):
    return [int(v) for v in np.exp(rng.uniform(np.log(low), np.log(high), size=count))]


def foreach_add_row(torch, timer, what, sizes, repeats):
    """lab.foreach_add against a Python loop of torch.add and torch._foreach_add_, in place."""
    xs = [torch.rand(n, device="cuda") for n in sizes]
    ys = [torch.rand(n, device="cuda") for n in sizes]

    def loop():
        for x, y in zip(xs, ys):
            torch.add(x, y, out=x)

    def lab_add():
        lab.foreach_add(xs, ys, xs)

    def torch_add():
        torch._foreach_add_(xs, ys)

    return dict(what=what, lab_ms=median_ms(lab_add, *timer, repeats=repeats),
                loop_ms=median_ms(loop, *timer, repeats=repeats),
                foreach_ms=median_ms(torch_add, *timer, repeats=repeats),
                lab_host_us=per_call_us(lab_add, torch.cuda.synchronize, 200, 1),
                foreach_host_us=per_call_us(torch_add, torch.cuda.synchronize, 200, 1),
                bytes=3 * sum(sizes) * 4)


def foreach_rows(torch, repeats, count=300):
    """Many tensors of a transformer's spread of sizes (log-uniform, 64 .. 4M elements), float32:
    lab's one-launch list ops against a Python loop of torch ops, torch._foreach_*, and torch's
    Adam with foreach=True and fused=True. A second add row takes small tensors (64 .. 64K), where
    the host's per-launch cost, not HBM, sets the loop's time."""
    timer = torch_timer(torch)
    rng = np.random.default_rng(0)
    sizes = log_uniform_sizes(rng, count, 64, 4 << 20)
    elements = sum(sizes)
    rows = [foreach_add_row(torch, timer, f"add over {count} tensors", sizes, repeats),
            foreach_add_row(torch, timer, f"add, {count} small ones", log_uniform_sizes(rng, count, 64, 64 << 10),
                            repeats)]

    params = [torch.nn.Parameter(torch.rand(n, device="cuda")) for n in sizes]
    for p in params:
        p.grad = torch.rand_like(p)
    exp_avgs = [torch.zeros_like(p) for p in params]
    exp_avg_sqs = [torch.zeros_like(p) for p in params]
    grads = [p.grad for p in params]
    step = [0]

    def lab_adam():
        step[0] += 1
        lab.adam_step(params, grads, exp_avgs, exp_avg_sqs, step=step[0], lr=1e-4)

    with torch.no_grad():
        adam_foreach = torch.optim.Adam(params, lr=1e-4, foreach=True)
        adam_fused = torch.optim.Adam(params, lr=1e-4, fused=True)
        rows.append(dict(what=f"adam over {count} tensors", lab_ms=median_ms(lab_adam, *timer, repeats=repeats),
                         foreach_ms=median_ms(adam_foreach.step, *timer, repeats=repeats),
                         fused_ms=median_ms(adam_fused.step, *timer, repeats=repeats), bytes=7 * elements * 4))
    return rows


def size_curve(torch, cupy, sizes, repeats, calls=20):
    """Time per call of `calls` back-to-back calls (event-timed), float32, per size and library."""
    ttimer = torch_timer(torch)
    ctimer = cupy_timer(cupy) if cupy else None
    rows = []
    for n in sizes:
        a, b, s = (torch.rand(n, device="cuda") for _ in range(3))
        out = torch.empty_like(a)
        peers = {
            "add": [("lab", ttimer, lambda: lab.add(a, b, out)), ("torch", ttimer, lambda: torch.add(a, b, out=out))],
            "fused_add_mul": [("lab", ttimer, lambda: lab.fused_add_mul(a, b, s, out)),
                              ("torch", ttimer, lambda: torch.mul(torch.add(a, b), s, out=out))],
        }
        if cupy is not None:
            ca, cb, cs = (cupy.random.rand(n, dtype=cupy.float32) for _ in range(3))
            cout = cupy.empty_like(ca)
            peers["add"].append(("cupy", ctimer, lambda: cupy.add(ca, cb, out=cout)))
            peers["fused_add_mul"].append(("cupy", ctimer, lambda: cupy.multiply(cupy.add(ca, cb), cs, out=cout)))
        for op, entries in peers.items():
            arrays = 3 if op == "add" else 4
            for library, timer, fn in entries:
                def batch(fn=fn):
                    for _ in range(calls):
                        fn()
                ms = median_ms(batch, *timer, repeats=repeats) / calls
                rows.append(dict(op=op, library=library, n=n, ms=ms, tbs=arrays * n * 4 / ms / 1e9))
    return rows


def per_call_rows(torch, cupy, rounds=5):
    """Host cost per call on 1024 float32 elements, and the floor of a bare launch from C, measured in
    rounds that visit every case in turn (per_call_rounds): each row's median over the rounds, its
    microseconds in each round, and the median over rounds of its ratio to that round's floor - the
    figure an A/B compares, the machine's drift between rounds cancelled."""
    sync_torch = torch.cuda.synchronize
    la, lb, lout = (lab.asarray(np.random.rand(1024).astype(np.float32)) for _ in range(3))
    pointers = (lout.data_ptr, la.data_ptr, lb.data_ptr, 1024)
    a, b, out = (torch.rand(1024, device="cuda") for _ in range(3))
    cases = [("floor: _bare_add(raw pointers)", lambda: lab.lab._bare_add(*pointers), lab.synchronize),
             ("lab.add on lab.Array", lambda: lab.add(la, lb, lout), lab.synchronize),
             ("lab.add on torch", lambda: lab.add(a, b, out), sync_torch),
             ("torch.add(out=)", lambda: torch.add(a, b, out=out), sync_torch)]
    if cupy is not None:
        ca, cb, cout = (cupy.random.rand(1024, dtype=cupy.float32) for _ in range(3))
        sync = cupy.cuda.runtime.deviceSynchronize
        cases += [("lab.add on CuPy", lambda: lab.add(ca, cb, cout), sync),
                  ("cupy.add(out=)", lambda: cupy.add(ca, cb, out=cout), sync)]
    try:
        from numba import cuda
    except Exception:
        cuda = None
    if cuda is not None:
        @cuda.jit
        def numba_add(x, y, z):
            i = cuda.grid(1)
            if i < z.size:
                z[i] = x[i] + y[i]

        na, nb, nout = (cuda.to_device(np.random.rand(1024).astype(np.float32)) for _ in range(3))
        cases += [("lab.add on Numba", lambda: lab.add(na, nb, nout), cuda.synchronize),
                  ("numba kernel launch", lambda: numba_add[4, 256](na, nb, nout), cuda.synchronize)]
    samples = per_call_rounds(cases, rounds=rounds)
    floor = cases[0][0]
    return [dict(what=what, us=median(samples[what]), rounds_us=samples[what],
                 over_floor=median_ratio(samples, what, floor)) for what, _, _ in cases]


def per_call_ratio(calls, ours, theirs):
    """The median over per_call_rows' rounds of ours / theirs (two rows' names)."""
    by = {r["what"]: r["rounds_us"] for r in calls}
    return median_ratio(by, ours, theirs)


def plot(curve, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for row, op in enumerate(("add", "fused_add_mul")):
        for library, style in (("lab", "o-"), ("torch", "s--"), ("cupy", "^:")):
            points = [r for r in curve if r["op"] == op and r["library"] == library]
            if not points:
                continue
            sizes = [r["n"] for r in points]
            axes[row][0].loglog(sizes, [r["ms"] * 1000 for r in points], style, label=library)
            axes[row][1].semilogx(sizes, [r["tbs"] for r in points], style, label=library)
        axes[row][0].set_title(f"{op}: time per call (float32)")
        axes[row][0].set_ylabel("us per call")
        axes[row][1].set_title(f"{op}: bandwidth")
        axes[row][1].set_ylabel("TB/s")
        for ax in axes[row]:
            ax.set_xlabel("elements")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def goal_lines(bw, calls, curve, lists, layouts):
    """The goals of this benchmark, each with its measured ratio."""
    lines = []
    add_row, small_row, adam_row = lists
    lines.append(("foreach_add >= 10x a Python loop of torch.add", add_row["loop_ms"] / add_row["lab_ms"], 10.0))
    lines.append(("  the same, 300 small tensors (64..64K)", small_row["loop_ms"] / small_row["lab_ms"], 10.0))
    lines.append(("foreach_add >= 1.0x torch._foreach_add_", add_row["foreach_ms"] / add_row["lab_ms"], 1.0))
    lines.append(("  the same, 300 small tensors (64..64K)", small_row["foreach_ms"] / small_row["lab_ms"], 1.0))
    lines.append(("adam_step >= 1.0x torch Adam(fused=True)", adam_row["fused_ms"] / adam_row["lab_ms"], 1.0))
    by = {(r["op"], r["dtype"]): r for r in bw}
    for dtype in ("float32", "float16", "bfloat16"):
        add, fused = by[("add", dtype)], by[("fused_add_mul", dtype)]
        lines.append((f"add {dtype} >= 1.0x torch", add["torch_ms"] / add["lab_ms"], 1.0))
        lines.append((f"fused_add_mul {dtype} >= 1.45x torch eager", fused["torch_ms"] / fused["lab_ms"], 1.45))
        if fused.get("compile_ms"):
            lines.append((f"fused_add_mul {dtype} >= 1.0x torch.compile", fused["compile_ms"] / fused["lab_ms"], 1.0))
        for op in ("relu", "gelu"):
            r = by[(op, dtype)]
            lines.append((f"{op} {dtype} >= 1.0x torch", r["torch_ms"] / r["lab_ms"], 1.0))
    us = {r["what"]: r["us"] for r in calls}
    lines.append(("per call on torch <= 0.75x torch.add", per_call_ratio(calls, "lab.add on torch", "torch.add(out=)"),
                  -0.75))
    if "cupy.add(out=)" in us:
        lines.append(("per call on CuPy <= 0.7x cupy.add", per_call_ratio(calls, "lab.add on CuPy", "cupy.add(out=)"),
                      -0.7))
    if "numba kernel launch" in us:
        lines.append(("per call on Numba <= 0.3x numba launch",
                      per_call_ratio(calls, "lab.add on Numba", "numba kernel launch"), -0.3))
    lines.append(("lab's own cost above the floor <= 0.5 us",
                  us["lab.add on lab.Array"] - us["floor: _bare_add(raw pointers)"], -0.5))
    for op in ("add", "fused_add_mul"):
        worst = min(min(r_peer["ms"] for r_peer in curve if r_peer["op"] == op and r_peer["n"] == n and
                        r_peer["library"] != "lab") / next(r["ms"] for r in curve if r["op"] == op and r["n"] == n and
                                                           r["library"] == "lab")
                    for n in sorted({r["n"] for r in curve}))
        lines.append((f"{op} curve 2^10..2^26: lab at or below torch and CuPy (worst peer/lab)", worst, 1.0))
    for r in layouts:  # mixed dtypes and casts at torch's speed
        if "->" in r["op"] or " + " in r["op"]:
            lines.append((f"{r['op']} >= 0.95x torch", r["torch_ms"] / r["lab_ms"], 0.95))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir", help="write results.json and results.png here")
    parser.add_argument("--quick", action="store_true", help="2^24 elements and fewer repeats")
    parser.add_argument("--per-call", action="store_true", help="only the per-call host cost table")
    args = parser.parse_args()
    torch = optional("torch")
    cupy = optional("cupy")
    if not lab.is_available() or torch is None or not torch.cuda.is_available():
        print("benchmark: needs a CUDA GPU and PyTorch (CuPy and Numba optional); `python3 -m lab` says what is "
              "missing")
        return 1
    if args.per_call:
        for row in per_call_rows(torch, cupy):
            print(f"{row['what']:<34s} {row['us']:7.2f} us a call  {row['over_floor']:5.2f}x the floor")
        return 0
    n = 1 << 24 if args.quick else 1 << 28
    repeats = 10 if args.quick else 20
    bw, copy_tbs = bandwidth_rows(torch, cupy, n, repeats)
    layouts = layout_rows(torch, 2048 if args.quick else 8192, repeats)
    curve = size_curve(torch, cupy, [1 << k for k in range(10, 27, 2)], 10 if args.quick else 15)
    calls = per_call_rows(torch, cupy)
    lists = foreach_rows(torch, 10 if args.quick else 20)
    goals = goal_lines(bw, calls, curve, lists, layouts)
    gpu = torch.cuda.get_device_name()
    meta = dict(gpu=gpu, date=time.strftime("%Y-%m-%d"), lab=lab.__version__, torch=torch.__version__,
                cupy=getattr(cupy, "__version__", None), driver=".".join(map(str, lab.cuda_driver_version() or ())),
                cuda_runtime=".".join(map(str, lab.cuda_runtime_version())), python=platform.python_version())
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "results.json"), "w") as f:
            json.dump(dict(meta=meta, copy_tbs=copy_tbs, bandwidth=bw, layouts=layouts, curve=curve, per_call=calls,
                           foreach=lists,
                           goals=[dict(goal=g, measured=m) for g, m, _ in goals]), f, indent=1)
        try:
            plot(curve, os.path.join(args.out_dir, "results.png"))
        except ImportError:
            print("(matplotlib is not installed: no plot)")

    print_report(meta, n, bw, copy_tbs, layouts, curve, calls, goals, lists)
    return 0


def print_report(meta, n, bw, copy_tbs, layouts, curve, calls, goals, lists):
    print(f"\n== lab benchmark: {meta['gpu']}, driver {meta['driver']}, torch {meta['torch']}, CuPy {meta['cupy']}, "
          f"{meta['date']}; n = 2^{n.bit_length() - 1} ==")
    print(f"{'op':15s} {'dtype':9s} {'lab ms':>8s} {'torch ms':>9s} {'compile':>8s} {'cupy ms':>8s} "
          f"{'vs torch':>9s} {'vs cupy':>8s} {'lab TB/s':>9s} {'% copy':>7s}")
    for r in bw:
        vs_torch = r["torch_ms"] / r["lab_ms"] if r["lab_ms"] else None
        vs_cupy = r["cupy_ms"] / r["lab_on_cupy_ms"] if r.get("cupy_ms") and r.get("lab_on_cupy_ms") else None
        print(f"{r['op']:15s} {r['dtype']:9s} {fmt(r['lab_ms']):>8s} {fmt(r['torch_ms']):>9s} "
              f"{fmt(r.get('compile_ms')):>8s} {fmt(r['cupy_ms']):>8s} {fmt(vs_torch, '.2f'):>9s} "
              f"{fmt(vs_cupy, '.2f'):>8s} {r['tbs']:9.2f} {100 * r['tbs'] / copy_tbs:6.0f}%")
    print(f"\n{'layout (float32)':16s} {'shape':>10s} {'lab ms':>8s} {'torch ms':>9s} {'vs torch':>9s} "
          f"{'lab TB/s':>9s} {'torch TB/s':>11s}")
    for r in layouts:
        print(f"{r['op']:16s} {r['shape']:>10s} {r['lab_ms']:8.3f} {r['torch_ms']:9.3f} "
              f"{r['torch_ms'] / r['lab_ms']:9.2f} {r['lab_tbs']:9.2f} {r['torch_tbs']:11.2f}")
    print(f"\n{'size curve, us per call':24s} " + " ".join(f"{'2^' + str(k):>7s}" for k in range(10, 27, 2)))
    for op in ("add", "fused_add_mul"):
        for library in ("lab", "torch", "cupy"):
            points = [r for r in curve if r["op"] == op and r["library"] == library]
            if points:
                print(f"{op + ' ' + library:24s} " + " ".join(f"{r['ms'] * 1000:7.2f}" for r in points))
    print(f"\n{'per call, 1024 float32':34s} {'us':>7s} {'x floor':>8s}")
    for r in calls:
        print(f"{r['what']:34s} {r['us']:7.2f} {r['over_floor']:8.2f}")
    print(f"\n{'many tensors (float32)':24s} {'lab ms':>8s} {'py loop':>8s} {'_foreach':>9s} {'fused':>8s} "
          f"{'lab TB/s':>9s} {'host us: lab':>13s} {'_foreach':>9s}")
    for r in lists:
        print(f"{r['what']:24s} {r['lab_ms']:8.3f} {fmt(r.get('loop_ms')):>8s} {fmt(r.get('foreach_ms')):>9s} "
              f"{fmt(r.get('fused_ms')):>8s} {r['bytes'] / r['lab_ms'] / 1e9:9.2f} "
              f"{fmt(r.get('lab_host_us'), '.1f'):>13s} {fmt(r.get('foreach_host_us'), '.1f'):>9s}")
    print(f"\n{'goal':62s} {'measured':>9s}  met")
    for goal, measured, target in goals:
        met = measured <= -target if target < 0 else measured >= target
        print(f"{goal:62s} {measured:9.2f}  {'yes' if met else 'NO'}")


if __name__ == "__main__":
    sys.exit(main())
