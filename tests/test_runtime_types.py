"""lab's runtime API on any machine: the thread-local current stream, argument checking of
lab.Stream / lab.Event / lab.empty / lab.zeros / lab.asarray, and the no-GPU errors."""
import inspect
import threading

import pytest

import lab
from conftest import HAVE_GPU

no_gpu_only = pytest.mark.skipif(HAVE_GPU, reason="checks the behaviour without a driver")


class FakeStream:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def test_current_stream_is_none_by_default():
    assert lab.current_stream() is None


def test_stream_context_sets_and_restores():
    s, t = FakeStream(0x1000), FakeStream(0x2000)
    with lab.stream(s) as entered:
        assert entered is s and lab.current_stream() is s
        with lab.stream(t):
            assert lab.current_stream() is t
        assert lab.current_stream() is s
    assert lab.current_stream() is None


def test_stream_context_restores_after_an_exception():
    with pytest.raises(KeyError):
        with lab.stream(5):
            raise KeyError
    assert lab.current_stream() is None


def test_stream_none_changes_nothing():
    with lab.stream(7):
        with lab.stream(None):
            assert lab.current_stream() == 7


def test_current_stream_is_thread_local():
    seen = {}
    barrier = threading.Barrier(2)

    def worker(name, handle):
        with lab.stream(handle):
            barrier.wait()  # both threads are inside their own block now
            seen[name] = lab.current_stream()
            barrier.wait()

    threads = [threading.Thread(target=worker, args=(n, h)) for n, h in (("a", 11), ("b", 22))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"a": 11, "b": 22} and lab.current_stream() is None


@pytest.mark.parametrize("bad, error", [("x", TypeError), (-3, ValueError), (object(), TypeError)])
def test_stream_context_validates(bad, error):
    with pytest.raises(error):
        with lab.stream(bad):
            pass
    assert lab.current_stream() is None


def test_signatures():
    assert str(inspect.signature(lab.empty)) == "(shape, dtype='float32', *, device=None, stream=None)"
    assert str(inspect.signature(lab.zeros)) == "(shape, dtype='float32', *, device=None, stream=None)"
    assert str(inspect.signature(lab.Event.record)) == "(self, /, stream=None)" or "stream" in lab.Event.record.__doc__


