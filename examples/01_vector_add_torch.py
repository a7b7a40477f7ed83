"""Example 1 - lab's first example, as a user first meets lab: add two 10M-element torch tensors.

lab reads the tensors' device pointers through torch's DLPack C exchange API (no copy), launches
its kernel on torch's current stream, and writes into c. Run: python3 examples/01_vector_add_torch.py
"""
from _common import need, need_gpu

torch = need("torch")
need_gpu()
import lab  # noqa: E402

n = 10_000_000
a = torch.rand(n, device="cuda")
b = torch.rand(n, device="cuda")
c = torch.empty(n, device="cuda")

lab.vector_add(a, b, c)

assert torch.allclose(c, a + b), "lab.vector_add disagrees with torch"
print(f"lab.vector_add on {n:,} float32 elements matches torch: c[:3] = {c[:3].tolist()}")
