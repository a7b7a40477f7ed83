"""Example 2 - the same call on every producer: CuPy, Numba and JAX arrays (and torch's).

lab never asks which library made an array. It reads the device pointer, shape, dtype and stream
from the array's own protocol - torch's DLPack C exchange API, or __cuda_array_interface__ for the
others - so one lab.vector_add serves them all, zero-copy. lab.lab._array_info shows what it read.
"""
import numpy as np

from _common import need_gpu

need_gpu()
import lab  # noqa: E402
import lab.lab as core  # noqa: E402

n = 1_000_003
host_a, host_b = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
want = host_a + host_b
ran = []


def check(name, a, b, out, to_numpy):
    lab.vector_add(a, b, out)
    info = core._array_info(out)
    np.testing.assert_allclose(to_numpy(out), want, rtol=1e-6)
    print(f"{name:6s} ok: lab read `out` through {info['source']}, dtype {info['dtype']}, stream {info['stream']}")
    ran.append(name)


try:
    import torch
    a, b = torch.from_numpy(host_a).cuda(), torch.from_numpy(host_b).cuda()
    check("torch", a, b, torch.empty_like(a), lambda x: (torch.cuda.synchronize(), x.cpu().numpy())[1])
except ImportError:
    print("torch  not installed")

try:
    import cupy
    a, b = cupy.asarray(host_a), cupy.asarray(host_b)
    check("cupy", a, b, cupy.empty_like(a), cupy.asnumpy)
except ImportError:
    print("cupy   not installed")

try:
    if not hasattr(np, "row_stack"):  # numba-cuda still imports it; NumPy 2.5 removed it
        np.row_stack = np.vstack
    from numba import cuda
    a, b = cuda.to_device(host_a), cuda.to_device(host_b)
    check("numba", a, b, cuda.device_array_like(a), lambda x: (cuda.synchronize(), x.copy_to_host())[1])
except ImportError:
    print("numba  not installed")

try:
    import os
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    gpu = jax.devices("gpu")[0]
    a, b = jax.device_put(host_a, gpu), jax.device_put(host_b, gpu)
    # JAX's __cuda_array_interface__ is version 2: no stream, and it does not wait for the copy that
    # device_put started - read at once, the arrays may still be arriving. Wait for them first.
    jax.block_until_ready((a, b))
    out = lab.empty(n)  # JAX arrays are immutable (exported read-only), so the output is lab's own
    lab.vector_add(a, b, out)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
    print(f"jax    ok: inputs read through {core._array_info(a)['source']} (read-only: "
          f"{core._array_info(a)['readonly']}), output a lab.Array")
    ran.append("jax")
except (ImportError, RuntimeError):
    print("jax    not installed or no GPU backend")

print(f"vector_add checked on: {', '.join(ran)}")
