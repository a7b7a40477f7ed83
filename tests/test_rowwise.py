"""Row-wise ops on any machine: signatures, and every bad input - dtypes, shapes of the
row operands, the statistics, targets, losses and column operands, eps, axis, cross-entropy's options,
outputs that are read-only, broadcast or overlapping, a residual without its output - a TypeError or
ValueError naming the argument, raised before any CUDA call, through fake producers (objects with
only __cuda_array_interface__)."""
import inspect

import pytest

import lab
from fakes import fake_array, fake_pointer

SIGNATURES = {
    "softmax": "(x, out, *, axis=-1, stream=None)",
    "log_softmax": "(x, out, *, axis=-1, stream=None)",
    "softmax_backward": "(grad_out, y, grad_x, *, axis=-1, stream=None)",
    "log_softmax_backward": "(grad_out, y, grad_x, *, axis=-1, stream=None)",
    "layer_norm": "(x, weight, bias, out, *, eps=1e-05, mean=None, rstd=None, stream=None)",
    "layer_norm_backward": "(grad_out, x, weight, mean, rstd, grad_x, grad_weight=None, grad_bias=None, *, stream=None)",
    "rms_norm": "(x, weight, out, *, eps=None, rstd=None, residual=None, residual_out=None, stream=None)",
    "rms_norm_backward": "(grad_out, x, weight, rstd, grad_x, grad_weight=None, *, stream=None)",
    "cross_entropy": "(logits, target, loss, *, ignore_index=-100, label_smoothing=0.0, reduction='mean', softcap=None, z_loss=0.0, grad=None, stream=None)",
    "cross_entropy_backward": "(grad_loss, grad, *, stream=None)",
    "swiglu_backward": "(grad_out, gate, up, grad_gate, grad_up, *, product=None, stream=None)",
    "geglu_backward": "(grad_out, gate, up, grad_gate, grad_up, *, product=None, stream=None)",
}
SHAPE = (6, 10)


def rows(shape=SHAPE, typestr="<f4", **kw):
    return fake_array(shape=shape, typestr=typestr, **kw)


def call(op, **over):
    """Calls op with well-formed fake arguments, `over` replacing some of them."""
    args = {
        "softmax": dict(x=rows(), out=rows()),
        "log_softmax": dict(x=rows(), out=rows()),
        "softmax_backward": dict(grad_out=rows(), y=rows(), grad_x=rows()),
        "log_softmax_backward": dict(grad_out=rows(), y=rows(), grad_x=rows()),
        "layer_norm": dict(x=rows(), weight=rows((10,)), bias=rows((10,)), out=rows()),
        "layer_norm_backward": dict(grad_out=rows(), x=rows(), weight=rows((10,)), mean=rows((6,)),
                                    rstd=rows((6,)), grad_x=rows()),
        "rms_norm": dict(x=rows(), weight=rows((10,)), out=rows()),
        "rms_norm_backward": dict(grad_out=rows(), x=rows(), weight=rows((10,)), rstd=rows((6,)), grad_x=rows()),
        "cross_entropy": dict(logits=rows(), target=rows((6,), "<i8"), loss=rows(())),
        "cross_entropy_backward": dict(grad_loss=rows(()), grad=rows()),
        "swiglu_backward": dict(grad_out=rows(), gate=rows(), up=rows(), grad_gate=rows(), grad_up=rows()),
        "geglu_backward": dict(grad_out=rows(), gate=rows(), up=rows(), grad_gate=rows(), grad_up=rows()),
    }[op]
    args.update(over)
    return getattr(lab, op)(**args)


@pytest.mark.parametrize("op", SIGNATURES)
def test_signature(op):
    assert str(inspect.signature(getattr(lab, op))) == SIGNATURES[op]
    assert op in lab.__all__


@pytest.mark.parametrize("op", SIGNATURES)
def test_integer_input_is_refused(op):
    """Every row operand int32: the message names the one the others are checked against."""
    parameters = inspect.signature(getattr(lab, op)).parameters
    integers = {name: rows(typestr="<i4") for name in ("grad_out", "y", "x", "grad_x", "out", "logits", "grad", "gate",
                                                      "up", "grad_gate", "grad_up") if name in parameters}
    reference = next(name for name in ("y", "x", "logits", "gate", "grad") if name in parameters)
    with pytest.raises(TypeError, match=rf"{op}\(\): argument '{reference}' has dtype int32; {op} takes"):
        call(op, **integers)


