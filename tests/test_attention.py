"""lab.attention and lab.attention_backward on the CPU: every layout the plan accepts reaches the
launch, and every refusal names the argument and what was expected - through fake producers (no
GPU: a call that passes every check fails as lab.CudaError at the first CUDA call)."""
import inspect

import pytest

import lab
from fakes import fake_array, fake_pointer

B, HQ, HK, SQ, SK, D = 2, 4, 2, 5, 7, 64


def contiguous_strides(shape, size=2):
    strides, step = [], size
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def tensor(shape, typestr="<f2", layout="contiguous", **kw):
    """(B, H, S, D): contiguous, or the transposed view of a (B, S, H, D) array."""
    if layout == "transposed":
        b, h, s, d = shape
        kw.setdefault("strides", (s * h * d * 2, d * 2, h * d * 2, 2))
    return fake_array(shape, typestr, **kw)


def arrays(typestr="<f2", d=D, hq=HQ, hk=HK, sq=SQ, sk=SK, layout="contiguous", **overrides):
    a = {
        "q": tensor((B, hq, sq, d), typestr, layout), "k": tensor((B, hk, sk, d), typestr, layout),
        "v": tensor((B, hk, sk, d), typestr, layout), "out": tensor((B, hq, sq, d), typestr, layout),
        "lse": fake_array((B, hq, sq), "<f4"),
        "grad_out": tensor((B, hq, sq, d), typestr, layout), "grad_q": tensor((B, hq, sq, d), typestr, layout),
        "grad_k": tensor((B, hk, sk, d), typestr, layout), "grad_v": tensor((B, hk, sk, d), typestr, layout),
    }
    a.update(overrides)
    return a


def forward(options=None, **kw):
    a = arrays(**kw)
    return lab.attention(a["q"], a["k"], a["v"], a["out"], a["lse"], **(options or {}))


def backward(options=None, **kw):
    a = arrays(**kw)
    return lab.attention_backward(a["grad_out"], a["q"], a["k"], a["v"], a["out"], a["lse"], a["grad_q"],
                                  a["grad_k"], a["grad_v"], **(options or {}))


def packed(total_q=11, total_k=13, batch=3, d=D, hq=HQ, hk=HK, **overrides):
    a = {
        "q": fake_array((total_q, hq, d), "<f2"), "k": fake_array((total_k, hk, d), "<f2"),
        "v": fake_array((total_k, hk, d), "<f2"), "out": fake_array((total_q, hq, d), "<f2"),
        "lse": fake_array((hq, total_q), "<f4"),
        "grad_out": fake_array((total_q, hq, d), "<f2"), "grad_q": fake_array((total_q, hq, d), "<f2"),
        "grad_k": fake_array((total_k, hk, d), "<f2"), "grad_v": fake_array((total_k, hk, d), "<f2"),
        "cu_seqlens_q": fake_array((batch + 1,), "<i4"), "cu_seqlens_k": fake_array((batch + 1,), "<i4"),
    }
    a.update(overrides)
    return a


def packed_options(a, **options):
    return {"cu_seqlens_q": a["cu_seqlens_q"], "cu_seqlens_k": a["cu_seqlens_k"], "max_seqlen_q": 5,
            "max_seqlen_k": 6, **options}


def reaches_cuda(thunk):
    """Everything was checked: without a GPU, the first CUDA call is what fails."""
    if lab.is_available():
        pytest.skip("a GPU is here: tests/test_attention_gpu.py launches for real")
    with pytest.raises(lab.CudaError):
        thunk()


def refused(thunk, error, *fragments):
    with pytest.raises(error) as info:
        thunk()
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)
    return str(info.value)


def test_signatures_read_like_the_docstrings():
    forward_params = list(inspect.signature(lab.attention).parameters)
    assert forward_params[:5] == ["q", "k", "v", "out", "lse"]
    backward_params = list(inspect.signature(lab.attention_backward).parameters)
    assert backward_params[:9] == ["grad_out", "q", "k", "v", "out", "lse", "grad_q", "grad_k", "grad_v"]
    for params in (forward_params, backward_params):
        assert params[-9:] == ["causal", "window", "softcap", "scale", "cu_seqlens_q", "cu_seqlens_k",
                               "max_seqlen_q", "max_seqlen_k", "stream"]


@pytest.mark.parametrize("d", [64, 96, 128])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("hq, hk", [(4, 4), (4, 2), (4, 1)], ids=["mha", "gqa", "mqa"])
def test_accepted_layouts_reach_the_launch(d, layout, hq, hk):
    reaches_cuda(lambda: forward(d=d, layout=layout, hq=hq, hk=hk))
    reaches_cuda(lambda: backward(d=d, layout=layout, hq=hq, hk=hk))


@pytest.mark.parametrize("options", [
    {"causal": True}, {"window": (3, 0)}, {"window": (None, 2)}, {"window": [-1, -1]},
    {"softcap": 30.0}, {"scale": 0.5}, {"causal": True, "window": (4, None), "softcap": 5.0},
])
def test_options_reach_the_launch(options):
    reaches_cuda(lambda: forward(options))
    reaches_cuda(lambda: backward(options))


