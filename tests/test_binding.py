"""The binding layer on any machine: argument parsing, protocol reading, validation and errors,
driven by fake producers. Nothing here needs a GPU; tests that reach the launch expect the no-GPU
error where there is none and are skipped where there is one (fake pointers must never launch)."""
import inspect

import pytest

import lab
import lab.lab as core
from conftest import HAVE_GPU
from fakes import (FAKE_POINTER, STREAM_REPORTED, CudaArrayWithDict, FakeExchangeTensor, RaisingInterface,
                   fake_array)

BINARY = ["vector_add", "add", "sub", "mul", "div", "maximum", "minimum", "add_relu"]
UNARY = ["neg", "abs", "sqrt", "exp", "relu", "sigmoid", "silu", "gelu"]
INTEGER_OPS = {"vector_add", "add", "sub", "mul", "maximum", "minimum", "neg", "abs", "copy"}
GLU = ["swiglu", "geglu"]  # binary, with the parameters named (gate, up, out)
ALL_OPS = BINARY + UNARY + GLU + ["fused_add_mul", "axpby", "copy"]

no_gpu_only = pytest.mark.skipif(HAVE_GPU, reason="fake pointers must not reach a real GPU")


def call(name, *arrays, **kw):
    """Calls op `name` with positional CUDA arrays in its natural order (scalars filled in)."""
    fn = getattr(lab, name)
    if name == "axpby":
        x, y, out = arrays
        return fn(2.0, x, 3.0, y, out, **kw)
    if name == "fused_add_mul" and len(arrays) == 3:
        a, b, out = arrays
        return fn(a, b, 2.0, out, **kw)
    return fn(*arrays, **kw)


def n_arrays(name):
    return 2 if name in UNARY or name == "copy" else 3


# ---- module surface ----

def test_version_and_runtime_facts():
    assert lab.__version__ == "0.1.0" == core.__version__
    major, minor = lab.cuda_runtime_version()
    assert major >= 12 and minor >= 0
    assert lab.device_count() >= (1 if HAVE_GPU else 0)
    assert "sm_" in lab.compiled_architectures()


def test_cuda_error_is_a_runtime_error():
    assert issubclass(lab.CudaError, RuntimeError)
    assert lab.CudaError.__module__ == "lab"


@pytest.mark.parametrize("name", ALL_OPS)
def test_text_signatures(name):
    sig = inspect.signature(getattr(lab, name))
    params = list(sig.parameters.values())
    assert params[-1].name == "stream" and params[-1].kind is inspect.Parameter.KEYWORD_ONLY
    assert params[-1].default is None
    assert getattr(lab, name).__text_signature__.startswith("(")
    assert "Writes into" in getattr(lab, name).__doc__ or name == "copy"


def test_specific_signatures():
    assert str(inspect.signature(lab.add)) == "(a, b, out, *, alpha=1, stream=None)"
    assert str(inspect.signature(lab.axpby)) == "(alpha, x, beta, y, out, *, stream=None)"
    assert str(inspect.signature(lab.fused_add_mul)) == "(a, b, s, out, *, stream=None)"
    assert str(inspect.signature(lab.gelu)) == "(x, out, *, approximate='none', stream=None)"
    assert str(inspect.signature(lab.copy)) == "(src, dst, *, stream=None)"
    assert str(inspect.signature(lab.swiglu)) == "(gate, up, out, *, stream=None)"
    assert str(inspect.signature(lab.geglu)) == "(gate, up, out, *, stream=None)"


# ---- argument parsing ----

def test_too_many_positional():
    with pytest.raises(TypeError, match=r"add\(\) takes 3 positional arguments but 4 were given"):
        lab.add(fake_array(), fake_array(), fake_array(), 1)


def test_missing_argument():
    with pytest.raises(TypeError, match=r"missing required argument 'out'"):
        lab.add(fake_array(), fake_array())


def test_unknown_keyword():
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'bogus'"):
        lab.relu(fake_array(), fake_array(), bogus=1)


def test_duplicate_argument():
    with pytest.raises(TypeError, match=r"multiple values for argument 'a'"):
        lab.add(fake_array(), fake_array(), fake_array(), a=fake_array())


