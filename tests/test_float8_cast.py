"""lab.cast_float8 without a GPU: the binding and the float8 cast kind's plan on fake producers (float8
outputs through DLPack's exchange API, as torch publishes them; the other arrays through
__cuda_array_interface__), every valid call getting as far as CUDA and every bad one refused by name.
The casts themselves are checked on the GPU (test_float8_cast_gpu.py)."""
import pytest

import lab
from fakes import FakeExchangeTensor, fake_array

E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"


def f8(shape, kind=E4M3, strides=None):
    return FakeExchangeTensor(shape=shape, code=kind, bits=8, strides=strides)


def scale(typestr="<f4", shape=()):
    return fake_array(shape, typestr)


def reaches_cuda(thunk):
    """Everything was checked: without a GPU, the first CUDA call is what fails."""
    if lab.is_available():
        pytest.skip("a GPU is here: tests/test_float8_cast_gpu.py casts for real")
    with pytest.raises(lab.CudaError):
        thunk()


@pytest.mark.parametrize("typestr", ["<f2", "<f4"])
@pytest.mark.parametrize("kind", [E4M3, E5M2])
@pytest.mark.parametrize("shape", [(1, 1), (7, 13), (64, 64), (257, 1031)])
@pytest.mark.parametrize("outputs", ["out", "out_t", "both"])
def test_a_valid_cast_gets_as_far_as_cuda(typestr, kind, shape, outputs):
    x = fake_array(shape, typestr)
    out = f8(shape, kind) if outputs != "out_t" else None
    out_t = f8(shape[::-1], kind) if outputs != "out" else None
    reaches_cuda(lambda: lab.cast_float8(x, scale(), out, out_t=out_t, amax=scale()))


@pytest.mark.parametrize("shape", [(5,), (2, 3, 4), ()])
def test_any_shape_casts_without_a_transpose(shape):
    reaches_cuda(lambda: lab.cast_float8(fake_array(shape, "<f4"), scale(), f8(shape)))


def test_an_empty_x_launches_nothing_but_still_writes_amax():
    x, out = fake_array((0, 16), "<f4"), f8((0, 16))
    assert lab.cast_float8(x, scale(), out) == (out, None)
    reaches_cuda(lambda: lab.cast_float8(x, scale(), out, amax=scale()))


BAD = [
    (lambda: (fake_array((4, 8), "<f8"), scale(), f8((4, 8))), {}, TypeError,
     "argument 'x' has dtype float64; it must be float16, bfloat16 or float32"),
    (lambda: (f8((4, 8)), scale(), f8((4, 8))), {}, TypeError,
     "argument 'x' is a float8_e4m3fn array; lab reads float8 arrays only as"),
    (lambda: (fake_array((4, 8), "<f4"), scale(), fake_array((4, 8), "<f2")), {}, TypeError,
     "argument 'out' has dtype float16; it must be float8_e4m3fn or float8_e5m2"),
    (lambda: (fake_array((4, 8), "<f4"), scale(), f8((8, 4))), {}, ValueError,
     "argument 'out' has shape (8, 4); it must have shape (4, 8) (the shape of 'x')"),
    (lambda: (fake_array((4, 8), "<f4"), scale(), f8((4, 8), strides=(1, 4))), {}, ValueError,
     "argument 'out' must be C-contiguous"),
    (lambda: (fake_array((4, 8), "<f4", strides=(4, 16)), scale(), f8((4, 8))), {}, ValueError,
     "argument 'x' must be C-contiguous"),
    (lambda: (fake_array((4, 8), "<f4"), scale(), None), {}, TypeError,
     "give 'out', 'out_t' or both"),
    (lambda: (fake_array((4, 8), "<f4"), scale(), None), {"out_t": f8((4, 8))}, ValueError,
     "argument 'out_t' has shape (4, 8); it must have shape (8, 4) (the shape of x's transpose)"),
    (lambda: (fake_array((32,), "<f4"), scale(), None), {"out_t": f8((32,))}, ValueError,
     "argument 'out_t' is x's transpose, and x has 1 dimension(s); it must be a matrix"),
    (lambda: (fake_array((4, 8), "<f4"), scale(), f8((4, 8))), {"out_t": f8((8, 4), E5M2)}, TypeError,
     "argument 'out_t' has dtype float8_e5m2; it must have the dtype of 'out', float8_e4m3fn"),
    (lambda: (fake_array((4, 8), "<f4"), scale("<f2"), f8((4, 8))), {}, TypeError,
     "argument 'scale' has dtype float16; it must be float32 (a per-tensor scale)"),
    (lambda: (fake_array((4, 8), "<f4"), scale(shape=(2,)), f8((4, 8))), {}, ValueError,
     "argument 'scale' has 2 elements; it must hold one (a per-tensor scale)"),
    (lambda: (fake_array((4, 8), "<f4"), scale(), f8((4, 8))), {"amax": scale("<f8")}, TypeError,
     "argument 'amax' has dtype float64; it must be float32 (one element)"),
    (lambda: (fake_array((4, 8), "<f4"), scale(), f8((4, 8))), {"amax": scale(shape=(3,))}, ValueError,
     "argument 'amax' has 3 elements; it must hold one"),
]


@pytest.mark.parametrize("make, kwargs, error, message", BAD, ids=[m[:40] for *_, m in BAD])
def test_a_bad_argument_is_refused_by_name(make, kwargs, error, message):
    with pytest.raises(error) as raised:
        lab.cast_float8(*make(), **kwargs)
    assert message in str(raised.value)
    assert str(raised.value).startswith("cast_float8(): ")


def test_an_output_sharing_memory_with_x_is_refused():
    x = fake_array((4, 8), "<f4")
    out = FakeExchangeTensor(shape=(4, 8), code=E4M3, bits=8, ptr=x.__cuda_array_interface__["data"][0])
    with pytest.raises(ValueError, match="'out' and 'x' share memory|'x' and 'out'"):
        lab.cast_float8(x, scale(), out)


def test_a_read_only_amax_is_refused():
    amax = fake_array((), "<f4", readonly=True)
    with pytest.raises(ValueError, match="argument 'amax' is read-only"):
        lab.cast_float8(fake_array((4, 8), "<f4"), scale(), f8((4, 8)), amax=amax)


def test_the_arguments_are_positional_then_keywords():
    with pytest.raises(TypeError, match="cast_float8"):
        lab.cast_float8(fake_array((4, 8), "<f4"), scale(), f8((4, 8)), f8((8, 4)))
