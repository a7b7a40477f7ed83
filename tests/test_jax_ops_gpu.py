"""lab.jax's elementwise ops and reductions on a GPU: inside jax.jit each is lab's kernel through XLA's
FFI, checked against NumPy in float64 over dtypes and shapes (0, 1, odd, prime, broadcast), against
jax.numpy's result dtype, under vmap (one launch for the batch) and under jax.grad."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu

jax = pytest.importorskip("jax")

TOLERANCE = {"float32": 2e-6, "bfloat16": 1e-2, "float16": 2e-3, "int32": 0}
SHAPES = [((0,), (0,)), ((1,), (1,)), ((7, 13), (7, 13)), ((4099,), (1,)), ((33, 1, 5), (1, 7, 1))]


def gpu_or_skip():
    try:
        return jax.devices("cuda")[0]
    except RuntimeError:
        pytest.skip("jax sees no CUDA device")


def on_gpu(values, dtype):
    import jax.numpy as jnp
    return jax.device_put(jnp.asarray(values, dtype), gpu_or_skip())


def gelu_erf(x):
    from math import erf
    return x * 0.5 * (1 + np.vectorize(erf, otypes=[float])(x / np.sqrt(2)))


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
          "div": np.divide, "add_relu": lambda a, b: np.maximum(a + b, 0)}
UNARY = {"neg": np.negative, "abs": np.abs, "exp": np.exp, "relu": lambda x: np.maximum(x, 0),
         "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "silu": lambda x: x / (1 + np.exp(-x)), "gelu": gelu_erf,
         "sqrt": np.sqrt}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32"])
@pytest.mark.parametrize("shapes", SHAPES, ids=["empty", "one", "odd", "prime-broadcast", "3d-broadcast"])
@pytest.mark.parametrize("name", sorted(BINARY) + sorted(UNARY))
def test_elementwise_in_jit(name, dtype, shapes):
    import lab.jax as ljax
    from lab._jax_ops import _ELEMENTWISE_REFERENCES
    rng = np.random.default_rng(1)
    a = rng.integers(-50, 50, shapes[0]) if dtype == "int32" else rng.standard_normal(shapes[0])
    b = rng.integers(1, 50, shapes[1]) if dtype == "int32" else rng.standard_normal(shapes[1]) + 3.0
    if name == "exp" and dtype == "int32":
        a = a % 20
    x, y = on_gpu(np.abs(a) if name == "sqrt" else a, dtype), on_gpu(b, dtype)
    args = (x, y) if name in BINARY else (x,)
    if dtype == "int32" and name in ("relu", "add_relu", "sigmoid", "silu"):  # jax.numpy's or lab's refusal
        with pytest.raises(TypeError, match="computes on floats|does not accept dtype int32"):
            getattr(ljax, name)(*args)
        return
    expected = jax.eval_shape(_ELEMENTWISE_REFERENCES[name], *args)
    out = jax.jit(getattr(ljax, name))(*args)
    want = (BINARY.get(name) or UNARY[name])(*[np.asarray(t, np.float64) for t in args])
    assert out.shape == want.shape and out.dtype == expected.dtype
    tolerance = TOLERANCE[str(out.dtype)] if str(out.dtype) in TOLERANCE else TOLERANCE["float32"]
    np.testing.assert_allclose(np.asarray(out, np.float64), want, rtol=tolerance, atol=tolerance)


def lab_jax():
    import lab.jax
    return lab.jax


NUMBERED = {  # lab.jax call with Python numbers, NumPy float64 formula
    "add alpha=2.5": (lambda a, b: lab_jax().add(a, b, alpha=2.5), lambda a, b: a + 2.5 * b),
    "add alpha=-3": (lambda a, b: lab_jax().add(a, b, alpha=-3), lambda a, b: a - 3 * b),
    "axpby": (lambda x, y: lab_jax().axpby(0.5, x, -2, y), lambda x, y: 0.5 * x - 2 * y),
    "fused_add_mul by 3.0": (lambda a, b: lab_jax().fused_add_mul(a, b, 3.0), lambda a, b: (a + b) * 3.0),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32"])
@pytest.mark.parametrize("shapes", SHAPES, ids=["empty", "one", "odd", "prime-broadcast", "3d-broadcast"])
@pytest.mark.parametrize("name", sorted(NUMBERED))
def test_ops_taking_numbers_in_jit(name, dtype, shapes):
    """add's alpha, axpby's alpha and beta, fused_add_mul's number: lab's kernel with the numbers as the
    call's attributes, the result in jax.numpy's dtype (int32 only for add with an int alpha; a float
    number makes floats of int32 inputs, converted before the float kernels)."""
    call, formula = NUMBERED[name]
    rng = np.random.default_rng(3)
    a = rng.integers(-50, 50, shapes[0]) if dtype == "int32" else rng.standard_normal(shapes[0])
    b = rng.integers(-50, 50, shapes[1]) if dtype == "int32" else rng.standard_normal(shapes[1])
    x, y = on_gpu(a, dtype), on_gpu(b, dtype)
    expected = jax.eval_shape(call, x, y)
    out = jax.jit(call)(x, y)
    want = formula(*[np.asarray(t, np.float64) for t in (x, y)])
    assert out.shape == want.shape and out.dtype == expected.dtype
    tolerance = TOLERANCE.get(str(out.dtype), TOLERANCE["float32"]) * 10  # alpha * b rounds once more
    np.testing.assert_allclose(np.asarray(out, np.float64), want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape, axis", [((1,), None), ((33, 1000), 1), ((33, 1000), 0), ((7, 11, 13), (0, 2)),
                                         ((257, 4099), None), ((0, 5), 0)])
@pytest.mark.parametrize("ord", [1, 2, float("inf")])
def test_vector_norms_in_jit(ord, dtype, shape, axis):
    """ljax.norm: lab's NORM1 / NORM2 / NORMINF reductions against NumPy in float64 (an empty inf-norm
    is jax.numpy's 0, made without a call)."""
    scale = 0.01 if dtype == "float16" else 1.0  # the 1-norm of a million values stays below float16's 65504
    x = on_gpu(np.random.default_rng(4).standard_normal(shape) * scale, dtype)
    out = jax.jit(lambda x: lab_jax().norm(x, ord, axis))(x)
    xf = np.abs(np.asarray(x, np.float64))
    want = {1: lambda: xf.sum(axis), 2: lambda: np.sqrt((xf * xf).sum(axis))}.get(ord, lambda: xf.max(axis, initial=0))()
    assert out.shape == np.shape(want) and out.dtype == x.dtype
    tolerance = {"float32": 1e-4, "bfloat16": 2e-2, "float16": 2e-3}[dtype]
    np.testing.assert_allclose(np.asarray(out, np.float64), want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape, axis", [((0, 5), 1), ((1,), None), ((33, 1000), 1), ((33, 1000), 0),
                                         ((7, 11, 13), (0, 2)), ((257, 4099), None)])