def test_keywords_are_accepted_by_name():
    a, b, out = fake_array(shape=(0,)), fake_array(shape=(0,)), fake_array(shape=(0,))
    assert lab.add(b=b, a=a, out=out, alpha=2) is out
    assert lab.copy(src=a, dst=out) is out


# ---- what is not a CUDA array ----

@pytest.mark.parametrize("bad", [None, 3, [1.0, 2.0], "x", object()], ids=lambda v: type(v).__name__)
@pytest.mark.parametrize("position", [0, 1, 2])
def test_non_arrays_are_refused(bad, position):
    args = [fake_array(), fake_array(), fake_array()]
    args[position] = bad
    name = ["a", "b", "out"][position]
    with pytest.raises(TypeError, match=rf"add\(\): argument '{name}' must be a CUDA array"):
        lab.add(*args)


def test_numpy_array_is_refused():
    np = pytest.importorskip("numpy")
    with pytest.raises(TypeError, match=r"argument 'x' is a numpy.ndarray in host memory.*lab.asarray\(x\)"):
        lab.relu(np.zeros(4, np.float32), fake_array(shape=(4,)))


def test_producer_error_propagates():
    with pytest.raises(RuntimeError, match="producer refuses"):
        lab.relu(RaisingInterface(), fake_array())


# ---- malformed __cuda_array_interface__ ----

def base_cai(**changes):
    cai = {"shape": (8,), "typestr": "<f4", "data": (FAKE_POINTER, False), "version": 3}
    cai.update(changes)
    return {k: v for k, v in cai.items() if v is not _DROP}


_DROP = object()