@pytest.mark.parametrize("op, name", [
    ("softmax", "out"), ("softmax_backward", "grad_out"), ("softmax_backward", "grad_x"),
    ("layer_norm", "out"), ("layer_norm_backward", "grad_out"), ("rms_norm_backward", "grad_x"),
])
def test_row_operands_need_the_inputs_shape(op, name):
    with pytest.raises(ValueError, match=rf"{op}\(\): argument '{name}' has shape \(6, 9\); it must have shape \(6, 10\)"):
        call(op, **{name: rows((6, 9))})


@pytest.mark.parametrize("op, name", [("softmax", "out"), ("layer_norm", "out"), ("rms_norm_backward", "grad_out")])
def test_row_operands_need_the_inputs_dtype(op, name):
    with pytest.raises(TypeError, match=rf"argument '{name}' has dtype float16; it must have the dtype of"):
        call(op, **{name: rows(typestr="<f2")})


@pytest.mark.parametrize("op, name", [
    ("layer_norm", "weight"), ("layer_norm", "bias"), ("rms_norm", "weight"), ("layer_norm_backward", "grad_weight"),
    ("layer_norm_backward", "grad_bias"), ("rms_norm_backward", "grad_weight"),
])
def test_column_operands_have_the_rows_length(op, name):
    with pytest.raises(ValueError, match=rf"argument '{name}' has shape \(6,\); it must have shape \(10,\)"):
        call(op, **{name: rows((6,))})
    with pytest.raises(TypeError, match=rf"argument '{name}' has dtype float64"):
        call(op, **{name: rows((10,), "<f8")})


@pytest.mark.parametrize("op, name", [("layer_norm", "mean"), ("layer_norm", "rstd"), ("rms_norm", "rstd"),
                                      ("layer_norm_backward", "mean"), ("rms_norm_backward", "rstd")])
def test_statistics_have_one_value_per_row(op, name):
    with pytest.raises(ValueError, match=rf"argument '{name}' has shape \(6, 1\); it must have shape \(6,\)"):
        call(op, **{name: rows((6, 1))})
    with pytest.raises(TypeError, match=rf"argument '{name}' has dtype float16; the statistics are float32"):
        call(op, **{name: rows((6,), "<f2")})


def test_mean_and_rstd_share_a_dtype():
    with pytest.raises(TypeError, match=r"'mean' and 'rstd' must have one dtype, got float32 and float64"):
        call("layer_norm", mean=rows((6,)), rstd=rows((6,), "<f8"))


@pytest.mark.parametrize("eps, error, pattern", [
    (-1.0, ValueError, r"argument 'eps' must be a finite number >= 0, got -1.0"),
    (float("nan"), ValueError, r"argument 'eps' must be a finite number >= 0, got nan"),
    (float("inf"), ValueError, r"argument 'eps' must be a finite number >= 0, got inf"),
    (True, TypeError, r"argument 'eps' must be a finite number >= 0, got bool"),
    ("1e-5", TypeError, r"argument 'eps'"),
])
@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_eps_is_checked(op, eps, error, pattern):
    with pytest.raises(error, match=pattern):
        call(op, eps=eps)


def test_residual_and_its_output_go_together():
    with pytest.raises(TypeError, match=r"'residual' and 'residual_out' go together"):
        call("rms_norm", residual=rows())
    with pytest.raises(TypeError, match=r"'residual' and 'residual_out' go together"):
        call("rms_norm", residual_out=rows())
    with pytest.raises(ValueError, match=r"argument 'residual_out' has shape \(6, 3\)"):
        call("rms_norm", residual=rows(), residual_out=rows((6, 3)))


@pytest.mark.parametrize("axis, error, pattern", [
    (2, ValueError, r"argument 'axis' = 2 is out of range for a 2-dimensional input"),
    (1.0, TypeError, r"argument 'axis' must be an int, got float"),
    ((0, 1), TypeError, r"argument 'axis' must be an int, got tuple"),
])
def test_softmax_axis(axis, error, pattern):
    with pytest.raises(error, match=pattern):
        call("softmax", axis=axis)


def test_zero_dimensional_input_has_no_row():
    with pytest.raises(ValueError, match=r"softmax\(\): argument 'x' is 0-dimensional"):
        lab.softmax(rows(()), rows(()))


def test_outputs_are_writable_and_one_element_per_position():
    with pytest.raises(ValueError, match=r"layer_norm\(\): argument 'out' is read-only"):
        call("layer_norm", out=rows(readonly=True))
    with pytest.raises(ValueError, match=r"argument 'rstd' is read-only"):
        call("rms_norm", rstd=rows((6,), readonly=True))
    with pytest.raises(ValueError, match=r"argument 'out' has stride 0 in dimension 0"):
        call("softmax", out=rows(strides=(0, 4)))
    with pytest.raises(ValueError, match=r"argument 'grad_weight' has stride 0"):
        call("rms_norm_backward", grad_weight=rows((10,), strides=(0,)))


