"""Writes docs/performance.md from bench/results: one table per benchmark area, each row a number
read from that area's latest results file, each table headed by the file's date, GPU, commit and the
command that produced it. No number in docs/performance.md is typed by hand; after a GPU run, copy
its results into bench/results under the usual name (DATE-GPU-AREA-COMMIT.json) and run
    python3 docs/make_performance.py          (tests/test_docs.py checks the page is its output)
"""
import json
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
NAME = re.compile(r"^(\d{4}-\d\d-\d\d)-(h\d00)(?:-(.+?))?(?:-([0-9a-f]{7}))?\.json$")
GPUS = {"h100": "NVIDIA H100", "h200": "NVIDIA H200"}

# area (the file name's middle part) -> (title, the command that writes it, what its rows say)
AREAS = {
    "": ("Elementwise ops", "python3 bench/bench_elementwise.py", "goals"),
    "elementwise-quick": ("Elementwise ops (quick run)", "python3 bench/bench_elementwise.py --quick", "goals"),
    "bandwidth": ("Every memory-bound kernel against a copy of its bytes", "python3 bench/bench_bandwidth.py",
                  "bandwidth"),
    "reductions": ("Reductions", "python3 bench/bench_reductions.py", "timed"),
    "jit": ("Runtime-compiled kernels (RawKernel, ElementwiseKernel)", "python3 bench/bench_jit.py", "scalars"),
    "rowwise": ("Row-wise training ops", "python3 bench/bench_rowwise.py", "timed"),
    "losses": ("Cross-entropy and the GLUs", "python3 bench/bench_losses.py", "timed"),
    "swiglu": ("SwiGLU forward + backward through autograd", "make bench-swiglu", "goals"),
    "rope": ("The rotary embedding", "make bench-rope", "goals"),
    "gemm": ("Matrix products (cuBLASLt)", "python3 bench/bench_gemm.py", "timed"),
    "gemm-float8": ("float8 matrix products", "python3 bench/bench_gemm.py --only float8 host", "timed"),
    "linear-ce": ("The fused linear cross-entropy", "make bench-linear-ce", "goals"),
    "attention": ("Attention against SDPA's flash and cuDNN backends", "python3 bench/bench_attention.py", "goals"),
    "attention-quick": ("Attention against SDPA's flash and cuDNN backends (quick run: no JAX)",
                        "python3 bench/bench_attention.py --quick --only fixed packed", "goals"),
    "attention-fixed": ("Attention against SDPA's flash and cuDNN backends, fixed-length cases (quick run)",
                        "python3 bench/bench_attention.py --quick --only fixed", "attention"),
    "attention-fixed-jax": ("Attention against SDPA's flash and cuDNN backends, and lab.jax inside jax.jit "
                            "(quick run: no packed batch)", "python3 bench/bench_attention.py --quick --only fixed jax",
                            "attention"),
    "packed": ("Padding-free fine-tuning against padded batches", "make bench-packed", "packed"),
    "llama": ("A Llama training step, end to end", "make gpu-llama", "llama"),
    "llama-quick": ("A Llama training step, end to end (quick run, 4 x 2048 only)",
                    "python3 bench/bench_llama.py --quick --case 4x2048", "llama"),
    "runtime": ("lab.Graph, random numbers and dropout against torch", "python3 bench/bench_runtime.py", "goals"),
    "runtime-random": ("Random numbers and dropout against torch", "python3 bench/bench_runtime.py --only random dropout",
                       "goals"),
    "float8": ("float8 casts and linear layers against the copy, bfloat16 and torchao", "make gpu-float8", "float8"),
    "llama-8b": ("An 8 B-shaped Llama training step in float8", "make gpu-llama-float8", "llama"),
    "llama-1b-float8": ("The 1 B Llama step in float8 (4 x 2048)", "python3 bench/bench_llama.py --one ... 4x2048",
                        "llama"),
    "convergence-float8-1b": ("float8 against bfloat16 over 300 training steps, 1 B shape",
                              "make gpu-convergence-float8", "convergence"),
    "jax": ("lab.jax inside jax.jit against XLA", "python3 bench/bench_jax.py", "goals"),
    "jax-train": ("A JAX training step with lab.jax", "python3 bench/bench_jax_train.py", "goals"),
}


