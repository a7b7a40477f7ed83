"""Temporary: times lab.rope + lab.rope_backward for each LAB_ROPE_VARIANT (one subprocess each)."""
import os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def one():
    import torch, lab
    from lab._timing import median_ms as _m

    def median_ms(fn, repeats):
        return _m(fn, lambda: torch.cuda.Event(enable_timing=True), lambda a, b: a.elapsed_time(b), repeats=repeats)
    bf16 = torch.bfloat16
    B, S, HQ, HK, D = 4, 2048, 32, 8, 128
    res = []
    for layout in ("transposed", "contiguous"):
        if layout == "transposed":
            q = torch.randn(B, S, HQ, D, device="cuda", dtype=bf16).transpose(1, 2)
            k = torch.randn(B, S, HK, D, device="cuda", dtype=bf16).transpose(1, 2)
        else:
            q = torch.randn(B, HQ, S, D, device="cuda", dtype=bf16)
            k = torch.randn(B, HK, S, D, device="cuda", dtype=bf16)
        ang = torch.randn(B, S, D, device="cuda")
        cos, sin = ang.cos().to(bf16), ang.sin().to(bf16)
        qo, ko, dq, dk = (torch.empty_like(t) for t in (q, k, q, k))
        lab.rope(q, k, cos, sin, qo, ko)
        c, s = cos[:, None].float(), sin[:, None].float()
        def ref(x):
            xf = x.float(); rh = torch.cat((-xf[..., D // 2:], xf[..., :D // 2]), -1)
            return xf * c + rh * s
        err = max((qo.float() - ref(q)).abs().max().item(), (ko.float() - ref(k)).abs().max().item())
        def step():
            lab.rope(q, k, cos, sin, qo, ko)
            lab.rope_backward(qo, ko, cos, sin, dq, dk)
        def ten():
            for _ in range(10):
                step()
        fwd = median_ms(lambda: lab.rope(q, k, cos, sin, qo, ko), repeats=50)
        t10 = median_ms(ten, repeats=20) / 10
        nbytes = 2 * (q.numel() + k.numel()) * 2
        cp = median_ms(lambda: (qo.copy_(q), ko.copy_(k)), repeats=50)
        res.append(f"copy {nbytes / cp / 1e9:.2f} TB/s")
        res.append(f"{layout:10s} fwd {fwd:.4f} ms ({nbytes / fwd / 1e9:.2f} TB/s)  fwd+bwd x10 {t10:.4f} ms  err {err:.3g}")
    print(" | ".join(res))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "one":
        one()
    else:
        for v in sys.argv[1:] or ["0g", "0", "1", "2", "3", "4", "5", "6"]:
            grid = "1" if v.endswith("g") else "0"
            out = subprocess.run([sys.executable, __file__, "one"],
                                 env={**os.environ, "LAB_ROPE_VARIANT": v.rstrip("g"), "LAB_ROPE_GRID": grid},
                                 capture_output=True, text=True)
            print(f"variant {v}: {out.stdout.strip()} {out.stderr.strip()[-300:]}", flush=True)
