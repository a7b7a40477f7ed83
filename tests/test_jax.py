"""lab.jax without a GPU, where jax is installed: on the CPU each function is its jax.numpy formula, so
values and gradients (the custom_vjp rules, the backward formulas lab's kernels implement) are checked
against NumPy in float64 and against jax's own autodiff; lowered for CUDA, each function and its
gradient become FFI calls to lab's targets with the right attributes; bad arguments fail at trace time
with the argument named."""
import numpy as np
import pytest
from jax_on_cpu import cuda_text, jax, on_the_cpu, rand  # noqa: F401 (on_the_cpu: an autouse fixture)

import jax.numpy as jnp  # noqa: E402

import lab  # noqa: E402
import lab.jax as ljax  # noqa: E402


def plain_rms_norm(x, w, eps):
    return x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * w


def plain_cross_entropy(logits, target, ignore_index=-100, smoothing=0.0, reduction="mean"):
    lse = jax.nn.logsumexp(logits, -1)
    keep = target != ignore_index
    picked = jnp.take_along_axis(logits, jnp.where(keep, target, 0)[..., None], -1)[..., 0]
    rows = jnp.where(keep, lse - (1 - smoothing) * picked - smoothing * logits.mean(-1), 0.0)
    return rows.sum() / keep.sum() if reduction == "mean" else rows.sum()


def rotate_half(x):
    half = x.shape[-1] // 2
    return jnp.concatenate([-x[..., half:], x[..., :half]], -1)


