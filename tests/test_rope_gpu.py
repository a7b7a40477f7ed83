"""lab.rope and lab.rope_backward on a GPU, against NumPy in float64 computed from the stored inputs:
every float dtype, both conventions, every table form (per element, per pair, float32 tables for
half inputs, broadcast over the batch or not), partial rotary dimensions, head dimensions that take
the 16-byte packet path and ones that do not, contiguous and transposed views, in place, q alone,
CuPy arrays; the backward as the forward's exact transpose; lab.nn.apply_rotary_pos_emb against
transformers' formula with autograd and under torch.compile. Outputs are poisoned (NaN) first."""
import numpy as np
import pytest

import lab
from producers import FLOAT_DTYPES, producer_or_skip

pytestmark = pytest.mark.gpu

RTOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-13}


def torch_or_skip():
    return producer_or_skip("torch").torch


def numpy_rope(x, cos, sin, interleaved, pair_table, backward):
    """launch.h's formula in float64: x (B, H, S, D), cos/sin broadcast to (B or 1, 1, S, C)."""
    rotary_dim = cos.shape[-1] * (2 if pair_table else 1)
    j = np.arange(rotary_dim)
    if interleaved:
        partner, sign, pair = j ^ 1, np.where(j % 2 == 0, -1.0, 1.0), j // 2
    else:
        half = rotary_dim // 2
        partner, sign, pair = np.where(j < half, j + half, j - half), np.where(j < half, -1.0, 1.0), j % half
    column = pair if pair_table else j
    c, s = cos[..., column], sin[..., column]
    head = x[..., :rotary_dim]
    if backward:
        turned = head * c - sign * head[..., partner] * s[..., partner]
    else:
        turned = head * c + sign * head[..., partner] * s
    return np.concatenate([turned, x[..., rotary_dim:]], axis=-1)


def make(torch, shape, dtype, layout, generator):
    """A (B, H, S, D) tensor: contiguous, or the transposed view of a (B, S, H, D) one."""
    b, h, s, d = shape
    if layout == "transposed":
        return torch.randn(b, s, h, d, generator=generator, device="cuda").to(dtype).transpose(1, 2)
    return torch.randn(shape, generator=generator, device="cuda").to(dtype)


def host(t):
    return t.double().cpu().numpy()


def check(got, want, dtype, what):
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape, what
    assert not np.isnan(got).any(), f"{what}: NaN in the output (an element left unwritten?)"
    tol = RTOL[dtype] * (np.abs(want) + 1.0)
    bad = np.abs(got - want) > tol
    assert not bad.any(), f"{what}: {bad.sum()} of {bad.size} off, worst {np.max(np.abs(got - want)):.3g}"


CASES = [  # (B, HQ, HK, S, D), table columns, rotary_dim option, table batch, table ndim
    ((2, 4, 2, 7, 128), 128, None, 2, 3),     # Llama's head_dim, Hugging Face tables
    ((1, 3, 1, 37, 64), 64, None, 1, 2),      # (positions, C) tables, a prime number of positions
    ((2, 2, 2, 5, 64), 32, 64, 1, 3),         # one column per pair
    ((3, 2, 1, 11, 64), 32, None, 3, 4),      # partial rotary: 32 of 64, tables (B, 1, S, C)
    ((2, 3, 2, 9, 6), 6, None, 1, 3),         # head_dim 6: no packet fits
    ((1, 1, 1, 1, 2), 2, None, 1, 3),         # one pair
    ((2, 5, 3, 13, 80), 40, 80, 2, 3),        # per pair, head_dim 80 (the packets of halves fit, floats not)
    # more items than the packet path's grid has threads (a wave of four 256-thread blocks on each
    # of an H200's 132 multiprocessors): each thread's shared-memory ring goes round several times
    ((2, 32, 8, 523, 128), 128, None, 2, 3),
    ((1, 16, 4, 1031, 128), 64, None, 1, 3),  # and partial: tail packets in the ring too
]
CASE_IDS = ["llama", "2d_tables", "pair_table", "partial", "d6", "one_pair", "d80_pairs", "many_strides",
            "many_strides_partial"]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("interleaved", [False, True], ids=["rotate_half", "interleaved"])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "in_place"])