@pytest.mark.parametrize("cai, error, pattern", [
    ([1, 2], TypeError, "must be a dict"),
    (base_cai(shape=_DROP), TypeError, "no 'shape' key"),
    (base_cai(typestr=_DROP), TypeError, "no 'typestr' key"),
    (base_cai(data=_DROP), TypeError, "no 'data' key"),
    (base_cai(version=_DROP), TypeError, "no 'version' key"),
    (base_cai(version="3"), TypeError, "'version'.* must be a non-negative int"),
    (base_cai(shape=[8]), TypeError, "'shape'.* must be a tuple"),
    (base_cai(shape=(8.0,)), TypeError, r"'shape'\]\[0\] must be an int"),
    (base_cai(shape=(-1,)), ValueError, "is not a valid size"),
    (base_cai(shape=(2**70,)), ValueError, "is not a valid size"),
    (base_cai(shape=(2**40, 2**40)), OverflowError, "overflows int64"),
    (base_cai(shape=(1,) * 9), ValueError, "9 dimensions; lab supports at most 8"),
    (base_cai(typestr=4), TypeError, "'typestr'.* must be a str"),
    (base_cai(typestr="f4"), ValueError, "malformed typestr"),
    (base_cai(typestr="<x4"), ValueError, "malformed typestr"),
    (base_cai(typestr="<f"), ValueError, "malformed typestr"),
    (base_cai(typestr=">f4"), ValueError, "big-endian"),
    (base_cai(typestr="<V2"), TypeError, "will not guess"),
    (base_cai(typestr="<c8"), TypeError, "unsupported dtype.*'<c8'.*float16, bfloat16"),
    (base_cai(typestr="|b1"), TypeError, "unsupported dtype"),
    (base_cai(typestr="<u4"), TypeError, "unsupported dtype"),
    (base_cai(data=FAKE_POINTER), TypeError, "'data'.* must be a tuple"),
    (base_cai(data=(FAKE_POINTER,)), TypeError, "'data'.* must be a tuple"),
    (base_cai(data=("0x10", False)), TypeError, "'data'.* must be a tuple"),
    (base_cai(data=(-16, False)), ValueError, "not a valid address"),
    (base_cai(data=(0, False)), ValueError, "null data pointer but 8 elements"),
    (base_cai(strides=(3,)), ValueError, "not a multiple of the item size"),
    (base_cai(strides=(4, 4)), ValueError, "must be None or a tuple of 1 ints"),
    (base_cai(strides=[4]), ValueError, "must be None or a tuple"),
    (base_cai(mask=object()), ValueError, "masked array"),
    (base_cai(stream=0), ValueError, "stream'\\] is 0, which the protocol forbids"),
    (base_cai(stream=-5), ValueError, "not a valid handle"),
    (base_cai(stream="s"), TypeError, "'stream'.* must be None or an int"),
])
def test_malformed_interface(cai, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        lab.relu(CudaArrayWithDict(cai), fake_array())
    assert "argument 'x'" in str(info.value) or "must be a dict" in str(info.value)


@pytest.mark.parametrize("typestr, dtype", [
    ("<f2", "float16"), ("<f4", "float32"), ("<f8", "float64"), ("=f4", "float32"), ("|i1", "int8"),
    ("<i1", "int8"), ("<i2", "int16"), ("<i4", "int32"), ("<i8", "int64"), ("|u1", "uint8"), (">i1", "int8"),
])
def test_typestrs_read(typestr, dtype):
    assert core._array_info(fake_array(typestr=typestr))["dtype"] == dtype


def test_interface_fields_read():
    info = core._array_info(fake_array(shape=(3, 4), typestr="<f8", strides=(8, 24), stream=1234, readonly=True,
                                       ptr=FAKE_POINTER))
    assert info == {"source": "cuda_array_interface", "dtype": "float64", "shape": (3, 4), "strides": (1, 3),
                    "numel": 12, "data": FAKE_POINTER, "readonly": True, "device": -1, "stream": 1234,
                    "contiguous": False}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_interface_versions(version):
    info = core._array_info(fake_array(shape=(2, 5), version=version, strides=None, mask=None, stream=None))
    assert info["strides"] == (5, 1) and info["contiguous"] and info["stream"] is None


def test_empty_array_may_have_null_pointer():
    info = core._array_info(fake_array(shape=(0, 3), ptr=0))
    assert info["numel"] == 0


def test_size_one_dims_do_not_break_contiguity():
    assert core._array_info(fake_array(shape=(4, 1), strides=(4, 999 * 4)))["contiguous"]


# ---- validation before CUDA ----

def test_readonly_out():
    with pytest.raises(ValueError, match=r"argument 'out' is read-only"):
        lab.add(fake_array(), fake_array(), fake_array(readonly=True))


def test_readonly_input_is_fine_until_launch():
    out = fake_array(shape=(0,))
    assert lab.add(fake_array(shape=(0,), readonly=True), fake_array(shape=(0,)), out) is out


def test_shape_mismatch_names_the_inputs():
    with pytest.raises(ValueError, match=r"cannot be broadcast together: 'a' has shape \(8,\), 'b' has shape \(4, 2\)"):
        lab.mul(fake_array(), fake_array(shape=(4, 2)), fake_array(shape=(4, 2)))


def test_output_must_have_the_broadcast_shape():
    with pytest.raises(ValueError, match=r"argument 'out' has shape \(8,\) but the inputs broadcast to \(3, 8\)"):
        lab.add(fake_array(shape=(3, 8)), fake_array(), fake_array())


@pytest.mark.parametrize("name", sorted(set(ALL_OPS) - INTEGER_OPS))
def test_float_only_ops_refuse_integers(name):
    arrays = [fake_array(typestr="<i4") for _ in range(n_arrays(name))]
    with pytest.raises(TypeError, match=r"argument '(x|a|gate)' has dtype int32(.*other inputs\))?; this op computes on floating-point"):
        call(name, *arrays)


def test_alpha_must_be_int_for_integer_dtypes():
    with pytest.raises(TypeError, match=r"argument 'alpha' must be an int for integer dtype int16, got float"):
        lab.add(*(fake_array(typestr="<i2") for _ in range(3)), alpha=1.5)


def test_alpha_must_be_a_number():
    with pytest.raises(TypeError, match=r"argument 'alpha' must be a real number, got str"):
        lab.add(fake_array(), fake_array(), fake_array(), alpha="2")


def test_alpha_overflow():
    with pytest.raises(OverflowError, match="'alpha' does not fit in int64"):
        lab.add(*(fake_array(typestr="<i8") for _ in range(3)), alpha=2**70)


def test_axpby_scalars_named():
    with pytest.raises(TypeError, match=r"argument 'beta' must be a real number"):
        lab.axpby(1.0, fake_array(), None, fake_array(), fake_array())


def test_fused_scale_must_be_array_or_number():
    with pytest.raises(TypeError, match=r"argument 's' must be a CUDA array or a Python number"):
        lab.fused_add_mul(fake_array(), fake_array(), "2", fake_array())


def test_gelu_approximate_values():
    with pytest.raises(ValueError, match=r"'approximate' must be 'none' or 'tanh', got 'fast'"):
        lab.gelu(fake_array(), fake_array(), approximate="fast")
    out = fake_array(shape=(0,))
    assert lab.gelu(fake_array(shape=(0,)), out, approximate="tanh") is out


@pytest.mark.parametrize("stream, error, pattern", [
    (object(), TypeError, "argument 'stream' must be None, an int handle, or an object with __cuda_stream__"),
    (-1, ValueError, "not a valid stream handle"),
    (True, TypeError, "got bool"),
    (1.5, TypeError, "argument 'stream' must be None"),
])
def test_bad_stream_argument(stream, error, pattern):
    with pytest.raises(error, match=pattern):
        lab.add(fake_array(), fake_array(), fake_array(), stream=stream)


class BadStreamProtocol:
    def __cuda_stream__(self):
        return 5


def test_bad_cuda_stream_protocol():
    with pytest.raises(TypeError, match=r"__cuda_stream__\(\) must return a tuple"):
        lab.add(fake_array(), fake_array(), fake_array(), stream=BadStreamProtocol())


# ---- empty arrays: validated, then nothing launched, even without a GPU ----

@pytest.mark.parametrize("name", ALL_OPS)
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 0, 5)])
def test_empty_arrays_succeed_without_cuda(name, shape):
    arrays = [fake_array(shape=shape, ptr=0) for _ in range(n_arrays(name))]
    assert call(name, *arrays) is arrays[-1]


