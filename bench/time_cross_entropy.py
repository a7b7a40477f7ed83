"""lab.cross_entropy with its gradient written into the logits (bfloat16 4096 x 131072, bench_losses.py's
headline case) beside torch's forward + backward, in one line: for trying a kernel change quickly.
    python3 bench/time_cross_entropy.py LABEL
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from _peers import peers  # noqa: E402
from lab._timing import median_ms, torch_timer  # noqa: E402


def main():
    found = peers("time_cross_entropy")
    if found is None:
        return 1
    torch = found[0]
    F = torch.nn.functional
    logits = torch.randn(4096, 131072, device="cuda", dtype=torch.bfloat16)
    target, loss = torch.randint(0, 131072, (4096,), device="cuda"), torch.empty((), device="cuda")
    timer = torch_timer(torch)
    ours = median_ms(lambda: lab.cross_entropy(logits, target, loss, grad=logits), *timer)
    leaf = logits.clone().requires_grad_()
    eager = median_ms(lambda: torch.autograd.grad(F.cross_entropy(leaf, target), (leaf,)), *timer)
    print(f"{sys.argv[1] if len(sys.argv) > 1 else 'lab'}: lab {ours:.3f} ms, torch eager {eager:.3f} ms, "
          f"{eager / ours:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