def test_forward_and_backward_match_numpy(dtype, interleaved, case, layout):
    torch = torch_or_skip()
    (b, hq, hk, s, d), columns, rotary_dim, table_batch, table_ndim = case
    torch_dtype = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(FLOAT_DTYPES.index(dtype) * 1000 + interleaved * 100 + s + d)
    table_shape = {2: (s, columns), 3: (table_batch, s, columns), 4: (table_batch, 1, s, columns)}[table_ndim]
    cos = torch.randn(table_shape, generator=g, device="cuda").to(torch_dtype)
    sin = torch.randn(table_shape, generator=g, device="cuda").to(torch_dtype)
    pair_table = rotary_dim is not None and rotary_dim == 2 * columns
    broadcast = lambda t: host(t).reshape((table_batch if table_ndim > 2 else 1, 1, s, columns))  # noqa: E731
    for backward, function in ((False, lab.rope), (True, lab.rope_backward)):
        q = make(torch, (b, hq, s, d), torch_dtype, "transposed" if layout != "contiguous" else layout, g)
        k = make(torch, (b, hk, s, d), torch_dtype, "transposed" if layout != "contiguous" else layout, g)
        want_q = numpy_rope(host(q), broadcast(cos), broadcast(sin), interleaved, pair_table, backward)
        want_k = numpy_rope(host(k), broadcast(cos), broadcast(sin), interleaved, pair_table, backward)
        if layout == "in_place":
            q_out, k_out = q, k
        else:
            q_out, k_out = torch.full_like(q, float("nan")), torch.full_like(k, float("nan"))
        got = function(q, k, cos, sin, q_out, k_out, rotary_dim=rotary_dim, interleaved=interleaved)
        assert got[0] is q_out and got[1] is k_out
        check(host(q_out), want_q, dtype, f"q, backward={backward}")
        check(host(k_out), want_k, dtype, f"k, backward={backward}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_float32_tables_for_half_inputs(dtype):
    torch = torch_or_skip()
    g = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn(2, 4, 9, 64, generator=g, device="cuda").to(getattr(torch, dtype))
    cos, sin = (torch.randn(1, 9, 64, generator=g, device="cuda") for _ in range(2))
    out = torch.full_like(q, float("nan"))
    lab.rope(q, None, cos, sin, out, None)
    check(host(out), numpy_rope(host(q), host(cos)[:, None], host(sin)[:, None], False, False, False), dtype, "q")


@pytest.mark.parametrize("interleaved", [False, True])
def test_backward_is_the_transpose(interleaved):
    """<rope(x), g> == <x, rope_backward(g)> for random tables, in float64."""
    torch = torch_or_skip()
    g = torch.Generator(device="cuda").manual_seed(7)
    x, grad = (torch.randn(2, 3, 17, 64, generator=g, device="cuda", dtype=torch.float64) for _ in range(2))
    cos, sin = (torch.randn(2, 17, 48, generator=g, device="cuda", dtype=torch.float64) for _ in range(2))
    y, back = torch.empty_like(x), torch.empty_like(x)
    lab.rope(x, None, cos, sin, y, None, interleaved=interleaved)
    lab.rope_backward(grad, None, cos, sin, back, None, interleaved=interleaved)
    assert abs(float((y * grad).sum() - (x * back).sum())) < 1e-9 * float((y * grad).abs().sum())


def test_cupy_arrays():
    cupy = producer_or_skip("cupy").cupy
    rng = np.random.default_rng(3)
    q = cupy.asarray(rng.standard_normal((2, 4, 6, 32)).astype(np.float32))
    k = cupy.asarray(rng.standard_normal((2, 1, 6, 32)).astype(np.float32))
    cos, sin = (cupy.asarray(rng.standard_normal((6, 32)).astype(np.float32)) for _ in range(2))
    q_out, k_out = cupy.full_like(q, np.nan), cupy.full_like(k, np.nan)
    lab.rope(q, k, cos, sin, q_out, k_out)
    cupy.cuda.runtime.deviceSynchronize()
    for x, out in ((q, q_out), (k, k_out)):
        want = numpy_rope(cupy.asnumpy(x).astype(np.float64), cupy.asnumpy(cos).astype(np.float64),
                          cupy.asnumpy(sin).astype(np.float64), False, False, False)
        check(cupy.asnumpy(out), want, "float32", "cupy")


def hf_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """transformers' Llama formula, written out here as the reference."""
    import torch

    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def llama_inputs(torch, dtype, requires_grad=True):
    """q and k as Llama's attention passes them (transposed projections, 4 query heads per key head)
    and its rotary embedding's tables (theta 500000)."""
    g = torch.Generator(device="cuda").manual_seed(11)
    b, s, hq, hk, d = 2, 33, 8, 2, 128
    q = torch.randn(b, s, hq, d, generator=g, device="cuda", dtype=dtype).transpose(1, 2)
    k = torch.randn(b, s, hk, d, generator=g, device="cuda", dtype=dtype).transpose(1, 2)
    inv_freq = 1.0 / (500000 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d))
    angles = torch.arange(s, device="cuda", dtype=torch.float32)[:, None] * inv_freq[None]
    emb = torch.cat((angles, angles), dim=-1)[None].expand(b, s, d)
    q.requires_grad_(requires_grad), k.requires_grad_(requires_grad)
    return q, k, emb.cos().to(dtype), emb.sin().to(dtype)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_apply_rotary_pos_emb_matches_transformers_with_gradients(dtype):
    torch = torch_or_skip()
    import lab.nn
    q, k, cos, sin = llama_inputs(torch, getattr(torch, dtype))
    ours = lab.nn.apply_rotary_pos_emb(q, k, cos, sin)
    theirs = hf_apply_rotary_pos_emb(q, k, cos, sin)
    tol = dict(rtol=1.6e-2, atol=1e-2) if dtype == "bfloat16" else dict(rtol=1e-5, atol=1e-5)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, **tol)
    weights = [torch.randn_like(t) for t in ours]
    grads = torch.autograd.grad(sum((o * w).sum() for o, w in zip(ours, weights)), (q, k))
    want = torch.autograd.grad(sum((t * w).sum() for t, w in zip(theirs, weights)), (q, k))
    for a, b in zip(grads, want):
        torch.testing.assert_close(a, b, **tol)


def test_apply_rotary_pos_emb_under_compile():
    torch = torch_or_skip()
    import lab.nn
    q, k, cos, sin = llama_inputs(torch, torch.bfloat16, requires_grad=False)
    compiled = torch.compile(lambda q, k, c, s: lab.nn.apply_rotary_pos_emb(q, k, c, s), fullgraph=True)
    for a, b in zip(compiled(q, k, cos, sin), lab.nn.apply_rotary_pos_emb(q, k, cos, sin)):
        assert torch.equal(a, b)
