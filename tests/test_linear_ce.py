"""lab.linear_cross_entropy on the CPU: the chunk planner, and every refusal of the binding and the
plan, through fake producers (no GPU: these never reach a launch)."""
import pytest

import lab
from fakes import fake_array



def _arrays(rows=6, depth=8, classes=11, typestr="<f4", reduction="mean", **overrides):
    arrays = {
        "hidden": fake_array((rows, depth), typestr),
        "weight": fake_array((classes, depth), typestr),
        "target": fake_array((rows,), "<i8"),
        "loss": fake_array(() if reduction != "none" else (rows,), "<f4"),
    }
    arrays.update(overrides)
    return arrays


def _call(reduction="mean", **kw):
    arrays = {k: kw.pop(k) for k in ("hidden", "weight", "target", "loss") if k in kw}
    base = _arrays(reduction=reduction, **arrays)
    return lab.linear_cross_entropy(base["hidden"], base["weight"], base["target"], base["loss"], reduction=reduction,
                                     **kw)


# ---- the chunk planner ----

def test_default_scratch_takes_1024_rows_of_a_llama_vocabulary():
    plan = lab.linear_cross_entropy_plan(8192, 128256, "bfloat16")
    assert plan["chunk_rows"] == 1024 and plan["chunks"] == 8
    assert plan["scratch_bytes"] <= 256 << 20


