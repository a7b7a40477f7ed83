"""lab's attention kernels beside SDPA's flash backend on bench_attention.py's cases, for Nsight
Compute (`make profile-attention`): for each case the forward, then the backward, of lab and then
of torch's flash attention, once each. Each case's name goes to stderr before its kernels."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from bench_attention import lab_steps, sdpa_steps, tensors  # noqa: E402

CASES = [(4, 32, 32, 4096, 128, True), (4, 16, 16, 8192, 64, False)]  # batch, heads q, k, positions, dim, causal


def main():
    import torch
    from torch.nn.attention import SDPBackend
    for b, hq, hk, s, d, causal in CASES:
        q, k, v, grad_out = tensors(torch, b, hq, hk, s, d)
        for name, (forward, both) in [("lab", lab_steps(torch, q, k, v, grad_out, causal)),
                                      ("sdpa flash", sdpa_steps(torch, SDPBackend.FLASH_ATTENTION, q, k, v,
                                                                grad_out, causal))]:
            print(f"{name} {b}x{hq}x{s}x{d} {'causal' if causal else 'full'}: forward, then forward + backward",
                  file=sys.stderr)
            forward()
            both()
        torch.cuda.synchronize()
    print(f"lab {lab.__file__}", file=sys.stderr)


if __name__ == "__main__":
    main()
