"""Matrix products: lab.matmul (cuBLASLt from C) against torch.mm and cupy.matmul on the same arrays,
in one run. Cases, bfloat16 unless named:
  - square products (4096^3, 8192^3) and a Llama-style layer's (8192 tokens: the MLP's up and down
    projections, 4096 <-> 14336, and the 128256-word output head), on torch tensors, and float16 on
    CuPy arrays (CuPy has no bfloat16);
  - bias + gelu_tanh in the product's epilogue against torch's _addmm_activation (cuBLASLt's epilogue
    too) and CuPy's matmul followed by its own bias and GELU;
  - an MLP block (Linear + GELU + Linear, 8192 tokens, 2048 -> 8192 -> 2048) forward and backward:
    lab's six products with the bias, GELU, GELU-gradient and bias-gradient work in their epilogues,
    against torch eager's autograd of the same block;
  - float8 e4m3fn 8192^3 with per-tensor scales into bfloat16 against torch._scaled_mm and against
    lab's own bfloat16 product of the same size (where torch has float8 and the GPU runs it);
  - host time per call on 256 x 256 (the GPU work is shorter than the host's).
Medians of event-timed repeats after warm-up on random data; ratios are the peer's time over lab's
(> 1: lab is faster).
    python3 bench/bench_gemm.py [--out-dir DIR] [--quick] [--only products epilogues mlp float8 host]
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import cupy_timer, median_ms  # noqa: E402
from _peers import start  # noqa: E402
from bench_elementwise import per_call_us  # noqa: E402

SHAPES = [("4096^3", 4096, 4096, 4096), ("8192^3", 8192, 8192, 8192), ("up 8192x4096 @ 4096x14336", 8192, 4096, 14336),
          ("down 8192x14336 @ 14336x4096", 8192, 14336, 4096), ("head 8192x4096 @ 4096x128256", 8192, 4096, 128256)]


def tflops(m, k, n, ms):
    return 2 * m * k * n / ms / 1e9


def product_rows(torch, cupy, timer, repeats):
    rows = []
    for name, m, k, n in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        lab_ms = median_ms(lambda: lab.matmul(a, b, out), *timer, repeats=repeats)
        torch_ms = median_ms(lambda: torch.mm(a, b, out=out), *timer, repeats=repeats)
        rows.append(dict(case=f"bf16 {name}", flop=2 * m * k * n, lab_ms=lab_ms, peer="torch.mm", peer_ms=torch_ms))
        del a, b, out
        if cupy is not None:
            ca = cupy.random.standard_normal((m, k), dtype=cupy.float32).astype(cupy.float16)
            cb = cupy.random.standard_normal((k, n), dtype=cupy.float32).astype(cupy.float16)
            cout = cupy.empty((m, n), dtype=cupy.float16)
            ctimer = cupy_timer(cupy)
            lab_ms = median_ms(lambda: lab.matmul(ca, cb, cout), *ctimer, repeats=repeats)
            cupy_ms = median_ms(lambda: cupy.matmul(ca, cb, out=cout), *ctimer, repeats=repeats)
            rows.append(dict(case=f"fp16 {name} (CuPy arrays)", flop=2 * m * k * n, lab_ms=lab_ms, peer="cupy.matmul",
                             peer_ms=cupy_ms))
            del ca, cb, cout
            cupy.get_default_memory_pool().free_all_blocks()
        torch.cuda.empty_cache()
    return rows


def epilogue_rows(torch, cupy, timer, repeats, size=8192):
    F = torch.nn.functional
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(size, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    flop = 2 * size**3
    lab_ms = median_ms(lambda: lab.matmul(a, b, out, bias=bias, epilogue="gelu_tanh"), *timer, repeats=repeats)
    torch_ms = median_ms(lambda: torch._addmm_activation(bias, a, b, use_gelu=True), *timer, repeats=repeats)
    rows = [dict(case=f"bf16 {size}^3 + bias, gelu_tanh", flop=flop, lab_ms=lab_ms, peer="torch _addmm_activation",
                 peer_ms=torch_ms)]
    eager_ms = median_ms(lambda: F.gelu(torch.mm(a, b) + bias, approximate="tanh"), *timer, repeats=repeats)
    rows.append(dict(case=f"bf16 {size}^3 + bias, gelu_tanh", flop=flop, lab_ms=lab_ms, peer="torch mm + bias + gelu",
                     peer_ms=eager_ms))
    del a, b, out
    if cupy is not None:
        ca = cupy.random.standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)
        cb = cupy.random.standard_normal((size, size), dtype=cupy.float32).astype(cupy.float16)
        cbias = cupy.random.standard_normal(size, dtype=cupy.float32).astype(cupy.float16)
        cout = cupy.empty((size, size), dtype=cupy.float16)
        gelu = cupy.ElementwiseKernel(
            "T x, T bias", "T y",
            "float v = (float)x + (float)bias; y = (T)(0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))))",
            "bias_gelu_tanh")
        ctimer = cupy_timer(cupy)
        lab_ms = median_ms(lambda: lab.matmul(ca, cb, cout, bias=cbias, epilogue="gelu_tanh"), *ctimer, repeats=repeats)
        cupy_ms = median_ms(lambda: gelu(cupy.matmul(ca, cb), cbias), *ctimer, repeats=repeats)
        rows.append(dict(case=f"fp16 {size}^3 + bias, gelu_tanh (CuPy)", flop=flop, lab_ms=lab_ms,
                         peer="cupy matmul + bias/gelu kernel", peer_ms=cupy_ms))
        del ca, cb, cout
        cupy.get_default_memory_pool().free_all_blocks()
    torch.cuda.empty_cache()
    return rows


def mlp_rows(torch, timer, repeats, tokens=8192, d=2048, hidden=8192):
    """Linear(d, hidden) + GELU(tanh) + Linear(hidden, d), forward and backward of sum(y * dy)."""
    F = torch.nn.functional
    bf16 = dict(device="cuda", dtype=torch.bfloat16)
    x = torch.randn(tokens, d, **bf16)
    w1, b1 = torch.randn(hidden, d, **bf16) * d**-0.5, torch.randn(hidden, **bf16) * 0.1
    w2, b2 = torch.randn(d, hidden, **bf16) * hidden**-0.5, torch.randn(d, **bf16) * 0.1
    dy = torch.randn(tokens, d, **bf16)
    leaves = [t.clone().requires_grad_() for t in (x, w1, b1, w2, b2)]

    def torch_step():
        x_, w1_, b1_, w2_, b2_ = leaves
        y = F.linear(F.gelu(F.linear(x_, w1_, b1_), approximate="tanh"), w2_, b2_)
        return torch.autograd.grad(y, leaves, dy)

    pre, h, y = torch.empty(tokens, hidden, **bf16), torch.empty(tokens, hidden, **bf16), torch.empty(tokens, d, **bf16)
    dpre = torch.empty(tokens, hidden, **bf16)
    dx, dw1, db1 = torch.empty_like(x), torch.empty_like(w1), torch.empty_like(b1)
    dw2, db2 = torch.empty_like(w2), torch.empty_like(b2)

    def lab_step():
        lab.matmul(x, w1.t(), h, bias=b1, epilogue="gelu_tanh", aux_out=pre)  # h = gelu(x W1^T + b1), pre saved
        lab.matmul(h, w2.t(), y, bias=b2)                                       # y = h W2^T + b2
        lab.matmul(dy.t(), h, dw2, bias_grad_out=db2)                           # dW2 = dy^T h, db2 = sum(dy)
        lab.matmul(dy, w2, dpre, epilogue="dgelu", aux=pre, bias_grad_out=db1)  # dpre = (dy W2) gelu'(pre), db1
        lab.matmul(dpre.t(), x, dw1)                                            # dW1 = dpre^T x
        lab.matmul(dpre, w1, dx)                                                # dx = dpre W1
        return dx

    flop = 6 * 2 * tokens * d * hidden
    lab_ms = median_ms(lab_step, *timer, repeats=repeats)
    torch_ms = median_ms(torch_step, *timer, repeats=repeats)
    rows = [dict(case=f"MLP fwd+bwd, {tokens}x{d}->{hidden}->{d}", flop=flop, lab_ms=lab_ms, peer="torch eager autograd",
                 peer_ms=torch_ms)]
    # Where the block's time goes: each product alone, with its epilogue and with the plain product
    # plus torch's separate op for the same work (so a slow fused epilogue shows).
    steps = [
        ("h = gelu(x W1^T + b1), pre saved", lambda: lab.matmul(x, w1.t(), h, bias=b1, epilogue="gelu_tanh", aux_out=pre),
         lambda: F.gelu(torch.addmm(b1, x, w1.t(), out=pre), approximate="tanh"), 2 * tokens * d * hidden),
        ("y = h W2^T + b2", lambda: lab.matmul(h, w2.t(), y, bias=b2), lambda: torch.addmm(b2, h, w2.t(), out=y),
         2 * tokens * d * hidden),
        ("dW2 = dy^T h, db2 = sum dy", lambda: lab.matmul(dy.t(), h, dw2, bias_grad_out=db2),
         lambda: (torch.mm(dy.t(), h, out=dw2), torch.sum(dy, 0, out=db2)), 2 * tokens * d * hidden),
        ("dpre = (dy W2) gelu'(pre), db1", lambda: lab.matmul(dy, w2, dpre, epilogue="dgelu", aux=pre, bias_grad_out=db1),
         lambda: torch.ops.aten.gelu_backward(torch.mm(dy, w2), pre, approximate="tanh").sum(0),
         2 * tokens * d * hidden),
        ("dW1 = dpre^T x", lambda: lab.matmul(dpre.t(), x, dw1), lambda: torch.mm(dpre.t(), x, out=dw1),
         2 * tokens * d * hidden),
        ("dx = dpre W1", lambda: lab.matmul(dpre, w1, dx), lambda: torch.mm(dpre, w1, out=dx), 2 * tokens * d * hidden),
    ]
    def fused_dgelu_bias_grad():
        previous = lab.lab._matmul_fuse_dgelu_bias_grad(True)
        lab.matmul(dy, w2, dpre, epilogue="dgelu", aux=pre, bias_grad_out=db1)
        lab.lab._matmul_fuse_dgelu_bias_grad(previous)

    steps += [
        ("dpre, db1 in cuBLASLt's DGELU_BGRAD", fused_dgelu_bias_grad,
         lambda: torch.ops.aten.gelu_backward(torch.mm(dy, w2), pre, approximate="tanh").sum(0),
         2 * tokens * d * hidden),
        ("dpre = (dy W2) gelu'(pre) alone", lambda: lab.matmul(dy, w2, dpre, epilogue="dgelu", aux=pre),
         lambda: torch.ops.aten.gelu_backward(torch.mm(dy, w2), pre, approximate="tanh"), 2 * tokens * d * hidden),
    ]
    for name, lab_fn, torch_fn, step_flop in steps:
        rows.append(dict(case=f"  MLP step: {name}", flop=step_flop, lab_ms=median_ms(lab_fn, *timer, repeats=repeats),
                         peer="torch, unfused", peer_ms=median_ms(torch_fn, *timer, repeats=repeats)))
    return rows


def float8_rows(torch, timer, repeats, size=8192):
    """a (row-major) times b = w.T (column-major), as torch._scaled_mm and cuBLASLt's float8 kernels take them."""
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm") or \
            torch.cuda.get_device_capability() < (8, 9):
        print("float8: this torch or GPU has no float8 products; the rows are left out")
        return []
    a = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn).t()
    scale_a, scale_b = (torch.ones((), device="cuda") for _ in range(2))
    out = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    lab_ms = median_ms(lambda: lab.matmul(a, b, out, scale_a=scale_a, scale_b=scale_b), *timer, repeats=repeats)
    torch_ms = median_ms(lambda: torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16),
                         *timer, repeats=repeats)
    a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
    bf16_ms = median_ms(lambda: lab.matmul(a16, b16, out), *timer, repeats=repeats)
    flop = 2 * size**3
    del a, b, a16, b16, out
    torch.cuda.empty_cache()
    return [dict(case=f"fp8 e4m3 {size}^3 -> bf16", flop=flop, lab_ms=lab_ms, peer="torch._scaled_mm", peer_ms=torch_ms),
            dict(case=f"fp8 e4m3 {size}^3 -> bf16", flop=flop, lab_ms=lab_ms, peer="lab bf16 matmul", peer_ms=bf16_ms)]


