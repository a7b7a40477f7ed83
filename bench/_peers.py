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


def start(script, description):
    """A benchmark's command line (--out-dir, --quick), its peers and torch's event timer:
    (args, torch, cupy, timer), or None where this machine cannot run it (peers() says why)."""
    import argparse
    from lab._timing import torch_timer
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out-dir")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    found = peers(script)
    if found is None:
        return None
    torch, cupy = found
    return args, torch, cupy, torch_timer(torch)


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
