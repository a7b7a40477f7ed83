"""lab.matmul with float8 inputs, without a GPU: the float8 types read through DLPack (a fake
producer type publishing DLPack's C exchange API, as torch does) and refused by every other op, the
plan cuBLASLt's float8 kernels need (a row-major, b column-major: the library's A transposed and B
not; each input's own data type; the scales matched to the library's operands), and every refusal.
The products themselves are checked on the GPU (test_matmul_gpu.py)."""
import pytest

import lab
import lab.lab as core
from fakes import FakeExchangeTensor, fake_array

E4M3, E5M2 = "float8_e4m3fn", "float8_e5m2"
CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F = 28, 29, 2, 14, 0


def f8(rows, cols, kind=E4M3, column_major=False, ld=None):
    """A float8 matrix (rows x cols): row-major, or column-major (the transposed view of a row-major
    (cols x rows) one, as w.T is), with leading dimension ld (in elements)."""
    if column_major:
        strides = (1, ld or rows)
    else:
        strides = (ld or cols, 1)
    return FakeExchangeTensor(shape=(rows, cols), code=kind, bits=8, strides=strides)


def scale(typestr="<f4", shape=()):
    return fake_array(shape, typestr)


def out(rows, cols, typestr="<f2", transposed=False):
    item = int(typestr[-1])
    strides = (item, rows * item) if transposed else (cols * item, item)
    return fake_array((rows, cols), typestr, strides=strides)


SCALES = {"scale_a": scale(), "scale_b": scale()}


def plan(a, b, o, **kw):
    return core._matmul_plan(a, b, o, **{**SCALES, **kw})


def test_float8_is_read_through_dlpack():
    p = plan(f8(4, 32), f8(32, 16, column_major=True), out(4, 16))
    assert p["work"] and (p["m"], p["n"], p["k"]) == (16, 4, 32)
    assert (p["data_type"], p["b_data_type"], p["out_type"]) == (CUDA_R_8F_E4M3, CUDA_R_8F_E4M3, CUDA_R_16F)
    assert (p["compute_type"], p["scale_type"]) == (68, CUDA_R_32F)  # float32 accumulation and scales


def test_row_major_out_gives_the_library_a_transposed_and_b_not():
    """out^T = b^T @ a^T: the library's A is b (column-major, so read transposed), its B is a (row-major
    a is a^T in column-major storage, read as it is) - cuBLASLt's "TN" - and scale_b goes with A."""
    p = plan(f8(4, 32), f8(32, 16, column_major=True), out(4, 16))
    assert p["swapped"] and p["A_is"] == "b" and p["A_scale_is"] == "scale_b"
    assert p["A"]["trans"] and not p["B"]["trans"]
    assert p["A"]["ld"] == 32 and p["B"]["ld"] == 32


@pytest.mark.parametrize("fast", [False, True])
def test_fast_accum_reaches_the_plan(fast):
    """fast_accum is part of the problem (its own cached descriptor), off unless asked for."""
    p = plan(f8(4, 32), f8(32, 16, column_major=True), out(4, 16), fast_accum=fast)
    assert p["fast_accum"] is fast
    assert plan(f8(4, 32), f8(32, 16, column_major=True), out(4, 16))["fast_accum"] is False


def test_column_major_out_keeps_the_same_flags():
    p = plan(f8(4, 32), f8(32, 16, column_major=True), out(4, 16, transposed=True))
    assert not p["swapped"] and p["A_is"] == "a" and p["A_scale_is"] == "scale_a"
    assert p["A"]["trans"] and not p["B"]["trans"]


@pytest.mark.parametrize("a_kind, b_kind", [(E4M3, E5M2), (E5M2, E4M3)])
def test_mixed_float8_types_keep_each_operands_type(a_kind, b_kind):
    p = plan(f8(4, 32, a_kind), f8(32, 16, b_kind, column_major=True), out(4, 16))
    codes = {E4M3: CUDA_R_8F_E4M3, E5M2: CUDA_R_8F_E5M2}
    assert (p["data_type"], p["b_data_type"]) == (codes[b_kind], codes[a_kind])  # A is b, B is a


@pytest.mark.parametrize("o, out_type", [
    (out(4, 16, "<f4"), CUDA_R_32F),
    (FakeExchangeTensor(shape=(4, 16), code="bfloat", bits=16), CUDA_R_16BF),
])
def test_wider_outs(o, out_type):
    assert plan(f8(4, 32), f8(32, 16, column_major=True), o)["out_type"] == out_type


def test_a_single_column_b_is_column_major():
    """b of one column is both row- and column-major; float8 reads it as column-major."""
    b = FakeExchangeTensor(shape=(32, 1), code=E4M3, bits=8, strides=(1, 1))
    p = plan(f8(4, 32), b, out(4, 1))
    assert p["A"]["trans"] and not p["B"]["trans"]


