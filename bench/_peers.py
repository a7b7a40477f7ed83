"""The peers a benchmark measures lab against, where installed, for the bench/ scripts."""
import lab


def peers(script):
    """(torch, cupy), each None where not installed; None instead of the pair when this machine
    cannot run `script` (it says why): every benchmark needs a CUDA GPU and PyTorch."""
    try:
        import torch
    except ImportError:
        torch = None
    try:
        import cupy
    except ImportError:
        cupy = None
    if not lab.is_available() or torch is None:
        print(f"{script}: needs a CUDA GPU and PyTorch")
        return None
    return torch, cupy


def bench_args(description, groups=None):
    """A benchmark's command line: --out-dir (where its JSON goes) and --quick; with `groups` (the
    names of a benchmark's groups of cases), --only NAME... runs only those."""
    import argparse
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out-dir")
    parser.add_argument("--quick", action="store_true")
    if groups:
        parser.add_argument("--only", nargs="+", choices=groups, default=list(groups),
                            help="run only these groups of cases")
    return parser.parse_args()


def start(script, description, groups=None):
    """A benchmark's command line (bench_args), its peers and torch's event timer:
    (args, torch, cupy, timer), or None where this machine cannot run it (peers() says why)."""
    from lab._timing import torch_timer
    args = bench_args(description, groups)
    found = peers(script)
    if found is None:
        return None
    torch, cupy = found
    return args, torch, cupy, torch_timer(torch)



