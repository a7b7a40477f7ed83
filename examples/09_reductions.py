"""Example 9 - reductions on anyone's arrays: row sums, column means, argmax, on torch and CuPy.

lab.sum / mean / amax / argmax write into the `out` you pass, over any axes, on any layout, and
give bitwise the same result every run (no atomics). Run: python3 examples/09_reductions.py
"""
from _common import need, need_gpu

need_gpu()
import numpy as np  # noqa: E402

import lab  # noqa: E402

torch = need("torch")
x = torch.randn(4096, 1000, device="cuda")
rows = torch.empty(4096, device="cuda")
lab.sum(x, rows, axis=1)
assert torch.allclose(rows, x.sum(dim=1), rtol=1e-5, atol=1e-4)
again = torch.empty_like(rows)
lab.sum(x, again, axis=1)
assert torch.equal(rows, again), "a reduction must give the same bits every run"

cols = torch.empty(1000, dtype=torch.float64, device="cuda")  # the mean cast to float64 on store
lab.mean(x.T, cols, axis=1)  # a transposed view: no copy
assert torch.allclose(cols, x.double().mean(dim=0), rtol=1e-5, atol=1e-6)

where = torch.empty(4096, dtype=torch.int64, device="cuda")
lab.argmax(x, where, axis=1)
assert torch.equal(where, x.argmax(dim=1))
print(f"torch: row sums, column means of a transposed view, argmax - all match; rows[:3] = {rows[:3].tolist()}")

try:
    import cupy
except ImportError:
    cupy = None
if cupy is not None:
    y = cupy.random.rand(300, 257, dtype=cupy.float32)[::-1, ::2]  # negative and step-2 strides
    top = cupy.empty(y.shape[1], cupy.float32)
    lab.amax(y, top, axis=0)
    assert np.array_equal(cupy.asnumpy(top), cupy.asnumpy(y.max(axis=0)))
    print(f"cupy: amax over a reversed, strided view matches cupy.max: top[:3] = {cupy.asnumpy(top[:3])}")
