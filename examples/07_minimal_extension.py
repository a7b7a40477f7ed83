"""Example 7 - the smallest CUDA extension, built and run: examples/minimal_extension/.

Before reading lab's src/, read minimal.c (about 100 lines) and add_kernel.cu: a method table, a
module definition, __cuda_array_interface__ parsing with strong references, a launcher in a .cu file,
error checking. This script builds it with its own setup.py (nvcc + setuptools) in a temporary
folder - no GPU and no lab needed for that - and runs its try-out (minimal_extension/try_minimal.py):
every bad argument of objects that only carry a __cuda_array_interface__ dict is a Python exception
naming it, raised before any CUDA call; where there is a GPU and CuPy or PyTorch, one addition on
their arrays. Last, where lab is built and sees a GPU, the same addition on lab.Arrays, which export
the same protocol as any producer.
Run: python3 examples/07_minimal_extension.py
"""
import os
import shutil
import subprocess
import sys
import tempfile

from _common import need_nvcc

need_nvcc()

source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minimal_extension")
with tempfile.TemporaryDirectory() as build_dir:
    for name in ("minimal.c", "add_kernel.cu", "setup.py", "try_minimal.py"):
        shutil.copy(os.path.join(source, name), build_dir)
    env = dict(os.environ)
    env.setdefault("LAB_CUDA_ARCH", "90")  # one architecture builds in ~2 s; set it to build others
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=build_dir, check=True,
                   stdout=subprocess.DEVNULL, env=env)
    sys.path.insert(0, build_dir)
    import minimal  # noqa: E402
    import try_minimal  # noqa: E402
    print("minimal built with nvcc and setuptools.")
    try_minimal.main()

    try:
        import lab
    except ImportError:
        print("lab itself is not built here (`make build`): skipped the addition on lab.Arrays")
        sys.exit(0)
    if not lab.is_available():
        print("skipped the addition on lab.Arrays: no CUDA GPU here (`python3 -m lab` says what is missing)")
        sys.exit(0)
    import numpy as np
    a = lab.asarray(np.arange(1000, dtype=np.float32))
    b = lab.asarray(np.full(1000, 0.5, dtype=np.float32))
    out = lab.empty(1000)
    assert minimal.add(a, b, out) is out
    np.testing.assert_array_equal(out.numpy(), np.arange(1000, dtype=np.float32) + 0.5)
    print(f"minimal.add run on lab.Arrays: out[:4] = {out.numpy()[:4]}")
