"""lab.jax on a GPU: each function inside jax.jit runs lab's kernel through XLA's FFI, against NumPy in
float64 and against the same function's jax.numpy formula; gradients against jax's autodiff of the
plain formulas; vmap; and lab's result on the same data through torch, bit for bit where the kernel is
the same."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu

jax = pytest.importorskip("jax")


def gpu_or_skip():
    try:
        return jax.devices("cuda")[0]
    except RuntimeError:
        pytest.skip("jax sees no CUDA device")


@pytest.mark.parametrize("dtype, rtol", [("float32", 2e-5), ("bfloat16", 2e-2)])
def test_rms_norm_softmax_in_jit(dtype, rtol):
    device = gpu_or_skip()
    import jax.numpy as jnp
    import lab.jax as ljax
    rng = np.random.default_rng(0)
    x = jax.device_put(jnp.asarray(rng.standard_normal((33, 1000)), dtype), device)
    w = jax.device_put(jnp.asarray(rng.standard_normal(1000), dtype), device)
    out = jax.jit(lambda x, w: ljax.rms_norm(x, w, eps=1e-6))(x, w)
    xf, wf = np.asarray(x, np.float64), np.asarray(w, np.float64)
    want = xf / np.sqrt((xf ** 2).mean(-1, keepdims=True) + 1e-6) * wf
    np.testing.assert_allclose(np.asarray(out, np.float64), want, rtol=rtol, atol=rtol)
    normed = jax.jit(lambda x, w: ljax.layer_norm(x, w, w))(x, w)
    centred = xf - xf.mean(-1, keepdims=True)
    want = centred / np.sqrt((centred ** 2).mean(-1, keepdims=True) + 1e-5) * wf + wf
    np.testing.assert_allclose(np.asarray(normed, np.float64), want, rtol=rtol, atol=rtol * 4)
    soft = jax.jit(ljax.softmax)(x)
    e = np.exp(xf - xf.max(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(soft, np.float64), e / e.sum(-1, keepdims=True), rtol=rtol, atol=1e-6)
    grad = jax.jit(jax.grad(lambda x, w: (ljax.rms_norm(x, w) * x).astype(jnp.float32).sum(), (0, 1)))(x, w)
    plain = jax.grad(lambda x, w: (x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + jnp.finfo(x.dtype).eps) * w
                                   * x).sum(), (0, 1))(x.astype(jnp.float32), w.astype(jnp.float32))
    for a, b in zip(grad, plain):
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=20 * rtol,
                                   atol=20 * rtol * float(jnp.abs(b).max()))


def test_cross_entropy_value_and_grad_in_jit():
    device = gpu_or_skip()
    import jax.numpy as jnp
    import lab.jax as ljax
    rng = np.random.default_rng(1)
    logits = jax.device_put(jnp.asarray(rng.standard_normal((64, 50257)), jnp.bfloat16), device)
    target = jax.device_put(jnp.asarray(rng.integers(0, 50257, 64)), device)
    loss, grad = jax.jit(jax.value_and_grad(lambda l: ljax.cross_entropy(l, target)))(logits)
    lf = jnp.asarray(logits, jnp.float32)
    want, want_grad = jax.value_and_grad(
        lambda l: jnp.mean(jax.nn.logsumexp(l, -1) - jnp.take_along_axis(l, target[:, None], -1)[:, 0]))(lf)
    assert abs(float(loss) - float(want)) <= 1e-3 * abs(float(want))
    np.testing.assert_allclose(np.asarray(grad, np.float32), np.asarray(want_grad), rtol=2e-2, atol=1e-5)


def test_rope_and_vmap():
    device = gpu_or_skip()
    import jax.numpy as jnp
    import lab.jax as ljax
    rng = np.random.default_rng(2)
    q = jax.device_put(jnp.asarray(rng.standard_normal((2, 8, 17, 64)), jnp.float32), device)
    k = jax.device_put(jnp.asarray(rng.standard_normal((2, 2, 17, 64)), jnp.float32), device)
    cos, sin = (jax.device_put(jnp.asarray(rng.standard_normal((1, 17, 64)), jnp.float32), device) for _ in range(2))
    q_out, k_out = jax.jit(ljax.apply_rotary_pos_emb)(q, k, cos, sin)

    def rotate_half(x):
        return jnp.concatenate([-x[..., 32:], x[..., :32]], -1)
    np.testing.assert_allclose(q_out, q * cos[:, None] + rotate_half(q) * sin[:, None], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(k_out, k * cos[:, None] + rotate_half(k) * sin[:, None], rtol=1e-5, atol=1e-5)
    x = jax.device_put(jnp.asarray(rng.standard_normal((3, 5, 128)), jnp.float32), device)
    mapped = jax.jit(jax.vmap(lambda x: ljax.rms_norm(x, eps=1e-6)))(x)
    np.testing.assert_allclose(mapped, jax.vmap(lambda x: ljax.rms_norm(x, eps=1e-6))(x), rtol=1e-6)


@pytest.mark.parametrize("name", ["swiglu", "geglu"])
@pytest.mark.parametrize("dtype, rtol", [("float32", 1e-5), ("bfloat16", 2e-2)])
def test_glus_in_jit(name, dtype, rtol):
    device = gpu_or_skip()
    import jax.numpy as jnp
    import lab.jax as ljax
    rng = np.random.default_rng(4)
    gate = jax.device_put(jnp.asarray(rng.standard_normal((257, 1000)), dtype), device)
    up = jax.device_put(jnp.asarray(rng.standard_normal((257, 1000)), dtype), device)
    g, u = np.asarray(gate, np.float64), np.asarray(up, np.float64)
    if name == "swiglu":
        act, slope = g / (1 + np.exp(-g)), (1 / (1 + np.exp(-g))) * (1 + g * (1 - 1 / (1 + np.exp(-g))))
    else:
        inner = np.sqrt(2 / np.pi) * (g + 0.044715 * g ** 3)
        t = np.tanh(inner)
        act = 0.5 * g * (1 + t)
        slope = 0.5 * (1 + t) + 0.5 * g * (1 - t * t) * np.sqrt(2 / np.pi) * (1 + 3 * 0.044715 * g * g)
    glu = getattr(ljax, name)
    out = jax.jit(glu)(gate, up)
    np.testing.assert_allclose(np.asarray(out, np.float64), act * u, rtol=rtol, atol=rtol)
    grads = jax.jit(jax.grad(lambda g, u: glu(g, u).astype(jnp.float32).sum(), (0, 1)))(gate, up)
    np.testing.assert_allclose(np.asarray(grads[0], np.float64), slope * u, rtol=4 * rtol, atol=4 * rtol)
    np.testing.assert_allclose(np.asarray(grads[1], np.float64), act, rtol=4 * rtol, atol=4 * rtol)
    mapped = jax.jit(jax.vmap(glu))(gate.reshape(257, 10, 100), up.reshape(257, 10, 100))
    np.testing.assert_array_equal(np.asarray(mapped).reshape(257, 1000), np.asarray(out))


def test_a_chain_xla_may_record_into_a_command_buffer_is_right_on_every_call():
    """The traceable targets may be recorded into XLA's CUDA graph and replayed: each call with new
    inputs (new buffers, new values) must give that call's result, not a replay of an earlier one. A
    chain long enough for XLA to build a graph of it (more than its minimum of five operations)."""
    device = gpu_or_skip()
    import jax.numpy as jnp
    import lab.jax as ljax

    def chain(x, w):
        for _ in range(4):
            x = ljax.softmax(ljax.rms_norm(x, w, eps=1e-6) * 2.0)
            x = ljax.add(x, x)
        return x

    def reference(x, w):
        for _ in range(4):
            r = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * w * 2.0
            e = np.exp(r - r.max(-1, keepdims=True))
            x = 2 * (e / e.sum(-1, keepdims=True))
        return x

    run = jax.jit(chain)
    rng = np.random.default_rng(7)
    w = jax.device_put(jnp.asarray(rng.standard_normal(96), jnp.float32), device)
    for call in range(4):
        x = jax.device_put(jnp.asarray(rng.standard_normal((17, 96)) * (call + 1), jnp.float32), device)
        out = np.asarray(run(x, w), np.float64)
        want = reference(np.asarray(x, np.float64), np.asarray(w, np.float64))
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-6, err_msg=f"call {call}")
