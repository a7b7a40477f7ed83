"""GPU producers for the tests: make a device array from host values in a given dtype, read one back.

Each producer returns the *stored* host values (after rounding to the dtype) as float64 or int64, so
references are computed from exactly what the GPU sees. bfloat16 exists only where the producer can
name it unambiguously: torch (through the DLPack exchange API). Producers that are not installed or
see no GPU are simply absent from PRODUCERS."""
import os

import numpy as np

FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]
INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8"]
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES


def host_dtype(dtype):
    return np.float32 if dtype == "bfloat16" else np.dtype(dtype)


def as_reference(values):
    """Host values read back from a device array, as float64 (floats) or int64 (integers)."""
    return values.astype(np.float64 if values.dtype.kind == "f" else np.int64)


def poison_value(dtype):
    """What an output is filled with before a run: NaN for floats, an unlikely value for integers."""
    return float("nan") if dtype in FLOAT_DTYPES else {"uint8": 0xA5, "int8": -91}.get(dtype, -0x5A5A)


class TorchProducer:
    name = "torch"

    def __init__(self):
        import torch
        self.torch = torch

    def supports(self, dtype):
        return True

    def from_host(self, values, dtype):
        t = self.torch.tensor(np.asarray(values, dtype=host_dtype(dtype)))
        t = t.to(getattr(self.torch, dtype)).to("cuda")
        return t, self.to_host(t)

    def empty_poisoned(self, shape, dtype):
        t = self.torch.empty(shape, dtype=getattr(self.torch, dtype), device="cuda")
        t.fill_(poison_value(dtype))
        return t

    def to_host(self, array):
        self.torch.cuda.synchronize()
        if array.dtype == self.torch.bfloat16:
            array = array.float()
        values = array.cpu().numpy()
        return as_reference(values)


class CupyProducer:
    name = "cupy"

    def __init__(self):
        import cupy
        self.cupy = cupy

    def supports(self, dtype):
        return dtype != "bfloat16"

    def from_host(self, values, dtype):
        array = self.cupy.asarray(np.asarray(values, dtype=dtype))
        return array, self.to_host(array)

    def empty_poisoned(self, shape, dtype):
        array = self.cupy.empty(shape, dtype=dtype)
        array.fill(poison_value(dtype))
        return array

    def to_host(self, array):
        self.cupy.cuda.runtime.deviceSynchronize()
        values = self.cupy.asnumpy(array)
        return as_reference(values)


class NumbaProducer:
    name = "numba"

    def __init__(self):
        from numba import cuda
        self.cuda = cuda

    def supports(self, dtype):
        return dtype != "bfloat16"

    def from_host(self, values, dtype):
        host = np.asarray(values, dtype=dtype)
        array = self.cuda.to_device(host)
        return array, self.to_host(array)

    def empty_poisoned(self, shape, dtype):
        return self.cuda.to_device(np.full(shape, poison_value(dtype), dtype=dtype))

    def to_host(self, array):
        self.cuda.synchronize()
        values = array.copy_to_host()
        return as_reference(values)


class LabProducer:
    """lab's own arrays (lab.Array), the producer that needs nothing but NumPy. Not among PRODUCERS (the
    tests of other producers' arrays parametrize over those); tests of lab's runtime use it directly."""
    name = "lab"

    def __init__(self):
        import lab
        self.lab = lab

    def supports(self, dtype):
        return True

    def from_host(self, values, dtype):
        """Host values as a lab.Array of dtype (bfloat16, which NumPy lacks, cast by lab.copy)."""
        if dtype != "bfloat16":
            array = self.lab.asarray(np.asarray(values, dtype=dtype))
        else:
            array = self.lab.empty(np.shape(values), "bfloat16")
            self.lab.copy(self.lab.asarray(np.asarray(values, np.float32)), array)
        return array, self.to_host(array)

    def empty_poisoned(self, shape, dtype):
        """A lab.Array of poison_value. lab.asarray makes host arrays at least 1-D: a 0-d one is the sum
        of one poisoned element."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        array = self.lab.empty(shape, dtype)
        host_type = np.float64 if dtype in FLOAT_DTYPES else dtype  # lab.copy casts to bfloat16 on the way
        filler = self.lab.asarray(np.full(shape or 1, poison_value(dtype), host_type))
        (self.lab.copy if shape else self.lab.sum)(filler, array)
        return array

    def to_host(self, array):
        if array.dtype == "bfloat16":
            wide = self.lab.empty(array.shape, "float32")
            self.lab.copy(array, wide)
            array = wide
        values = array.numpy()  # waits for the copy back
        return as_reference(values)


def round_to(values, dtype):
    """values (float64/int64) as stored in dtype, back as float64/int64: what a cast on store gives
    (bfloat16 through torch, which rounds to nearest even like the kernels)."""
    if dtype == "bfloat16":
        import torch
        return torch.tensor(np.asarray(values, np.float32)).to(torch.bfloat16).float().numpy().astype(np.float64)
    return as_reference(np.asarray(values).astype(dtype))


def _available():
    """The producers that work here. LAB_TEST_PRODUCERS (e.g. "torch,cupy") narrows the set: the
    sanitizer's API-error pass leaves Numba out, whose driver probes the sanitizer reports."""
    wanted = os.environ.get("LAB_TEST_PRODUCERS")
    found = {}
    for cls in (TorchProducer, CupyProducer, NumbaProducer):
        if wanted is not None and cls.name not in wanted.split(","):
            continue
        try:
            producer = cls()
            probe, _ = producer.from_host([1.0], "float32")
            del probe
        except Exception:  # not installed, or no GPU: that producer is not tested
            continue
        found[cls.name] = producer
    return found


PRODUCER_NAMES = ["torch", "cupy", "numba"]
_cache = {}


def producer_or_skip(name, dtype="float32"):
    """The producer, or a pytest skip saying why it cannot take part."""
    import pytest
    producer = get_producer(name)
    if producer is None:
        pytest.skip(f"{name} is not installed or sees no GPU")
    if not producer.supports(dtype):
        pytest.skip(f"{name} cannot express {dtype} unambiguously")
    return producer


def torch_float8_or_skip(tensor_cores=False):
    """torch, where it has float8 types and sees a GPU - and, with tensor_cores, a GPU with float8
    tensor cores (compute capability 8.9 or newer, what cuBLASLt's float8 products need); else a skip."""
    import pytest
    torch = producer_or_skip("torch").torch
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8 types")
    if tensor_cores and torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("float8 tensor cores need compute capability 8.9 or newer")
    return torch


def get_producer(name):
    if "all" not in _cache:
        _cache["all"] = _available()
    return _cache["all"].get(name)
