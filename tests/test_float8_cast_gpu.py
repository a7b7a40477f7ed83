"""lab.cast_float8 on a GPU (torch's float8 tensors through DLPack): every input dtype into e4m3fn and
e5m2, with and without the transpose, odd and tile-sized shapes and views that start mid-tile,
bit for bit against torch's own rounding of x * (1 / scale) clamped to the format's range; the amax;
NaN and saturation; and the casts feeding lab.matmul's float8 products for both sides of a linear
layer (x @ w.T and dy @ w, the latter reading the transpose). Outputs are poisoned first."""
import numpy as np
import pytest

import lab
from producers import torch_float8_or_skip

pytestmark = pytest.mark.gpu

SHAPES = [(1, 1), (7, 13), (64, 64), (65, 72), (257, 1031), (1024, 4096)]
FORMAT_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}


def poisoned_float8(torch, shape, kind):
    out = torch.empty(shape, dtype=getattr(torch, kind), device="cuda")
    out.view(torch.uint8).fill_(0xAB)  # a value, not a NaN: an unwritten element compares unequal
    return out


def reference(torch, x, scale, kind):
    """torch's float8 of x * (1 / scale) in float32, clamped to the format's finite range first."""
    inverse = 1.0 / scale.float()
    limit = FORMAT_MAX[kind]
    return (x.float() * inverse).clamp(-limit, limit).to(getattr(torch, kind))


def same_bits(torch, got, want):
    assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), \
        f"{(got.view(torch.uint8) != want.view(torch.uint8)).sum().item()} elements differ"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("kind", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"{r}x{c}" for r, c in SHAPES])
def test_the_cast_and_its_transpose_round_as_torch_does(dtype, kind, shape):
    torch = torch_float8_or_skip()
    gen = torch.Generator(device="cuda").manual_seed(shape[0] * 7919 + shape[1])
    x = (torch.randn(shape, device="cuda", generator=gen) * 40).to(getattr(torch, dtype))
    # a scale that sends the largest values past the format's range: saturation is tested too
    scale = (x.float().abs().max() / FORMAT_MAX[kind] / 1.5).reshape(())
    out, out_t = poisoned_float8(torch, shape, kind), poisoned_float8(torch, shape[::-1], kind)
    amax = torch.full((1,), float("nan"), device="cuda")
    assert lab.cast_float8(x, scale, out, out_t=out_t, amax=amax) == (out, out_t)
    want = reference(torch, x, scale, kind)
    same_bits(torch, out, want)
    same_bits(torch, out_t, want.t().contiguous())
    assert amax.item() == x.float().abs().max().item()


@pytest.mark.parametrize("shape", [(3,), (1000, 3), (2, 3, 517)])
def test_any_shape_casts_without_a_transpose(shape):
    torch = torch_float8_or_skip()
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16) * 3
    scale = torch.tensor(0.01, device="cuda")
    out = poisoned_float8(torch, shape, "float8_e4m3fn")
    lab.cast_float8(x, scale, out)
    same_bits(torch, out, reference(torch, x, scale, "float8_e4m3fn"))


def test_only_the_transpose_and_a_view_starting_mid_tile():
    torch = torch_float8_or_skip()
    base = torch.randn(300, 200, device="cuda", dtype=torch.bfloat16)
    x = base[3:250]  # rows start mid-tile; x stays C-contiguous
    scale = torch.tensor(0.02, device="cuda")
    out_t = poisoned_float8(torch, (200, 247), "float8_e4m3fn")
    assert lab.cast_float8(x, scale, None, out_t=out_t) == (None, out_t)
    same_bits(torch, out_t, reference(torch, x, scale, "float8_e4m3fn").t().contiguous())


def test_nan_stays_nan_and_amax_reports_it():
    torch = torch_float8_or_skip()
    x = torch.ones(64, 64, device="cuda")
    x[5, 7] = float("nan")
    x[6, 8] = float("inf")
    out = poisoned_float8(torch, (64, 64), "float8_e4m3fn")
    amax = torch.zeros(1, device="cuda")
    lab.cast_float8(x, torch.tensor(1.0, device="cuda"), out, amax=amax)
    assert torch.isnan(out.float()[5, 7]) and out.float()[6, 8] == 448.0, "saturated, not infinite"
    assert torch.isnan(amax).item()