@pytest.mark.parametrize("rows", [1, 7, 64, 1000, 8192, 12345])
@pytest.mark.parametrize("classes", [2, 50257, 128256, 151936, 256000])
@pytest.mark.parametrize("budget", [None, 64 << 20, 16 << 20])
def test_chunks_cover_every_row_within_the_budget(rows, classes, budget):
    dtype = "bfloat16"
    ld = (classes + 63) // 64 * 64  # a chunk's rows are padded to 128 bytes
    need = 512 + ((rows * 4 + 255) // 256 * 256) + ld * 2
    if budget is not None and budget < need:
        with pytest.raises(ValueError, match="max_scratch_bytes"):
            lab.linear_cross_entropy_plan(rows, classes, dtype, max_scratch_bytes=budget)
        return
    plan = lab.linear_cross_entropy_plan(rows, classes, dtype, max_scratch_bytes=budget)
    chunk, chunks = plan["chunk_rows"], plan["chunks"]
    assert 1 <= chunk <= rows and chunk * chunks >= rows and chunk * (chunks - 1) < rows
    assert plan["scratch_bytes"] <= (budget or 256 << 20)
    assert plan["logits_ld"] == ld and plan["scratch_bytes"] >= chunk * ld * 2 + rows * 4


def test_rows_spread_evenly_in_tiles_of_64():
    plan = lab.linear_cross_entropy_plan(8192, 128256, "bfloat16", max_scratch_bytes=64 << 20)
    assert plan["chunk_rows"] == 256 and plan["chunks"] == 32
    plan = lab.linear_cross_entropy_plan(1000, 50257, "bfloat16", max_scratch_bytes=40 << 20)
    assert plan["chunk_rows"] % 64 == 0 or plan["chunk_rows"] == 1000


def test_no_rows_is_one_empty_chunk():
    assert lab.linear_cross_entropy_plan(0, 7, "float32") == {"chunk_rows": 0, "chunks": 1, "logits_ld": 64,
                                                              "scratch_bytes": 256}


def test_none_keeps_no_row_losses_and_the_bias_gradient_takes_two_float32_vectors():
    mean = lab.linear_cross_entropy_plan(1000, 1000, "float32")["scratch_bytes"]
    none = lab.linear_cross_entropy_plan(1000, 1000, "float32", "none")["scratch_bytes"]
    bias = lab.linear_cross_entropy_plan(1000, 1000, "float32", "mean", True)["scratch_bytes"]
    assert mean - none == 4096 and bias - mean == 2 * 4096


def test_plan_refusals():
    with pytest.raises(ValueError, match="'dtype'"):
        lab.linear_cross_entropy_plan(4, 4, "int32")
    with pytest.raises(ValueError, match="argument 'classes' must be an int >= 1, got 0"):
        lab.linear_cross_entropy_plan(4, 0, "float32")
    with pytest.raises(ValueError, match="'max_scratch_bytes' gives 100 bytes"):
        lab.linear_cross_entropy_plan(4, 100, "float32", max_scratch_bytes=100)
    with pytest.raises(ValueError, match="'max_scratch_bytes' must be an int >= 0"):
        lab.linear_cross_entropy_plan(4, 100, "float32", max_scratch_bytes=-1)
    with pytest.raises(ValueError, match="'reduction'"):
        lab.linear_cross_entropy_plan(4, 100, "float32", "avg")


# ---- refusals of the call ----

@pytest.mark.parametrize("kw, error, match", [
    ({"hidden": fake_array((6, 8), "<i4")}, TypeError, "'hidden' has dtype int32"),
    ({"hidden": fake_array((), "<f4")}, ValueError, "'hidden' is 0-dimensional"),
    ({"weight": fake_array((11, 9), "<f4")}, ValueError, r"'weight' has shape \(11, 9\)"),
    ({"weight": fake_array((11, 8), "<f8")}, TypeError, "'weight' has dtype float64; it must be hidden's"),
    ({"weight": fake_array((0, 8), "<f4")}, ValueError, "'weight' has no classes"),
    ({"target": fake_array((5,), "<i8")}, ValueError, r"'target' has shape \(5,\)"),
    ({"target": fake_array((6,), "<f4")}, TypeError, "'target' has dtype float32; class indices"),
    ({"loss": fake_array((6,), "<f4")}, ValueError, "'loss' has shape .*one number"),
    ({"loss": fake_array((), "<i4")}, TypeError, "'loss' has dtype int32"),
    ({"bias": fake_array((10,), "<f4")}, ValueError, "'bias' has shape"),
    ({"bias": fake_array((11,), "<f8")}, TypeError, "'bias' has dtype"),
    ({"grad_hidden": fake_array((6, 7), "<f4")}, ValueError, "'grad_hidden' has shape"),
    ({"grad_hidden": fake_array((6, 8), "<f8")}, TypeError, "'grad_hidden' has dtype float64"),
    ({"grad_weight": fake_array((8, 11), "<f4")}, ValueError, "'grad_weight' has shape"),
    ({"grad_bias": fake_array((11,), "<i8")}, TypeError, "'grad_bias' has dtype int64"),
    ({"grad_output": fake_array((6,), "<f4")}, ValueError, "'grad_output' .*reduced loss is one number"),
    ({"grad_output": fake_array((), "<i4")}, TypeError, "'grad_output' has dtype int32"),
    ({"ignore_index": 1.5}, TypeError, "'ignore_index' must be an int"),
    ({"label_smoothing": 2.0}, ValueError, r"'label_smoothing' must be a number in \[0, 1\]"),
    ({"label_smoothing": True}, TypeError, "'label_smoothing' must be a number in \[0, 1\], got bool"),
    ({"softcap": 0.0}, ValueError, "'softcap' must be a finite number > 0"),
    ({"softcap": float("inf")}, ValueError, "'softcap'"),
    ({"z_loss": -1e-4}, ValueError, "'z_loss' must be a finite number >= 0"),
    ({"max_scratch_bytes": -5}, ValueError, "'max_scratch_bytes' must be an int >= 0"),
    ({"max_scratch_bytes": 100}, ValueError,
     r"'max_scratch_bytes' gives 100 bytes of scratch memory; one row of logits \(256 bytes\)"),
    ({"max_scratch_bytes": "big"}, TypeError, "max_scratch_bytes"),
    ({"reduction": "avg"}, ValueError, "'reduction' must be 'mean', 'sum' or 'none'"),
    ({"scratch": fake_array((100,), "|u1")}, ValueError, "'scratch' gives 100 bytes of scratch memory"),
    ({"scratch": fake_array((100,), "|u1"), "max_scratch_bytes": 4096}, ValueError, "'scratch' holds 100 bytes"),
    ({"scratch": fake_array((2000,), "|u1", strides=(2,))}, ValueError, "'scratch' must be contiguous"),
    ({"hidden": fake_array((6, 8), "<f4", strides=(64, 8))}, ValueError, "'hidden' has strides"),
    ({"hidden": fake_array((2, 3, 8), "<f4", strides=(128, 32, 4)), "target": fake_array((2, 3), "<i8")},
     ValueError, "'hidden' has leading dimensions that do not flatten"),
    ({"loss": fake_array((6,), "<f4", readonly=True), "reduction": "none"}, ValueError, "'loss' is read-only"),
])
def test_refusals_name_the_argument(kw, error, match):
    with pytest.raises(error, match=match):
        _call(**kw)


def test_none_wants_a_loss_per_row_and_takes_an_upstream_gradient_per_row():
    with pytest.raises(ValueError, match=r"'loss' has shape \(\); it must have shape \(6,\)"):
        _call(reduction="none", loss=fake_array((), "<f4"))
    with pytest.raises(ValueError, match="'grad_output' .*one upstream gradient per row"):
        _call(reduction="none", grad_output=fake_array((5,), "<f4"))


def test_an_output_sharing_memory_with_an_input_is_refused():
    hidden = fake_array((6, 8), "<f4")
    grad = fake_array((6, 8), "<f4", ptr=hidden.__cuda_array_interface__["data"][0])
    with pytest.raises(ValueError, match="'grad_hidden' and 'hidden' share memory"):
        _call(hidden=hidden, grad_hidden=grad)


def test_too_many_positional_arguments_and_unknown_keywords():
    a = _arrays()
    with pytest.raises(TypeError):
        lab.linear_cross_entropy(a["hidden"], a["weight"], a["target"], a["loss"], None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'logits'"):
        lab.linear_cross_entropy(a["hidden"], a["weight"], a["target"], a["loss"], logits=None)


@pytest.mark.skipif(lab.is_available(), reason="with a GPU, fake pointers are refused as not device memory")
def test_a_valid_call_without_a_gpu_fails_cleanly():
    """Everything checks out, so the call goes on to load cuBLASLt and launch: on a machine without
    a GPU that is an ImportError (no library) or lab.CudaError, never a crash."""
    with pytest.raises((ImportError, lab.CudaError)):
        _call(grad_hidden=fake_array((6, 8), "<f4"), grad_weight=fake_array((11, 8), "<f4"),
              grad_bias=fake_array((11,), "<f4"), bias=fake_array((11,), "<f4"))


def test_cross_entropy_takes_softcap_and_z_loss():
    logits, target = fake_array((4, 5), "<f4"), fake_array((4,), "<i8")
    with pytest.raises(ValueError, match="'softcap'"):
        lab.cross_entropy(logits, target, fake_array((), "<f4"), softcap=-1.0)
    with pytest.raises(ValueError, match="'z_loss'"):
        lab.cross_entropy(logits, target, fake_array((), "<f4"), z_loss=float("nan"))
