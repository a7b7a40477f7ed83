"""Reductions on any machine: signatures, the axis argument, the output's shape and
dtype, integer inputs to mean, empty reductions - every bad input a TypeError or ValueError naming
the argument, raised before any CUDA call - through fake producers."""
import inspect

import pytest

import lab
from fakes import fake_array

OPS = ["sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "norm", "var", "std", "logsumexp"]
FLOAT_ONLY = ["mean", "norm", "var", "std", "logsumexp"]
EXTRA_KEYWORD = {"norm": ", ord=2", "var": ", correction=1", "std": ", correction=1"}


def out_for(op, shape):
    return fake_array(shape=shape, typestr="<i8" if op.startswith("arg") else "<f4")


@pytest.mark.parametrize("op", OPS)
def test_signature(op):
    extra = EXTRA_KEYWORD.get(op, "")
    assert str(inspect.signature(getattr(lab, op))) == f"(x, out, *, axis=None, keepdim=False{extra}, stream=None)"
    assert "Deterministic" in getattr(lab, op).__doc__


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis, error, pattern", [
    (2, ValueError, r"argument 'axis' = 2 is out of range for a 2-dimensional input \(valid: -2 .. 1\)"),
    (-3, ValueError, r"argument 'axis' = -3 is out of range"),
    (1.0, TypeError, r"argument 'axis' must be None, an int or a tuple of ints, got float"),
    (True, TypeError, r"argument 'axis' must be None, an int or a tuple of ints, got bool"),
])
def test_bad_axis(op, axis, error, pattern):
    with pytest.raises(error, match=rf"{op}\(\): {pattern}"):
        getattr(lab, op)(fake_array(shape=(4, 6)), out_for(op, (4,)), axis=axis)


@pytest.mark.parametrize("op", ["sum", "mean", "prod", "amax", "amin", "norm", "var", "logsumexp"])
def test_repeated_axis(op):
    with pytest.raises(ValueError, match=rf"{op}\(\): argument 'axis' names dimension 1 twice"):
        getattr(lab, op)(fake_array(shape=(4, 6)), out_for(op, (4,)), axis=(1, -1))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_index_ops_take_one_axis(op):
    with pytest.raises(TypeError, match=rf"{op}\(\): argument 'axis' must be None or an int \(one dimension\)"):
        getattr(lab, op)(fake_array(shape=(4, 6)), out_for(op, (4,)), axis=(0, 1))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axis, keepdim, out_shape, want", [
    (1, False, (6,), r"\(4,\)"), (1, True, (4,), r"\(4, 1\)"), (None, False, (1,), r"\(\)"),
    (0, False, (4,), r"\(6,\)"),
])
def test_output_shape_is_checked(op, axis, keepdim, out_shape, want):
    with pytest.raises(ValueError, match=rf"{op}\(\): argument 'out' has shape .*; reducing the input's shape "
                                         rf"\(4, 6\) over this axis.* gives {want}"):
        getattr(lab, op)(fake_array(shape=(4, 6)), out_for(op, out_shape), axis=axis, keepdim=keepdim)


@pytest.mark.parametrize("op", FLOAT_ONLY)
def test_float_only_reductions_refuse_integer_input(op):
    with pytest.raises(TypeError, match=rf"{op}\(\): argument 'x' has integer dtype int32"):
        getattr(lab, op)(fake_array(shape=(4, 6), typestr="<i4"), fake_array(shape=(4,)), axis=1)


@pytest.mark.parametrize("ord, error, pattern", [
    (3, ValueError, r"argument 'ord' must be 1, 2 or inf \(float\('inf'\)\), got 3"),
    (0, ValueError, r"argument 'ord' must be 1, 2 or inf"),
    (-float("inf"), ValueError, r"argument .ord. must be 1, 2 or inf .*got -inf"),
    ("fro", TypeError, r"argument 'ord' must be a real number, got str"),
    (True, TypeError, r"argument 'ord' must be 1, 2 or inf, got bool"),
])
def test_norm_orders(ord, error, pattern):
    with pytest.raises(error, match=rf"norm\(\): {pattern}"):
        lab.norm(fake_array(shape=(4, 6)), fake_array(shape=(4,)), axis=1, ord=ord)


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("correction, error, pattern", [
    (-1, ValueError, r"argument 'correction' must be a finite number >= 0, got -1"),
    (float("nan"), ValueError, r"argument .correction. must be a finite number >= 0, got nan"),
    (float("inf"), ValueError, r"argument .correction. must be a finite number >= 0, got inf"),
    ("1", TypeError, r"argument 'correction' must be a real number, got str"),
    (False, TypeError, r"argument 'correction' must be a finite number >= 0, got bool"),
])
def test_correction_is_checked(op, correction, error, pattern):
    with pytest.raises(error, match=rf"{op}\(\): {pattern}"):
        getattr(lab, op)(fake_array(shape=(4, 6)), fake_array(shape=(4,)), axis=1, correction=correction)