def test_values_and_gradients_on_the_cpu():
    x, w = rand(3, 5, 16), rand(16)
    np.testing.assert_allclose(ljax.rms_norm(x, w, eps=1e-6), plain_rms_norm(x, w, 1e-6), rtol=1e-12)
    got = jax.grad(lambda x, w: (ljax.rms_norm(x, w, 1e-6) ** 3).sum(), (0, 1))(x, w)
    want = jax.grad(lambda x, w: (plain_rms_norm(x, w, 1e-6) ** 3).sum(), (0, 1))(x, w)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jax.grad(lambda x: (ljax.rms_norm(x) ** 3).sum())(x),
                               jax.grad(lambda x: (plain_rms_norm(x, 1.0, jnp.finfo(x.dtype).eps) ** 3).sum())(x),
                               rtol=1e-9, atol=1e-12)
    b = rand(16)

    def plain_layer_norm(x, w, b):
        mean = x.mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b
    for args, plain_args in (((w, b), (w, b)), ((w, None), (w, 0.0)), ((None, b), (1.0, b)), ((None, None), (1.0, 0.0))):
        np.testing.assert_allclose(ljax.layer_norm(x, *args), plain_layer_norm(x, *plain_args), rtol=1e-10, atol=1e-12)
        given = [i for i, a in enumerate(args) if a is not None]
        got = jax.grad(lambda x, *p: (ljax.layer_norm(x, *[p[given.index(i)] if i in given else None
                                                            for i in range(2)]) ** 3).sum(),
                       tuple(range(1 + len(given))))(x, *[args[i] for i in given])
        want = jax.grad(lambda x, *p: (plain_layer_norm(x, *[p[given.index(i)] if i in given else plain_args[i]
                                                             for i in range(2)]) ** 3).sum(),
                        tuple(range(1 + len(given))))(x, *[args[i] for i in given])
        for a, c in zip(got, want):
            np.testing.assert_allclose(a, c, rtol=1e-8, atol=1e-10)
    for ours, theirs in ((ljax.softmax, jax.nn.softmax), (ljax.log_softmax, jax.nn.log_softmax)):
        for axis in (-1, 1):
            np.testing.assert_allclose(ours(x, axis), theirs(x, axis=axis), rtol=1e-12)
            np.testing.assert_allclose(jax.grad(lambda x: (ours(x, axis) * x).sum())(x),
                                       jax.grad(lambda x: (theirs(x, axis=axis) * x).sum())(x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_and_its_gradient(reduction, smoothing):
    logits = rand(7, 13)
    target = jnp.asarray([0, 12, 3, -100, 5, 5, 1])
    loss, grad = jax.value_and_grad(lambda l: 2.5 * ljax.cross_entropy(l, target, label_smoothing=smoothing,
                                                                       reduction=reduction))(logits)
    want, want_grad = jax.value_and_grad(lambda l: 2.5 * plain_cross_entropy(l, target, -100, smoothing,
                                                                             reduction))(logits)
    np.testing.assert_allclose(loss, want, rtol=1e-6)  # the loss is float32
    np.testing.assert_allclose(grad, want_grad, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_and_its_gradient(interleaved):
    q, k = rand(2, 4, 6, 8), rand(2, 2, 6, 8)
    cos, sin = rand(1, 6, 8), rand(1, 6, 8)  # any tables: the backward is the forward's transpose
    q_out, k_out = ljax.apply_rotary_pos_emb(q, k, cos, sin, interleaved=interleaved)
    if not interleaved:
        c, s = cos[:, None], sin[:, None]
        np.testing.assert_allclose(q_out, q * c + rotate_half(q) * s, rtol=1e-12)
        np.testing.assert_allclose(k_out, k * c + rotate_half(k) * s, rtol=1e-12)
    gq, gk = rand(*q.shape), rand(*k.shape)
    _, vjp = jax.vjp(lambda q, k: ljax.apply_rotary_pos_emb(q, k, cos, sin, interleaved=interleaved), q, k)
    back_q, back_k = vjp((gq, gk))
    lhs = (q_out * gq).sum() + (k_out * gk).sum()
    assert abs(float(lhs - ((q * back_q).sum() + (k * back_k).sum()))) < 1e-9 * float(abs(lhs) + 1)


@pytest.mark.parametrize("name", ["swiglu", "geglu"])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5, 11)])
def test_glus_and_their_gradients(name, shape):
    act = {"swiglu": jax.nn.silu, "geglu": lambda g: jax.nn.gelu(g, approximate=True)}[name]
    gate, up = rand(*shape), rand(*shape)
    glu = getattr(ljax, name)
    np.testing.assert_allclose(glu(gate, up), act(gate) * up, rtol=1e-12, atol=1e-15)
    cotangent = rand(*shape)
    ours = jax.vjp(glu, gate, up)[1](cotangent)
    plain = jax.vjp(lambda g, u: act(g) * u, gate, up)[1](cotangent)
    for a, b in zip(ours, plain):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    mapped = jax.vmap(glu)(rand(2, *shape), rand(2, *shape))
    assert mapped.shape == (2, *shape)