def test_overlapping_operands():
    base = fake_pointer()
    with pytest.raises(ValueError, match=r"softmax\(\): argument 'x' overlaps 'out' in memory without being the same view"):
        call("softmax", x=rows(ptr=base), out=rows(ptr=base + 4))
    with pytest.raises(ValueError, match=r"arguments 'out' and 'rstd' share memory; 'out' is written"):
        call("rms_norm", out=rows(ptr=base), rstd=rows((6,), ptr=base + 16))
    with pytest.raises(ValueError, match=r"arguments 'grad_weight' and 'weight' share memory"):
        call("rms_norm_backward", weight=rows((10,), ptr=base), grad_weight=rows((10,), ptr=base))
    with pytest.raises(ValueError, match=r"arguments 'out' and 'residual_out' share memory"):
        call("rms_norm", residual=rows(), residual_out=rows(ptr=base), out=rows(ptr=base))


def test_nothing_to_compute_needs_no_cuda():
    out = rows((0, 10))
    assert lab.softmax(rows((0, 10)), out) is out
    out = rows((4, 0))
    assert lab.log_softmax(rows((4, 0)), out) is out
    assert lab.layer_norm(rows((0, 10)), None, None, rows((0, 10)), mean=rows((0,)), rstd=rows((0,))) is not None
    grad_x = rows((3, 0))
    assert lab.rms_norm_backward(rows((3, 0)), rows((3, 0)), None, rows((3,)), grad_x) is grad_x


def test_in_place_passes_validation():
    """The output may be the very view of the input: validation passes and the launch is reached
    (lab.CudaError on a machine without a GPU, where the fake pointer is never dereferenced)."""
    x = rows()
    same = {"__cuda_array_interface__": x.__cuda_array_interface__}
    out = type("View", (), same)()
    if lab.is_available():
        pytest.skip("fake pointers must not reach a real GPU")
    with pytest.raises(lab.CudaError):
        lab.softmax(x, out)


def test_arguments_are_parsed_like_any_op():
    with pytest.raises(TypeError, match=r"layer_norm\(\) missing required argument 'out' \(pos 4\)"):
        lab.layer_norm(rows(), None, None)
    with pytest.raises(TypeError, match=r"rms_norm\(\) got an unexpected keyword argument 'bias'"):
        call("rms_norm", bias=rows((10,)))
    with pytest.raises(TypeError, match=r"softmax\(\): argument 'x' must be a CUDA array"):
        lab.softmax([1.0], rows())
    with pytest.raises(TypeError, match=r"layer_norm_backward\(\): argument 'mean' must be a CUDA array"):
        call("layer_norm_backward", mean=None)


def test_import_lab_does_not_import_torch():
    import subprocess
    import sys
    code = "import sys, lab; lab.softmax; assert 'torch' not in sys.modules, 'lab imported torch'"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- cross-entropy and the GLU backwards ----

@pytest.mark.parametrize("dtype", ["<f4", "<i2", "|u1", "<f8"])
def test_targets_are_int64_or_int32(dtype):
    with pytest.raises(TypeError, match=r"cross_entropy\(\): argument 'target' has dtype \w+; class indices are int64 or int32"):
        call("cross_entropy", target=rows((6,), dtype))


def test_targets_and_losses_have_one_value_per_row():
    with pytest.raises(ValueError, match=r"argument 'target' has shape \(6, 10\); it must have shape \(6,\)"):
        call("cross_entropy", target=rows((6, 10), "<i8"))
    with pytest.raises(ValueError, match=r"argument 'loss' has shape \(6,\); it must have shape \(\) \(one number"):
        call("cross_entropy", loss=rows((6,)))
    with pytest.raises(ValueError, match=r"argument 'loss' has shape \(\); it must have shape \(6,\)"):
        call("cross_entropy", reduction="none")
    with pytest.raises(TypeError, match=r"argument 'loss' has dtype int32; the loss is float16, bfloat16"):
        call("cross_entropy", loss=rows((), "<i4"))
    with pytest.raises(ValueError, match=r"argument 'grad' has shape \(6, 9\); it must have shape \(6, 10\)"):
        call("cross_entropy", grad=rows((6, 9)))
    with pytest.raises(TypeError, match=r"argument 'grad' has dtype float16; it must have the dtype of 'logits'"):
        call("cross_entropy", grad=rows(typestr="<f2"))


