"""lab.attention and lab.attention_backward on a GPU, against attention computed by torch in float64
from the stored inputs: float16 and bfloat16, head dims 64, 96, 128 (and 256 forward), full, causal,
sliding windows and softcap, grouped and multi-query heads, unequal and odd lengths (1, primes,
lengths that are not multiples of a tile), contiguous and transposed layouts, packed batches (empty
sequences and length 1 included) against each sequence run alone, the backward bitwise identical run
to run, CuPy arrays, and lab.nn's faces with autograd and under torch.compile. Outputs are poisoned
(NaN) first, so an element left unwritten fails."""
import math

import pytest

import lab
from producers import producer_or_skip

pytestmark = pytest.mark.gpu

# max |lab - reference| / max |reference|: the kernels round probabilities (and ds) to the inputs'
# dtype before their second product, as FlashAttention does
TOL = {"float16": {"out": 4e-3, "grad": 1e-2}, "bfloat16": {"out": 2.5e-2, "grad": 5e-2}}


def torch_or_skip():
    return producer_or_skip("torch").torch


def visible_mask(torch, sq, sk, causal, window, device):
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    diagonal = sk - sq
    left, right = window
    if causal:
        right = 0
    seen = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if left >= 0:
        seen &= j >= i + diagonal - left
    if right >= 0:
        seen &= j <= i + diagonal + right
    return seen


