"""Example 7 - the smallest CUDA extension, built and run: examples/minimal_extension/.

Before reading lab's src/, read minimal.c (about 100 lines) and add_kernel.cu: a method table, a
module definition, __cuda_array_interface__ parsing, a launcher in a .cu file, error checking. This
script builds it with its own setup.py (nvcc + setuptools) in a temporary directory, then calls it
on lab.Array vectors - which export __cuda_array_interface__ like any producer.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from _common import need_gpu

need_gpu()
import lab  # noqa: E402

source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minimal_extension")
with tempfile.TemporaryDirectory() as build_dir:
    for name in ("minimal.c", "add_kernel.cu", "setup.py"):
        shutil.copy(os.path.join(source, name), build_dir)
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=build_dir, check=True,
                   stdout=subprocess.DEVNULL)
    sys.path.insert(0, build_dir)
    import minimal

    a = lab.asarray(np.arange(1000, dtype=np.float32))
    b = lab.asarray(np.full(1000, 0.5, dtype=np.float32))
    out = lab.empty(1000)
    assert minimal.add(a, b, out) is out
    np.testing.assert_array_equal(out.numpy(), np.arange(1000, dtype=np.float32) + 0.5)
    try:
        minimal.add(a, b, np.zeros(1000, np.float32))
    except TypeError as error:
        print(f"a host array is refused: {error}")
    print(f"minimal.add built with nvcc and run on lab.Arrays: out[:4] = {out.numpy()[:4]}")