def test_cross_entropy_needs_classes():
    with pytest.raises(ValueError, match=r"argument 'logits' has no classes"):
        call("cross_entropy", logits=rows((6, 0)))


@pytest.mark.parametrize("option, value, error, pattern", [
    ("ignore_index", 1.0, TypeError, r"argument 'ignore_index' must be an int, got float"),
    ("ignore_index", True, TypeError, r"argument 'ignore_index' must be an int, got bool"),
    ("ignore_index", 2**63, ValueError, r"argument 'ignore_index' must fit in int64"),
    ("label_smoothing", -0.1, ValueError, r"argument 'label_smoothing' must be a number in \[0, 1\], got -0.1"),
    ("label_smoothing", 1.5, ValueError, r"argument 'label_smoothing' must be a number in \[0, 1\]"),
    ("label_smoothing", float("nan"), ValueError, r"argument 'label_smoothing' must be a number in \[0, 1\]"),
    ("label_smoothing", "0.1", TypeError, r"argument 'label_smoothing'"),
    ("reduction", "avg", ValueError, r"argument 'reduction' must be 'mean', 'sum' or 'none', got 'avg'"),
    ("reduction", None, TypeError, r"argument 'reduction' must be a str, not None"),
])
def test_cross_entropy_options(option, value, error, pattern):
    with pytest.raises(error, match=pattern):
        call("cross_entropy", **{option: value})


def test_cross_entropy_outputs():
    base = fake_pointer()
    with pytest.raises(ValueError, match=r"argument 'loss' is read-only"):
        call("cross_entropy", loss=rows((), readonly=True))
    with pytest.raises(ValueError, match=r"arguments 'loss' and 'logits' share memory; 'loss' is written"):
        call("cross_entropy", logits=rows(ptr=base), loss=rows((), ptr=base + 8))
    with pytest.raises(ValueError, match=r"argument 'logits' overlaps 'grad' in memory without being the same view"):
        call("cross_entropy", logits=rows(ptr=base), grad=rows(ptr=base + 4))


def test_nothing_to_compute_still_writes_a_reduced_loss():
    """No rows: 'none' has nothing to do; 'mean' and 'sum' still write their number (a launch)."""
    loss = rows((0,))
    assert lab.cross_entropy(rows((0, 10)), rows((0,), "<i8"), loss, reduction="none") is loss
    if lab.is_available():
        pytest.skip("fake pointers must not reach a real GPU")
    with pytest.raises(lab.CudaError):
        lab.cross_entropy(rows((0, 10)), rows((0,), "<i8"), rows(()))


@pytest.mark.parametrize("op", ["swiglu_backward", "geglu_backward"])
def test_glu_backward_operands(op):
    base = fake_pointer()
    with pytest.raises(ValueError, match=rf"{op}\(\): argument 'up' has shape \(6, 9\); it must have shape \(6, 10\)"):
        call(op, up=rows((6, 9)))
    with pytest.raises(TypeError, match=r"argument 'grad_up' has dtype float64; it must have the dtype of 'gate'"):
        call(op, grad_up=rows(typestr="<f8"))
    with pytest.raises(ValueError, match=r"arguments 'grad_gate' and 'grad_up' share memory"):
        call(op, grad_gate=rows(ptr=base), grad_up=rows(ptr=base + 8))
    # the optional product: x's shape and dtype, apart from the other outputs
    with pytest.raises(ValueError, match=rf"{op}\(\): argument 'product' has shape \(6,\); it must have shape \(6, 10\)"):
        call(op, product=rows((6,)))
    with pytest.raises(TypeError, match=r"argument 'product' has dtype float16; it must have the dtype of 'gate'"):
        call(op, product=rows(typestr="<f2"))
    with pytest.raises(ValueError, match=r"arguments 'grad_up' and 'product' share memory|arguments 'product' and 'grad_up' share memory"):
        call(op, grad_up=rows(ptr=base), product=rows(ptr=base + 8))


