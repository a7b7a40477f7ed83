"""The rotary position embedding, forward + backward of q and k as a Llama's attention makes them:
q (4, 32, 2048, 128) and k (4, 8, 2048, 128) bfloat16, the transposed views of the (batch,
positions, heads, head_dim) projections, with Hugging Face's cos/sin tables (4, 2048, 128). Side by
side in one run on the same tensors: transformers' formula in eager mode and under torch.compile,
Liger-Kernel's liger_rotary_pos_emb (where importable: carried as a wheel), lab.nn's
apply_rotary_pos_emb (autograd), and lab.rope + lab.rope_backward alone on outputs made once.
Two modes: one step after a synchronization (the goal's; the host's time to issue it shows) and ten
back to back (the GPU's time per step shows), and the host's time to issue a step (wall clock over
ten steps issued after a sync, none waited for). Medians of event-timed repeats after warm-up; ratios
are the peer's time over lab.nn's for one step (> 1: lab is faster); TB/s counts the bytes that must
move (q and k read and written, forward and backward) back to back.
    python3 bench/bench_rope.py [--out-dir DIR] [--quick]
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import median_ms  # noqa: E402
from _peers import print_met_goals, save_json, start  # noqa: E402

B, S, HQ, HK, D = 4, 2048, 32, 8, 128
BACK_TO_BACK = 10


def hf_formula(torch):
    def rotate_half(x):
        return torch.cat((-x[..., D // 2:], x[..., : D // 2]), dim=-1)

    def apply(q, k, cos, sin):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    return apply


def make(torch):
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(B, S, HQ, D, device="cuda", generator=g, dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
    k = torch.randn(B, S, HK, D, device="cuda", generator=g, dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
    inv_freq = 1.0 / (500000 ** (torch.arange(0, D, 2, device="cuda", dtype=torch.float32) / D))
    angles = torch.arange(S, device="cuda", dtype=torch.float32)[:, None] * inv_freq[None]
    emb = torch.cat((angles, angles), dim=-1)[None].expand(B, S, D)
    grads = (torch.randn(q.shape, device="cuda", generator=g, dtype=torch.bfloat16),
             torch.randn(k.shape, device="cuda", generator=g, dtype=torch.bfloat16))
    return q, k, emb.cos().to(torch.bfloat16).contiguous(), emb.sin().to(torch.bfloat16).contiguous(), grads


def fwd_bwd(torch, apply, q, k, cos, sin, grads):
    def step():
        outs = apply(q, k, cos, sin)
        return torch.autograd.grad(outs, (q, k), grad_outputs=grads)
    return step


def lab_kernels(torch, q, k, cos, sin, grads):
    """lab.rope then lab.rope_backward, outputs made once: the two launches alone."""
    q_, k_ = q.detach(), k.detach()
    q_out, k_out, dq, dk = torch.empty_like(q_), torch.empty_like(k_), torch.empty_like(q_), torch.empty_like(k_)

    def step():
        lab.rope(q_, k_, cos, sin, q_out, k_out)
        lab.rope_backward(grads[0], grads[1], cos, sin, dq, dk)
    return step


def host_us_per_step(torch, step, repeats):
    """The host's microseconds to issue one step: BACK_TO_BACK steps after a sync, none waited for."""
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(BACK_TO_BACK):
            step()
        samples.append((time.perf_counter() - started) / BACK_TO_BACK * 1e6)
    torch.cuda.synchronize()
    return statistics.median(samples)


def liger_or_none():
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb
        return liger_rotary_pos_emb
    except ImportError as e:
        print(f"Liger-Kernel is not importable ({e}): its row is left out")
        return None


def main():
    started = start("bench_rope.py", __doc__)
    if started is None:
        return
    args, torch, _, timer = started
    import lab.nn
    repeats = 10 if args.quick else 50
    q, k, cos, sin, grads = make(torch)
    hf = hf_formula(torch)
    impls = [("lab.nn.apply_rotary_pos_emb", fwd_bwd(torch, lab.nn.apply_rotary_pos_emb, q, k, cos, sin, grads)),
             ("lab.rope + rope_backward", lab_kernels(torch, q, k, cos, sin, grads)),
             ("transformers, eager", fwd_bwd(torch, hf, q, k, cos, sin, grads)),
             ("transformers, torch.compile", fwd_bwd(torch, torch.compile(hf), q, k, cos, sin, grads))]
    liger = liger_or_none()
    if liger is not None:
        impls.append(("Liger-Kernel", fwd_bwd(torch, liger, q, k, cos, sin, grads)))
    moved = 4 * (q.numel() + k.numel()) * q.element_size()
    print(f"\nrope fwd+bwd, q {tuple(q.shape)} k {tuple(k.shape)} bf16, transposed views")
    print(f"{'implementation':32s} {'one call ms':>12s} {'vs lab.nn':>10s} {'back to back ms':>16s} {'TB/s':>7s} "
          f"{'host us/step':>13s}")
    times, many, host = {}, {}, {}
    for name, step in impls:
        times[name] = median_ms(step, *timer, repeats=repeats, warmup=5)
        many[name] = median_ms(lambda: [step() for _ in range(BACK_TO_BACK)], *timer, repeats=max(repeats // 5, 3),
                               warmup=2) / BACK_TO_BACK
        host[name] = host_us_per_step(torch, step, max(repeats // 5, 3))
    ours = times["lab.nn.apply_rotary_pos_emb"]
    for name, ms in times.items():
        print(f"{name:32s} {ms:12.3f} {ms / ours:10.2f} {many[name]:16.3f} {moved / many[name] / 1e9:7.2f} "
              f"{host[name]:13.1f}")
    goals = [("lab.nn rope fwd+bwd <= 0.12 ms", ours, ours <= 0.12)]
    for peer in ("transformers, torch.compile", "Liger-Kernel"):
        if peer in times:
            goals.append((f"{peer} / lab.nn >= 5", times[peer] / ours, times[peer] / ours >= 5))
    print_met_goals(goals, width=44, digits=3)
    save_json(args.out_dir, "rope.json", torch, times_ms=times, back_to_back_ms=many, host_us_per_step=host,
              bytes_moved=moved,
              goals=[list(g) for g in goals])


if __name__ == "__main__":
    main()