def reference(torch, q, k, v, causal=False, window=(-1, -1), softcap=0.0, scale=None):
    """(out, lse) in float64 with autograd: q (B, H, Sq, D), k and v (B, Hk, Sk, D)."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-1, -2) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    seen = visible_mask(torch, q.shape[2], k.shape[2], causal, window, q.device)
    any_seen = seen.any(-1)
    s = s.masked_fill(~seen, float("-inf"))
    s = torch.where(any_seen[:, None], s, 0.0)  # a row that sees nothing: finite, then zeroed below
    lse = torch.where(any_seen, torch.logsumexp(s, -1), float("inf"))
    out = torch.where(any_seen[:, None], torch.softmax(s, -1) @ v, 0.0)
    return out, lse


def make(torch, shape, dtype, layout, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    b, h, s, d = shape
    if layout == "transposed":  # the (B, S, H, D) projections viewed as (B, H, S, D)
        return torch.randn(b, s, h, d, generator=g, device="cuda").to(dtype).transpose(1, 2)
    return torch.randn(shape, generator=g, device="cuda").to(dtype)


def poisoned_like(torch, x):
    return torch.full_like(x, float("nan"))


def close(torch, got, want, tol, what):
    got = got.double()
    assert not torch.isnan(got).any(), f"{what}: NaN (an element left unwritten?)"
    scale = want.abs().max().item() or 1.0
    err = (got - want).abs().max().item() / scale
    assert err <= tol, f"{what}: max error {err:.3g} of max |reference| {scale:.3g} (tolerance {tol})"


CASES = [  # (B, Hq, Hk, Sq, Sk), options, layout
    ((2, 4, 4, 128, 128), {}, "contiguous"),
    ((2, 4, 4, 128, 128), {"causal": True}, "transposed"),
    ((1, 4, 2, 1, 1), {}, "contiguous"),                          # one position
    ((2, 6, 2, 37, 37), {"causal": True}, "contiguous"),           # odd, grouped
    ((1, 4, 1, 131, 67), {"causal": True}, "transposed"),          # multi-query, Sq > Sk: empty rows
    ((1, 2, 2, 67, 131), {"causal": True}, "contiguous"),          # Sq < Sk: the diagonal at the bottom right
    ((1, 3, 3, 300, 300), {"window": (47, 0)}, "contiguous"),      # a sliding window (Mistral's shape)
    ((1, 2, 1, 200, 257), {"window": (20, 9)}, "transposed"),      # both sides bounded
    ((2, 2, 2, 97, 97), {"softcap": 5.0, "causal": True}, "contiguous"),  # Gemma 2's softcap
    ((1, 4, 2, 200, 190), {"scale": 0.3}, "contiguous"),
    ((1, 8, 2, 600, 600), {"causal": True}, "transposed"),         # many blocks each way
]
CASE_IDS = ["full", "causal_transposed", "one", "odd_gqa", "mqa_empty_rows", "bottom_right", "window",
            "window_both", "softcap", "scale", "many_blocks"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("d", [64, 96, 128])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_forward_and_backward_match_float64(dtype, d, case):
    torch = torch_or_skip()
    (b, hq, hk, sq, sk), options, layout = case
    tdtype = getattr(torch, dtype)
    q = make(torch, (b, hq, sq, d), tdtype, layout, 1)
    k = make(torch, (b, hk, sk, d), tdtype, layout, 2)
    v = make(torch, (b, hk, sk, d), tdtype, layout, 3)
    grad_out = make(torch, (b, hq, sq, d), tdtype, layout, 4)
    out, lse = poisoned_like(torch, q), torch.full((b, hq, sq), float("nan"), device="cuda")
    got_out, got_lse = lab.attention(q, k, v, out, lse, **options)
    assert got_out is out and got_lse is lse

    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    want_out, want_lse = reference(torch, q64, k64, v64, **options)
    close(torch, out, want_out.detach(), TOL[dtype]["out"], "out")
    finite = torch.isfinite(want_lse)
    assert torch.equal(torch.isfinite(lse), finite), "lse: +inf exactly for rows that see no key"
    assert (lse[~finite] == float("inf")).all()
    assert (lse[finite] - want_lse.detach()[finite]).abs().max().item() < 2e-3 if finite.any() else True

    want_out.backward(grad_out.double())
    grads = [poisoned_like(torch, t) for t in (q, k, v)]
    lab.attention_backward(grad_out, q, k, v, out, lse, *grads, **options)
    for name, got, want in zip(["grad_q", "grad_k", "grad_v"], grads, [q64.grad, k64.grad, v64.grad]):
        close(torch, got, want, TOL[dtype]["grad"], name)


@pytest.mark.parametrize("products", ["mma.sync", "wgmma-serial"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_the_forwards_other_builds(monkeypatch, products, d, case):
    """On an H100 or H200 head dims 64 and 128 run on wgmma, the forward with its softmax overlapped
    with the products (the test above checks both passes). LAB_ATTENTION_PRODUCTS picks the other
    builds, which the benchmark times beside it: the kernels every other GPU runs (forward and
    backward), and the forward on wgmma without the overlap (its backward: wgmma's)."""
    torch = torch_or_skip()
    monkeypatch.setenv("LAB_ATTENTION_PRODUCTS", products)
    (b, hq, hk, sq, sk), options, layout = case
    q, k, v = (make(torch, (b, h, s, d), torch.bfloat16, layout, seed)
               for h, s, seed in ((hq, sq, 1), (hk, sk, 2), (hk, sk, 3)))
    out, lse = poisoned_like(torch, q), torch.full((b, hq, sq), float("nan"), device="cuda")
    lab.attention(q, k, v, out, lse, **options)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    want_out, _ = reference(torch, q64, k64, v64, **options)
    close(torch, out, want_out.detach(), TOL["bfloat16"]["out"], "out")
    grad_out = make(torch, (b, hq, sq, d), torch.bfloat16, layout, 4)
    want_out.backward(grad_out.double())
    grads = [poisoned_like(torch, t) for t in (q, k, v)]
    lab.attention_backward(grad_out, q, k, v, out, lse, *grads, **options)  # mma.sync under both choices
    for name, got, want in zip(["grad_q", "grad_k", "grad_v"], grads, [q64.grad, k64.grad, v64.grad]):
        close(torch, got, want, TOL["bfloat16"]["grad"], name)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("options", [{}, {"causal": True}], ids=["full", "causal"])
def test_head_dim_256_forward(dtype, options):
    torch = torch_or_skip()
    tdtype = getattr(torch, dtype)
    q, k, v = (make(torch, (2, 2, 77, 256), tdtype, "contiguous", seed) for seed in (1, 2, 3))
    out = poisoned_like(torch, q)
    lab.attention(q, k, v, out, **options)
    want, _ = reference(torch, q.double(), k.double(), v.double(), **options)
    close(torch, out, want, TOL[dtype]["out"], "out")


def packed_batch(torch, lengths_q, lengths_k, hq, hk, d, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def rows(total, heads):
        return torch.randn(total, heads, d, generator=g, device="cuda").to(dtype)

    cu_q = torch.tensor([0] + list(torch.tensor(lengths_q).cumsum(0)), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor([0] + list(torch.tensor(lengths_k).cumsum(0)), dtype=torch.int32, device="cuda")
    return rows(sum(lengths_q), hq), rows(sum(lengths_k), hk), rows(sum(lengths_k), hk), cu_q, cu_k


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("lengths, options", [
    (([5, 0, 1, 64, 130, 17], None), {"causal": True}),
    (([33, 200, 1, 0], [40, 190, 3, 5]), {"causal": True}),     # cross lengths: the diagonal per sequence
    (([100, 37, 256], None), {"window": (31, 0)}),
    (([70, 1, 129], None), {}),
], ids=["causal_with_empty_and_one", "unequal", "window", "full"])
def test_packed_batches_match_each_sequence_alone(dtype, lengths, options):
    torch = torch_or_skip()
    tdtype = getattr(torch, dtype)
    lengths_q, lengths_k = lengths[0], lengths[1] or lengths[0]
    hq, hk, d = 4, 2, 64
    q, k, v, cu_q, cu_k = packed_batch(torch, lengths_q, lengths_k, hq, hk, d, tdtype, 7)
    grad_out = torch.randn_like(q)
    extra = 3  # rows no sequence covers, past the last: left as they were
    q_all = torch.cat([q, torch.randn(extra, hq, d, device="cuda").to(tdtype)])
    out = torch.full_like(q_all, float("nan"))
    lse = torch.full((hq, q_all.shape[0]), float("nan"), device="cuda")
    packing = {"cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, "max_seqlen_q": max(lengths_q),
               "max_seqlen_k": max(lengths_k), **options}
    lab.attention(q_all, k, v, out, lse, **packing)
    assert torch.isnan(out[-extra:]).all() and torch.isnan(lse[:, -extra:]).all()
    grads = [poisoned_like(torch, t) for t in (q, k, v)]
    lab.attention_backward(grad_out, q, k, v, out[:-extra], lse[:, :-extra], *grads, **packing)
    for i in range(len(lengths_q)):
        sq0, sq1 = cu_q[i].item(), cu_q[i + 1].item()
        sk0, sk1 = cu_k[i].item(), cu_k[i + 1].item()
        as_batch = [t.transpose(0, 1)[None].double().requires_grad_() for t in (q[sq0:sq1], k[sk0:sk1], v[sk0:sk1])]
        want_out, _ = reference(torch, *as_batch, **options)
        if sq1 > sq0:
            close(torch, out[sq0:sq1].transpose(0, 1)[None], want_out.detach(), TOL[dtype]["out"], f"out of {i}")
            want_out.backward(grad_out[sq0:sq1].transpose(0, 1)[None].double())
            close(torch, grads[0][sq0:sq1].transpose(0, 1)[None], as_batch[0].grad, TOL[dtype]["grad"], f"grad_q {i}")
        for name, got, wanted in [("grad_k", grads[1], as_batch[1].grad), ("grad_v", grads[2], as_batch[2].grad)]:
            if sk1 > sk0:
                wanted = torch.zeros_like(as_batch[1]) if wanted is None else wanted
                close(torch, got[sk0:sk1].transpose(0, 1)[None], wanted, TOL[dtype]["grad"], f"{name} of {i}")


def test_the_backward_is_bitwise_deterministic():
    torch = torch_or_skip()
    q, k, v, grad_out = (make(torch, (2, 8, 1000, 128), torch.bfloat16, "transposed", s) for s in range(4))
    k, v = k[:, :2], v[:, :2]
    out, lse = torch.empty_like(q), torch.empty(2, 8, 1000, device="cuda")
    lab.attention(q, k, v, out, lse, causal=True)
    runs = []
    for _ in range(3):
        grads = [torch.empty_like(t) for t in (q, k, v)]
        lab.attention_backward(grad_out, q, k, v, out, lse, *grads, causal=True)
        runs.append(grads)
    for later in runs[1:]:
        for a, b in zip(runs[0], later):
            assert torch.equal(a.view(torch.int16), b.view(torch.int16))


def test_cupy_arrays():
    cupy = producer_or_skip("cupy").cupy
    torch = torch_or_skip()
    rng = cupy.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 4, 90, 64), dtype=cupy.float32).astype(cupy.float16) for _ in range(3))
    out = cupy.full_like(q, cupy.nan)
    lab.attention(q, k, v, out, causal=True)
    want, _ = reference(torch, *(torch.as_tensor(x, device="cuda").double() for x in (q, k, v)), causal=True)
    close(torch, torch.as_tensor(out, device="cuda"), want, TOL["float16"]["out"], "out")


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_nn_scaled_dot_product_attention_with_autograd(is_causal, compiled):
    torch = torch_or_skip()
    import lab.nn
    q = make(torch, (2, 8, 130, 64), torch.bfloat16, "transposed", 1).requires_grad_()
    k = make(torch, (2, 2, 130, 64), torch.bfloat16, "transposed", 2).requires_grad_()
    v = make(torch, (2, 2, 130, 64), torch.bfloat16, "transposed", 3).requires_grad_()
    sdpa = lab.nn.scaled_dot_product_attention
    if compiled:
        sdpa = torch.compile(sdpa, fullgraph=True)
    out = sdpa(q, k, v, is_causal=is_causal, enable_gqa=True)
    out.float().square().sum().backward()
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    want, _ = reference(torch, q64, k64, v64, causal=is_causal)
    want.square().sum().backward()
    close(torch, out.detach(), want.detach(), TOL["bfloat16"]["out"], "out")
    for name, got, wanted in [("q", q.grad, q64.grad), ("k", k.grad, k64.grad), ("v", v.grad, v64.grad)]:
        close(torch, got, wanted, TOL["bfloat16"]["grad"], f"grad of {name}")


