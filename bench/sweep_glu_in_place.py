"""Whether the GLU backward runs faster writing its gradients over its inputs (as Liger-Kernel's does:
grad_gate into gate, grad_up into up) than into arrays of their own, and the same for the backward
that also makes the product (swiglu_linear's): bf16 16384 x 4096. Every timed call first restores
gate and up from pristine copies (the in-place form destroys them), and the copies alone are timed
too, so each form's backward is its time less theirs. Ten calls back to back per event-timed sample,
the median of 20; the forms alternated over three rounds.
    python3 bench/sweep_glu_in_place.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from _peers import peers  # noqa: E402
from bench_bandwidth import per_call_ms  # noqa: E402
from lab._timing import torch_timer  # noqa: E402


def main():
    found = peers("sweep_glu_in_place")
    if found is None:
        return 1
    torch = found[0]
    timer = torch_timer(torch)
    rows, n = 16384, 4096
    grad0, gate0, up0 = (torch.randn(rows, n, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    grad, gate, up = torch.empty_like(grad0), torch.empty_like(gate0), torch.empty_like(up0)
    grad_gate, grad_up, product = torch.empty_like(gate0), torch.empty_like(up0), torch.empty_like(gate0)

    def restore():
        grad.copy_(grad0)
        gate.copy_(gate0)
        up.copy_(up0)

    forms = {
        "restore only": lambda: None,
        "gradients apart": lambda: lab.swiglu_backward(grad, gate, up, grad_gate, grad_up),
        "gradients over gate, up": lambda: lab.swiglu_backward(grad, gate, up, gate, up),
        "product, all apart": lambda: lab.swiglu_backward(grad, gate, up, grad_gate, grad_up, product=product),
        "product, grad_gate over grad (lab.nn)": lambda: lab.swiglu_backward(grad, gate, up, grad, grad_up,
                                                                             product=product),
        "product, all over the inputs": lambda: lab.swiglu_backward(grad, gate, up, grad, up, product=gate),
    }
    # each in-place form checked against the form apart first
    restore()
    lab.swiglu_backward(grad, gate, up, grad_gate, grad_up, product=product)
    expected = (grad_gate.clone(), grad_up.clone(), product.clone())
    restore()
    lab.swiglu_backward(grad, gate, up, grad, up, product=gate)
    for name, got, want in zip(("grad_gate", "grad_up", "product"), (grad, up, gate), expected):
        assert torch.equal(got, want), name
    samples = {name: [] for name in forms}
    for _round in range(3):
        for name, form in forms.items():
            samples[name].append(per_call_ms(lambda: (restore(), form()), timer))
    base = min(samples["restore only"])
    print(f"GLU backward, bf16 {rows} x {n}: ms a call less the restoring copies ({base:.4f} ms), best of 3 rounds")
    for name, ms in samples.items():
        if name != "restore only":
            print(f"  {name:40s} {min(ms) - base:.4f}   rounds {' '.join(f'{m - base:.4f}' for m in ms)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
