"""lab.matmul without a GPU: the plan that maps NumPy's row-major product onto column-major cuBLASLt
(which operand is the library's A, which transpose flag and leading dimension each gets, how
batches collapse), every refusal with its message, and the search for cuBLASLt with the message a
user gets when it is missing. Fake producers expose only __cuda_array_interface__."""
import os
import subprocess
import sys

import pytest

import lab
import lab.lab as core
from fakes import fake_array

F32 = "<f4"


def matrix(rows, cols, typestr=F32, transposed=False, ld=None, batch=()):
    """A fake matrix (rows x cols), row-major with leading dimension ld, or a transposed view of a
    row-major (cols x rows) one."""
    item = int(typestr[-1])
    if transposed:
        ld = ld or rows
        strides = (item, ld * item)
    else:
        ld = ld or cols
        strides = (ld * item, item)
    batch_strides, span = [], rows * cols * item * 4
    for size in reversed(batch):
        batch_strides.insert(0, span)
        span *= size
    return fake_array(tuple(batch) + (rows, cols), typestr, strides=tuple(batch_strides) + strides)


def plan(a, b, out, **kw):
    return core._matmul_plan(a, b, out, **kw)


def test_row_major_out_computes_the_transposed_product():
    p = plan(matrix(4, 3), matrix(3, 5), matrix(4, 5))
    assert p["swapped"] and p["A_is"] == "b"
    assert (p["m"], p["n"], p["k"]) == (5, 4, 3)  # out^T = b^T @ a^T: 5 x 4
    assert p["A"] == {"trans": False, "rows": 5, "cols": 3, "ld": 5, "batch_stride": 0}
    assert p["B"] == {"trans": False, "rows": 3, "cols": 4, "ld": 3, "batch_stride": 0}
    assert p["D"]["ld"] == 5 and not p["D"]["trans"]


@pytest.mark.parametrize("a_t, b_t", [(False, False), (True, False), (False, True), (True, True)])
def test_a_transposed_view_is_a_flag(a_t, b_t):
    p = plan(matrix(4, 3, transposed=a_t), matrix(3, 5, transposed=b_t), matrix(4, 5))
    assert p["A"]["trans"] == b_t and p["B"]["trans"] == a_t
    assert p["A"]["ld"] == (3 if b_t else 5) and p["B"]["ld"] == (4 if a_t else 3)


def test_column_major_out_is_computed_directly():
    p = plan(matrix(4, 3), matrix(3, 5), matrix(4, 5, transposed=True))
    assert not p["swapped"] and p["A_is"] == "a" and (p["m"], p["n"]) == (4, 5)
    assert p["A"]["trans"] and p["B"]["trans"]  # a and b are row-major: their transposes, read transposed


def test_leading_dimensions_of_sliced_views():
    p = plan(matrix(4, 3, ld=16), matrix(3, 5, ld=8), matrix(4, 5, ld=24))
    assert (p["A"]["ld"], p["B"]["ld"], p["D"]["ld"]) == (8, 16, 24)


def test_batches_collapse_to_one_strided_call():
    p = plan(matrix(4, 3, batch=(2, 3)), matrix(3, 5), matrix(4, 5, batch=(2, 3)))
    assert p["batch_count"] == 6 and p["collapsed"]
    assert p["A"]["batch_stride"] == 0  # b, one matrix for every batch
    assert p["B"]["batch_stride"] == 4 * 3 * 4 and p["D"]["batch_stride"] == 4 * 5 * 4


def test_batches_that_do_not_collapse():
    a = fake_array((2, 3, 4, 3), F32, strides=(1000 * 4, 100 * 4, 12, 4))
    p = plan(a, matrix(3, 5), matrix(4, 5, batch=(2, 3)))
    assert p["batch_count"] == 6 and not p["collapsed"]


@pytest.mark.parametrize("typestr, compute, data", [("<f2", 68, 2), ("<f4", 68, 0), ("<f8", 70, 1)])
def test_types(typestr, compute, data):
    p = plan(matrix(4, 3, typestr), matrix(3, 5, typestr), matrix(4, 5, typestr))
    assert (p["compute_type"], p["data_type"], p["out_type"]) == (compute, data, data)


