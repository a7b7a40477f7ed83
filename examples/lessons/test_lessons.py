"""The lessons' checks: every refusal on plain objects that only carry a __cuda_array_interface__
dict (any machine: their pointers are never read, because each refusal comes before any CUDA call),
and each lesson's add on real device memory where there is a GPU - lab.Arrays, and a strided view of
one described by hand, since a CAI dict is all a producer is. `make lessons` builds and runs them."""
import importlib.util
import inspect
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lesson1_keywords  # noqa: E402
import lesson2_module_state  # noqa: E402
import lesson3_strides_dtypes  # noqa: E402
import lesson4_plan_launch  # noqa: E402
import lesson5_streams  # noqa: E402
import lesson6_dlpack_exchange  # noqa: E402
import lesson7_xla_ffi  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests"))
from xla_frames import F32, F64, ApiVersion, Extension, Metadata, MetadataExtension, Xla  # noqa: E402

try:
    import lab
    HAVE_GPU = lab.is_available()
except ImportError:
    HAVE_GPU = False
gpu = pytest.mark.skipif(not HAVE_GPU, reason="no CUDA GPU (or lab not built): the GPU half of the lessons")

ADDS = [lesson1_keywords.add, lesson2_module_state.add, lesson3_strides_dtypes.add, lesson4_plan_launch.add,
        lesson5_streams.add, lesson6_dlpack_exchange.add]
FAKE = 0x7F0000000000  # never dereferenced: every call below that reaches the launch fails there


class Vector:
    def __init__(self, n=8, typestr="<f4", strides=None, readonly=False, ptr=FAKE, stream=None, **extra):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": typestr, "strides": strides,
                                         "data": (ptr, readonly), "version": 3, "stream": stream, **extra}


# ---- lesson 1: keyword arguments ----

def test_keywords_are_matched_by_name_and_refused_by_name():
    add, v = lesson1_keywords.add, Vector()
    assert str(inspect.signature(add)) == "(a, b, out, *, stream=None)"
    with pytest.raises(TypeError, match="unexpected keyword argument 'strem'"):
        add(v, v, v, strem=None)
    with pytest.raises(TypeError, match="multiple values for argument 'out'"):
        add(v, v, v, out=v)
    with pytest.raises(TypeError, match="missing required argument 'b'"):
        add(v, out=v)
    with pytest.raises(TypeError, match="takes 3 positional arguments but 4 were given"):
        add(v, v, v, None)
    with pytest.raises(TypeError, match="'stream' must be None or an int"):
        add(v, v, v, stream="default")


def test_a_keyword_name_built_at_run_time_still_matches():
    name = "".join(["st", "ream"])  # not the interned object: the parser's fallback compare finds it
    with pytest.raises(TypeError, match="'stream' must be None or an int"):
        lesson1_keywords.add(Vector(), Vector(), Vector(), **{name: 1.5})


# ---- lesson 2: module state ----

def test_the_module_state_holds_its_own_exception_type():
    assert issubclass(lesson2_module_state.CudaError, RuntimeError)
    if not HAVE_GPU:  # the launch itself fails without a GPU: the module's own type says so
        with pytest.raises(lesson2_module_state.CudaError, match="CUDA error"):
            lesson2_module_state.add(Vector(), Vector(), Vector())


def test_a_second_module_object_gets_a_state_of_its_own():
    spec = importlib.util.find_spec("lesson2_module_state")
    second = importlib.util.module_from_spec(spec)  # multi-phase init: a new module, a new state
    spec.loader.exec_module(second)
    assert second is not lesson2_module_state
    assert second.CudaError is not lesson2_module_state.CudaError
    with pytest.raises(TypeError, match="unexpected keyword argument 'x'"):
        second.add(Vector(), Vector(), Vector(), x=1)


# ---- lesson 3: strides and dtypes ----

@pytest.mark.parametrize("typestr, strides, want", [
    ("<f4", None, (1, "float32")), ("<f8", None, (1, "float64")), ("<f4", (8,), (2, "float32")),
    ("<f8", (-8,), (-1, "float64")), ("<f4", (0,), (0, "float32"))])
def test_describe_reads_the_dtype_and_the_stride_in_elements(typestr, strides, want):
    got = lesson3_strides_dtypes.describe(Vector(5, typestr, strides, stream=7))
    assert (got["stride"], got["dtype"]) == want
    assert got["n"] == 5 and got["data"] == FAKE and got["stream"] == 7 and got["readonly"] is False


class RaisingProperty:
    @property
    def __cuda_array_interface__(self):
        raise KeyError("the producer's own error")


@pytest.mark.parametrize("obj, error, match", [
    (np.zeros(4, np.float32), TypeError, "'x' must be a CUDA array, got numpy.ndarray"),
    (Vector(typestr="<i4"), TypeError, r"float32 or float64 \('<f4', '<f8'\), got '<i4'"),
    (Vector(strides=(6,)), ValueError, "stride of 6 bytes, not a whole number of elements"),
    (Vector(strides=(4, 4)), ValueError, "a vector has one"),
    (Vector(shape=(2, 4)), ValueError, r"1-dimensional, got shape \(2, 4\)"),
    (Vector(data=None), TypeError, "malformed 'data'"),
    (RaisingProperty(), KeyError, "the producer's own error"),
])
def test_describe_refuses_what_it_cannot_represent(obj, error, match):
    with pytest.raises(error, match=match):
        lesson3_strides_dtypes.describe(obj)