@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "var", "std", "logsumexp", "prod"])
def test_reductions_in_jit(name, dtype, shape, axis):
    import lab.jax as ljax
    if name in ("amax", "amin") and 0 in shape:
        pytest.skip("an empty amax/amin has no value (refused at trace time)")
    rng = np.random.default_rng(2)
    values = rng.standard_normal(shape) * (0.1 if name == "prod" else 1.0) + (1.0 if name == "prod" else 0.0)
    x = on_gpu(values, dtype)
    out = jax.jit(lambda x: getattr(ljax, name)(x, axis))(x)
    xf = np.asarray(x, np.float64)
    want = dict(sum=np.sum, mean=np.mean, amax=np.max, amin=np.min, var=np.var, std=np.std, prod=np.prod,
                logsumexp=lambda v, axis: np.log(np.exp(v).sum(axis)))[name](xf, axis=axis)
    tolerance = {"float32": 1e-4, "bfloat16": 2e-2}[dtype] * (50 if name == "prod" else 1)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(np.asarray(out, np.float64), want, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("shape, axis", [((1,), None), ((33, 1000), 1), ((33, 1000), 0), ((7, 11, 13), None)])
def test_index_reductions_in_jit(name, shape, axis):
    import lab.jax as ljax
    values = np.random.default_rng(3).permutation(int(np.prod(shape))).reshape(shape).astype(np.float32)
    out = jax.jit(lambda x: getattr(ljax, name)(x, axis))(on_gpu(values, "float32"))
    np.testing.assert_array_equal(np.asarray(out), getattr(np, name)(values, axis=axis))


def test_integer_sums_dot_vmap_and_grad():
    import jax.numpy as jnp
    import lab.jax as ljax
    ints = on_gpu(np.arange(-500, 501).reshape(7, 143), "int32")
    np.testing.assert_array_equal(jax.jit(lambda x: ljax.sum(x, 1))(ints), np.arange(-500, 501).reshape(7, 143).sum(1))
    a, b = on_gpu(np.linspace(-1, 1, 4099), "float32"), on_gpu(np.linspace(2, 3, 4099), "float32")
    np.testing.assert_allclose(jax.jit(ljax.dot)(a, b), np.dot(np.linspace(-1, 1, 4099), np.linspace(2, 3, 4099)),
                               rtol=1e-5)
    x = on_gpu(np.random.default_rng(4).standard_normal((5, 33, 64)), "float32")
    w = on_gpu(np.random.default_rng(5).standard_normal(64), "float32")
    mapped = jax.jit(jax.vmap(lambda x: ljax.var(ljax.mul(x, w), axis=1)))(x)
    np.testing.assert_allclose(mapped, (np.asarray(x) * np.asarray(w)).var(2), rtol=1e-5)
    text = jax.jit(jax.vmap(lambda x: ljax.sum(x, axis=0))).lower(x).as_text()
    assert text.count("@lab_reduce(") == 1  # one launch for the batch
    grad = jax.jit(jax.grad(lambda x: ljax.logsumexp(ljax.silu(x), axis=-1).sum()))(x)
    plain = jax.grad(lambda x: jax.nn.logsumexp(jax.nn.silu(x), axis=-1).sum())(x)
    np.testing.assert_allclose(grad, plain, rtol=1e-5, atol=1e-6)
    assert jnp.isfinite(grad).all()
