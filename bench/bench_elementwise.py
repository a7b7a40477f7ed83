"""Elementwise benchmark: lab against torch and CuPy on the same GPU, in one run.

Bandwidth (2^28 elements): achieved TB/s counting each array read or written once, next to a
device-to-device copy measured in the same run. Per-call cost (1024 elements): host wall time of
many back-to-back calls, which is what a small op costs a Python program. Times are medians of
event-timed repeats after warm-up (lab/_timing.py). Usage:
    python3 bench/bench_elementwise.py [--json results.json] [--quick]
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import cupy_timer, median_ms, torch_timer  # noqa: E402


def optional(name):
    try:
        return __import__(name)
    except ImportError:
        return None


def per_call_us(fn, sync, calls=20000):
    for _ in range(200):
        fn()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


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
            cupy_ms = median_ms(cupy_fn, *ctimer, repeats=repeats) if cupy_fn else None
            lab_cupy_ms = median_ms(lab_cupy_fn, *ctimer, repeats=repeats) if lab_cupy_fn else None
            itemsize = a.element_size()
            rows.append(dict(op=name, dtype=dtype, n=n, lab_ms=lab_ms, torch_ms=torch_ms, cupy_ms=cupy_ms,
                             lab_on_cupy_ms=lab_cupy_ms, arrays=arrays, tbs=arrays * n * itemsize / lab_ms / 1e9))
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
    x16 = x.half()
    elems = side * side
    cases = [
        ("copy(x.T)", 2 * elems * 4, lambda: lab.copy(x.T, out), lambda: out.copy_(x.T)),
        ("add bias row", 2 * elems * 4 + side * 4, lambda: lab.add(x, bias, out), lambda: torch.add(x, bias, out=out)),
        ("add x[:, ::2]", 3 * elems * 2, lambda: lab.add(x[:, ::2], y[:, ::2], half_out),
         lambda: torch.add(x[:, ::2], y[:, ::2], out=half_out)),
        ("add f16 + f32", elems * (2 + 4 + 4), lambda: lab.add(x16, y, out), lambda: torch.add(x16, y, out=out)),
    ]
    rows = []
    for name, nbytes, lab_fn, torch_fn in cases:
        lab_ms = median_ms(lab_fn, *timer, repeats=repeats)
        torch_ms = median_ms(torch_fn, *timer, repeats=repeats)
        rows.append(dict(op=name, shape=f"{side}x{side}", lab_ms=lab_ms, torch_ms=torch_ms,
                         lab_tbs=nbytes / lab_ms / 1e9, torch_tbs=nbytes / torch_ms / 1e9))
    return rows


def per_call_rows(torch, cupy):
    rows = []
    a, b, out = (torch.rand(1024, device="cuda") for _ in range(3))
    rows.append(dict(what="lab.add on torch", us=per_call_us(lambda: lab.add(a, b, out), torch.cuda.synchronize)))
    rows.append(dict(what="torch.add(out=)", us=per_call_us(lambda: torch.add(a, b, out=out), torch.cuda.synchronize)))
    if cupy is not None:
        ca, cb, cout = (cupy.random.rand(1024, dtype=cupy.float32) for _ in range(3))
        sync = cupy.cuda.runtime.deviceSynchronize
        rows.append(dict(what="lab.add on CuPy", us=per_call_us(lambda: lab.add(ca, cb, cout), sync)))
        rows.append(dict(what="cupy.add(out=)", us=per_call_us(lambda: cupy.add(ca, cb, out=cout), sync)))
    return rows


def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="write the raw numbers here")
    parser.add_argument("--quick", action="store_true", help="2^24 elements and fewer repeats")
    args = parser.parse_args()
    torch = optional("torch")
    cupy = optional("cupy")
    if not lab.is_available() or torch is None or not torch.cuda.is_available():
        print("benchmark: needs a CUDA GPU and PyTorch (CuPy optional); `python3 -m lab` says what is missing")
        return 1
    n = 1 << 24 if args.quick else 1 << 28
    repeats = 10 if args.quick else 30
    bw, copy_tbs = bandwidth_rows(torch, cupy, n, repeats)
    layouts = layout_rows(torch, 2048 if args.quick else 8192, repeats)
    calls = per_call_rows(torch, cupy)
    gpu = torch.cuda.get_device_name()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(gpu=gpu, torch=torch.__version__, cupy=getattr(cupy, "__version__", None),
                           lab=lab.__version__, date=time.strftime("%Y-%m-%d"), bandwidth=bw, layouts=layouts,
                           per_call=calls), f,
                      indent=1)

    print(f"\n== lab elementwise benchmark on {gpu}, torch {torch.__version__}, CuPy "
          f"{getattr(cupy, '__version__', 'absent')}, n = 2^{n.bit_length() - 1} ==")
    print(f"{'op':15s} {'dtype':9s} {'lab ms':>8s} {'torch ms':>9s} {'cupy ms':>8s} {'lab/cupy':>9s} "
          f"{'vs torch':>9s} {'vs cupy':>8s} {'lab TB/s':>9s} {'% copy':>7s}")
    for r in bw:
        vs_torch = r["torch_ms"] / r["lab_ms"] if r["lab_ms"] else None
        vs_cupy = r["cupy_ms"] / r["lab_on_cupy_ms"] if r.get("cupy_ms") and r.get("lab_on_cupy_ms") else None
        print(f"{r['op']:15s} {r['dtype']:9s} {fmt(r['lab_ms']):>8s} {fmt(r['torch_ms']):>9s} {fmt(r['cupy_ms']):>8s} "
              f"{fmt(r.get('lab_on_cupy_ms')):>9s} {fmt(vs_torch, '.2f'):>9s} {fmt(vs_cupy, '.2f'):>8s} "
              f"{r['tbs']:9.2f} {100 * r['tbs'] / copy_tbs:6.0f}%")
    print("(vs torch / vs cupy: the peer's time over lab's; > 1 means lab is faster)")
    print(f"\n{'layout (float32)':16s} {'shape':>10s} {'lab ms':>8s} {'torch ms':>9s} {'vs torch':>9s} "
          f"{'lab TB/s':>9s} {'torch TB/s':>11s}")
    for r in layouts:
        print(f"{r['op']:16s} {r['shape']:>10s} {r['lab_ms']:8.3f} {r['torch_ms']:9.3f} "
              f"{r['torch_ms'] / r['lab_ms']:9.2f} {r['lab_tbs']:9.2f} {r['torch_tbs']:11.2f}")
    print(f"\n{'per call, 1024 elements':28s} {'us':>7s}")
    for r in calls:
        print(f"{r['what']:28s} {r['us']:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