def test_tf32_and_a_wider_out():
    assert plan(matrix(4, 3), matrix(3, 5), matrix(4, 5), allow_tf32=True)["compute_type"] == 77
    p = plan(matrix(4, 3, "<f2"), matrix(3, 5, "<f2"), matrix(4, 5, "<f4"))
    assert (p["data_type"], p["out_type"]) == (2, 0)


@pytest.mark.parametrize("kw, epilogue", [
    ({}, 1), ({"bias": matrix(1, 5)}, 4), ({"epilogue": "relu"}, 2),
    ({"epilogue": "gelu_tanh", "aux_out": matrix(4, 5, ld=8)}, 160),
    ({"epilogue": "dgelu", "aux": matrix(4, 5, ld=8)}, 192),
    ({"epilogue": "dgelu", "aux": matrix(4, 5, ld=8), "bias_grad_out": matrix(1, 5)}, 192),  # + lab's sum
    ({"bias_grad_out": matrix(1, 4)}, 512),
])
def test_epilogues(kw, epilogue):
    kw = {k: (fake_array((v.__cuda_array_interface__["shape"][1],), F32) if k in ("bias", "bias_grad_out") else v)
          for k, v in kw.items()}
    assert plan(matrix(4, 3), matrix(3, 5), matrix(4, 5), **kw)["epilogue"] == epilogue


def test_dgelu_bias_gradient_by_lab_or_by_cublaslt():
    kw = dict(epilogue="dgelu", aux=matrix(4, 5, ld=8), bias_grad_out=fake_array((5,)))
    assert plan(matrix(4, 3), matrix(3, 5), matrix(4, 5), **kw)["bias_grad_by_lab"]
    previous = core._matmul_fuse_dgelu_bias_grad(True)
    try:
        p = plan(matrix(4, 3), matrix(3, 5), matrix(4, 5), **kw)
    finally:
        core._matmul_fuse_dgelu_bias_grad(previous)
    assert p["epilogue"] == 208 and not p["bias_grad_by_lab"]


@pytest.mark.parametrize("args, kw, error, words", [
    ((matrix(4, 3), matrix(4, 5), matrix(4, 5)), {}, ValueError, "shapes do not chain"),
    ((fake_array((3,)), matrix(3, 5), matrix(4, 5)), {}, ValueError, "argument 'a' has 1 dimension"),
    ((matrix(4, 3), matrix(3, 5), matrix(5, 4)), {}, ValueError, "argument 'out' must have 2 dimensions ending in (4, 5)"),
    ((matrix(4, 3, "<i4"), matrix(3, 5, "<i4"), matrix(4, 5, "<i4")), {}, TypeError, "one floating dtype"),
    ((matrix(4, 3), matrix(3, 5, "<f8"), matrix(4, 5)), {}, TypeError, "one floating dtype"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5, "<f8")), {}, TypeError, "argument 'out' has dtype float64"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5)), {"beta": 1.0}, ValueError, "argument 'beta' scales 'c'"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5)), {"epilogue": "tanh"}, ValueError, "argument 'epilogue' must be"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5)), {"bias": fake_array((4,))}, ValueError,
     "argument 'bias' must be a contiguous 1-D array of 5 elements"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5)), {"bias": fake_array((5,), "<f8")}, TypeError,
     "argument 'bias' has dtype float64"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5)), {"epilogue": "dgelu"}, ValueError, "needs 'aux'"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5)), {"aux_out": matrix(4, 5, ld=8)}, ValueError,
     "'aux_out' is written by epilogue='gelu_tanh' alone"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5)), {"epilogue": "gelu_tanh", "aux_out": matrix(4, 5)}, ValueError,
     "cuBLASLt needs a multiple of 8"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5)), {"bias": fake_array((5,)), "bias_grad_out": fake_array((4,))},
     ValueError, "cannot both be given"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5, transposed=True)), {"bias": fake_array((5,))}, ValueError,
     "need an out whose rows are contiguous"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5)), {"c": matrix(4, 5, transposed=True)}, ValueError,
     "argument 'c' must be laid out as 'out' is"),
    ((matrix(4, 3), matrix(3, 5), matrix(4, 5)), {"c": matrix(4, 4)}, ValueError, "argument 'c' must have out's shape"),
    ((matrix(4, 3, batch=(2,)), matrix(3, 5, batch=(3,)), matrix(4, 5, batch=(3,))), {}, ValueError,
     "batch dimension 0"),
    ((matrix(4, 3), matrix(3, 5), fake_array((4, 5), F32, readonly=True)), {}, ValueError, "read-only"),
    ((matrix(4, 3), matrix(3, 5), fake_array((4, 5), F32, strides=(0, 4))), {}, ValueError,
     "argument 'out' has strides (0, 1)"),
    ((matrix(4, 3, batch=(2,)), matrix(3, 5), fake_array((2, 4, 5), F32, strides=(0, 20, 4))), {}, ValueError,
     "argument 'out' has stride 0 in dimension 0"),
])
def test_refusals(args, kw, error, words):
    with pytest.raises(error) as raised:
        plan(*args, **kw)
    assert words in str(raised.value)
    with pytest.raises(error):  # lab.matmul refuses the same way, before looking for cuBLASLt
        lab.matmul(*args, **kw)