@pytest.mark.parametrize("kw", [{}, {"epilogue": "relu"}, {"epilogue": "gelu_tanh", "bias": fake_array((16,), "<f2")},
                                {"c": out(4, 16), "beta": 0.5}])
def test_forward_epilogues_and_c(kw):
    assert plan(f8(4, 32), f8(32, 16, column_major=True), out(4, 16), **kw)["work"]


@pytest.mark.parametrize("args, kw, error, words", [
    ((f8(4, 32), f8(32, 16), out(4, 16)), {}, ValueError, "float8 'b' must have its columns contiguous"),
    ((f8(4, 32, column_major=True), f8(32, 16, column_major=True), out(4, 16)), {}, ValueError,
     "float8 'a' must have its rows contiguous"),
    ((f8(4, 24), f8(24, 16, column_major=True), out(4, 16)), {}, ValueError, "a multiple of 16"),
    ((f8(4, 32), f8(32, 16, column_major=True, ld=40), out(4, 16)), {}, ValueError, "a multiple of 16"),
    ((f8(4, 32), f8(32, 16, column_major=True), out(4, 16)), {"scale_a": None}, TypeError,
     "float8 inputs need 'scale_a' and 'scale_b'"),
    ((f8(4, 32), f8(32, 16, column_major=True), out(4, 16)), {"scale_b": scale("<f2")}, TypeError,
     "argument 'scale_b' has dtype float16; it must be float32"),
    ((f8(4, 32), f8(32, 16, column_major=True), out(4, 16)), {"scale_a": scale(shape=(2,))}, ValueError,
     "argument 'scale_a' has 2 elements; it must hold one"),
    ((f8(4, 32, E5M2), f8(32, 16, E5M2, column_major=True), out(4, 16)), {}, TypeError, "both float8_e5m2"),
    ((f8(4, 32), f8(32, 16, column_major=True), out(4, 16, "<f8")), {}, TypeError,
     "for float8 inputs it must be bfloat16, float16 or float32"),
    ((f8(4, 32), fake_array((32, 16), "<f2"), out(4, 16)), {}, TypeError, "must both be float8 or neither"),
    ((fake_array((4, 32), "<f2"), fake_array((32, 16), "<f2"), out(4, 16)), {}, TypeError,
     "'scale_a' and 'scale_b' scale float8 inputs"),
    ((fake_array((4, 32), "<f2"), fake_array((32, 16), "<f2"), out(4, 16)),
     {"scale_a": None, "scale_b": None, "fast_accum": True}, ValueError, "'fast_accum' is for float8 inputs"),
    ((f8(4, 32), f8(32, 16, column_major=True), out(4, 16, "<f4")), {"bias": fake_array((16,), "<f4")}, ValueError,
     "'bias' goes with a bfloat16 or float16 out"),
    ((f8(4, 32), f8(32, 16, column_major=True), out(4, 16)), {"bias": fake_array((16,), "<f4")}, TypeError,
     "argument 'bias' has dtype float32; it must be out's, float16"),
    ((f8(4, 32), f8(32, 16, column_major=True), out(4, 16)), {"epilogue": "gelu_tanh", "aux_out": out(4, 16)},
     ValueError, "are not offered"),
    ((f8(4, 32), f8(32, 16, column_major=True), out(4, 16)), {"epilogue": "dgelu", "aux": out(4, 16)}, ValueError,
     "are not offered"),
    ((f8(4, 32), f8(32, 16, column_major=True), FakeExchangeTensor(shape=(4, 16), code=E4M3, bits=8)), {}, TypeError,
     "argument 'out' is a float8_e4m3fn array; lab reads float8 arrays only as lab.matmul's 'a' and 'b'"),
])
def test_refusals(args, kw, error, words):
    kw = {k: v for k, v in {**SCALES, **kw}.items() if v is not None}  # None: that scale left out
    with pytest.raises(error) as raised:
        core._matmul_plan(*args, **kw)
    assert words in str(raised.value)
    with pytest.raises(error):  # lab.matmul refuses the same way, before looking for cuBLASLt
        lab.matmul(*args, **kw)


@pytest.mark.parametrize("kind", [E4M3, E5M2])
def test_every_other_op_refuses_float8(kind):
    x = FakeExchangeTensor(shape=(8,), code=kind, bits=8)
    with pytest.raises(TypeError, match=rf"argument 'x' is a {kind} array; lab reads float8 arrays only as lab.matmul"):
        lab.relu(x, fake_array((8,)))
    with pytest.raises(TypeError, match=rf"argument 'xs\[0\]' is a {kind} array"):
        lab.foreach_add([x], [fake_array((8,))], [fake_array((8,))])