# ---- the DLPack C exchange path, through a fake producer type ----

def test_exchange_api_is_read():
    info = core._array_info(FakeExchangeTensor(shape=(2, 3), code="bfloat", bits=16, device_id=0, byte_offset=64,
                                               ptr=FAKE_POINTER))
    assert info["source"] == "dlpack_exchange" and info["dtype"] == "bfloat16"
    assert info["shape"] == (2, 3) and info["strides"] == (3, 1) and info["data"] == FAKE_POINTER + 64
    assert info["device"] == 0 and not info["readonly"]


def test_exchange_api_strides_in_elements():
    info = core._array_info(FakeExchangeTensor(shape=(2, 3), strides=(1, 2)))
    assert info["strides"] == (1, 2) and not info["contiguous"]


def test_exchange_api_cpu_tensor_refused():
    with pytest.raises(TypeError, match=r"argument 'x' must be a CUDA array, got a FakeExchangeTensor object on the CPU"):
        lab.relu(FakeExchangeTensor(device_type=1), fake_array())


@pytest.mark.parametrize("code, bits, lanes", [("complex", 64, 1), ("bool", 8, 1), ("float", 32, 4), ("uint", 32, 1)])
def test_exchange_api_unsupported_dtype(code, bits, lanes):
    with pytest.raises(TypeError, match=r"argument 'x' has an unsupported dtype \(DLPack code"):
        lab.relu(FakeExchangeTensor(code=code, bits=bits, lanes=lanes), fake_array())


def test_exchange_api_devices_must_match():
    a, b, out = (FakeExchangeTensor(device_id=d) for d in (0, 1, 0))
    with pytest.raises(ValueError, match=r"argument 'b' is on cuda:1 but 'out' is on cuda:0"):
        lab.add(a, b, out)


# ---- reaching CUDA on a machine without it ----