def test_forward_without_lse_and_head_dim_256_reach_the_launch():
    a = arrays()
    reaches_cuda(lambda: lab.attention(a["q"], a["k"], a["v"], a["out"]))
    reaches_cuda(lambda: forward(d=256))


def test_packed_batches_reach_the_launch():
    a = packed()
    reaches_cuda(lambda: lab.attention(a["q"], a["k"], a["v"], a["out"], a["lse"], **packed_options(a)))
    reaches_cuda(lambda: lab.attention_backward(a["grad_out"], a["q"], a["k"], a["v"], a["out"], a["lse"],
                                                a["grad_q"], a["grad_k"], a["grad_v"], **packed_options(a)))


def test_empty_batches_launch_nothing():
    a = arrays(sq=0)
    out, lse = lab.attention(a["q"], a["k"], a["v"], a["out"], a["lse"])
    assert out is a["out"] and lse is a["lse"]
    a = packed(batch=0)
    assert lab.attention(a["q"], a["k"], a["v"], a["out"], **packed_options(a))[1] is None


def test_the_backward_of_keys_no_query_sees_still_launches():
    """q has no positions but k does: grad_k and grad_v must become zeros, which is a launch."""
    reaches_cuda(lambda: backward(sq=0))


@pytest.mark.parametrize("name", ["q", "k", "v", "out"])
def test_none_for_an_array_is_refused_by_name(name):
    a = arrays(**{name: None})
    refused(lambda: lab.attention(a["q"], a["k"], a["v"], a["out"]), TypeError, f"'{name}'", "not None")


def test_none_for_backward_arrays_is_refused_by_name():
    for name in ["grad_out", "lse", "grad_q", "grad_k", "grad_v"]:
        refused(lambda: backward(**{name: None}), TypeError, f"'{name}'", "not None")


@pytest.mark.parametrize("typestr", ["<f4", "<f8", "<i4"])
def test_other_dtypes_are_refused(typestr):
    refused(lambda: forward(typestr=typestr), TypeError, "'q'", "float16 or bfloat16")


@pytest.mark.parametrize("d", [32, 80, 72, 256])
def test_unsupported_head_dims_are_refused(d):
    if d == 256:
        refused(lambda: backward(d=d), ValueError, "head_dim 256", "64, 96 or 128")
    else:
        refused(lambda: forward(d=d), ValueError, f"head_dim {d}", "64, 96 or 128")


@pytest.mark.parametrize("name, shape, fragment", [
    ("k", (B, 3, SK, D), "dividing q's"),
    ("k", (B + 1, HK, SK, D), "q's batch"),
    ("k", (B, HK, SK, 96), "head_dim"),
    ("v", (B, HK, SK + 1, D), "the shape of 'k'"),
    ("out", (B, HQ, SQ + 1, D), "the shape of 'q'"),
    ("lse", (B, HQ, SQ + 1), "(batch, heads, positions)"),
    ("q", (B, SQ, D), "4: (batch, heads, positions, head_dim)"),
])
def test_shapes_are_checked_by_name(name, shape, fragment):
    a = {name: fake_array(shape, "<f4" if name == "lse" else "<f2")}
    refused(lambda: forward(**a), ValueError, f"'{name}'", fragment)


@pytest.mark.parametrize("name", ["grad_out", "grad_q", "grad_k", "grad_v"])
def test_backward_shapes_are_checked_by_name(name):
    refused(lambda: backward(**{name: fake_array((B, HQ, SQ + 2, D), "<f2")}), ValueError, f"'{name}'")


def test_dtypes_must_agree():
    refused(lambda: forward(k=fake_array((B, HK, SK, D), "<f4")), TypeError, "'k'", "dtype of 'q'")
    refused(lambda: forward(out=fake_array((B, HQ, SQ, D), "<f4")), TypeError, "'out'", "dtype of 'q'")
    refused(lambda: forward(lse=fake_array((B, HQ, SQ), "<f2")), TypeError, "'lse'", "float32")


@pytest.mark.parametrize("strides, what", [
    (contiguous_strides((B, HQ, SQ, D + 8))[:3] + (2,), None),  # rows padded to 72: accepted
    ((HQ * SQ * D * 2, SQ * D * 2, D * 2, 4), "head_dim"),      # head_dim strided
    ((HQ * SQ * 66 * 2, SQ * 66 * 2, 66 * 2, 2), "multiple of 8"),  # rows 132 bytes apart
])
def test_strides_the_kernels_cannot_copy_in_16_bytes_are_refused(strides, what):
    q = fake_array((B, HQ, SQ, D), "<f2", strides=strides)
    if what is None:
        reaches_cuda(lambda: forward(q=q))
    else:
        refused(lambda: forward(q=q), ValueError, "'q'", "contiguous head_dim")