@pytest.mark.parametrize("args, kwargs, error, pattern", [
    (((3,), "complex64"), {}, TypeError, "argument 'dtype' = 'complex64' is not supported"),
    (((3,), "nonsense"), {}, TypeError, "argument 'dtype' must be a dtype name such as 'float32' or 'bfloat16', a NumPy "
                                        "spelling such as 'f4', or a NumPy dtype, got 'nonsense'"),
    (((3,), "c8"), {}, TypeError, "argument 'dtype' = 'complex64' is not supported"),
    (((3,), 3.5), {}, TypeError, "argument 'dtype' must be a dtype name"),
    (((-1,),), {}, ValueError, r"argument 'shape' item 0 = -1 is not a valid size"),
    ((("a",),), {}, TypeError, r"argument 'shape' item 0 must be an int"),
    ((3.5,), {}, TypeError, "argument 'shape' must be an int or a tuple"),
    (((1,) * 9,), {}, ValueError, "at most 8"),
    (((2**40, 2**40),), {}, OverflowError, "too large"),
    (((3,),), {"stream": "s"}, TypeError, "argument 'stream' must be None"),
    (((3,),), {"device": -1}, ValueError, "argument 'device' must be a CUDA device ordinal"),
    (((3,),), {"bogus": 1}, TypeError, "unexpected keyword argument 'bogus'"),
    (((3,), "float32", 0), {}, TypeError, "at most 2 positional arguments"),
])
def test_empty_validates_before_cuda(args, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        lab.empty(*args, **kwargs)
    with pytest.raises(error, match=pattern.replace("empty", "zeros")):
        lab.zeros(*args, **kwargs)


def test_array_cannot_be_made_directly():
    with pytest.raises(TypeError):
        lab.Array()


def test_types_are_lab_types():
    assert lab.Stream.__module__ == "lab" and lab.Event.__module__ == "lab" and lab.Array.__module__ == "lab"
    assert "Stream(device=None, priority=0)" in lab.Stream.__doc__ or inspect.signature(lab.Stream)


@no_gpu_only
@pytest.mark.parametrize("make", [lambda: lab.Stream(), lambda: lab.Event(timing=True), lambda: lab.empty((4,)),
                                  lambda: lab.zeros(4, "int8"), lambda: lab.asarray([1.0, 2.0]),
                                  lambda: lab.synchronize(), lambda: lab.mem_get_info(),
                                  lambda: lab.memory_allocated(), lambda: lab.memory_reserved(0),
                                  lambda: lab.memory_stats(), lambda: lab.max_memory_allocated(0),
                                  lambda: lab.reset_peak_memory_stats(), lambda: lab.empty_cache()],
                         ids=["Stream", "Event", "empty", "zeros", "asarray", "synchronize", "mem_get_info",
                              "memory_allocated", "memory_reserved", "memory_stats", "max_memory_allocated",
                              "reset_peak_memory_stats", "empty_cache"])
def test_no_gpu_raises_cuda_error(make):
    with pytest.raises(lab.CudaError, match="no CUDA driver/GPU was found"):
        make()


def test_synchronize_argument_checks():
    with pytest.raises(ValueError, match=r"synchronize\(\): argument 'device' must be a CUDA device ordinal"):
        lab.synchronize(-2)
    with pytest.raises(TypeError, match="at most 1 positional argument"):
        lab.mem_get_info(0, 1)
    with pytest.raises(ValueError, match=r"memory_allocated\(\): argument 'device' must be a CUDA device ordinal"):
        lab.memory_allocated(-1)
    with pytest.raises(TypeError, match="memory_reserved.. takes at most 1 positional argument"):
        lab.memory_reserved(0, 1)
    for memory_function in (lab.memory_stats, lab.max_memory_allocated, lab.reset_peak_memory_stats,
                            lab.empty_cache):
        name = memory_function.__name__
        with pytest.raises(TypeError, match=rf"{name}\(\): argument 'device' must be an int, got str"):
            memory_function("0")
        with pytest.raises(ValueError, match=rf"{name}\(\): argument 'device' must be a CUDA device ordinal"):
            memory_function(-1)


def test_out_of_memory_error_is_a_cuda_error_and_a_memory_error():
    assert issubclass(lab.OutOfMemoryError, lab.CudaError)
    assert issubclass(lab.OutOfMemoryError, MemoryError)
    assert lab.OutOfMemoryError.__module__ == "lab"


@pytest.mark.parametrize("spelling, name", [("f4", "float32"), ("<f4", "float32"), ("single", "float32"),
                                            ("float", "float64"), ("f2", "float16"), ("i1", "int8"),
                                            ("uint8", "uint8"), ("bfloat16", "bfloat16"), ("int64", "int64")])
def test_empty_accepts_numpy_dtype_spellings(spelling, name):
    """Validation accepts every spelling numpy.dtype() knows; without a GPU the call then stops at CUDA."""
    try:
        arr = lab.empty(4, spelling)
    except lab.CudaError as error:
        assert not HAVE_GPU and "no CUDA driver/GPU" in str(error)
    else:
        assert arr.dtype == name


@pytest.mark.parametrize("call", [lambda: lab.get_device_properties("x"), lambda: lab.synchronize("x"),
                                  lambda: lab.mem_get_info(1.5), lambda: lab.memory_allocated(True)],
                         ids=["get_device_properties", "synchronize", "mem_get_info", "memory_allocated"])
def test_device_arguments_name_the_function(call):
    name = call.__code__.co_names[-1]
    with pytest.raises(TypeError, match=rf"^{name}\(\): argument 'device' must be an int, got"):
        call()


def test_event_timing_has_one_spelling_per_call():
    with pytest.raises(TypeError, match="arguments 'timing' and 'enable_timing' say the same: pass one, not both"):
        lab.Event(True, enable_timing=True)
    assert "enable_timing" in lab.Event.__doc__
