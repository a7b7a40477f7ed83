"""Fake producers for CPU tests: objects that expose only an array protocol, so the binding cannot
special-case any library (the habit of Numba's CAI tests).

FakeCudaArray carries a hand-written __cuda_array_interface__ dict; FakeExchangeTensor's *type*
carries a DLPack C exchange API built with ctypes, so CI exercises the DLPack path with no GPU.
The pointers are never dereferenced: without a GPU, validation runs and the launch fails cleanly.
"""
import ctypes

import itertools

FAKE_POINTER = 0x7F0000000000  # 16-byte aligned, never dereferenced on the CPU
_next_buffer = itertools.count(1)


def fake_pointer():
    """A distinct, 16-byte aligned fake address 4 GiB apart from every other one, so that fake
    arrays do not overlap unless a test makes them."""
    return FAKE_POINTER + next(_next_buffer) * (1 << 32)


class FakeCudaArray:
    """An object whose only array protocol is a __cuda_array_interface__ dict given in full."""

    def __init__(self, shape=(8,), typestr="<f4", ptr=None, readonly=False, version=3, **extra):
        ptr = fake_pointer() if ptr is None else ptr
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "data": (ptr, readonly), "version": version, **extra,
        }


def fake_array(shape=(8,), typestr="<f4", **kw):
    return FakeCudaArray(shape, typestr, **kw)


class CudaArrayWithDict:
    """Exposes an arbitrary object (maybe not a dict) as __cuda_array_interface__."""

    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


class RaisingInterface:
    """A producer whose protocol property raises (as torch does for tensors that require grad)."""

    @property
    def __cuda_array_interface__(self):
        raise RuntimeError("producer refuses to export")


# ---- a DLPack C exchange API made with ctypes ----

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(_DLTensor))
_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


class _Header(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev_api", ctypes.c_void_p)]


class _ExchangeAPI(ctypes.Structure):
    _fields_ = [("header", _Header), ("allocator", ctypes.c_void_p), ("from_py", ctypes.c_void_p),
                ("to_py", ctypes.c_void_p), ("dltensor_from_py_object_no_sync", _FROM_PY),
                ("current_work_stream", _STREAM)]


DL_CODES = {"float": 2, "bfloat": 4, "int": 0, "uint": 1, "bool": 6, "complex": 5, "float8_e4m3fn": 10,
            "float8_e5m2": 12}
STREAM_REPORTED = 0x5000  # what the fake producer says its current stream is


def _fill(obj, out):
    t = out.contents
    obj._shape = (ctypes.c_int64 * len(obj.shape))(*obj.shape)
    t.data = obj.ptr
    t.device = _DLDevice(obj.device_type, obj.device_id)
    t.ndim = len(obj.shape)
    t.dtype = _DLDataType(DL_CODES[obj.code], obj.bits, obj.lanes)
    t.shape = obj._shape
    if obj.strides is None:
        t.strides = None
    else:
        obj._strides = (ctypes.c_int64 * len(obj.strides))(*obj.strides)
        t.strides = obj._strides
    t.byte_offset = obj.byte_offset
    return 0


def _stream(device_type, device_id, out):
    out[0] = STREAM_REPORTED
    return 0


_from_py = _FROM_PY(_fill)
_current_stream = _STREAM(_stream)
_api = _ExchangeAPI(_Header(1, 3, None), None, None, None, _from_py, _current_stream)
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_CAPSULE_NAME = ctypes.create_string_buffer(b"dlpack_exchange_api")  # the capsule keeps only a pointer to it
_CAPSULE = _capsule_new(ctypes.addressof(_api), ctypes.addressof(_CAPSULE_NAME), None)


class FakeExchangeTensor:
    """A tensor type that publishes a DLPack C exchange API on the type, as torch 2.11+ does."""

    __dlpack_c_exchange_api__ = _CAPSULE

    def __init__(self, shape=(8,), code="float", bits=32, lanes=1, ptr=None, device_type=2, device_id=0,
                 strides=None, byte_offset=0):
        ptr = fake_pointer() if ptr is None else ptr
        self.shape, self.code, self.bits, self.lanes, self.ptr = tuple(shape), code, bits, lanes, ptr
        self.device_type, self.device_id, self.strides, self.byte_offset = device_type, device_id, strides, byte_offset
