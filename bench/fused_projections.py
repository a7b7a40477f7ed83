"""Whether one product over concatenated weights beats separate ones: a Llama layer's input
projections (bench_llama's model: hidden 2048, q|k|v 2048 + 1024 + 1024, gate|up 8192 + 8192) at 8192
and 16384 tokens, bf16, forward + backward (the input's gradient summed from the branches by
autograd, against one product) and forward alone; event-timed medians, torch only.
    python3 bench/fused_projections.py
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from lab._timing import median_ms, torch_timer  # noqa: E402


def timed(fn):
    """Median ms of fn(): 30 event-timed calls after 5 untimed."""
    return median_ms(fn, *torch_timer(torch), repeats=30, warmup=5)


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