def test_an_empty_x_sets_amax_to_zero():
    torch = torch_float8_or_skip()
    amax = torch.full((1,), 5.0, device="cuda")
    lab.cast_float8(torch.empty(0, 8, device="cuda"), torch.tensor(1.0, device="cuda"),
                    torch.empty(0, 8, device="cuda", dtype=torch.float8_e4m3fn), amax=amax)
    assert amax.item() == 0.0


def test_the_casts_feed_both_products_of_a_linear_layer():
    """forward x @ w.T reads w as cast; the input's gradient dy @ w reads w's transpose, which the
    same cast wrote (out_t): cuBLASLt's float8 products take only a's rows and b's columns contiguous."""
    torch = torch_float8_or_skip()
    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("cuBLASLt's float8 kernels need compute capability 8.9 or newer")
    gen = torch.Generator(device="cuda").manual_seed(3)
    m, k, n = 256, 512, 384
    x = torch.randn(m, k, device="cuda", generator=gen, dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", generator=gen, dtype=torch.bfloat16) * 0.05
    dy = torch.randn(m, n, device="cuda", generator=gen, dtype=torch.bfloat16)
    scales = {name: (t.float().abs().max() / 448.0).reshape(()) for name, t in (("x", x), ("w", w), ("dy", dy))}
    x8 = torch.empty(m, k, device="cuda", dtype=torch.float8_e4m3fn)
    w8, w8_t = (torch.empty(s, device="cuda", dtype=torch.float8_e4m3fn) for s in ((n, k), (k, n)))
    dy8 = torch.empty(m, n, device="cuda", dtype=torch.float8_e4m3fn)
    lab.cast_float8(x, scales["x"], x8)
    lab.cast_float8(w, scales["w"], w8, out_t=w8_t)
    lab.cast_float8(dy, scales["dy"], dy8)
    y = lab.matmul(x8, w8.t(), torch.empty(m, n, device="cuda", dtype=torch.bfloat16),
                   scale_a=scales["x"], scale_b=scales["w"])
    dx = lab.matmul(dy8, w8_t.t(), torch.empty(m, k, device="cuda", dtype=torch.bfloat16),
                    scale_a=scales["dy"], scale_b=scales["w"])
    for got, want in ((y, x.double() @ w.double().t()), (dx, dy.double() @ w.double())):
        error = (got.double() - want).norm() / want.norm()
        assert error.item() < 0.06, f"relative error {error.item():.3f}: e4m3fn keeps 3 bits of mantissa"


@pytest.mark.parametrize("zeros", [False, True], ids=["values", "all_zero"])
def test_current_scaling_in_three_calls_without_a_host_sync(zeros):
    """The scale from this tensor's own amax, all on the device: norm(ord=inf), amax / 448, the cast.
    An all-zero x has amax 0 and scale 0, and casts to zeros (not NaN)."""
    torch = torch_float8_or_skip()
    x = torch.zeros(300, 500, device="cuda", dtype=torch.bfloat16) if zeros else \
        torch.randn(300, 500, device="cuda", dtype=torch.bfloat16) * 7
    amax, scale = torch.empty((), device="cuda"), torch.empty((), device="cuda")
    out = poisoned_float8(torch, (300, 500), "float8_e4m3fn")
    lab.norm(x, amax, ord=float("inf"))
    lab.axpby(1.0 / 448.0, amax, 0.0, amax, scale)
    lab.cast_float8(x, scale, out)
    assert np.isclose(scale.item(), x.float().abs().max().item() / 448.0, rtol=1e-6, atol=0)
    if zeros:
        assert (out.view(torch.uint8) == 0).all()
    else:
        same_bits(torch, out, reference(torch, x, scale, "float8_e4m3fn"))
        assert out.float().abs().max().item() == 448.0, "the largest magnitude maps to e4m3fn's largest"