@no_gpu_only
@pytest.mark.parametrize("name", ALL_OPS)
def test_no_gpu_raises_cuda_error(name):
    arrays = [fake_array() for _ in range(n_arrays(name))]
    with pytest.raises(lab.CudaError, match=r"no CUDA driver/GPU was found") as info:
        call(name, *arrays)
    assert info.value.code in (35, 100) and info.value.name in ("cudaErrorInsufficientDriver", "cudaErrorNoDevice")
    assert str(info.value).startswith(f"{name}(): CUDA error")


@no_gpu_only
def test_no_gpu_facts():
    assert lab.is_available() is False
    assert lab.device_count() == 0
    with pytest.raises(lab.CudaError):
        lab.get_device_properties(0)


@no_gpu_only
def test_no_gpu_with_exchange_tensor_and_explicit_stream():
    a, b, out = (FakeExchangeTensor() for _ in range(3))
    with pytest.raises(lab.CudaError, match="no CUDA driver"):
        lab.add(a, b, out, stream=7)
    assert STREAM_REPORTED  # the fake producer's stream is only asked for at launch


# ---- size and address arithmetic that must not overflow ----

@pytest.mark.parametrize("kw", [
    dict(shape=(3,), strides=(2**62,), ptr=16),            # (3-1) * 2^62 * 4 bytes overflows int64
    dict(shape=(3,), strides=(-64,), ptr=16),              # a negative stride walks below address 0
    dict(shape=(4,), ptr=2**64 - 8),                       # the last element is past 2^64
    dict(shape=(2**59,), typestr="<f8", ptr=2**63 + 2**62 + 16),  # 2^62 bytes from past 2^63 + 2^62
    dict(shape=(3, 2), strides=(2**62, 4), ptr=16),        # (3-1) * 2^62 bytes overflows int64
])
def test_views_reaching_outside_the_address_space_are_refused(kw):
    with pytest.raises(ValueError, match="reach outside the address space"):
        core._array_info(fake_array(**kw))


def test_byte_size_overflow_is_an_overflow_error():
    with pytest.raises(OverflowError, match="overflows int64"):
        core._array_info(fake_array(shape=(2**61,), typestr="<f8", ptr=16))


def test_large_but_representable_views_are_read():
    info = core._array_info(fake_array(shape=(2**40,), ptr=2**63))  # 4 TiB from 2^63: fits below 2^64
    assert info["numel"] == 2**40
    info = core._array_info(fake_array(shape=(10,), strides=(-4,), ptr=4096))  # x[::-1] of a buffer at 4096-36
    assert info["strides"] == (-1,)


class CountingProducer:
    """A producer whose __cuda_array_interface__ is a class-level property, as in CuPy and Numba,
    counting how often the (costly, per-access) dict is built."""
    builds = 0

    def __init__(self, shape):
        self._cai = {"shape": shape, "typestr": "<f4", "data": (0, False), "version": 3}

    @property
    def __cuda_array_interface__(self):
        type(self).builds += 1
        return self._cai


def test_each_protocol_dict_is_built_once_per_call():
    arrays = [CountingProducer((0,)) for _ in range(4)]
    CountingProducer.builds = 0
    lab.fused_add_mul(arrays[0], arrays[1], arrays[2], arrays[3])  # `s` an array: probed, then read
    assert CountingProducer.builds == 4


def test_scale_array_with_an_instance_attribute_interface():
    a, b, s, out = (fake_array(shape=(0,), ptr=0) for _ in range(4))
    assert lab.fused_add_mul(a, b, s, out) is out
    with pytest.raises(ValueError, match=r"cannot be broadcast together: .*'s' has shape \(3,\)"):
        lab.fused_add_mul(fake_array(shape=(0,)), fake_array(shape=(0,)), fake_array(shape=(3,)), fake_array(shape=(0,)))


@pytest.mark.parametrize("name", ["add", "mul", "relu", "gelu", "fused_add_mul", "axpby", "copy"])
def test_docstrings_describe_layouts_and_dtype_mixes(name):
    doc = getattr(lab, name).__doc__
    assert "broadcast" in doc and "any strides" in doc and "dtypes may mix" in doc
    assert "C-contiguous" not in doc and "one shape and dtype" not in doc


def test_copy_docstring_names_its_own_output():
    doc = lab.copy.__doc__
    assert "writes into `dst`" in doc and "`out`" not in doc
