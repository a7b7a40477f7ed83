"""The rotary embedding's and SwiGLU's kernels on their benchmarks' inputs, for Nsight Compute (`make
profile-rope-glu`): lab.rope and lab.rope_backward on bench_rope.py's Llama-sized q and k (transposed
views, bfloat16), then SwiGLU forward + backward on bench_swiglu.py's 16384 x 4096 bfloat16 - twice
called directly on buffers made once, twice through lab.nn.swiglu and autograd - so the kernels'
times in the two settings stand side by side (bench_swiglu.py measured the direct calls slower).
Each case's name goes to stderr before its kernels, in launch order."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402


def main():
    import torch
    import lab.nn
    bf16 = torch.bfloat16
    q = torch.randn(4, 2048, 32, 128, device="cuda", dtype=bf16).transpose(1, 2)
    k = torch.randn(4, 2048, 8, 128, device="cuda", dtype=bf16).transpose(1, 2)
    angles = torch.randn(1, 2048, 128, device="cuda")
    cos, sin = angles.cos().to(bf16), angles.sin().to(bf16)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    for name, fn in [("lab rope", lambda: lab.rope(q, k, cos, sin, q_out, k_out)),
                     ("lab rope_backward", lambda: lab.rope_backward(q_out, k_out, cos, sin, q, k))]:
        print(name, file=sys.stderr)
        fn()
    del q, k, q_out, k_out
    gate, up, dy = (torch.randn(16384, 4096, device="cuda", dtype=bf16) for _ in range(3))
    out, grad_gate, grad_up = (torch.empty_like(gate) for _ in range(3))
    for _ in range(2):
        print("lab swiglu + swiglu_backward, direct", file=sys.stderr)
        lab.swiglu(gate, up, out)
        lab.swiglu_backward(dy, gate, up, grad_gate, grad_up)
    gate.requires_grad_(), up.requires_grad_()
    for _ in range(2):
        print("lab.nn.swiglu forward + backward", file=sys.stderr)
        torch.autograd.grad(lab.nn.swiglu(gate, up), (gate, up), dy)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