def test_dot_signature_and_checks():
    assert str(inspect.signature(lab.dot)) == "(a, b, out, *, stream=None)"
    assert "Deterministic" in lab.dot.__doc__ and "torch.dot" in lab.dot.__doc__
    vec = fake_array(shape=(5,))
    with pytest.raises(ValueError, match=r"dot\(\): argument 'a' must be 1-dimensional, got 2 dimensions"):
        lab.dot(fake_array(shape=(5, 1)), vec, fake_array(shape=()))
    with pytest.raises(ValueError, match=r"dot\(\): argument 'b' must be 1-dimensional, got 0 dimensions"):
        lab.dot(vec, fake_array(shape=()), fake_array(shape=()))
    with pytest.raises(ValueError, match=r"dot\(\): arguments 'a' and 'b' must have the same length, got 5 and 6"):
        lab.dot(vec, fake_array(shape=(6,)), fake_array(shape=()))
    with pytest.raises(TypeError, match=r"dot\(\): arguments 'a' and 'b' must have the same dtype, got float32 and "
                                        r"float64"):
        lab.dot(vec, fake_array(shape=(5,), typestr="<f8"), fake_array(shape=()))
    with pytest.raises(TypeError, match=r"dot\(\): argument 'a' has integer dtype int64"):
        lab.dot(fake_array(shape=(5,), typestr="<i8"), fake_array(shape=(5,), typestr="<i8"), fake_array(shape=()))
    with pytest.raises(ValueError, match=r"dot\(\): argument 'out' has shape \(1,\); .* gives \(\)"):
        lab.dot(vec, vec, fake_array(shape=(1,)))
    with pytest.raises(TypeError, match=r"dot\(\) missing required argument 'out' \(pos 3\)"):
        lab.dot(vec, vec)
    with pytest.raises(TypeError, match=r"dot\(\) got an unexpected keyword argument 'axis'"):
        lab.dot(vec, vec, fake_array(shape=()), axis=0)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("typestr", ["<f4", "<i2", "|u1"])
def test_index_ops_write_int64_or_int32(op, typestr):
    with pytest.raises(TypeError, match=rf"{op}\(\): argument 'out' has dtype .*; {op} writes indices"):
        getattr(lab, op)(fake_array(shape=(4, 6)), fake_array(shape=(4,), typestr=typestr), axis=1)


@pytest.mark.parametrize("op, kwargs", [("amax", {}), ("amin", {}), ("argmax", {}), ("argmin", {}),
                                        ("norm", {"ord": float("inf")})])
def test_empty_reductions_without_a_value_are_refused(op, kwargs):
    with pytest.raises(ValueError, match=rf"{op}\(\): argument 'x' has zero elements along the reduced dimensions"):
        getattr(lab, op)(fake_array(shape=(4, 0)), out_for(op, (4,)), axis=1, **kwargs)


@pytest.mark.parametrize("op", OPS)
def test_no_outputs_needs_no_cuda(op):
    out = out_for(op, (0,))
    assert getattr(lab, op)(fake_array(shape=(0, 5)), out, axis=1) is out


def test_read_only_and_overlapping_outputs():
    with pytest.raises(ValueError, match=r"sum\(\): argument 'out' is read-only"):
        lab.sum(fake_array(shape=(4, 6)), fake_array(shape=(4,), readonly=True), axis=1)
    from fakes import fake_pointer
    base = fake_pointer()
    with pytest.raises(ValueError, match=r"sum\(\): argument 'x' overlaps 'out'"):
        lab.sum(fake_array(shape=(4, 6), ptr=base), fake_array(shape=(4,), ptr=base + 8), axis=1)


def test_zero_dimensional_input():
    with pytest.raises(ValueError, match=r"argument 'axis' = 0 is out of range for a 0-dimensional input"):
        lab.sum(fake_array(shape=()), fake_array(shape=()), axis=0)


def test_arguments_are_parsed_like_any_op():
    with pytest.raises(TypeError, match=r"sum\(\) missing required argument 'out' \(pos 2\)"):
        lab.sum(fake_array(shape=(3,)))
    with pytest.raises(TypeError, match=r"sum\(\) got an unexpected keyword argument 'dim'"):
        lab.sum(fake_array(shape=(3,)), fake_array(shape=()), dim=0)
    with pytest.raises(TypeError, match=r"sum\(\): argument 'x' must be a CUDA array"):
        lab.sum([1.0, 2.0], fake_array(shape=()))
