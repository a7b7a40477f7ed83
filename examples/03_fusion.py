"""Example 3 - why lab exists: one pass over memory instead of several.

(a + b) * s written as two framework ops reads and writes the temporary a + b through HBM: 5 array
transfers (read a, b; write t; read t, s; write out) plus an allocation. lab.fused_add_mul does 4
(read a, b, s; write out) in one kernel. On a memory-bound GPU the time follows the bytes.
"""
from _common import need, need_gpu

torch = need("torch")
need_gpu()
import lab  # noqa: E402
from lab._timing import median_ms, torch_timer  # noqa: E402

n = 1 << 27
a, b, s = (torch.rand(n, device="cuda") for _ in range(3))
out = torch.empty_like(a)

lab.fused_add_mul(a, b, s, out)
assert torch.allclose(out, (a + b) * s)

timer = torch_timer(torch)
two_ops = median_ms(lambda: torch.mul(torch.add(a, b), s, out=out), *timer)
fused = median_ms(lambda: lab.fused_add_mul(a, b, s, out), *timer)
gb = n * 4 / 1e9
print(f"(a+b)*s on {n:,} float32:")
print(f"  torch, two ops : {two_ops:.3f} ms  ({5 * gb / two_ops:.2f} TB/s over 5 array transfers)")
print(f"  lab, fused     : {fused:.3f} ms  ({4 * gb / fused:.2f} TB/s over 4)  -> {two_ops / fused:.2f}x faster")