def test_nn_face_falls_back_to_torch_for_what_lab_does_not_run():
    torch = torch_or_skip()
    import lab.nn
    q = torch.randn(1, 2, 10, 64, device="cuda", dtype=torch.bfloat16)
    mask = torch.ones(10, 10, dtype=torch.bool, device="cuda").tril()
    want = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    assert torch.equal(lab.nn.scaled_dot_product_attention(q, q, q, attn_mask=mask), want)


@pytest.mark.parametrize("packed", [False, True], ids=["fixed", "packed"])
def test_jax_dot_product_attention_inside_jit_with_grad(packed):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import numpy as np
    if not any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("jax sees no GPU")
    import lab.jax as ljax
    keys = jax.random.split(jax.random.PRNGKey(0), 4)
    q = jax.random.normal(keys[0], (2, 150, 8, 64)).astype(jnp.bfloat16)
    k, v = (jax.random.normal(key, (2, 150, 2, 64)).astype(jnp.bfloat16) for key in keys[1:3])
    grad_out = jax.random.normal(keys[3], q.shape).astype(jnp.bfloat16)
    if packed:
        lengths = [0, 31, 150, 1, 118]
        cu = jnp.asarray(np.concatenate([[0], np.cumsum(lengths)]), jnp.int32)
        q, k, v, grad_out = (x.reshape(-1, *x.shape[2:]) for x in (q, k, v, grad_out))
        packing = dict(cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=150, max_seqlen_k=150)
    else:
        packing = {}

    def loss(fn):
        return lambda q, k, v: (fn(q, k, v).astype(jnp.float32) * grad_out.astype(jnp.float32)).sum()
    ours = jax.jit(jax.value_and_grad(loss(lambda q, k, v: ljax.dot_product_attention(
        q, k, v, is_causal=True, **packing)), argnums=(0, 1, 2)))
    value, grads = ours(q, k, v)
    f64 = lambda x: np.asarray(x.astype(jnp.float32), np.float64)  # noqa: E731
    torch = torch_or_skip()
    as_torch = [torch.tensor(f64(x), device="cuda").requires_grad_() for x in (q, k, v)]
    if packed:
        outs = []
        for i in range(len(lengths)):
            a, b = int(cu[i]), int(cu[i + 1])
            piece = [x[a:b].transpose(0, 1)[None] for x in as_torch]
            outs.append(reference(torch, *piece, causal=True)[0][0].transpose(0, 1))
        want = torch.cat(outs)
    else:
        want = reference(torch, *(x.transpose(1, 2) for x in as_torch), causal=True)[0].transpose(1, 2)
    (want * torch.tensor(f64(grad_out), device="cuda")).sum().backward()
    for name, got, x in zip(["q", "k", "v"], grads, as_torch):
        close(torch, torch.tensor(f64(got), device="cuda"), x.grad, TOL["bfloat16"]["grad"], f"grad of {name}")