def test_misaligned_data_is_refused():
    q = fake_array((B, HQ, SQ, D), "<f2", ptr=fake_pointer() + 2)
    refused(lambda: forward(q=q), ValueError, "'q'", "16-byte aligned")


def test_outputs_must_be_apart_from_inputs():
    a = arrays()
    refused(lambda: lab.attention(a["q"], a["k"], a["v"], a["q"]), ValueError, "'out'", "'q'")
    refused(lambda: lab.attention_backward(a["grad_out"], a["q"], a["k"], a["v"], a["out"], a["lse"], a["grad_q"],
                                           a["k"], a["grad_v"]), ValueError, "'grad_k'")


def test_read_only_outputs_are_refused():
    refused(lambda: forward(out=fake_array((B, HQ, SQ, D), "<f2", readonly=True)), ValueError, "'out'", "read-only")


@pytest.mark.parametrize("options, error, fragment", [
    ({"window": 3}, TypeError, "'window' must be a pair"),
    ({"window": (1, 2, 3)}, TypeError, "'window' must be a pair"),
    ({"window": (-2, 0)}, ValueError, "window[0]"),
    ({"window": (0, "x")}, TypeError, "window[1]"),
    ({"softcap": -1.0}, ValueError, "'softcap'"),
    ({"softcap": float("nan")}, ValueError, "'softcap'"),
    ({"scale": 0.0}, ValueError, "'scale'"),
    ({"scale": True}, TypeError, "'scale'"),
    ({"causal": None}, TypeError, "'causal'"),
    ({"max_seqlen_q": 4, "max_seqlen_k": 4}, TypeError, "packed batch"),
    ({"cu_seqlens_q": fake_array((3,), "<i4")}, TypeError, "go together"),
])
def test_bad_options_are_refused_by_name(options, error, fragment):
    refused(lambda: forward(options), error, fragment)


@pytest.mark.parametrize("overrides, options, error, fragment", [
    ({"cu_seqlens_q": fake_array((4,), "<i8")}, {}, TypeError, "int32"),
    ({"cu_seqlens_k": fake_array((5,), "<i4")}, {}, ValueError, "'cu_seqlens_k'"),
    ({"cu_seqlens_q": fake_array((2, 2), "<i4")}, {}, ValueError, "'cu_seqlens_q'"),
    ({}, {"max_seqlen_q": None}, TypeError, "needs max_seqlen_q"),
    ({}, {"max_seqlen_k": 14}, ValueError, "'max_seqlen_k'"),
    ({"lse": fake_array((11, HQ), "<f4")}, {}, ValueError, "(heads, tokens)"),
    ({"q": fake_array((B, HQ, 11, D), "<f2")}, {}, ValueError, "3: (tokens, heads, head_dim)"),
])
def test_packed_batches_are_checked(overrides, options, error, fragment):
    a = packed(**overrides)
    opts = packed_options(a, **options)
    refused(lambda: lab.attention(a["q"], a["k"], a["v"], a["out"], a["lse"], **opts), error, fragment)


def run_host_program(tmp_path, name):
    """tests/<name>.cu built with nvcc for the host (no GPU) and run: its output, or a skip without nvcc."""
    import os
    import shutil
    import subprocess
    nvcc = shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    if not os.path.exists(nvcc):
        pytest.skip("nvcc is not installed")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    program = str(tmp_path / name)
    subprocess.run([nvcc, "-std=c++17", "-O1", "-I" + os.path.join(root, "src", "kernels"), "-o", program,
                    os.path.join(root, "tests", name + ".cu")], check=True, capture_output=True, timeout=300)
    done = subprocess.run([program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout
    return done.stdout


def test_the_kernels_block_ranges_cover_every_visible_pair(tmp_path):
    """attention.cuh's ranges (which key blocks a query block walks, which query blocks a key block
    walks, which tiles need no mask) checked pair by pair against the visibility rule, and a packed
    batch's lying lengths clamped: tests/attention_ranges.cu."""
    output = run_host_program(tmp_path, "attention_ranges")
    assert " 0 failures" in output and "visible pairs checked" in output


def test_every_fragment_register_holds_the_element_mma_expects(tmp_path):
    """tile_mma.cuh's ldmatrix addresses replayed on its swizzled tiles: each lane's registers hold
    the A and B elements of mma.sync.m16n8k16's layout, and no ldmatrix phase shares a bank group:
    tests/tile_fragments.cu."""
    assert run_host_program(tmp_path, "tile_fragments").strip().endswith("0 failures")


def test_a_window_list_emptied_by_its_own_index_is_read_safely():
    """window=[a, b] where a's __index__ clears the list: b must still be alive when read."""
    class Clearing:
        def __init__(self, target):
            self.target = target

        def __index__(self):
            self.target.clear()
            return 3
    window = []
    window.extend([Clearing(window), type("Side", (), {"__index__": lambda self: 0})()])
    reaches_cuda(lambda: forward({"window": window}))
