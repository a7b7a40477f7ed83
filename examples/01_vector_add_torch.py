"""Example 1 - the seed's example, as a user first meets lab: add two 10M-element torch tensors.

lab reads the tensors' device pointers through torch's DLPack C exchange API (no copy), launches
its kernel on torch's current stream, and writes into c. Run: python3 examples/01_vector_add_torch.py
"""
import sys

try:
    import torch
except ImportError:
    sys.exit("this example needs PyTorch with CUDA (pip install torch)")
import lab

if not torch.cuda.is_available() or not lab.is_available():
    sys.exit("this example needs a CUDA GPU; `python3 -m lab` says what is missing")

n = 10_000_000
a = torch.rand(n, device="cuda")
b = torch.rand(n, device="cuda")
c = torch.empty(n, device="cuda")

lab.vector_add(a, b, c)

assert torch.allclose(c, a + b), "lab.vector_add disagrees with torch"
print(f"lab.vector_add on {n:,} float32 elements matches torch: c[:3] = {c[:3].tolist()}")