def host_rows(torch, calls):
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(256, 256, device="cuda", dtype=torch.bfloat16)
    sync = torch.cuda.synchronize
    lab_us = per_call_us(lambda: lab.matmul(a, b, out), sync, calls)
    torch_us = per_call_us(lambda: torch.mm(a, b, out=out), sync, calls)
    return [dict(case="host time per call, bf16 256x256", lab_us=lab_us, peer="torch.mm", peer_us=torch_us)]


GROUPS = ("products", "epilogues", "mlp", "float8", "host")
GOALS = [("bf16 ", "torch.mm", 0.98), ("(CuPy arrays)", "cupy.matmul", 1.0),
         ("+ bias, gelu_tanh", "torch _addmm_activation", 1.0), ("(CuPy)", "cupy matmul + bias/gelu kernel", 1.3),
         ("MLP fwd+bwd", "torch eager autograd", 1.1), ("fp8 e4m3", "torch._scaled_mm", 0.98),
         ("fp8 e4m3", "lab bf16 matmul", 1.6)]


def main():
    started = start("bench_gemm.py", __doc__, GROUPS)
    if started is None:
        return 0
    args, torch, cupy, timer = started
    repeats = 5 if args.quick else 15
    groups = {"products": lambda: product_rows(torch, cupy, timer, repeats),
              "epilogues": lambda: epilogue_rows(torch, cupy, timer, repeats),
              "mlp": lambda: mlp_rows(torch, timer, repeats), "float8": lambda: float8_rows(torch, timer, repeats)}
    rows = [row for name in GROUPS if name in groups and name in args.only for row in groups[name]()]
    host = host_rows(torch, 2000 if args.quick else 20000) if "host" in args.only else []
    print(f"\n{'matrix product':52s} {'lab ms':>8s} {'peer ms':>8s} {'vs peer':>8s} {'lab TFLOP/s':>12s}  peer")
    for r in rows:
        print(f"{r['case']:52s} {r['lab_ms']:8.3f} {r['peer_ms']:8.3f} {r['peer_ms'] / r['lab_ms']:8.2f} "
              f"{r['flop'] / r['lab_ms'] / 1e9:12.0f}  {r['peer']}")
    for r in host:
        print(f"{r['case']:52s} lab {r['lab_us']:.2f} us, {r['peer']} {r['peer_us']:.2f} us: "
              f"{r['lab_us'] / r['peer_us']:.2f}x the peer's host time")
    print(f"\n{'goal':70s} {'measured':>9s}  met")
    for part, peer, target in GOALS:
        for r in rows:
            if part in r["case"] and r["peer"] == peer:
                ratio = r["peer_ms"] / r["lab_ms"]
                print(f"{r['case'] + ' >= ' + str(target) + 'x ' + peer:70s} {ratio:9.2f}  {'yes' if ratio >= target else 'NO'}")
    for r in host:
        ratio = r["lab_us"] / r["peer_us"]
        print(f"{r['case'] + ' <= 1.0x ' + r['peer']:70s} {ratio:9.2f}  {'yes' if ratio <= 1.0 else 'NO'}")
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "gemm.json"), "w") as f:
            json.dump(dict(gpu=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), torch=torch.__version__,
                           cublaslt=lab.lab._cublaslt_info(), rows=rows, host=host), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