# ---- lesson 4: plan and launch ----

def test_the_plan_chooses_the_path_without_a_gpu():
    plan = lesson4_plan_launch.plan
    assert plan(Vector(), Vector(), Vector())["path"] == "contiguous"
    assert plan(Vector(typestr="<f8"), Vector(typestr="<f8"), Vector(typestr="<f8"))["path"] == "strided"
    got = plan(Vector(strides=(8,)), Vector(), Vector())
    assert got["path"] == "strided" and got["strides"] == (1, 2, 1) and got["n"] == 8


@pytest.mark.parametrize("add", ADDS, ids=lambda f: f.__module__ if hasattr(f, "__module__") else str(f))
def test_every_add_refuses_before_any_cuda_call(add):
    v = Vector()
    with pytest.raises(ValueError, match="differ in length"):
        add(v, Vector(7), v)
    with pytest.raises(ValueError, match="'out' is read-only"):
        add(v, v, Vector(readonly=True))
    with pytest.raises(TypeError, match="one dtype"):
        add(v, Vector(typestr="<f8"), v)


# ---- the GPU half ----

def strided_view(array, step):
    """Every step-th element of a lab.Array, described by hand: the same memory, a stride in bytes."""
    cai = array.__cuda_array_interface__
    itemsize = np.dtype(cai["typestr"]).itemsize
    return Vector((cai["shape"][0] + step - 1) // step, cai["typestr"], (step * itemsize,), ptr=cai["data"][0],
                  stream=cai.get("stream"))


