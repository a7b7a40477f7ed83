"""lab.rope and lab.rope_backward on the CPU: every shape the plan accepts reaches the launch, and
every refusal names the argument and what was expected - through fake producers (no GPU: a call
that passes every check fails as lab.CudaError at the first CUDA call)."""
import inspect

import pytest

import lab
from fakes import fake_array

B, HQ, HK, S, D = 2, 4, 2, 5, 8


def tensors(typestr="<f2", table=(B, S, D), table_typestr=None, **overrides):
    arrays = {
        "q": fake_array((B, HQ, S, D), typestr), "k": fake_array((B, HK, S, D), typestr),
        "cos": fake_array(table, table_typestr or typestr), "sin": fake_array(table, table_typestr or typestr),
        "q_out": fake_array((B, HQ, S, D), typestr), "k_out": fake_array((B, HK, S, D), typestr),
    }
    arrays.update(overrides)
    return arrays


def call(function=lab.rope, options=None, **arrays):
    a = tensors(**arrays)
    return function(a["q"], a["k"], a["cos"], a["sin"], a["q_out"], a["k_out"], **(options or {}))


def reaches_cuda(thunk):
    """Everything was checked: without a GPU, the first CUDA call is what fails."""
    if lab.is_available():
        pytest.skip("a GPU is here: tests/test_rope_gpu.py launches for real")
    with pytest.raises(lab.CudaError):
        thunk()


def transposed(shape, typestr="<f2"):
    """(B, H, S, D) as the transposed view of a (B, S, H, D) projection, as attention passes it."""
    b, h, s, d = shape
    size = int(typestr[2:])
    return fake_array(shape, typestr, strides=(s * h * d * size, d * size, h * d * size, size))