def commit_order(commit):
    """How far along history a commit is (more commits reachable: later); 0 where it is unknown."""
    if not commit:
        return 0
    done = subprocess.run(["git", "rev-list", "--count", commit], cwd=ROOT, capture_output=True, text=True)
    return int(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip().isdigit() else 0


def latest_files():
    """{area: (file name, date, gpu, commit)}: per area the newest file, by date, then by commit."""
    found = {}
    for name in sorted(os.listdir(RESULTS)):
        match = NAME.match(name)
        if not match or (match.group(3) or "") not in AREAS:
            continue
        date, gpu, area, commit = match.group(1), match.group(2), match.group(3) or "", match.group(4)
        key = (date, commit_order(commit), name)
        if area not in found or key > found[area][0]:
            found[area] = (key, (name, date, gpu, commit))
    return {area: value for area, (_, value) in found.items()}


def fmt(value):
    if isinstance(value, bool):
        return "met" if value else "missed"
    if isinstance(value, (int, float)):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def goal_rows(data):
    rows = []
    for goal in data.get("goals", []):
        if isinstance(goal, dict):
            rows.append([goal.get("goal"), fmt(goal.get("measured")), fmt(goal["met"]) if "met" in goal else ""])
        else:
            rows.append([goal[0], fmt(goal[1]), fmt(goal[2]) if len(goal) > 2 else ""])
    return ["goal", "measured", ""], rows


def timed_rows(data):
    """Rows of {case, lab_ms, <peer>_ms...}: lab's time, its rate, and each peer's time over lab's."""
    rows = []
    for row in data.get("rows", []):
        if "lab_ms" not in row:
            continue
        lab = row["lab_ms"]
        rate = ""
        if row.get("bytes"):
            rate = f"{row['bytes'] / lab / 1e9:.2f} TB/s"
        elif row.get("flop"):
            rate = f"{row['flop'] / lab / 1e9:.0f} TFLOP/s"
        peers = []
        for key, value in row.items():
            if key.endswith("_ms") and key != "lab_ms" and isinstance(value, (int, float)) and value:
                peer = row.get("peer", "peer") if key == "peer_ms" else key[:-3].replace("_", " ")
                peers.append(f"{value / lab:.2f}x {peer}")
        rows.append([row["case"], f"{lab:.3f}", rate, ", ".join(peers)])
    return ["case", "lab ms", "rate", "peer's time / lab's"], rows


def bandwidth_rows(data):
    rows = [[r["case"], f"{r['lab_ms']:.3f}", f"{r['bytes'] / r['lab_ms'] / 1e9:.2f}",
             f"{r['bytes'] / r['lab_ms'] / 1e9 / r['copy_tbps'] * 100:.1f}%"]
            for r in data.get("rows", []) if r.get("copy_tbps")]
    return ["case", "lab ms", "TB/s", "of the copy's rate"], rows


def scalar_rows(data):
    rows = []
    for key, value in data.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            rows.append([key.replace("_", " "), fmt(value), ""])
        elif isinstance(value, dict):
            for inner, number in value.items():
                if isinstance(number, (int, float)) and not isinstance(number, bool):
                    rows.append([f"{key.replace('_', ' ')}: {inner}", fmt(number), ""])
    return ["what", "measured", ""], rows


def llama_rows(data):
    rows = [[r.get("implementation"), r.get("case"), fmt(r.get("tokens_per_s")), fmt(r.get("peak_gib"))]
            for r in data.get("rows", [])]
    rows += [[f"goal: {goal}", "", fmt(measured), fmt(met)] for goal, measured, met in data.get("goals", [])]
    return ["implementation", "batch", "tokens/s", "peak GiB beyond the model"], rows


def packed_rows(data):
    """Each implementation's real tokens/s and peak (or that it ran out of memory), then the goals."""
    rows = [[r["implementation"], "out of memory", "", ""] if r.get("out_of_memory") else
            [r["implementation"], fmt(r["real_tokens_per_s"]), f"{r['padding']:.0%}", fmt(r["peak_gib"])]
            for r in data.get("rows", [])]
    rows += [[f"goal: {goal}", fmt(measured), fmt(met), ""] for goal, measured, met in data.get("goals", [])]
    return ["implementation", "real tokens/s", "padding", "peak GiB beyond weights and grads"], rows


def attention_rows(data):
    """Per case, each implementation's TFLOP/s forward and forward + backward, then the goals."""
    cases, impls = {}, []
    for r in data.get("fixed", []):
        cases.setdefault(r["case"], {})[r["impl"]] = r
        if r["impl"] not in impls:
            impls.append(r["impl"])
    tflops = lambda r, key: fmt(r[key]) if r and r.get(key) == r.get(key) and r.get(key) else "-"  # noqa: E731
    rows = [[case, "fwd"] + [tflops(by_impl.get(i), "forward_tflops") for i in impls] for case, by_impl in cases.items()]
    rows += [[case, "fwd+bwd"] + [tflops(by_impl.get(i), "forward_backward_tflops") for i in impls]
             for case, by_impl in cases.items()]
    rows += [[f"goal: {g[0]}", "", fmt(g[1]), fmt(g[2])] + [""] * (len(impls) - 2) for g in data.get("goals", [])]
    return ["case", "pass"] + [f"{i} TFLOP/s" for i in impls], rows


def float8_rows(data):
    """The linear layers' forward + backward times (bf16, lab float8, torchao eager and compiled), then the goals."""
    ms = lambda r, key: fmt(r["ms"][key]) if key in r["ms"] else "-"  # noqa: E731
    rows = [[r["case"], ms(r, "bf16"), ms(r, "lab"), ms(r, "ao"), ms(r, "ao_compile"), fmt(r["ms"]["bf16"] / r["ms"]["lab"]),
             "float8" if r["rule_converts"] else "bf16"] for r in data.get("linear", [])]
    rows += [[f"goal: {goal}", fmt(measured), fmt(met), "", "", "", ""] for goal, measured, met in data.get("goals", [])]
    return ["projection (fwd + bwd)", "bf16 ms", "lab float8 ms", "torchao ms", "torchao compiled ms", "bf16 / lab",
            "patch's rule"], rows


def convergence_rows(data):
    """Each run's loss at a few steps and over its last 10, then the distance between them."""
    steps = [1, 10, 100, data["steps"]]
    rows = [[name] + [fmt(curve[s - 1]) for s in steps] + [fmt(sum(curve[-10:]) / 10)]
            for name, curve in data["curves"].items()]
    rows.append([f"float8 against bfloat16 over the last 10 steps (goal: within 1%); "
                 f"{'no NaN or inf' if data['finite'] else 'NaN or inf'}", "", "", "", "",
                 f"{data['relative_distance']:.2%}"])
    return ["run"] + [f"loss at step {s}" for s in steps] + ["last 10"], rows


FORMATS = {"attention": attention_rows, "goals": goal_rows, "timed": timed_rows, "bandwidth": bandwidth_rows, "scalars": scalar_rows,
           "llama": llama_rows, "packed": packed_rows, "float8": float8_rows, "convergence": convergence_rows}


def table(header, rows):
    cell = lambda text: str(text).replace("|", "\\|")  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def page():
    parts = ["""# Performance

What lab measures against its peers on the GPU machine, area by area. Every table is generated by
`docs/make_performance.py` from the newest results file of its area in `bench/results/` (its date,
GPU, commit and command head the table); nothing here is typed by hand. Times are medians of
event-timed repeats after warm-up; a ratio is the peer's time over lab's (above 1: lab is faster),
measured side by side in one run on one machine - compare numbers only within one table. How the
kernels got there, run by run, is in [notebook/](notebook/).
"""]
    files = latest_files()
    for area, (title, command, kind) in AREAS.items():
        if area not in files:
            continue
        name, date, gpu, commit = files[area]
        data = json.load(open(os.path.join(RESULTS, name)))
        header, rows = FORMATS[kind](data)
        if not rows:
            continue
        parts.append(f"## {title}\n\n{date}, {GPUS.get(gpu, gpu)}, commit {commit or 'not recorded'}, "
                     f"`{command}`: [{name}](../bench/results/{name})\n\n{table(header, rows)}\n")
    return "\n".join(parts)


if __name__ == "__main__":
    with open(os.path.join(ROOT, "docs", "performance.md"), "w") as f:
        f.write(page())
    print("wrote docs/performance.md")
