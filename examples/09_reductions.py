"""Example 9 - reductions on anyone's arrays: row sums, column means, argmax, variance, norms,
logsumexp and dot, on torch and CuPy.

lab's reductions write into the `out` you pass, over any axes, on any layout, and give bitwise the
same result every run (no atomics). Run: python3 examples/09_reductions.py
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
lab.var(x, rows, axis=1)  # one pass; correction=1, as torch.var
assert torch.allclose(rows, x.var(dim=1), rtol=1e-4)
lab.norm(x, cols, axis=0, ord=float("inf"))  # the largest |x| of each column
assert torch.allclose(cols, x.abs().amax(dim=0).double())
lab.logsumexp(x * 100, rows, axis=1)  # exp(100 x) overflows float32; logsumexp does not
assert torch.allclose(rows, torch.logsumexp(x * 100, dim=1), rtol=1e-5)
total = torch.empty((), device="cuda")
lab.dot(x[:, 0], x[:, 1], total)  # two strided columns
assert torch.allclose(total, torch.dot(x[:, 0], x[:, 1]), rtol=1e-4, atol=1e-3)
print(f"torch: row sums, column means of a transposed view, argmax, var, inf-norm, logsumexp, dot - "
      f"all match; rows[:3] = {rows[:3].tolist()}")

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
