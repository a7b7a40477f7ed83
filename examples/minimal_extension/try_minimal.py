"""Try the minimal extension without lab: its refusals on objects that carry only a
__cuda_array_interface__ dict (any machine: each comes before any CUDA call), then, where there is a
GPU and CuPy or PyTorch, one addition on their arrays - zero-copy, through the same protocol.
    python3 examples/minimal_extension/setup.py build_ext --inplace
    python3 examples/minimal_extension/try_minimal.py
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minimal  # noqa: E402 - built in this folder by setup.py

FAKE = 0x7F0000000000  # an address nobody may read: only the checks before a launch may see it


class Vector:
    """Anything with a __cuda_array_interface__ is a CUDA array to minimal.add."""

    def __init__(self, n=1000, typestr="<f4", strides=None, readonly=False, shape=None):
        self.__cuda_array_interface__ = {"shape": shape or (n,), "typestr": typestr, "strides": strides,
                                         "data": (FAKE, readonly), "version": 3}


class ClearingFlag:
    """A read-only flag whose __bool__ empties the dict it sits in - legal Python, and the reason
    minimal.c holds strong references to the dict's entries while it reads them."""

    def __init__(self):
        self.dict = None

    def __bool__(self):
        self.dict.clear()
        return False


def clearing_vector(n):
    flag = ClearingFlag()
    vector = Vector(n)
    cai = vector.__cuda_array_interface__
    cai["data"] = (FAKE, flag)
    cai["shape"] = tuple([n])  # a tuple only the dict holds: clearing the dict frees it
    flag.dict = cai
    return vector


def refused(call, *args):
    try:
        call(*args)
    except (TypeError, ValueError, RuntimeError) as error:
        return f"{type(error).__name__}: {error}"
    raise AssertionError("minimal.add accepted what it must refuse")


def refusals():
    """(what, message) for each bad call; none reaches CUDA."""
    v = Vector()
    cases = [("two arguments", (v, v)), ("a plain list", (v, v, [0.0] * 1000)),
             ("float64", (v, Vector(typestr="<f8"), v)), ("2-D", (v, Vector(shape=(10, 100)), v)),
             ("strided", (v, Vector(strides=(8,)), v)), ("a read-only out", (v, v, Vector(readonly=True))),
             ("lengths that differ", (v, Vector(999), v)),
             ("a flag that empties its dict", (v, v, clearing_vector(999)))]
    return [(what, refused(minimal.add, *args)) for what, args in cases]


def has_cuda_driver():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def add_on_a_gpu():
    """minimal.add on CuPy's or torch's arrays; a line saying what ran, or what is missing."""
    try:
        import cupy
        a, b, out = cupy.arange(1000, dtype=cupy.float32), cupy.full(1000, 0.5, cupy.float32), cupy.empty(1000, cupy.float32)
        to_host = cupy.asnumpy
        producer = "CuPy"
    except Exception:
        try:
            import torch
            if not torch.cuda.is_available():
                return "no GPU that PyTorch can use here: the addition itself needs one"
            a = torch.arange(1000, dtype=torch.float32, device="cuda")
            b, out = torch.full_like(a, 0.5), torch.empty_like(a)
            to_host = lambda t: t.cpu().numpy()  # noqa: E731
            producer = "PyTorch"
        except ImportError:
            return "neither CuPy nor PyTorch is installed: nothing here makes device arrays to add"
    assert minimal.add(a, b, out) is out
    result = to_host(out)
    assert all(result[i] == i + 0.5 for i in range(1000)), "minimal.add gave a wrong sum"
    return f"minimal.add on {producer} arrays: out[:4] = {result[:4]}"


def main():
    print("minimal.add's checks, before any CUDA call:")
    for what, message in refusals():
        print(f"  {what:30s} -> {message}")
    if not has_cuda_driver():
        print(f"  {'no CUDA driver: the launch':30s} -> {refused(minimal.add, Vector(), Vector(), Vector())}")
        print("no CUDA driver here: the addition itself needs a GPU")
        return 0
    print(add_on_a_gpu())
    return 0


if __name__ == "__main__":
    sys.exit(main())
