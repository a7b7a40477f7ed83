"""lab's float8 casts against the copy's bandwidth and torch's own casts, side by side on the same
tensors: x (bfloat16) cast to float8_e4m3fn with a per-tensor scale from device memory, alone and with
its transpose in the same pass (the layout the other side of a linear layer's float8 products reads),
and the amax. torch does it as torchao's eager path does: (x * (1 / scale)).clamp(...).to(float8),
then .t().contiguous() and x.abs().max() as separate passes; torch.compile fuses what it can.
Medians of event-timed repeats after warm-up; bandwidth counts the bytes each way must move (x read
once; each float8 output written once).
    python3 bench/bench_float8.py [--out-dir DIR] [--quick]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from _peers import print_met_goals, save_json, start, time_bandwidths  # noqa: E402


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


def main():
    started = start("bench_float8", __doc__.split("\n")[0])
    if started is None:
        return 1
    args, torch, _, timer = started
    if not hasattr(torch, "float8_e4m3fn"):
        print("bench_float8: this torch has no float8 types")
        return 1
    goals, results = [], {}
    bench_casts(torch, timer, goals, results, args.quick)
    print_met_goals(goals, width=62, digits=3)
    save_json(args.out_dir, "float8.json", torch, goals=[list(g) for g in goals], **results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
