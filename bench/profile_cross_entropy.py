"""lab's cross_entropy with its gradient, once with its ring rows (as launched) and once streamed
(lab.lab._rowwise_ring_steps(0)), on bfloat16 logits of 8192 x 32000 and 4096 x 128256 - for Nsight
Compute to set the two walks side by side (`make profile-cross-entropy`). Prints each case to stderr."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from _peers import peers  # noqa: E402


def main():
    found = peers("profile_cross_entropy")
    if found is None:
        return 1
    torch = found[0]
    for rows, n in ((8192, 32000), (4096, 128256)):
        logits = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        target, loss = torch.randint(0, n, (rows,), device="cuda"), torch.empty((), device="cuda")
        grad = torch.empty_like(logits)
        for label, steps in (("ring", -1), ("streamed", 0)):
            previous = lab.lab._rowwise_ring_steps(steps)
            try:
                print(f"bfloat16 {rows} x {n}, {label}", file=sys.stderr)
                lab.cross_entropy(logits, target, loss, grad=grad)
            finally:
                lab.lab._rowwise_ring_steps(previous)
        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
