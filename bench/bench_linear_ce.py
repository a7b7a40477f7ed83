"""The loss head without its logits: lab.linear_cross_entropy against Liger-Kernel's
LigerFusedLinearCrossEntropyLoss, Apple's Cut Cross-Entropy (cut_cross_entropy.linear_cross_entropy),
torch eager (F.cross_entropy((h @ W.T).float(), t)) and the three products alone (torch.mm), side
by side in one run on the same tensors. Forward + backward to d hidden and d weight, bfloat16:
  - hidden (8192, 4096), weight (128256, 4096) of std 0.02 (a Llama's initialization: logits of std
    1.3): lab's C function (scratch from lab's pool), lab.nn (autograd; scratch a torch tensor), both
    peers, torch eager, the three products alone (together and each); lab and CCE with 64 MiB of
    scratch, lab with 128 and 512 MiB; lab and CCE on a peaked softmax (logits of std 6.4), where CCE skips most of the
    gradient;
  - vocabularies of GPT-2 (50257), Qwen (151936) and Gemma (256000, softcap 30), lab against both
    peers;
  - memory beyond dh and dW: torch's allocator's peak during one forward + backward over what was
    allocated before, less dh and dW (lab.nn's scratch is a torch tensor, so it is counted);
  - grad_weight's error against a float32 reference on the 128256 case, for lab and each peer.
Liger and CCE are pure Python over Triton: carried as wheels where they are not installed; a peer
missing is a row left out, said so. Medians of event-timed repeats after warm-up; ratios are the
peer's time over lab's (> 1: lab is faster).
    python3 bench/bench_linear_ce.py [--out-dir DIR] [--quick]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import median_ms  # noqa: E402
from _peers import extra_peak_mib, print_met_goals, save_json, start  # noqa: E402

T, D, V = 8192, 4096, 128256


def load_peers():
    """name -> loss(hidden, weight, target, softcap) for the peers importable here."""
    found = {}
    try:
        from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss

        def liger(h, w, t, softcap=None):
            return LigerFusedLinearCrossEntropyLoss(softcap=softcap)(w, h, t)
        found["Liger"] = liger
    except ImportError as e:
        print(f"Liger-Kernel is not importable ({e}): its rows are left out")
    try:
        from cut_cross_entropy import linear_cross_entropy as cce

        def cut(h, w, t, softcap=None):
            return cce(h, w, t, softcap=softcap)
        found["CCE"] = cut
    except ImportError as e:
        print(f"cut-cross-entropy is not importable ({e}): its rows are left out")
    return found


def make(torch, vocab, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    hidden = torch.randn(T, D, device="cuda", generator=g).to(torch.bfloat16).requires_grad_()
    weight = (torch.randn(vocab, D, device="cuda", generator=g) * 0.02).to(torch.bfloat16).requires_grad_()
    target = torch.randint(0, vocab, (T,), device="cuda", generator=g)
    return hidden, weight, target


def fwd_bwd(torch, loss_fn, hidden, weight, target, **kw):
    def step():
        return torch.autograd.grad(loss_fn(hidden, weight, target, **kw), (hidden, weight))
    return step


def lab_nn(h, w, t, softcap=None, max_scratch_bytes=None):
    import lab.nn
    return lab.nn.linear_cross_entropy(h, w, t, softcap=softcap, max_scratch_bytes=max_scratch_bytes)


def torch_eager(torch):
    F = torch.nn.functional

    def loss(h, w, t, softcap=None):
        logits = (h @ w.T).float()
        if softcap:
            logits = softcap * torch.tanh(logits / softcap)
        return F.cross_entropy(logits, t)
    return loss


def lab_c_step(torch, hidden, weight, target, **kw):
    """The C function with its outputs made once: the forward and backward in one call."""
    loss = torch.empty((), device="cuda")
    dh, dw = torch.empty_like(hidden), torch.empty_like(weight)
    h, w = hidden.detach(), weight.detach()
    return lambda: lab.linear_cross_entropy(h, w, target, loss, grad_hidden=dh, grad_weight=dw, **kw)


def products(torch, hidden, weight):
    """The three products at full size with torch.mm, together and each alone: name -> step."""
    h, w = hidden.detach(), weight.detach()
    logits = torch.empty(T, w.shape[0], device="cuda", dtype=torch.bfloat16)
    dh, dw = torch.empty_like(h), torch.empty_like(w)
    each = {"logits = h @ W.T (torch.mm)": lambda: torch.mm(h, w.T, out=logits),
            "dh = dlogits @ W (torch.mm)": lambda: torch.mm(logits, w, out=dh),
            "dW = dlogits.T @ h (torch.mm)": lambda: torch.mm(logits.T, h, out=dw)}

    def all_three():
        for step in each.values():
            step()
    return {"3 products alone (torch.mm)": all_three, **each}


def beyond_grads_mib(torch, step, hidden, weight):
    """MiB at torch's allocator's peak during step() beyond what was allocated before, less dh, dW."""
    grads = hidden.numel() * hidden.element_size() + weight.numel() * weight.element_size()
    return extra_peak_mib(torch, step) - grads / 2**20


def grad_weight_error(torch, loss_fn, hidden, weight, target, reference):
    _, dw = fwd_bwd(torch, loss_fn, hidden, weight, target)()
    diff = dw.float() - reference
    return dict(relative_frobenius=(diff.norm() / reference.norm()).item(),
                max_abs_over_max=(diff.abs().max() / reference.abs().max()).item())


def main():
    started = start("bench_linear_ce.py", __doc__)
    if started is None:
        return
    args, torch, _, timer = started
    peers = load_peers()
    repeats = 3 if args.quick else 10
    rows, memory, errors = [], [], {}

    def timed(case, name, step):
        ms = median_ms(step, *timer, repeats=repeats, warmup=2)
        rows.append(dict(case=case, impl=name, ms=ms))
        print(f"  {case:34s} {name:26s} {ms:8.2f} ms", flush=True)
        return ms

    print(f"fused linear cross-entropy, bf16, hidden ({T}, {D}), forward + backward")
    hidden, weight, target = make(torch, V)
    main_case = f"V={V}"
    impls = [("lab", lab_c_step(torch, hidden, weight, target)),
             ("lab.nn", fwd_bwd(torch, lab_nn, hidden, weight, target))]
    impls += [(name, fwd_bwd(torch, fn, hidden, weight, target)) for name, fn in peers.items()]
    impls += [("torch eager", fwd_bwd(torch, torch_eager(torch), hidden, weight, target))]
    impls += list(products(torch, hidden, weight).items())
    for name, step in impls:
        timed(main_case, name, step)
    if "CCE" in peers:  # CCE skips the gradient's blocks whose softmax is negligible: a peaked softmax is faster
        peaked = (weight.detach() * 5).requires_grad_()
        timed(main_case + ", logits std 6.4", "lab", lab_c_step(torch, hidden, peaked, target))
        timed(main_case + ", logits std 6.4", "CCE", fwd_bwd(torch, peers["CCE"], hidden, peaked, target))
        del peaked
    small = 64 << 20
    timed(main_case + ", 64 MiB scratch", "lab", lab_c_step(torch, hidden, weight, target, max_scratch_bytes=small))
    timed(main_case + ", 64 MiB scratch", "lab.nn",
          fwd_bwd(torch, lab_nn, hidden, weight, target, max_scratch_bytes=small))
    if "CCE" in peers:
        timed(main_case + ", 64 MiB scratch", "CCE", fwd_bwd(torch, peers["CCE"], hidden, weight, target))
    for mib in (128, 512):  # the trade: fewer chunks, fewer passes over grad_weight, more memory
        timed(main_case + f", {mib} MiB scratch", "lab",
              lab_c_step(torch, hidden, weight, target, max_scratch_bytes=mib << 20))

    print("\nmemory beyond dh and dW (torch's allocator)")
    mem_impls = [("lab.nn", fwd_bwd(torch, lab_nn, hidden, weight, target)),
                 ("lab.nn, 64 MiB scratch", fwd_bwd(torch, lab_nn, hidden, weight, target, max_scratch_bytes=small))]
    mem_impls += [(name, fwd_bwd(torch, fn, hidden, weight, target)) for name, fn in peers.items()]
    mem_impls += [("torch eager", fwd_bwd(torch, torch_eager(torch), hidden, weight, target))]
    for name, step in mem_impls:
        mib = beyond_grads_mib(torch, step, hidden, weight)
        memory.append(dict(impl=name, mib=mib))
        print(f"  {name:34s} {mib:10.1f} MiB", flush=True)

    # the unfused loss on given logits, its gradient written into them (Liger's habit)
    logits = (hidden.detach()[:4096] @ weight.detach().T).requires_grad_()
    small_target = target[:4096]

    def into_logits():
        import lab.nn
        return torch.autograd.grad(lab.nn.cross_entropy(logits, small_target, grad_into_logits=True), (logits,))
    mib = extra_peak_mib(torch, into_logits)
    memory.append(dict(impl="lab.nn.cross_entropy(grad_into_logits), 4096x128256, beyond the logits", mib=mib))
    print(f"  {memory[-1]['impl']:34s} {mib:10.1f} MiB", flush=True)
    del logits

    print("\ngrad_weight against a float32 reference (relative Frobenius error, max error / max)")
    h32 = hidden.detach().float().requires_grad_()
    w32 = weight.detach().float().requires_grad_()
    reference = torch.autograd.grad(torch.nn.functional.cross_entropy(h32 @ w32.T, target), (w32,))[0]
    del h32, w32
    for name, fn in [("lab.nn", lab_nn)] + list(peers.items()):
        errors[name] = grad_weight_error(torch, fn, hidden, weight, target, reference)
        print(f"  {name:34s} {errors[name]['relative_frobenius']:.3e}  {errors[name]['max_abs_over_max']:.3e}")
    del reference, hidden, weight, target, impls, mem_impls
    torch.cuda.empty_cache()

    for vocab, softcap in [(50257, None), (151936, None), (256000, 30.0)]:
        case = f"V={vocab}" + (f", softcap {softcap:g}" if softcap else "")
        hidden, weight, target = make(torch, vocab, seed=vocab)
        timed(case, "lab", lab_c_step(torch, hidden, weight, target, softcap=softcap))
        for name, fn in peers.items():
            timed(case, name, fwd_bwd(torch, fn, hidden, weight, target, softcap=softcap))
        del hidden, weight, target
        torch.cuda.empty_cache()

    def ms(case, impl):
        r = next((r for r in rows if r["case"] == case and r["impl"] == impl), None)
        return r["ms"] if r else None

    print(f"\n{'case':34s} {'impl':26s} {'ms':>8s} {'/ lab':>7s}")
    for r in rows:
        lab_ms = ms(r["case"], "lab")
        print(f"{r['case']:34s} {r['impl']:26s} {r['ms']:8.2f} {r['ms'] / lab_ms:7.2f}")

    goals = []
    lab_ms = ms(main_case, "lab")
    goals.append((f"{main_case}: lab <= 38.5 ms", lab_ms, lab_ms <= 38.5))
    for peer, limit in (("CCE", 0.75), ("Liger", 0.7)):
        if ms(main_case, peer):
            ratio = lab_ms / ms(main_case, peer)
            goals.append((f"{main_case}: lab / {peer} <= {limit}", ratio, ratio <= limit))
    ratio = lab_ms / ms(main_case, "3 products alone (torch.mm)")
    goals.append((f"{main_case}: lab / the 3 products <= 1.15", ratio, ratio <= 1.15))
    if ms(main_case, "CCE"):
        ratio = ms(main_case + ", 64 MiB scratch", "lab") / ms(main_case, "CCE")
        goals.append(("64 MiB scratch: lab / CCE <= 0.9", ratio, ratio <= 0.9))
        peaked = main_case + ", logits std 6.4"
        ratio = ms(peaked, "lab") / ms(peaked, "CCE")
        goals.append(("logits std 6.4: lab / CCE <= 0.75", ratio, ratio <= 0.75))
    for m in memory:
        if m["impl"].startswith("lab.nn.cross_entropy"):
            goals.append(("memory, lab.nn.cross_entropy grad_into_logits <= 1 MiB", m["mib"], m["mib"] <= 1))
        elif m["impl"].startswith("lab.nn"):
            bound = (64 if "64 MiB" in m["impl"] else 256) + 8
            goals.append((f"memory, {m['impl']} <= {bound} MiB", m["mib"], m["mib"] <= bound))
    for case in sorted({r["case"] for r in rows if not r["case"].startswith(main_case)}):
        for peer in peers:
            if ms(case, peer):
                ratio = ms(case, peer) / ms(case, "lab")
                goals.append((f"{case}: {peer} / lab > 1", ratio, ratio > 1))
    if "Liger" in errors:
        ours, theirs = errors["lab.nn"]["relative_frobenius"], errors["Liger"]["relative_frobenius"]
        goals.append(("grad_weight error: lab <= Liger's", ours / theirs, ours <= theirs))
    print_met_goals(goals, width=52, digits=3)
    save_json(args.out_dir, "linear_ce.json", torch, peers=sorted(peers), rows=rows, memory_mib=memory,
              grad_weight_error=errors, goals=[dict(goal=g, measured=v, met=m) for g, v, m in goals])


if __name__ == "__main__":
    main()
