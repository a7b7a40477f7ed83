"""Example 6 - lab with nothing but NumPy: lab.Array, lab's own device arrays.

lab.asarray copies host data to the GPU (memory from cudaMallocAsync, on the current lab stream),
ops write into lab.empty outputs, .numpy() copies back. The same arrays export
__cuda_array_interface__ and __dlpack__, so torch or CuPy could wrap them without a copy.
"""
import numpy as np

from _common import need_gpu

need_gpu()
import lab  # noqa: E402

x = np.linspace(-4, 4, 1_000_001, dtype=np.float32)
with lab.stream(lab.Stream()):
    d_x = lab.asarray(x)
    d_y = lab.empty(d_x.shape)
    lab.gelu(d_x, d_y, approximate="tanh")
    lab.fused_add_mul(d_y, d_x, 0.5, d_y)      # in place: y = (gelu(x) + x) * 0.5
    y = d_y.numpy()

gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
np.testing.assert_allclose(y, (gelu + x) * 0.5, rtol=1e-5, atol=1e-6)
print(f"{d_y!r}: matches NumPy; y[::250000] = {np.round(y[::250000], 4)}")
print(f"__cuda_array_interface__: { {k: v for k, v in d_y.__cuda_array_interface__.items() if k != 'data'} }")