def test_lowered_for_cuda_each_function_is_an_ffi_call_to_lab():
    x, w = rand(4, 8, dtype=jnp.bfloat16), rand(8, dtype=jnp.bfloat16)
    text = cuda_text(lambda x, w: ljax.rms_norm(x, w, eps=1e-5), x, w)
    assert "stablehlo.custom_call @lab_rms_norm" in text and "eps = 1.000000e-05 : f64" in text
    text = cuda_text(jax.grad(lambda x, w: ljax.rms_norm(x, w).astype(jnp.float32).sum(), (0, 1)), x, w)
    assert "@lab_rms_norm(" in text and "@lab_rms_norm_backward(" in text
    text = cuda_text(jax.grad(lambda x, w: ljax.layer_norm(x, w, w).astype(jnp.float32).sum(), (0, 1)), x, w)
    assert "@lab_layer_norm(" in text and "@lab_layer_norm_backward(" in text
    text = cuda_text(jax.grad(lambda x: ljax.log_softmax(x).astype(jnp.float32).sum()), x)
    assert "@lab_softmax(" in text and "@lab_softmax_backward(" in text and "log = 1 : i32" in text
    target = jnp.asarray([1, 2, 3, 4])
    text = cuda_text(jax.grad(lambda l: ljax.cross_entropy(l, target, label_smoothing=0.25, reduction="sum")), x)
    assert text.count("@lab_cross_entropy(") == 1  # the gradient comes from the forward's call
    assert "label_smoothing = 2.500000e-01 : f64" in text and "reduction = 2 : i32" in text
    q, k, cos = rand(1, 4, 6, 8, dtype=jnp.bfloat16), rand(1, 2, 6, 8, dtype=jnp.bfloat16), rand(1, 6, 8,
                                                                                               dtype=jnp.bfloat16)
    text = cuda_text(jax.grad(lambda q, k: sum(t.astype(jnp.float32).sum()
                                               for t in ljax.apply_rotary_pos_emb(q, k, cos, cos)), (0, 1)), q, k)
    assert "@lab_rope(" in text and "backward = 1 : i32" in text  # the forward's call is dead code here
    text = cuda_text(jax.grad(lambda g, u: (ljax.geglu(g, u) * g).astype(jnp.float32).sum(), (0, 1)), x, x)
    geglu = [row[0] for row in lab.lab._xla_ffi_ops()["elementwise"]].index("geglu")
    assert "@lab_elementwise(" in text and f"op = {geglu} : i32" in text
    assert "@lab_glu_backward(" in text and "act = 1 : i32" in text


