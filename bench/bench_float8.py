"""lab's float8 casts against the copy's bandwidth and torch's own casts, side by side on the same
tensors: x (bfloat16) cast to float8_e4m3fn with a per-tensor scale from device memory, alone and with
its transpose in the same pass (the layout the other side of a linear layer's float8 products reads),
and the amax. torch does it as torchao's eager path does: (x * (1 / scale)).clamp(...).to(float8),
then .t().contiguous() and x.abs().max() as separate passes; torch.compile fuses what it can.
Medians of event-timed repeats after warm-up; bandwidth counts the bytes each way must move (x read
once; each float8 output written once).

The linear layers: one projection's forward and backward (y = x @ w.T, then dx and dw from a given
dy, through autograd) for the Llama shapes the patch meets - 8 B (hidden 4096, MLP 14336, 8 key-value
heads of 128) and 1 B (hidden 2048, MLP 8192, 8 key-value heads of 64) at 8192 tokens - in bfloat16
(torch), lab.nn.float8_linear, and torchao's float8 training (tensorwise, eager and torch.compile)
where torchao is installed. The ratio bf16 / lab says which shapes gain; lab.nn.patch's rule
(float8_gains) is printed beside it.
    python3 bench/bench_float8.py [--out-dir DIR] [--quick] [--only casts linear]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from _peers import run_groups, time_bandwidths  # noqa: E402


def bench_casts(torch, timer, goals, results, quick):
    shapes = [(4096, 4096)] if quick else [(8192, 8192), (16384, 4096), (8192, 14336)]
    e4m3 = torch.float8_e4m3fn
    rows_out = []
    for rows, cols in shapes:
        n = rows * cols
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16, generator=gen)
        scale = (x.float().abs().max() / 448.0).reshape(())
        out, out_t = torch.empty(rows, cols, device="cuda", dtype=e4m3), torch.empty(cols, rows, device="cuda", dtype=e4m3)
        amax = torch.empty(1, device="cuda")
        copied = torch.empty_like(x)

        def torch_cast(x, scale):
            return (x.float() * (1.0 / scale)).clamp(-448.0, 448.0).to(e4m3)

        def torch_cast_transpose(x, scale):
            cast = torch_cast(x, scale)
            return cast, cast.t().contiguous(), x.abs().amax()

        compiled = torch.compile(torch_cast_transpose, dynamic=False)
        cases = {
            "copy (bfloat16)": (lambda: copied.copy_(x), 4 * n),
            "lab cast": (lambda: lab.cast_float8(x, scale, out, amax=amax), 3 * n),
            "torch cast": (lambda: torch_cast(x, scale), 3 * n),
            "lab cast + transpose": (lambda: lab.cast_float8(x, scale, out, out_t=out_t, amax=amax), 4 * n),
            "torch cast + transpose": (lambda: torch_cast_transpose(x, scale), 4 * n),
            "torch.compile cast + transpose": (lambda: compiled(x, scale), 4 * n),
        }
        rates = time_bandwidths(cases, timer, f"float8 casts of {rows}x{cols} bfloat16", width=32)
        share = rates["lab cast + transpose"] / rates["copy (bfloat16)"]
        goals.append((f"lab cast + transpose / copy bandwidth >= 0.85 ({rows}x{cols})", share, share >= 0.85))
        rows_out.append(dict(shape=[rows, cols], gb_per_s=rates))
    results["casts"] = rows_out


LLAMA_8B = {"q/o 4096->4096": (4096, 4096), "k/v 4096->1024": (4096, 1024), "gate/up 4096->14336": (4096, 14336),
            "down 14336->4096": (14336, 4096)}
LLAMA_1B = {"q/o 2048->2048": (2048, 2048), "k/v 2048->512": (2048, 512), "gate/up 2048->8192": (2048, 8192),
            "down 8192->2048": (8192, 2048)}


def torchao_or_none():
    try:
        from torchao.float8 import convert_to_float8_training
        return convert_to_float8_training
    except ImportError:
        return None


def bench_linear(torch, timer, goals, results, quick):
    import lab.nn
    from lab._timing import median_ms
    convert = torchao_or_none()
    tokens = 2048 if quick else 8192
    shapes = {"8B " + k: v for k, v in LLAMA_8B.items()}
    if not quick:
        shapes.update({"1B " + k: v for k, v in LLAMA_1B.items()})
    print(f"\nlinear forward + backward at {tokens} tokens, bfloat16 in and out (ms; ratios: the peer's time "
          f"over lab's){'' if convert else ' - torchao is not installed'}")
    print(f"{'projection':28s} {'bf16':>7s} {'lab f8':>7s} {'ao f8':>7s} {'ao comp':>7s} {'bf16/lab':>8s} "
          f"{'ao/lab':>7s} {'aoc/lab':>7s}  rule")
    rows = []
    for name, (k, n) in shapes.items():
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
        w = (torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen) / k ** 0.5).requires_grad_()
        dy = torch.randn(tokens, n, device="cuda", dtype=torch.bfloat16, generator=gen)

        def step(layer, params):
            return lambda: torch.autograd.grad(layer(x), params, dy)

        cases = {"bf16": step(lambda v: torch.nn.functional.linear(v, w), (x, w)),
                 "lab": step(lambda v: lab.nn.float8_linear(v, w), (x, w))}
        if convert is not None and name.startswith("8B"):
            module = torch.nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16)
            module.weight = torch.nn.Parameter(w.detach().clone())
            module = convert(module)
            cases["ao"] = step(module, (x, module.weight))
            torch._dynamo.reset()
            cases["ao_compile"] = step(torch.compile(module), (x, module.weight))
        ms = {key: median_ms(fn, *timer, repeats=10 if quick else 20, warmup=3) for key, fn in cases.items()}
        gains = lab.nn.patching.float8_gains(k, n)
        row = dict(case=name, k=k, n=n, tokens=tokens, ms=ms, rule_converts=gains)
        rows.append(row)
        ratio = lambda key: f"{ms[key] / ms['lab']:7.2f}" if key in ms else f"{'-':>7s}"  # noqa: E731
        print(f"{name:28s} {ms['bf16']:7.3f} {ms['lab']:7.3f} "
              + " ".join(f"{ms[key]:7.3f}" if key in ms else f"{'-':>7s}" for key in ("ao", "ao_compile"))
              + f" {ms['bf16'] / ms['lab']:8.2f} {ratio('ao')} {ratio('ao_compile')}  {'float8' if gains else 'bf16'}")
        agrees = gains == (ms["bf16"] / ms["lab"] > 1.0)
        goals.append((f"rule agrees with the measurement ({name})", ms["bf16"] / ms["lab"], agrees))
    results["linear"] = rows


def main():
    return run_groups("bench_float8", __doc__.split("\n")[0], {"casts": bench_casts, "linear": bench_linear},
                      "float8.json", width=62, digits=3,
                      missing=lambda torch: None if hasattr(torch, "float8_e4m3fn") else "this torch has no float8 types")


if __name__ == "__main__":
    sys.exit(main())
