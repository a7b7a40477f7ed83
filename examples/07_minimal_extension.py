"""Example 7 - the smallest CUDA extension, built and run: examples/minimal_extension/.

Before reading lab's src/, read minimal.c (about 100 lines) and add_kernel.cu: a method table, a
module definition, __cuda_array_interface__ parsing, a launcher in a .cu file, error checking. This
script builds it with its own setup.py (nvcc + setuptools) in a temporary directory - no GPU needed
for that - and shows its argument checks on objects that only carry a __cuda_array_interface__ dict
(as the tests' fake producers do): every bad argument is a Python exception naming it, raised
before any CUDA call. Where there is a GPU it then adds lab.Array vectors, which export the same
protocol as any producer; where there is none, the launch's own error arrives as an exception too.
Run: python3 examples/07_minimal_extension.py
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from _common import need_nvcc

need_nvcc()
import lab  # noqa: E402


class Vector:
    """Anything with a __cuda_array_interface__ is a CUDA array to minimal.add; this one points at
    an address nobody may read, so only the checks before the launch can use it."""

    def __init__(self, n=1000, typestr="<f4", strides=None, readonly=False, shape=None):
        self.__cuda_array_interface__ = {"shape": shape or (n,), "typestr": typestr, "strides": strides,
                                         "data": (0x7F0000000000, readonly), "version": 3}


def refused(call, *args):
    try:
        call(*args)
    except (TypeError, ValueError, RuntimeError) as error:
        return f"{type(error).__name__}: {error}"
    raise AssertionError("minimal.add accepted what it must refuse")


source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minimal_extension")
with tempfile.TemporaryDirectory() as build_dir:
    for name in ("minimal.c", "add_kernel.cu", "setup.py"):
        shutil.copy(os.path.join(source, name), build_dir)
    env = dict(os.environ)
    if not lab.is_available():  # nothing will run it: one architecture builds in ~2 s
        env.setdefault("LAB_CUDA_ARCH", "90")
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=build_dir, check=True,
                   stdout=subprocess.DEVNULL, env=env)
    sys.path.insert(0, build_dir)
    import minimal
    print("minimal built with nvcc and setuptools; its checks, before any CUDA call:")

    v = Vector()
    for what, args in [("two arguments", (v, v)), ("a NumPy array (host memory)", (v, v, np.zeros(1000))),
                       ("float64", (v, Vector(typestr="<f8"), v)), ("2-D", (v, Vector(shape=(10, 100)), v)),
                       ("strided", (v, Vector(strides=(8,)), v)), ("a read-only out", (v, v, Vector(readonly=True))),
                       ("lengths that differ", (v, Vector(999), v))]:
        print(f"  {what:28s} -> {refused(minimal.add, *args)}")

    if not lab.is_available():
        print(f"  {'no GPU here: the launch':28s} -> {refused(minimal.add, v, v, v)}")
        print("skipped the GPU part: no CUDA GPU here (`python3 -m lab` says what is missing)")
        sys.exit(0)
    a = lab.asarray(np.arange(1000, dtype=np.float32))
    b = lab.asarray(np.full(1000, 0.5, dtype=np.float32))
    out = lab.empty(1000)
    assert minimal.add(a, b, out) is out
    np.testing.assert_array_equal(out.numpy(), np.arange(1000, dtype=np.float32) + 0.5)
    print(f"minimal.add run on lab.Arrays: out[:4] = {out.numpy()[:4]}")
