"""Example 10 - your own kernel, written in a string, run on torch and CuPy arrays alike.

lab.RawKernel compiles CUDA C++ with NVRTC at the first call (cached on disk afterwards), loads it
with the CUDA runtime, and launches it the way every lab op launches: arrays from any producer
become device pointers, on the producer's current stream. `signature=` checks each array's dtype and
converts Python numbers to the parameters' C types before the launch. lab.ElementwiseKernel takes
just the per-element operation, in CuPy's syntax, and runs it through lab's iterator: broadcasting,
any strides, mixed dtypes, and the vectorized loop where the arrays allow it.
Run: python3 examples/10_your_own_kernel.py
"""
from _common import need_gpu

need_gpu()
import numpy as np  # noqa: E402

import lab  # noqa: E402

SOURCE = r'''
extern "C" __global__ void smooth(const float* x, float* y, float weight, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;           // y = a 3-point moving average
    if (i < n) {
        float left = i > 0 ? x[i - 1] : x[i], right = i + 1 < n ? x[i + 1] : x[i];
        y[i] = weight * x[i] + 0.5f * (1.0f - weight) * (left + right);
    }
}'''
smooth = lab.RawKernel(SOURCE, "smooth", signature="const float*, float*, float, int")
n = 1_000_000
grid, block = (n + 255) // 256, 256

try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    smooth(grid, block, (x, y, 0.5, n))  # Python numbers become float and int: the signature says so
    padded = torch.cat([x[:1], x, x[-1:]])
    assert torch.allclose(y, 0.5 * x + 0.25 * (padded[:-2] + padded[2:]), atol=1e-6)
    print(f"torch: smoothed {n} values on torch's current stream; y[:3] = {y[:3].tolist()}")

try:
    import cupy
except ImportError:
    cupy = None
if cupy is not None:
    x = cupy.random.rand(n, dtype=cupy.float32)
    y = cupy.empty_like(x)
    smooth(grid, block, (x, y, 0.5, n))  # the same compiled kernel, CuPy's arrays
    host = cupy.asnumpy(x)
    padded = np.concatenate([host[:1], host, host[-1:]])
    assert np.allclose(cupy.asnumpy(y), 0.5 * host + 0.25 * (padded[:-2] + padded[2:]), atol=1e-6)
    print(f"cupy: the same kernel on CuPy arrays; y[:3] = {cupy.asnumpy(y[:3])}")

try:
    smooth(grid, block, (lab.empty(n, dtype="float64"), lab.empty(n), 0.5, n))
except TypeError as error:  # checked before anything reaches the GPU
    print(f"a float64 array where the kernel reads float: {error}")

# The per-element part alone: lab writes the loops (vectorized, or strided for views and broadcasts).
clipped_blend = lab.ElementwiseKernel("T x, T y, float32 w", "T z", "z = fminf(fmaxf(w * x + (1 - w) * y, -1), 1)",
                                      "clipped_blend")
if torch is not None:
    x, bias = torch.randn(1000, 512, device="cuda", dtype=torch.bfloat16), torch.randn(512, device="cuda",
                                                                                      dtype=torch.bfloat16)
    z = torch.empty_like(x)
    clipped_blend(x, bias, 0.25, z)  # bias broadcast along the rows; bfloat16 computed in float32
    want = (0.25 * x.float() + 0.75 * bias.float()).clamp(-1, 1).bfloat16()
    torch.testing.assert_close(z, want, atol=8e-3, rtol=8e-3)  # one rounding, FMA or not
    print(f"torch: ElementwiseKernel on bfloat16 with a broadcast row; z[0, :3] = {z[0, :3].tolist()}")
if cupy is not None:
    x = cupy.random.rand(3, 4, dtype=cupy.float32).T  # a transposed view: the strided loop
    z = clipped_blend(x, x[:1], 0.5)  # z left out: a lab.Array of the broadcast shape
    assert np.allclose(cupy.asnumpy(cupy.asarray(z)), np.clip(cupy.asnumpy(0.5 * x + 0.5 * x[:1]), -1, 1))
    print(f"cupy: the same kernel on a transposed view, output allocated: {type(z).__name__} {z.shape}")