@pytest.mark.parametrize("typestr", ["<f2", "<f4", "<f8"])
@pytest.mark.parametrize("table, options", [
    ((B, S, D), {}),                        # Hugging Face's (batch, positions, rotary_dim)
    ((1, S, D), {}),                        # one table for the whole batch
    ((S, D), {}),                           # positions only
    ((B, 1, S, D), {}),                     # already unsqueezed over heads
    ((S, D // 2), {"rotary_dim": D}),      # one column per pair (flash-attn's tables)
    ((S, 4), {}),                           # partial rotary: the first 4 of 8 rotated
    ((S, 2), {"rotary_dim": 4}),           # partial, per pair
    ((B, S, D), {"interleaved": True}),
])
def test_accepted_shapes_reach_the_launch(typestr, table, options):
    reaches_cuda(lambda: call(typestr=typestr, table=table, options=options))
    reaches_cuda(lambda: call(lab.rope_backward, typestr=typestr, table=table, options=options))


def test_float32_tables_for_half_inputs():
    reaches_cuda(lambda: call(typestr="<f2", table_typestr="<f4"))


def test_views_in_place_and_q_alone():
    q, k = transposed((B, HQ, S, D)), transposed((B, HK, S, D))
    reaches_cuda(lambda: call(q=q, k=k, q_out=transposed((B, HQ, S, D)), k_out=transposed((B, HK, S, D))))
    reaches_cuda(lambda: call(q=q, k=k, q_out=q, k_out=k))  # in place
    reaches_cuda(lambda: call(k=None, k_out=None))


def test_empty_inputs_make_no_cuda_call():
    a = tensors(table=(0, D), q=fake_array((B, HQ, 0, D), "<f2"), q_out=fake_array((B, HQ, 0, D), "<f2"))
    q_out, k_out = lab.rope(a["q"], None, a["cos"], a["sin"], a["q_out"], None)
    assert q_out is a["q_out"] and k_out is None


def test_signatures():
    assert str(inspect.signature(lab.rope)) == \
        "(q, k, cos, sin, q_out, k_out, *, rotary_dim=None, interleaved=False, stream=None)"
    assert str(inspect.signature(lab.rope_backward)) == \
        "(grad_q_out, grad_k_out, cos, sin, grad_q, grad_k, *, rotary_dim=None, interleaved=False, stream=None)"


BAD = [
    ({"q": fake_array((B, S, D), "<f2")}, ValueError, r"rope\(\): argument 'q' has 3 dimensions; it must have 4"),
    ({"q": fake_array((B, HQ, S, D), "<i4"), "q_out": fake_array((B, HQ, S, D), "<i4")}, TypeError,
     r"argument 'q' has dtype int32; rope takes float16, bfloat16, float32, float64"),
    ({"k": fake_array((B + 1, HK, S, D), "<f2")}, ValueError,
     r"argument 'k' has shape \(3, 2, 5, 8\); it must have shape \(2, 2, 5, 8\) \(q's batch, positions"),
    ({"k": fake_array((B, HK, S, D + 2), "<f2")}, ValueError, r"argument 'k' has shape"),
    ({"k": fake_array((B, HK, S, D), "<f4"), "k_out": fake_array((B, HK, S, D), "<f4")}, TypeError,
     r"argument 'k' has dtype float32; it must have the dtype of 'q', float16"),
    ({"q_out": fake_array((B, HQ, S, D + 1), "<f2")}, ValueError,
     r"argument 'q_out' has shape \(2, 4, 5, 9\); it must have shape \(2, 4, 5, 8\) \(the shape of 'q'\)"),
    ({"k_out": fake_array((B, HK, S, D), "<f4")}, TypeError,
     r"argument 'k_out' has dtype float32; it must have the dtype of 'k', float16"),
    ({"cos": fake_array((B, S, D), "<f8")}, TypeError,
     r"argument 'cos' has dtype float64; the tables have the dtype of 'q' \(float16\) or float32"),
    ({"sin": fake_array((B, S, D), "<f4")}, TypeError, r"argument 'sin' has dtype float32; it must have the dtype of 'cos'"),
    ({"sin": fake_array((1, S, D), "<f2")}, ValueError,
     r"argument 'sin' has shape \(1, 5, 8\); it must have shape \(2, 5, 8\) \(the shape of 'cos'\)"),
    ({"cos": fake_array((B, S + 1, D), "<f2")}, ValueError, r"argument 'cos' has shape \(2, 6, 8\); it must have "
     r"shape \(2, 5, 8\) \(\(positions, C\), \(batch or 1, positions, C\)"),
    ({"cos": fake_array((3, S, D), "<f2")}, ValueError, r"argument 'cos' has shape \(3, 5, 8\)"),
    ({"cos": fake_array((B, HQ, S, D), "<f2")}, ValueError, r"argument 'cos' has shape \(2, 4, 5, 8\); it must have "
     r"shape \(2, 1, 5, 8\)"),
    ({"cos": fake_array((D,), "<f2")}, ValueError, r"argument 'cos' has shape \(8,\)"),
    ({"cos": fake_array((S, 3), "<f2"), "sin": fake_array((S, 3), "<f2")}, ValueError,
     r"the rotary dimension is 3; it must be even, at least 2 and at most head_dim \(8\)"),
    ({"cos": fake_array((S, 10), "<f2"), "sin": fake_array((S, 10), "<f2")}, ValueError,
     r"the rotary dimension is 10; .* at most head_dim \(8\)"),
    ({"q_out": fake_array((B, HQ, S, D), "<f2", readonly=True)}, ValueError, r"'q_out' is read-only"),
    ({"q_out": fake_array((B, HQ, S, D), "<f2", strides=(0, 0, 0, 2))}, ValueError, r"q_out"),
]


@pytest.mark.parametrize("arrays, error, match", BAD)
def test_refusals_name_the_argument(arrays, error, match):
    with pytest.raises(error, match=match):
        call(**arrays)


def test_backward_refusals_use_its_own_names():
    with pytest.raises(ValueError, match=r"rope_backward\(\): argument 'grad_q' has shape \(2, 4, 5, 9\); it must have "
                                         r"shape \(2, 4, 5, 8\) \(the shape of 'grad_q_out'\)"):
        call(lab.rope_backward, q_out=fake_array((B, HQ, S, D + 1), "<f2"))
    with pytest.raises(TypeError, match=r"rope_backward\(\): arguments 'grad_k_out' and 'grad_k' go together"):
        call(lab.rope_backward, k_out=None)


@pytest.mark.parametrize("options, error, match", [
    ({"rotary_dim": 6}, ValueError, r"'cos' has 8 columns; for rotary_dim=6 it must have 6 \(one per element\) or 3 "
     r"\(one per pair\)"),
    ({"rotary_dim": True}, TypeError, r"argument 'rotary_dim' must be an int, got bool"),
    ({"rotary_dim": -2}, ValueError, r"argument 'rotary_dim' must be an int >= 0"),
    ({"rotary_dim": 2.0}, TypeError, r"rotary_dim"),
    ({"rotary_dim": 1 << 70}, OverflowError, r"rotary_dim"),
    ({"unknown": 1}, TypeError, r"rope\(\) got an unexpected keyword argument 'unknown'"),
    ({"stream": "s"}, TypeError, r"stream"),
])
def test_bad_options(options, error, match):
    with pytest.raises(error, match=match):
        call(options=options)


def test_k_and_its_output_go_together():
    with pytest.raises(TypeError, match=r"rope\(\): arguments 'k' and 'k_out' go together: give both or neither"):
        call(k_out=None)
    with pytest.raises(TypeError, match=r"arguments 'k' and 'k_out' go together"):
        call(k=None)


def test_outputs_must_not_overlap_other_operands():
    q = fake_array((B, HQ, S, D), "<f2")
    k_same_heads = fake_array((B, HQ, S, D), "<f2")
    a = tensors(q=q, k=k_same_heads, q_out=k_same_heads, k_out=fake_array((B, HQ, S, D), "<f2"))
    with pytest.raises(ValueError, match=r"arguments 'q_out' and 'k' share memory; 'q_out' is written"):
        lab.rope(a["q"], a["k"], a["cos"], a["sin"], a["q_out"], a["k_out"])
    a = tensors()
    with pytest.raises(ValueError, match=r"'q_out' and 'cos' share memory|'cos' and 'q_out' share memory"):
        cos = fake_array((B, S, D), "<f2", ptr=a["q_out"].__cuda_array_interface__["data"][0])
        lab.rope(a["q"], a["k"], cos, a["sin"], a["q_out"], a["k_out"])
    with pytest.raises(ValueError, match=r"'q_out' and 'k_out' share memory|'k_out' and 'q_out' share memory"):
        k_out = fake_array((B, HK, S, D), "<f2", ptr=a["q_out"].__cuda_array_interface__["data"][0])
        lab.rope(a["q"], a["k"], a["cos"], a["sin"], a["q_out"], k_out)


def test_a_partial_overlap_with_its_own_input_is_refused():
    q = fake_array((B, HQ, S, D), "<f2")
    base = q.__cuda_array_interface__["data"][0]
    shifted = fake_array((B, HQ, S, D), "<f2", ptr=base + 2)
    with pytest.raises(ValueError, match=r"'q'.*'q_out'|'q_out'.*'q'"):
        call(q=q, q_out=shifted)