def run_in_own_process(script, one_args, label, timeout):
    """`python3 script --one ONE_ARGS...`: one implementation measured in a process of its own (so
    patches and allocator peaks do not leak between them); its last JSON line as a dict, or None
    where it failed or said it was skipped (both printed under `label`)."""
    import json
    import subprocess
    import sys
    done = subprocess.run([sys.executable, script, "--one", *one_args], capture_output=True, text=True,
                          timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        print(f"{label}: failed\n{done.stderr[-2000:]}")
        return None
    row = json.loads(lines[-1])
    if "skipped" in row:
        print(f"{label}: {row['skipped']}")
        return None
    return row


def prototype_peers(script, source):
    """For the sweeps that compile prototypes at run time: (torch, cupy, module, timer) - `source`
    compiled by CuPy's NVRTC into module - or None where this machine cannot run `script` (it says why)."""
    from lab._timing import torch_timer
    found = peers(script)
    if found is None:
        return None
    torch, cupy = found
    if cupy is None:
        print(f"{script}: needs CuPy (its NVRTC compiles the prototypes)")
        return None
    return torch, cupy, cupy.RawModule(code=source, options=("-std=c++17",)), torch_timer(torch)

def plot_bars(rows, series, title, path, ylabel="TB/s (higher is better)"):
    """One bar per (case, series) side by side: series is [(label, key of the row's milliseconds,
    colour)]; a bar's height is the row's bytes over that time. Rows without a time get no bar."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(series)
    for k, (label, key, color) in enumerate(series):
        offset = (k - (len(series) - 1) / 2) * width
        xs = [i + offset for i, r in enumerate(rows) if r.get(key)]
        tbs = [r["bytes"] / r[key] / 1e9 for r in rows if r.get(key)]
        ax.bar(xs, tbs, width, label=label, color=color)
    ax.set_xticks(range(len(rows)), [r["case"] for r in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def print_ratio_table(rows, title):
    """lab against torch eager and torch.compile, one row per case (milliseconds, ratios: the peer's
    time over lab's, > 1 when lab is faster, and lab's bytes per second)."""
    print(f"\n{title:58s} {'lab ms':>8s} {'eager ms':>9s} {'compile':>8s} {'vs eager':>9s} {'vs compile':>10s} "
          f"{'lab TB/s':>9s}")
    for r in rows:
        compiled = f"{r['compile_ms']:8.3f}" if r.get("compile_ms") else f"{'-':>8s}"
        vs_compile = f"{r['compile_ms'] / r['lab_ms']:10.2f}" if r.get("compile_ms") else f"{'-':>10s}"
        print(f"{r['case']:58s} {r['lab_ms']:8.3f} {r['eager_ms']:9.3f} {compiled} {r['eager_ms'] / r['lab_ms']:9.2f} "
              f"{vs_compile} {r['bytes'] / r['lab_ms'] / 1e9:9.2f}")


def print_goals(rows, goals):
    """Each goal (case, peer 'eager' or 'compile', least ratio) against the row measured for it."""
    print(f"\n{'goal':60s} {'measured':>9s}  met")
    for case, peer, target in goals:
        r = next((r for r in rows if r["case"] == case), None)
        if r is None or not r.get(f"{peer}_ms"):
            continue
        ratio = r[f"{peer}_ms"] / r["lab_ms"]
        print(f"{r['case'] + ' >= ' + str(target) + 'x ' + peer:60s} {ratio:9.2f}  {'yes' if ratio >= target else 'NO'}")


def save_eager_compile_results(out_dir, name, torch, rows, title):
    """<out_dir>/<name>.json (the GPU, date, torch version and rows) and <name>.png: lab, torch
    eager and torch.compile side by side per case. Nothing without out_dir."""
    import json
    import os
    import time
    if not out_dir:
        return
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), torch=torch.__version__,
                       rows=rows), f, indent=1)
    try:
        plot_bars(rows, [("lab", "lab_ms", "tab:blue"), ("torch eager", "eager_ms", "tab:orange"),
                         ("torch.compile", "compile_ms", "tab:red")], title, os.path.join(out_dir, f"{name}.png"))
    except ImportError:
        print("(matplotlib is not installed: no plot)")


def extra_peak_mib(torch, fn):
    """MiB torch's allocator held at its peak during fn() beyond what was allocated before."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    result = fn()
    torch.cuda.synchronize()
    del result
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def time_bandwidths(cases, timer, title, width=22):
    """{name: GB/s} for cases {name: (fn, bytes it must move)}: each fn's median event-timed ms after
    warm-up, printed under `title` as one row a case."""
    from lab._timing import median_ms
    rates = {}
    print(f"\n{title} (GB/s of bytes read + written)")
    for name, (fn, nbytes) in cases.items():
        ms = median_ms(fn, *timer, repeats=20, warmup=3)
        rates[name] = nbytes / ms / 1e6
        print(f"{name:{width}s} {ms:8.3f} ms {rates[name]:9.0f} GB/s")
    return rates


def print_met_goals(goals, width=55, digits=2):
    """The goals table: (goal, measured, met) rows, the measured value with `digits` decimals."""
    print(f"\n{'goal':{width}s} {'measured':>9s}  met")
    for goal, measured, met in goals:
        print(f"{goal:{width}s} {measured:9.{digits}f}  {'yes' if met else 'NO'}")


def save_json(out_dir, filename, torch, **fields):
    """<out_dir>/<filename>: the GPU, the date, torch's version and `fields`. Nothing without out_dir."""
    import json
    import os
    import time
    if not out_dir:
        return
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, filename), "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), torch=torch.__version__,
                       **fields), f, indent=1)


def run_groups(script, description, groups, json_name, width=55, digits=2, missing=None):
    """A benchmark's main: its command line and peers (start), each group of `groups` - {name:
    fn(torch, timer, goals, results, quick)} - that --only keeps, the goals table, and
    <out-dir>/<json_name>. missing(torch), where given, says what this torch lacks (None: nothing).
    Returns the exit code."""
    started = start(script, description, list(groups))
    if started is None:
        return 1
    args, torch, _, timer = started
    lacking = missing(torch) if missing else None
    if lacking:
        print(f"{script}: {lacking}")
        return 1
    goals, results = [], {}
    for name, bench in groups.items():
        if name in args.only:
            bench(torch, timer, goals, results, args.quick)
    print_met_goals(goals, width=width, digits=digits)
    save_json(args.out_dir, json_name, torch, goals=[list(g) for g in goals], **results)
    return 0
