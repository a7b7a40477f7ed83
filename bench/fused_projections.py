"""Whether one product over concatenated weights beats separate ones: a Llama layer's input
projections (bench_llama's model: hidden 2048, q|k|v 2048 + 1024 + 1024, gate|up 8192 + 8192) at 8192
and 16384 tokens, bf16, forward + backward (the input's gradient summed from the branches by
autograd, against one product) and forward alone; event-timed medians, torch only.
    python3 bench/fused_projections.py
"""
import statistics

import torch
import torch.nn.functional as F

def timed(fn, reps=30, warm=5):
    """Median ms of fn() over `reps` event-timed calls after `warm` untimed ones."""
    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)

def case(tokens, hidden, outs):
    """Prints one comparison; returns the ms the single product saves, forward + backward."""
    dev = torch.device("cuda")
    x = torch.randn(tokens, hidden, device=dev, dtype=torch.bfloat16, requires_grad=True)
    ws = [torch.randn(o, hidden, device=dev, dtype=torch.bfloat16, requires_grad=True) for o in outs]
    fused = torch.cat([w.detach() for w in ws]).requires_grad_()
    grads = [torch.randn(tokens, o, device=dev, dtype=torch.bfloat16) for o in outs]
    gfused = torch.cat(grads, dim=1)
    def separate():
        ys = [F.linear(x, w) for w in ws]
        torch.autograd.backward(ys, grads)
        x.grad = None
        for w in ws:
            w.grad = None
    def one():
        y = F.linear(x, fused)
        y.backward(gfused)
        x.grad = None
        fused.grad = None
    def separate_fwd():
        with torch.no_grad():
            [F.linear(x, w) for w in ws]
    def one_fwd():
        with torch.no_grad():
            F.linear(x, fused)
    a, b = timed(separate), timed(one)
    c, d = timed(separate_fwd), timed(one_fwd)
    print(f"{tokens}x{hidden} -> {outs}: fwd+bwd separate {a:.3f} ms fused {b:.3f} ms (saves {a-b:.3f}); "
          f"fwd {c:.3f} / {d:.3f}", flush=True)
    return a - b

def main():
    if not torch.cuda.is_available():
        print("fused_projections.py: needs a CUDA GPU")
        return
    for tokens in (8192, 16384):
        saved = case(tokens, 2048, [2048, 1024, 1024]) + case(tokens, 2048, [8192, 8192])
        print(f"tokens {tokens}: per layer saves {saved:.3f} ms, 8 layers {8 * saved:.2f} ms")


if __name__ == "__main__":
    main()
