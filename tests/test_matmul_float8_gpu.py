"""lab.matmul with float8 inputs on a GPU (compute capability 8.9 or newer, torch with float8 types,
read through DLPack): e4m3fn and e5m2 inputs with per-tensor scales into bfloat16, float16 and float32
outs, against NumPy in float64 computed from the stored float8 values, and against torch._scaled_mm
where torch has it; the forward epilogues with a bias, alpha and c, out=None. Outputs are poisoned
(NaN) first."""
import numpy as np
import pytest

import lab
from producers import torch_float8_or_skip as float8_torch_or_skip

pytestmark = pytest.mark.gpu

# the products of float8 values are exact in float32; the sum's rounding and the output's remain
TOLERANCE = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-3}
SHAPES = [(16, 32, 16), (48, 64, 80), (257, 64, 48), (1024, 512, 272)]


def torch_float8_or_skip():
    return float8_torch_or_skip(tensor_cores=True)


def quantized(torch, shape, kind, rng, column_major=False):
    """A float8 tensor of `shape` (the transposed view of a row-major one when column_major, as w.T
    is), its per-tensor scale (a float32 device scalar) and the values it stands for, in float64."""
    stored = shape[::-1] if column_major else shape
    values = rng.standard_normal(stored) * 3.0
    dtype = getattr(torch, kind)
    amax = float(np.abs(values).max())
    scale = amax / float(torch.finfo(dtype).max)  # so the largest value is float8's largest
    x = torch.tensor(values / scale, dtype=torch.float32, device="cuda").to(dtype)
    if column_major:
        x = x.t()
    s = torch.tensor(scale, dtype=torch.float32, device="cuda")
    return x, s, x.double().cpu().numpy() * scale


def relative_error(got, want):
    got = np.asarray(got, dtype=np.float64)
    assert not np.isnan(got).any(), "NaN in the output: an element was not written"
    return np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)


def poisoned(torch, shape, dtype):
    return torch.full(shape, float("nan"), dtype=getattr(torch, dtype), device="cuda")


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("kinds", [("float8_e4m3fn", "float8_e4m3fn"), ("float8_e4m3fn", "float8_e5m2"),
                                   ("float8_e5m2", "float8_e4m3fn")], ids=["e4m3xe4m3", "e4m3xe5m2", "e5m2xe4m3"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{m}x{k}x{n}" for m, k, n in SHAPES])
def test_scaled_product_matches_numpy(out_dtype, kinds, shape):
    torch = torch_float8_or_skip()
    m, k, n = shape
    rng = np.random.default_rng(m + k + n)
    a, sa, ha = quantized(torch, (m, k), kinds[0], rng)
    b, sb, hb = quantized(torch, (k, n), kinds[1], rng, column_major=True)
    out = poisoned(torch, (m, n), out_dtype)
    assert lab.matmul(a, b, out, scale_a=sa, scale_b=sb) is out
    assert relative_error(out.double().cpu().numpy(), ha @ hb) < TOLERANCE[out_dtype]


@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
def test_matches_torch_scaled_mm(out_dtype):
    torch = torch_float8_or_skip()
    if not hasattr(torch, "_scaled_mm"):
        pytest.skip("this torch has no _scaled_mm")
    rng = np.random.default_rng(5)
    a, sa, _ = quantized(torch, (256, 512), "float8_e4m3fn", rng)
    b, sb, _ = quantized(torch, (512, 128), "float8_e4m3fn", rng, column_major=True)
    want = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=getattr(torch, out_dtype))
    out = poisoned(torch, (256, 128), out_dtype)
    lab.matmul(a, b, out, scale_a=sa, scale_b=sb)
    assert relative_error(out.double().cpu().numpy(), want.double().cpu().numpy()) < TOLERANCE[out_dtype]


@pytest.mark.parametrize("fast_accum", [False, True])
def test_fast_accumulation_keeps_the_product(fast_accum):
    """fast_accum changes how partial sums are kept along k, not what is computed: over a long k the
    result stays within bfloat16's tolerance of NumPy's, and matches torch._scaled_mm's same mode."""
    torch = torch_float8_or_skip()
    rng = np.random.default_rng(13)
    a, sa, ha = quantized(torch, (128, 4096), "float8_e4m3fn", rng)
    b, sb, hb = quantized(torch, (4096, 256), "float8_e4m3fn", rng, column_major=True)
    out = poisoned(torch, (128, 256), "bfloat16")
    lab.matmul(a, b, out, scale_a=sa, scale_b=sb, fast_accum=fast_accum)
    got = out.double().cpu().numpy()
    assert relative_error(got, ha @ hb) < TOLERANCE["bfloat16"]
    if hasattr(torch, "_scaled_mm"):
        want = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast_accum)
        assert relative_error(got, want.double().cpu().numpy()) < TOLERANCE["bfloat16"]


@pytest.mark.parametrize("epilogue", [None, "relu", "gelu_tanh"])
def test_forward_epilogues_with_a_bias(epilogue):
    torch = torch_float8_or_skip()
    rng = np.random.default_rng(7)
    a, sa, ha = quantized(torch, (128, 64), "float8_e4m3fn", rng)
    b, sb, hb = quantized(torch, (64, 96), "float8_e4m3fn", rng, column_major=True)
    bias = torch.tensor(rng.standard_normal(96), dtype=torch.bfloat16, device="cuda")
    out = poisoned(torch, (128, 96), "bfloat16")
    lab.matmul(a, b, out, bias=bias, epilogue=epilogue, scale_a=sa, scale_b=sb)
    z = ha @ hb + bias.double().cpu().numpy()
    want = {None: z, "relu": np.maximum(z, 0),
            "gelu_tanh": 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))}[epilogue]
    assert relative_error(out.double().cpu().numpy(), want) < TOLERANCE["bfloat16"]


def test_alpha_and_c():
    torch = torch_float8_or_skip()
    rng = np.random.default_rng(9)
    a, sa, ha = quantized(torch, (64, 32), "float8_e4m3fn", rng)
    b, sb, hb = quantized(torch, (32, 48), "float8_e4m3fn", rng, column_major=True)
    c = torch.tensor(rng.standard_normal((64, 48)), dtype=torch.float32, device="cuda")
    hc = c.double().cpu().numpy()
    lab.matmul(a, b, c, c=c, alpha=0.5, beta=2.0, scale_a=sa, scale_b=sb)  # c is out
    assert relative_error(c.double().cpu().numpy(), 0.5 * ha @ hb + 2.0 * hc) < TOLERANCE["float32"]


def test_out_none_is_a_bfloat16_lab_array():
    torch = torch_float8_or_skip()
    rng = np.random.default_rng(11)
    a, sa, ha = quantized(torch, (32, 64), "float8_e4m3fn", rng)
    b, sb, hb = quantized(torch, (64, 16), "float8_e4m3fn", rng, column_major=True)
    out = lab.matmul(a, b, scale_a=sa, scale_b=sb)
    assert isinstance(out, lab.Array) and out.dtype == "bfloat16" and out.shape == (32, 16)
    got = torch.from_dlpack(out).double().cpu().numpy()
    assert relative_error(got, ha @ hb) < TOLERANCE["bfloat16"]


def test_other_ops_refuse_float8_tensors():
    torch = torch_float8_or_skip()
    x = torch.zeros(8, device="cuda").to(torch.float8_e4m3fn)
    with pytest.raises(TypeError, match="is a float8_e4m3fn array; lab reads float8 arrays only as lab.matmul"):
        lab.relu(x, torch.empty(8, device="cuda"))