@gpu
@pytest.mark.parametrize("add", ADDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_add_on_lab_arrays(add, dtype):
    n = 1001  # odd: the last block is partly idle
    a_host, b_host = np.arange(n, dtype=dtype), np.full(n, 0.5, dtype=dtype)
    a, b, out = lab.asarray(a_host), lab.asarray(b_host), lab.asarray(np.full(n, np.nan, dtype=dtype))
    assert add(a, b, out) is out
    np.testing.assert_array_equal(out.numpy(), a_host + b_host)


@gpu
@pytest.mark.parametrize("add", ADDS[2:])
def test_strided_views_read_every_other_element(add):
    a_host = np.arange(2000, dtype=np.float64)
    a, out = lab.asarray(a_host), lab.asarray(np.full(1000, np.nan))
    add(strided_view(a, 2), strided_view(a, 2), out)
    np.testing.assert_array_equal(out.numpy(), 2 * a_host[::2])


# ---- lesson 5: streams and events ----

class StreamProtocol:
    def __init__(self, answer):
        self.answer = answer

    def __cuda_stream__(self):
        return self.answer


def test_the_stream_argument_is_read_before_any_cuda_call():
    stream_of = lesson5_streams.stream_of
    assert stream_of(None) is None and stream_of(0x1234) == 0x1234
    assert stream_of(StreamProtocol((0, 0xABC0))) == 0xABC0
    with pytest.raises(TypeError, match="must be None, an int or an object with __cuda_stream__, got str"):
        stream_of("default")
    with pytest.raises(TypeError, match=r"must return \(version, handle\)"):
        stream_of(StreamProtocol(7))
    with pytest.raises(ValueError, match="has version 3; this reads version 0"):
        stream_of(StreamProtocol((3, 1)))
    with pytest.raises(TypeError, match="unexpected keyword argument 'strem'"):
        lesson5_streams.add(Vector(), Vector(), Vector(), strem=None)


@gpu
def test_add_on_a_stream_of_its_own_is_ordered_for_its_reader():
    """out is written on a side stream; lab's .numpy() copies on lab's current stream, which the
    lesson's events made wait for the launch (out's producer stream is ordered after it)."""
    n = 1 << 20
    a_host = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    a, out = lab.asarray(a_host), lab.asarray(np.full(n, np.nan, np.float32))
    side = lab.Stream()
    for _ in range(3):  # each launch on `side` waits for out's producer stream, and it for the launch
        lesson5_streams.add(a, a, out, stream=side)
    np.testing.assert_array_equal(out.numpy(), 2 * a_host)
    lesson5_streams.add(a, a, out, stream=side.__cuda_stream__()[1])
    np.testing.assert_array_equal(out.numpy(), 2 * a_host)


# ---- lesson 6: the DLPack C exchange API ----

def exchange_fakes():
    """tests/fakes.py's producer type, whose exchange table is built with ctypes: no GPU needed."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))
    import fakes
    return fakes


def test_describe_reads_the_exchange_table_of_the_type():
    fakes = exchange_fakes()
    got = lesson6_dlpack_exchange.describe(fakes.FakeExchangeTensor((5,), ptr=0x7F0000000000, strides=(2,),
                                                                    byte_offset=16))
    assert got == {"n": 5, "stride": 2, "dtype": "float32", "data": 0x7F0000000000 + 16,
                   "stream": fakes.STREAM_REPORTED}
    assert lesson6_dlpack_exchange.describe(fakes.FakeExchangeTensor((3,), bits=64))["dtype"] == "float64"


def test_the_exchange_table_is_checked_before_it_is_trusted():
    fakes = exchange_fakes()
    for bad, match in [(fakes.FakeExchangeTensor(bits=16), "1-D float32 or float64"),
                       (fakes.FakeExchangeTensor((2, 4)), "1-D float32 or float64"),
                       (fakes.FakeExchangeTensor(device_type=1), "not CUDA device memory")]:
        with pytest.raises(TypeError, match=match):
            lesson6_dlpack_exchange.describe(bad)

    class Forged:
        __dlpack_c_exchange_api__ = 0x1234  # an address is not a capsule: never dereferenced

    with pytest.raises(TypeError, match="must be a capsule named 'dlpack_exchange_api'"):
        lesson6_dlpack_exchange.add(Forged(), Forged(), Forged())
    with pytest.raises(TypeError, match="publishes no DLPack exchange API"):
        lesson6_dlpack_exchange.describe(Vector())


@gpu
def test_add_reads_torch_through_its_table_and_others_through_the_cai():
    torch = pytest.importorskip("torch")
    if getattr(type(torch.empty(0)), "__dlpack_c_exchange_api__", None) is None:
        pytest.skip("this torch publishes no DLPack exchange API (torch 2.11+ does)")
    a = torch.arange(1001, device="cuda", dtype=torch.float32)
    out = torch.full_like(a, float("nan"))
    assert lesson6_dlpack_exchange.add(a, a, out) is out
    torch.testing.assert_close(out, 2 * a)
    b = lab.asarray(np.full(1001, 0.5, np.float32))  # a lab.Array: read through its CAI
    lesson6_dlpack_exchange.add(a[::1], b, out)
    torch.testing.assert_close(out, a + 0.5)
    lesson6_dlpack_exchange.add(a[::2], a[::2], out[:501])  # DLPack strides are in elements
    torch.testing.assert_close(out[:501], 2 * a[::2])


# ---- lesson 7: a handler XLA calls ----

def test_the_handler_answers_the_metadata_query_and_refuses_before_any_cuda_call():
    """Frames built by hand, as XLA builds them (tests/xla_frames.py): the version question, stages
    before execution, and the refusals - all before a pointer is read."""
    import ctypes
    target = lesson7_xla_ffi.add_target()
    metadata = Metadata(ctypes.sizeof(Metadata), ApiVersion(ctypes.sizeof(ApiVersion), None, -1, -1), 99)
    extension = MetadataExtension(Extension(ctypes.sizeof(MetadataExtension), 1, None), ctypes.pointer(metadata))
    result, _ = Xla().call(target, [], [], extension=ctypes.cast(ctypes.pointer(extension), ctypes.POINTER(Extension)))
    assert result is None and (metadata.api_version.major_version, metadata.traits) == (0, 0)
    assert Xla().call(target, [(F32, (8,))], [], stage=1)[0] is None  # nothing to prepare
    vector = (F32, (8,))
    for args, rets, match in [([vector], [vector], "takes two float32 vectors"),
                              ([vector, (F64, (8,))], [vector], "takes two float32 vectors"),
                              ([vector, (F32, (2, 4))], [vector], "takes two float32 vectors"),
                              ([vector, (F32, (9,))], [vector], "must have one length")]:
        _, (code, message) = Xla().call(target, args, rets)
        assert code == 3 and match in message, message
    _, (code, _) = Xla(major=1).call(target, [vector, vector], [vector])
    assert code == 13


@pytest.mark.skipif(HAVE_GPU, reason="with a GPU the launch would read the frame's made-up pointers")
def test_without_a_gpu_the_launch_error_comes_back_as_an_xla_error():
    _, (code, message) = Xla().call(lesson7_xla_ffi.add_target(), [(F32, (8,)), (F32, (8,))], [(F32, (8,))])
    assert code == 13 and message  # CUDA's own words: no driver, no device


@gpu
def test_lesson7_add_runs_inside_jax_jit():
    jax = pytest.importorskip("jax")
    try:
        device = jax.devices("cuda")[0]
    except RuntimeError:
        pytest.skip("jax sees no CUDA device")
    import jax.numpy as jnp
    jax.ffi.register_ffi_target("lesson7_add", lesson7_xla_ffi.add_target(), platform="CUDA")
    a = jax.device_put(jnp.arange(1000, dtype=jnp.float32), device)

    @jax.jit
    def twice_plus_one(a):
        out = jax.ffi.ffi_call("lesson7_add", jax.ShapeDtypeStruct(a.shape, a.dtype))(a, a)
        return out + 1  # XLA's own kernel after the handler's, on the same stream

    np.testing.assert_array_equal(np.asarray(twice_plus_one(a)), 2 * np.arange(1000, dtype=np.float32) + 1)
