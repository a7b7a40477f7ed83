"""The Python half of lab's runtime API: `with lab.stream(s):` and `lab.asarray(...)`.

The objects themselves (lab.Stream, lab.Event, lab.Array) are C types in src/*_type.c; these two
helpers are thin enough that Python shows their logic more plainly than C would."""
import numpy as np

from . import lab as _core

# lab's dtypes, in the order of lab_dtype (src/kernels/launch.h): a kernel key's digits index it.
DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")


def _checked_dtype(dtype):
    """asarray's `dtype`, checked against lab's dtypes before NumPy sees it: NumPy would answer a
    malformed spelling with its own SyntaxError, and a cast it cannot do with a RuntimeError."""
    if dtype is None or (isinstance(dtype, str) and dtype in DTYPE_NAMES):
        return dtype
    try:
        name = np.dtype(dtype).name
    except Exception:  # NumPy raises TypeError, SyntaxError or ValueError for what it cannot parse
        name = None
    if name not in DTYPE_NAMES:
        raise TypeError(f"asarray(): argument 'dtype' must be one of lab's dtypes ({', '.join(DTYPE_NAMES)}) "
                        f"or a NumPy spelling of one, got {dtype!r}")
    return name


class stream:
    """with lab.stream(s): ... - make `s` this thread's current stream for lab.

    Inside the block every lab call without stream= launches on `s`, which may be a lab.Stream, a
    torch or CuPy stream (anything with __cuda_stream__, .cuda_stream or .ptr) or an int handle.
    Blocks nest; other threads are not affected. None leaves the current stream as it is.
    """

    def __init__(self, s):
        self.stream = s
        self._previous = None

    def __enter__(self):
        if self.stream is not None:
            self._previous = _core._swap_current_stream(self.stream)
        return self.stream

    def __exit__(self, *exc_info):
        if self.stream is not None:
            _core._swap_current_stream(self._previous)
        return False


def asarray(obj, dtype=None, *, device=None, stream=None):
    """A lab.Array holding the contents of `obj`.

    A host array (anything numpy.asarray accepts) is copied to the device; a CUDA array of any
    producer is copied on the device with lab.copy (so a dtype change is a cast). A lab.Array of the
    requested dtype is returned as it is. The copy is queued on `stream` (default: lab.stream(),
    else the legacy default stream); a host copy waits for it so the host buffer may be reused.
    """
    dtype = _checked_dtype(dtype)
    if isinstance(obj, _core.Array) and dtype in (None, obj.dtype) and device in (None, obj.device):
        return obj
    if hasattr(type(obj), "__dlpack_c_exchange_api__") or hasattr(obj, "__cuda_array_interface__"):
        info = _core._array_info(obj)
        out = _core.empty(info["shape"], dtype or info["dtype"], device=device, stream=stream)
        _core.copy(obj, out, stream=stream)  # None: lab.stream(), else out's stream, ordered after obj's
        return out
    if dtype == "bfloat16":
        raise TypeError("asarray(): NumPy has no bfloat16, so host data cannot be converted to it on the way; "
                        "copy it as float32, then lab.copy it into lab.empty(shape, 'bfloat16')")
    host = np.ascontiguousarray(obj, dtype=dtype)
    out = _core.empty(host.shape, host.dtype, device=device, stream=stream)
    out._copy_from_host(host)
    return out
