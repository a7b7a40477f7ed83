"""Attention, forward and forward + backward, bfloat16: lab.attention (+ attention_backward, outputs
made once) against torch's scaled_dot_product_attention with its flash backend and its cuDNN
backend, side by side in one run on the same tensors (on an H100 or H200 also lab's forward without
its softmax overlapped, "lab serial", and on mma.sync, "lab mma.sync"). Cases: (batch 4, 32 heads, 4096 positions,
head_dim 128), (4, 16, 8192, 64) and grouped queries 32/8 at 4096 x 128, each causal and full. Then
a packed batch: 16 K tokens in sequences of lognormal lengths (median 512, at most 4096, seed 0),
32/8 heads of 128, causal - lab packed against lab on a fixed batch of the same tokens (4 x 4096),
and torch's SDPA on the same sequences as one block-diagonal mask and as a batch padded to the
longest (both through its efficient backend, the one that takes a mask). TFLOP/s counts the
products' multiply-adds (4 B H Sq Sk D for the forward, 2.5 times that for the backward, halved
when causal; for the packed batch the real sequences' only), against the GPU's dense bfloat16 peak
(989 TFLOP/s on an H100 or H200 SXM). Medians of event-timed runs after warm-up. Last, where jax is
installed: jit(value_and_grad) of lab.jax.dot_product_attention against jax.nn's cuDNN and XLA
implementations.
    python3 bench/bench_attention.py [--out-dir DIR] [--quick] [--only fixed packed jax]
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import median_ms  # noqa: E402
from _peers import print_met_goals, save_json, start  # noqa: E402

PEAK_TFLOPS = 989.0
CASES = [("4x32x4096x128", 4, 32, 32, 4096, 128), ("4x16x8192x64", 4, 16, 16, 8192, 64),
         ("gqa 32/8 4096x128", 4, 32, 8, 4096, 128)]


def flops(b, hq, sq, sk, d, causal, backward):
    f = 4.0 * b * hq * sq * sk * d * (0.5 if causal else 1.0)
    return f * 3.5 if backward else f


def tensors(torch, b, hq, hk, s, d):
    g = torch.Generator(device="cuda").manual_seed(0)

    def one(h):  # the (batch, positions, heads, head_dim) projections, viewed as (batch, heads, ...)
        return torch.randn(b, s, h, d, device="cuda", generator=g, dtype=torch.bfloat16).transpose(1, 2)
    return one(hq), one(hk), one(hk), one(hq)


def lab_steps(torch, q, k, v, grad_out, causal, packing=None, products=None):
    """lab's forward and forward + backward; `products` (LAB_ATTENTION_PRODUCTS) picks the forward's
    build on an H100 or H200, to time them side by side: "wgmma-serial" without the softmax overlapped
    with the products, "mma.sync" off wgmma altogether."""
    out, grads = torch.empty_like(q), [torch.empty_like(t) for t in (q, k, v)]
    lse_shape = (q.shape[1], q.shape[0]) if packing else q.shape[:3]
    lse = torch.empty(lse_shape, device="cuda", dtype=torch.float32)
    options = dict(causal=causal, **(packing or {}))

    def choosing(step):
        if products is None:
            return step

        def chosen():
            os.environ["LAB_ATTENTION_PRODUCTS"] = products
            try:
                step()
            finally:
                del os.environ["LAB_ATTENTION_PRODUCTS"]
        return chosen

    def forward():
        lab.attention(q, k, v, out, lse, **options)

    def both():
        lab.attention(q, k, v, out, lse, **options)
        lab.attention_backward(grad_out, q, k, v, out, lse, *grads, **options)
    return choosing(forward), choosing(both)


def sdpa_steps(torch, backend, q, k, v, grad_out, causal, mask=None):
    from torch.nn.attention import sdpa_kernel
    F = torch.nn.functional
    gqa = {"enable_gqa": True} if k.shape[1] != q.shape[1] else {}
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))

    def forward():
        with sdpa_kernel(backend), torch.no_grad():
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None, **gqa)

    def both():
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(qg, kg, vg, attn_mask=mask, is_causal=causal and mask is None,
                                                 **gqa)
        torch.autograd.grad(out, (qg, kg, vg), grad_out)
    return forward, both


def timed(torch, timer, step, repeats):
    try:
        return median_ms(step, *timer, repeats=repeats, warmup=3)
    except RuntimeError as e:  # a backend that does not take this case says so
        print(f"    ({str(e).splitlines()[0][:90]})")
        torch.cuda.synchronize()
        return None


def fixed_cases(torch, timer, repeats):
    from torch.nn.attention import SDPBackend
    rows, goals = [], []
    print(f"\n{'case':26s} {'impl':12s} {'fwd ms':>8s} {'TFLOP/s':>8s} {'fwd+bwd ms':>11s} {'TFLOP/s':>8s} "
          f"{'% peak':>7s}")
    for name, b, hq, hk, s, d in CASES:
        q, k, v, grad_out = tensors(torch, b, hq, hk, s, d)
        for causal in (True, False):
            label = f"{name} {'causal' if causal else 'full'}"
            impls = {"lab": lab_steps(torch, q, k, v, grad_out, causal),
                     "lab serial": lab_steps(torch, q, k, v, grad_out, causal, products="wgmma-serial"),
                     "lab mma.sync": lab_steps(torch, q, k, v, grad_out, causal, products="mma.sync"),
                     "sdpa flash": sdpa_steps(torch, SDPBackend.FLASH_ATTENTION, q, k, v, grad_out, causal),
                     "sdpa cudnn": sdpa_steps(torch, SDPBackend.CUDNN_ATTENTION, q, k, v, grad_out, causal)}
            result = {}
            for impl, (forward, both) in impls.items():
                f_ms, b_ms = timed(torch, timer, forward, repeats), timed(torch, timer, both, repeats)
                f_tf = flops(b, hq, s, s, d, causal, False) / f_ms / 1e9 if f_ms else float("nan")
                b_tf = flops(b, hq, s, s, d, causal, True) / b_ms / 1e9 if b_ms else float("nan")
                result[impl] = (f_ms, b_ms)
                print(f"{label:26s} {impl:12s} {f_ms or float('nan'):8.3f} {f_tf:8.1f} {b_ms or float('nan'):11.3f} "
                      f"{b_tf:8.1f} {100 * b_tf / PEAK_TFLOPS:6.1f}%")
                rows.append(dict(case=label, impl=impl, forward_ms=f_ms, forward_backward_ms=b_ms,
                                 forward_tflops=f_tf, forward_backward_tflops=b_tf))
            ours = result["lab"]
            for peer, want in (("sdpa flash", 1.3), ("sdpa cudnn", 0.9)):
                for i, what in ((0, "fwd"), (1, "fwd+bwd")):
                    if result[peer][i] and ours[i]:
                        ratio = result[peer][i] / ours[i]
                        goals.append((f"{label} {what}: {peer} / lab >= {want}", ratio, ratio >= want))
        del q, k, v, grad_out
    return rows, goals


def lognormal_lengths(total=16384, median=512, longest=4096, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    lengths = []
    while sum(lengths) < total:
        lengths.append(int(min(longest, max(1, round(rng.lognormal(math.log(median), 1.0))))))
    lengths[-1] -= sum(lengths) - total
    return [n for n in lengths if n > 0]


def packed_case(torch, timer, repeats):
    from torch.nn.attention import SDPBackend
    hq, hk, d = 32, 8, 128
    lengths = lognormal_lengths()
    total = sum(lengths)
    print(f"\npacked: {len(lengths)} sequences, {total} tokens, lengths lognormal (median 512, sigma 1, at most "
          f"4096, seed 0): min {min(lengths)}, median {sorted(lengths)[len(lengths) // 2]}, max {max(lengths)}")
    g = torch.Generator(device="cuda").manual_seed(1)
    q, k, v, grad_out = (torch.randn(total, h, d, device="cuda", generator=g, dtype=torch.bfloat16)
                         for h in (hq, hk, hk, hq))
    # SDPA's backend that takes a mask does not take grouped heads: its k and v are repeated to hq heads
    k_heads, v_heads = (t.repeat_interleave(hq // hk, dim=1) for t in (k, v))
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32, device="cuda")
    packing = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lengths), max_seqlen_k=max(lengths))
    useful = sum(flops(1, hq, n, n, d, True, False) for n in lengths)
    results = {}
    forward, both = lab_steps(torch, q, k, v, grad_out, True, packing)
    results["lab packed"] = (timed(torch, timer, forward, repeats), timed(torch, timer, both, repeats))
    fq, fk, fv, fg = tensors(torch, 4, hq, hk, 4096, d)
    forward, both = lab_steps(torch, fq, fk, fv, fg, True)
    fixed = (timed(torch, timer, forward, repeats), timed(torch, timer, both, repeats))
    fixed_flops = flops(4, hq, 4096, 4096, d, True, False)
    del fq, fk, fv, fg
    # SDPA over the same sequences: one (1, H, T, D) batch with a block-diagonal causal mask
    seq_id = torch.repeat_interleave(torch.arange(len(lengths), device="cuda"), torch.tensor(lengths, device="cuda"))
    pos = torch.arange(total, device="cuda")
    mask = (seq_id[:, None] == seq_id[None, :]) & (pos[None, :] <= pos[:, None])
    as_batch = [t.transpose(0, 1)[None] for t in (q, k_heads, v_heads, grad_out)]
    forward, both = sdpa_steps(torch, SDPBackend.EFFICIENT_ATTENTION, *as_batch, True, mask=mask)
    results["sdpa block-diagonal"] = (timed(torch, timer, forward, repeats), timed(torch, timer, both, repeats))
    del mask
    # and padded to the longest: (sequences, H, longest, D) with a causal key-padding mask
    longest = max(lengths)
    padded = []
    for t in (q, k_heads, v_heads, grad_out):
        p = t.new_zeros(len(lengths), longest, t.shape[1], d)
        for i, (start, n) in enumerate(zip(cu[:-1].tolist(), lengths)):
            p[i, :n] = t[start:start + n]
        padded.append(p.transpose(1, 2))
    keep = torch.arange(longest, device="cuda")[None, :] < torch.tensor(lengths, device="cuda")[:, None]
    causal = torch.ones(longest, longest, dtype=torch.bool, device="cuda").tril()
    pad_mask = (causal[None] & keep[:, None, :])[:, None] | ~keep[:, None, :, None]  # padded rows see all: no NaN
    forward, both = sdpa_steps(torch, SDPBackend.EFFICIENT_ATTENTION, *padded, True, mask=pad_mask)
    results["sdpa padded"] = (timed(torch, timer, forward, repeats), timed(torch, timer, both, repeats))

    print(f"{'impl':22s} {'fwd ms':>8s} {'eff TFLOP/s':>12s} {'fwd+bwd ms':>11s} {'eff TFLOP/s':>12s}")
    rows = []
    for name, (f_ms, b_ms) in list(results.items()) + [("lab fixed 4x4096", fixed)]:
        work = fixed_flops if name.startswith("lab fixed") else useful
        f_tf = work / f_ms / 1e9 if f_ms else float("nan")
        b_tf = work * 3.5 / b_ms / 1e9 if b_ms else float("nan")
        print(f"{name:22s} {f_ms or float('nan'):8.3f} {f_tf:12.1f} {b_ms or float('nan'):11.3f} {b_tf:12.1f}")
        rows.append(dict(impl=name, forward_ms=f_ms, forward_backward_ms=b_ms, forward_tflops=f_tf,
                         forward_backward_tflops=b_tf))
    packed_rate = useful / results["lab packed"][0]
    fixed_rate = fixed_flops / fixed[0]
    goals = [("packed fwd effective / fixed rate >= 0.85", packed_rate / fixed_rate, packed_rate / fixed_rate >= 0.85),
             ("packed fwd+bwd effective / fixed rate >= 0.85", (useful / results["lab packed"][1]) / (fixed_flops / fixed[1]),
              (useful / results["lab packed"][1]) / (fixed_flops / fixed[1]) >= 0.85)]
    return rows, goals, lengths


def jax_case(repeats):
    """jit(value_and_grad) of a causal attention, (4, 4096, 32, 128) bfloat16 in jax.nn's layout: lab.jax
    against jax.nn.dot_product_attention with implementation "cudnn" and "xla". Wall-clock medians of
    block_until_ready (jax's own timing), after warm-up."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # torch's tensors share the GPU
    try:
        import jax
        import jax.numpy as jnp
        import lab.jax as ljax
    except ImportError as e:
        print(f"\njax is not importable ({e}): its rows are left out")
        return [], []
    import statistics
    import time
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    q = jax.random.normal(keys[0], (4, 4096, 32, 128)).astype(jnp.bfloat16)
    k, v = (jax.random.normal(key, (4, 4096, 32, 128)).astype(jnp.bfloat16) for key in keys[1:])

    def step(attend):
        return jax.jit(jax.value_and_grad(lambda q, k, v: attend(q, k, v).astype(jnp.float32).sum(), (0, 1, 2)))
    impls = {"lab.jax": step(lambda q, k, v: ljax.dot_product_attention(q, k, v, is_causal=True)),
             "jax.nn cudnn": step(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                                                               implementation="cudnn")),
             "jax.nn xla": step(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                                                             implementation="xla"))}
    work = flops(4, 32, 4096, 4096, 128, True, True)
    print(f"\njax, jit(value_and_grad), (4, 4096, 32, 128) bf16 causal")
    times, rows = {}, []
    for name, fn in impls.items():
        try:
            for _ in range(3):
                jax.block_until_ready(fn(q, k, v))
            samples = []
            for _ in range(repeats):
                started = time.perf_counter()
                jax.block_until_ready(fn(q, k, v))
                samples.append((time.perf_counter() - started) * 1e3)
            times[name] = statistics.median(samples)
        except Exception as e:  # a backend this jax or GPU lacks says so
            print(f"    {name}: {str(e).splitlines()[0][:100]}")
            continue
        print(f"{name:14s} {times[name]:9.3f} ms {work / times[name] / 1e9:8.1f} TFLOP/s")
        rows.append(dict(impl=name, ms=times[name], tflops=work / times[name] / 1e9))
    goals = []
    if "lab.jax" in times:
        for peer, want in (("jax.nn cudnn", 1.0), ("jax.nn xla", 3.0)):
            if peer in times:
                ratio = times[peer] / times["lab.jax"]
                goals.append((f"jax value_and_grad: {peer} / lab.jax >= {want}", ratio, ratio >= want))
    return rows, goals


def main():
    started = start("bench_attention.py", __doc__, groups=["fixed", "packed", "jax"])
    if started is None:
        return
    args, torch, _, timer = started
    repeats = 5 if args.quick else 20
    rows, goals, packed_rows, lengths, jax_rows = [], [], [], [], []
    if "fixed" in args.only:
        rows, goals = fixed_cases(torch, timer, repeats)
    if "packed" in args.only:
        packed_rows, packed_goals, lengths = packed_case(torch, timer, repeats)
        goals += packed_goals
    if "jax" in args.only:
        torch.cuda.empty_cache()  # jax allocates its own pool next
        jax_rows, jax_goals = jax_case(repeats)
        goals += jax_goals
    print_met_goals(goals, width=56)
    save_json(args.out_dir, "attention.json", torch, fixed=rows, packed=packed_rows, packed_lengths=lengths,
              jax=jax_rows, peak_tflops=PEAK_TFLOPS, goals=[list(g) for g in goals])


if __name__ == "__main__":
    main()