@pytest.mark.parametrize("layout, disjoint", [
    ("halves", True),                    # x[:, :5] and x[:, 5:] of a [6, 10] float32 array
    ("even_and_odd_columns", True),      # x[:, ::2] and x[:, 1::2]
    ("halves_reversed_rows", True),      # the halves of x[::-1]
    ("halves_shifted_by_one", False),    # x[:, :5] and x[:, 1:6]: they share four columns
    ("rows_and_shifted_rows", False),    # x[:3] and x[1:4]
])
def test_interleaved_outputs_are_allowed_only_when_disjoint(layout, disjoint):
    """Two outputs whose address ranges meet are refused unless the plan proves they share no
    element; the disjoint ones reach the launch (lab.CudaError on a machine without a GPU)."""
    base = fake_pointer()
    views = {
        "halves": [dict(ptr=base, strides=(40, 4)), dict(ptr=base + 20, strides=(40, 4))],
        "even_and_odd_columns": [dict(ptr=base, strides=(40, 8)), dict(ptr=base + 4, strides=(40, 8))],
        "halves_reversed_rows": [dict(ptr=base + 200, strides=(-40, 4)), dict(ptr=base + 220, strides=(-40, 4))],
        "halves_shifted_by_one": [dict(ptr=base, strides=(40, 4)), dict(ptr=base + 4, strides=(40, 4))],
        "rows_and_shifted_rows": [dict(ptr=base, strides=(20, 4)), dict(ptr=base + 20, strides=(20, 4))],
    }[layout]
    grad_gate, grad_up = (rows((6, 5), **view) for view in views)
    if not disjoint:
        with pytest.raises(ValueError, match=r"arguments 'grad_gate' and 'grad_up' share memory"):
            lab.swiglu_backward(rows((6, 5)), rows((6, 5)), rows((6, 5)), grad_gate, grad_up)
        return
    if lab.is_available():
        pytest.skip("fake pointers must not reach a real GPU")
    with pytest.raises(lab.CudaError):
        lab.swiglu_backward(rows((6, 5)), rows((6, 5)), rows((6, 5)), grad_gate, grad_up)


def test_halves_of_one_array_are_disjoint():
    """gate/up and grad_gate/grad_up as x[:, :h] and x[:, h:] pass validation (the launch is reached);
    a quarter-shifted view of the same buffer overlaps and is refused."""
    base, grads = fake_pointer(), fake_pointer()
    half = dict(shape=(6, 5), strides=(40, 4))
    gate, up = rows(ptr=base, **half), rows(ptr=base + 20, **half)
    grad_gate, grad_up = rows(ptr=grads, **half), rows(ptr=grads + 20, **half)
    with pytest.raises(ValueError, match=r"arguments 'grad_gate' and 'grad_up' share memory"):
        lab.swiglu_backward(rows((6, 5)), gate, up, grad_gate, rows(ptr=grads + 8, **half))
    if lab.is_available():
        pytest.skip("fake pointers must not reach a real GPU")
    with pytest.raises(lab.CudaError):
        lab.swiglu_backward(rows((6, 5)), gate, up, grad_gate, grad_up)


def test_cross_entropy_backward_operands():
    with pytest.raises(ValueError, match=r"cross_entropy_backward\(\): argument 'grad_loss' has shape \(5,\); it must have shape \(6,\)"):
        call("cross_entropy_backward", grad_loss=rows((5,)))
    with pytest.raises(TypeError, match=r"argument 'grad_loss' has dtype int64; the loss is float16"):
        call("cross_entropy_backward", grad_loss=rows((), "<i8"))
    with pytest.raises(ValueError, match=r"argument 'grad' is read-only"):
        call("cross_entropy_backward", grad=rows(readonly=True))
    base = fake_pointer()
    with pytest.raises(ValueError, match=r"arguments 'grad' and 'grad_loss' share memory"):
        call("cross_entropy_backward", grad=rows(ptr=base), grad_loss=rows((6,), ptr=base + 8))


@pytest.mark.parametrize("knob, bad, good", [
    ("_rowwise_max_chunks", 3, 2),
    ("_rowwise_staged_min_vectors", -1, 1 << 62),
    ("_rowwise_staged_vectors_per_thread", 65, 16),
    ("_rowwise_staged_most_bytes", -2, 48128),
    ("_rowwise_window_depth", 9, 2),
    ("_rowwise_window_depth", -2, 0),
    ("_rowwise_cluster_blocks", 3, 4),
    ("_rowwise_cluster_blocks", 16, 0),
    ("_reduce_slice_waves", 0, 4),
    ("_reduce_slice_waves", 65, 64),
])
def test_tuning_knobs_check_their_value_and_return_the_previous(knob, bad, good):
    """The tuning sweeps' private knobs: a value out of range is refused and changes nothing; a good one
    returns the setting it replaced, so the caller can put it back."""
    set_knob = getattr(lab.lab, knob)
    with pytest.raises(ValueError, match=knob):
        set_knob(bad)
    default = set_knob(good)
    try:
        assert set_knob(good) == good
    finally:
        assert set_knob(default) == good
    with pytest.raises(TypeError):
        set_knob("4")