def test_inputs_with_no_contiguous_dimension_are_staged():
    """A view strided in both of its last dimensions is copied contiguous at launch (lab's copy
    kernel into scratch memory), then read row-major; out and c must be readable as they are."""
    a = fake_array((4, 3), F32, strides=(24, 8))  # every other column of every other row
    p = plan(a, matrix(3, 5), matrix(4, 5))
    assert p["staged"] == (True, False) and p["B"] == {"trans": False, "rows": 3, "cols": 4, "ld": 3,
                                                       "batch_stride": 0}
    assert plan(matrix(4, 3), fake_array((3, 5), F32, strides=(40, 8)), matrix(4, 5))["staged"] == (False, True)
    with pytest.raises(ValueError, match="argument 'c' has strides"):
        plan(matrix(4, 3), matrix(3, 5), matrix(4, 5), c=fake_array((4, 5), F32, strides=(40, 8)))


def test_out_may_not_share_memory_with_an_input():
    a = matrix(4, 4)
    with pytest.raises(ValueError, match="'out' shares memory with 'a'"):
        plan(a, matrix(4, 4), a)
    c = matrix(4, 4)
    assert plan(matrix(4, 4), matrix(4, 4), c, c=c)["work"]  # c may be out itself


def test_empty_outputs_need_no_library():
    for a, b, out in [(matrix(0, 3), matrix(3, 5), matrix(0, 5)), (matrix(4, 3), matrix(3, 0), matrix(4, 0))]:
        assert not plan(a, b, out)["work"]
        assert lab.matmul(a, b, out) is out  # nothing to compute: no cuBLASLt, no CUDA


def test_candidates_start_with_the_variable_then_the_wheels(monkeypatch, tmp_path):
    from lab import _blas
    monkeypatch.setenv("LAB_CUBLASLT", "/opt/mine/libcublasLt.so.13")
    paths = _blas.cublaslt_candidates()
    assert paths[0] == "/opt/mine/libcublasLt.so.13" and paths[-1] == "libcublasLt.so"


def test_missing_library_is_an_import_error_saying_what_to_install():
    """In a child process: once a process has loaded cuBLASLt it keeps it, so the message is only
    seen where none loads - which a machine without a GPU guarantees for the fake path given."""
    code = ("import lab, sys; sys.path.insert(0, 'tests'); from fakes import fake_array\n"
            "a, b, out = fake_array((4, 3)), fake_array((3, 5)), fake_array((4, 5))\n"
            "import lab._blas; lab._blas.cublaslt_candidates = lambda: ['/nowhere/libcublasLt.so.13']\n"
            "try:\n    lab.matmul(a, b, out)\nexcept ImportError as e:\n    print(e)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=root))
    assert proc.returncode == 0, proc.stderr
    assert "pip install nvidia-cublas" in proc.stdout and "/nowhere/libcublasLt.so.13" in proc.stdout


def test_python_m_lab_names_cublaslt():
    from lab._blas import describe
    assert "cuBLASLt" in describe()