@pytest.mark.parametrize("call, error, match", [
    (lambda: ljax.rms_norm(jnp.zeros((4, 8), jnp.int32)), TypeError, r"rms_norm\(\): argument 'x' has dtype int32"),
    (lambda: ljax.rms_norm(jnp.zeros((4, 8)), jnp.zeros(7)), ValueError, r"argument 'weight' has shape \(7,\)"),
    (lambda: ljax.rms_norm(jnp.zeros((4, 8)), jnp.zeros(8, jnp.float32)), TypeError, r"argument 'weight' has dtype"),
    (lambda: ljax.rms_norm(jnp.zeros((4, 8)), eps=-1.0), ValueError, r"'eps' must be >= 0"),
    (lambda: ljax.softmax(jnp.zeros((4, 8)), axis=2), ValueError, r"softmax\(\): axis 2 is out of range"),
    (lambda: ljax.layer_norm(jnp.zeros((4, 8)), None, jnp.zeros(9)), ValueError, r"argument 'bias' has shape \(9,\)"),
    (lambda: ljax.cross_entropy(jnp.zeros((4, 8)), jnp.zeros((5,), jnp.int32)), ValueError,
     r"argument 'target' has shape \(5,\); it must have shape \(4,\)"),
    (lambda: ljax.cross_entropy(jnp.zeros((4, 8)), jnp.zeros((4,))), TypeError, r"class indices are int32 or int64"),
    (lambda: ljax.cross_entropy(jnp.zeros((4, 8)), jnp.zeros((4,), jnp.int32), reduction="none"), ValueError,
     r"reduction must be 'mean' or 'sum'"),
    (lambda: ljax.apply_rotary_pos_emb(jnp.zeros((4, 6, 8)), jnp.zeros((4, 6, 8)), jnp.zeros((1, 6, 8)),
                                       jnp.zeros((1, 6, 8))), ValueError, r"argument 'q' has 3 dimensions"),
    (lambda: ljax.apply_rotary_pos_emb(jnp.zeros((1, 4, 6, 8)), jnp.zeros((1, 2, 6, 8)), jnp.zeros((1, 6, 10)),
                                       jnp.zeros((1, 6, 10))), ValueError, r"cos and sin have shapes \(1, 6, 10\)"),
    (lambda: ljax.swiglu(jnp.zeros((4, 8), jnp.int32), jnp.zeros((4, 8), jnp.int32)), TypeError,
     r"swiglu\(\): argument 'gate' has dtype int32"),
    (lambda: ljax.geglu(jnp.zeros((4, 8)), jnp.zeros((4, 7))), ValueError, r"geglu\(\): argument 'up' has shape \(4, 7\)"),
])
def test_bad_arguments_fail_at_trace_time(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_dot_product_attention_on_the_cpu_and_lowered_for_cuda():
    """On the CPU: jax.nn.dot_product_attention's values and gradients (its layout, grouped heads,
    causal); a packed batch as its sequences run alone. For CUDA: one lab_attention call for the
    forward and one with backward = 1 for the gradient, reading jax.nn's layout in place."""
    q, k, v = rand(2, 37, 4, 64, dtype=jnp.bfloat16), rand(2, 37, 2, 64, dtype=jnp.bfloat16), \
        rand(2, 37, 2, 64, dtype=jnp.bfloat16)

    def f32(x):
        return np.asarray(x.astype(jnp.float32))
    ours = ljax.dot_product_attention(q, k, v, is_causal=True)
    want = jax.nn.dot_product_attention(q, k, v, is_causal=True)
    np.testing.assert_allclose(f32(ours), f32(want), atol=3e-2)
    grads = jax.grad(lambda *x: ljax.dot_product_attention(*x, is_causal=True).astype(jnp.float32).sum(),
                     (0, 1, 2))(q, k, v)
    wanted = jax.grad(lambda *x: jax.nn.dot_product_attention(*x, is_causal=True).astype(jnp.float32).sum(),
                      (0, 1, 2))(q, k, v)
    for a, b in zip(grads, wanted):
        np.testing.assert_allclose(f32(a), f32(b), rtol=2e-2, atol=6e-2)  # bfloat16 sums: an ulp of 8 is 1/16
    lengths = [5, 0, 20]
    cu = jnp.asarray(np.concatenate([[0], np.cumsum(lengths)]), jnp.int32)
    packed = ljax.dot_product_attention(q[0, :25], k[0, :25], v[0, :25], is_causal=True, cu_seqlens_q=cu,
                                        cu_seqlens_k=cu, max_seqlen_q=20, max_seqlen_k=20)
    alone = jax.nn.dot_product_attention(q[:1, 5:25], k[:1, 5:25], v[:1, 5:25], is_causal=True)[0]
    np.testing.assert_allclose(f32(packed[5:]), f32(alone), atol=3e-2)
    np.testing.assert_allclose(f32(packed[:5]), f32(jax.nn.dot_product_attention(
        q[:1, :5], k[:1, :5], v[:1, :5], is_causal=True)[0]), atol=3e-2)
    text = cuda_text(jax.grad(lambda q: ljax.dot_product_attention(q, k, v, is_causal=True).astype(
        jnp.float32).sum()), q)
    assert "@lab_attention(" in text and "backward = 1 : i32" in text and "sequence_major = 1 : i32" in text


@pytest.mark.parametrize("call, error, match", [
    (lambda: ljax.dot_product_attention(jnp.zeros((1, 4, 2, 64)), jnp.zeros((1, 4, 2, 64)), jnp.zeros((1, 4, 2, 64))),
     TypeError, r"'query' has dtype float"),
    (lambda: ljax.dot_product_attention(*(jnp.zeros((1, 4, 2, 80), jnp.float16),) * 3), ValueError, "head_dim 80"),
    (lambda: ljax.dot_product_attention(jnp.zeros((1, 4, 3, 64), jnp.float16), *(jnp.zeros((1, 4, 2, 64),
                                                                                            jnp.float16),) * 2),
     ValueError, "dividing query's"),
    (lambda: ljax.dot_product_attention(*(jnp.zeros((8, 2, 64), jnp.float16),) * 3, cu_seqlens_q=jnp.zeros(2, jnp.int32),
                                        cu_seqlens_k=jnp.zeros(2, jnp.int32)), TypeError,
     "needs arguments 'max_seqlen_q' and"),
    (lambda: ljax.dot_product_attention(*(jnp.zeros((8, 2, 64), jnp.float16),) * 3), ValueError, "4: "),
])
def test_dot_product_attention_refuses_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call()
