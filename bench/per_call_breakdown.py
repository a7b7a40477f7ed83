"""Where one small lab.add call's host time goes, per producer.

For 1024-element float32 operands of each producer, microseconds per call (wall clock, median of
several runs of many calls):
  read      lab.lab._array_info(x): reading one array through its protocol (x3 in a call)
  empty     lab.add on zero-size arrays of that producer: parse, read three arrays, plan, device
            check - everything before CUDA, and no launch
  full      lab.add on 1024 elements
  floor     lab.lab._bare_add on raw pointers: a bare launch from C, nothing else
so `empty` is lab's Python-facing work, `full - empty - floor` what the CUDA side of the sequence
adds over a bare launch (locating CAI memory, the launch scope, ordering), and `full - floor` the
total above the floor.
    python3 bench/per_call_breakdown.py"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import lab  # noqa: E402
from bench_elementwise import per_call_us  # noqa: E402


class BareCAI:
    """Only __cuda_array_interface__, as a minimal producer would offer it (the dict built per read)."""

    def __init__(self, array):
        self._array = array

    @property
    def __cuda_array_interface__(self):
        return self._array.__cuda_array_interface__


def producers():
    made = {"lab.Array": lambda n: lab.empty(n)}
    try:
        import torch
        made["torch"] = lambda n: torch.rand(n, device="cuda")
    except ImportError:
        pass
    try:
        import cupy
        made["cupy"] = lambda n: cupy.random.rand(n, dtype=cupy.float32) if n else cupy.empty(0, cupy.float32)
    except ImportError:
        pass
    try:
        from numba import cuda
        made["numba"] = lambda n: cuda.to_device(np.random.rand(n).astype(np.float32))
    except Exception:
        pass
    made["bare CAI"] = lambda n: BareCAI(lab.asarray(np.random.rand(n).astype(np.float32)))
    return made


def main():
    if not lab.is_available():
        print("per_call_breakdown: needs a CUDA GPU")
        return 1
    la, lb, lout = (lab.asarray(np.random.rand(1024).astype(np.float32)) for _ in range(3))
    pointers = (lout.data_ptr, la.data_ptr, lb.data_ptr, 1024)
    floor = per_call_us(lambda: lab.lab._bare_add(*pointers), lab.synchronize)
    print(f"{'producer':10s} {'read':>7s} {'empty':>7s} {'full':>7s} {'floor':>7s} "
          f"{'before CUDA':>12s} {'CUDA side':>10s} {'above floor':>12s}   (us per call)")
    for name, make in producers().items():
        a, b, out = make(1024), make(1024), make(1024)
        za, zb, zout = make(0), make(0), make(0)
        read = per_call_us(lambda: lab.lab._array_info(a), lab.synchronize)
        empty = per_call_us(lambda: lab.add(za, zb, zout), lab.synchronize)
        full = per_call_us(lambda: lab.add(a, b, out), lab.synchronize)
        print(f"{name:10s} {read:7.2f} {empty:7.2f} {full:7.2f} {floor:7.2f} {empty:12.2f} "
              f"{full - empty - floor:10.2f} {full - floor:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
