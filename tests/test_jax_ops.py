"""lab.jax's elementwise ops and reductions without a GPU, where jax is installed: on the CPU each is
its jax.numpy formula, so these check what lab adds around the kernel - result shapes and dtypes as
jax.numpy gives them, integer inputs converted for float-only kernels, gradients, vmap, keepdims -
against NumPy in float64; lowered for CUDA, each becomes one FFI call to lab_elementwise or lab_reduce
with the op's number and the reduced axes counted from the last; bad arguments fail at trace time."""
import numpy as np
import pytest
from jax_on_cpu import cuda_text, jax, on_the_cpu, rand  # noqa: F401 (on_the_cpu: an autouse fixture)

import jax.numpy as jnp  # noqa: E402

import lab  # noqa: E402
import lab.jax as ljax  # noqa: E402
from lab._jax_ops import _ELEMENTWISE_REFERENCES as REFERENCES  # noqa: E402


def op_number(table, name):
    return [row[0] for row in lab.lab._xla_ffi_ops()[table]].index(name)


def gelu_erf(x):
    from math import erf
    return x * 0.5 * (1 + np.vectorize(erf, otypes=[float])(x / np.sqrt(2)))


ELEMENTWISE = [  # name, inputs, NumPy float64 formula
    ("add", 2, np.add), ("sub", 2, np.subtract), ("mul", 2, np.multiply), ("div", 2, np.divide),
    ("maximum", 2, np.maximum), ("minimum", 2, np.minimum), ("add_relu", 2, lambda a, b: np.maximum(a + b, 0)),
    ("fused_add_mul", 3, lambda a, b, s: (a + b) * s), ("neg", 1, np.negative), ("abs", 1, np.abs),
    ("sqrt", 1, np.sqrt), ("exp", 1, np.exp), ("relu", 1, lambda x: np.maximum(x, 0)),
    ("sigmoid", 1, lambda x: 1 / (1 + np.exp(-x))), ("silu", 1, lambda x: x / (1 + np.exp(-x))),
    ("gelu", 1, gelu_erf),
]


@pytest.mark.parametrize("name, inputs, formula", ELEMENTWISE, ids=[row[0] for row in ELEMENTWISE])
@pytest.mark.parametrize("shapes", [((5, 7),), ((0, 3),), ((4, 1, 3), (1, 6, 1)), ((), (13,))],
                         ids=["same", "empty", "broadcast", "scalar"])
def test_elementwise_values_and_gradients(name, inputs, formula, shapes):
    shapes = [shapes[i % len(shapes)] for i in range(inputs)]
    args = [rand(*s, positive=name == "sqrt") for s in shapes]
    fn = getattr(ljax, name)
    out = jax.jit(fn)(*args)
    want = formula(*[np.asarray(a) for a in args])
    assert out.shape == np.broadcast_shapes(*shapes) and out.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-12, atol=1e-12)
    if name in ("maximum", "minimum", "abs", "relu", "add_relu"):
        return  # kinks: jax's choice at ties is the reference's, checked below on generic points anyway
    grads = jax.grad(lambda *a: fn(*a).sum(), tuple(range(inputs)))(*args)
    plain = jax.grad(lambda *a: REFERENCES[name](*a).sum(), tuple(range(inputs)))(*args)
    for g, p in zip(grads, plain):
        np.testing.assert_allclose(np.asarray(g), np.asarray(p), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ours, theirs, dtype", [
    (lambda: ljax.add(rand(3, dtype=jnp.bfloat16), 1.0), lambda: rand(3, dtype=jnp.bfloat16) + 1.0,
     jnp.bfloat16),  # a Python number is weak
    (lambda: ljax.add(jnp.arange(3, dtype=jnp.int8), jnp.arange(3, dtype=jnp.int16)),
     lambda: jnp.arange(3, dtype=jnp.int8) + jnp.arange(3, dtype=jnp.int16), jnp.int16),
    (lambda: ljax.mul(rand(3, dtype=jnp.float16), rand(3, dtype=jnp.float32)),
     lambda: rand(3, dtype=jnp.float16) * rand(3, dtype=jnp.float32), jnp.float32),
    (lambda: ljax.div(jnp.arange(1, 4, dtype=jnp.int32), jnp.arange(1, 4, dtype=jnp.int32)),
     lambda: jnp.arange(1, 4, dtype=jnp.int32) / jnp.arange(1, 4, dtype=jnp.int32), None),
    (lambda: ljax.sqrt(jnp.arange(4, dtype=jnp.int64)), lambda: jnp.sqrt(jnp.arange(4, dtype=jnp.int64)), None),
    (lambda: ljax.neg(jnp.arange(4, dtype=jnp.uint8)), lambda: -jnp.arange(4, dtype=jnp.uint8), jnp.uint8),
    (lambda: ljax.sum(jnp.arange(6, dtype=jnp.int8).reshape(2, 3), axis=1),
     lambda: jnp.sum(jnp.arange(6, dtype=jnp.int8).reshape(2, 3), axis=1), None),
    (lambda: ljax.mean(jnp.arange(6, dtype=jnp.int32)), lambda: jnp.mean(jnp.arange(6, dtype=jnp.int32)), None),
    (lambda: ljax.amax(rand(6, dtype=jnp.bfloat16)), lambda: jnp.max(rand(6, dtype=jnp.bfloat16)), jnp.bfloat16),
    (lambda: ljax.argmax(rand(2, 6), axis=1), lambda: jnp.argmax(rand(2, 6), axis=1), None),
])
def test_result_dtypes_are_jax_numpys(ours, theirs, dtype):
    assert ours().dtype == theirs().dtype
    assert dtype is None or ours().dtype == dtype


def halves(dtype):
    return (jnp.arange(-3, 4) * 0.5).astype(dtype)


NUMBERED = [  # call with Python numbers, its NumPy float64 formula, inputs
    ("add alpha=2.5", lambda a, b: ljax.add(a, b, alpha=2.5), lambda a, b: a + 2.5 * b, 2),
    ("add alpha=-3", lambda a, b: ljax.add(a, b, alpha=-3), lambda a, b: a - 3 * b, 2),
    ("axpby", lambda x, y: ljax.axpby(0.5, x, -2, y), lambda x, y: 0.5 * x - 2 * y, 2),
    ("fused_add_mul by 3.0", lambda a, b: ljax.fused_add_mul(a, b, 3.0), lambda a, b: (a + b) * 3.0, 2),
    ("fused_add_mul by np.float32(0.25)", lambda a, b: ljax.fused_add_mul(a, b, np.float32(0.25)),
     lambda a, b: (a + b) * 0.25, 2),
]


@pytest.mark.parametrize("call, formula, inputs", [row[1:] for row in NUMBERED], ids=[row[0] for row in NUMBERED])
@pytest.mark.parametrize("shapes", [((5, 7),), ((0, 3),), ((4, 1, 3), (1, 6, 1))], ids=["same", "empty", "broadcast"])
def test_ops_taking_python_numbers(call, formula, inputs, shapes):
    """add's alpha, axpby's alpha and beta, fused_add_mul's scale as numbers: values, gradients, vmap."""
    args = [rand(*shapes[i % len(shapes)]) for i in range(inputs)]
    out = jax.jit(call)(*args)
    want = formula(*[np.asarray(a) for a in args])
    assert out.shape == want.shape and out.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-12, atol=1e-12)
    grads = jax.grad(lambda *a: call(*a).sum(), tuple(range(inputs)))(*args)
    plain = jax.grad(lambda *a: formula(*a).sum(), tuple(range(inputs)))(*args)
    for g, p in zip(grads, plain):
        np.testing.assert_allclose(np.asarray(g), np.asarray(p), rtol=1e-12, atol=1e-12)
    batched = [rand(3, *a.shape) for a in args]
    np.testing.assert_allclose(np.asarray(jax.vmap(call)(*batched)), formula(*[np.asarray(b) for b in batched]),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ours, theirs", [
    (lambda: ljax.add(jnp.arange(4, dtype=jnp.int32), jnp.arange(4, dtype=jnp.int32), alpha=3),
     lambda: jnp.arange(4, dtype=jnp.int32) + 3 * jnp.arange(4, dtype=jnp.int32)),  # integers stay integers
    (lambda: ljax.add(jnp.arange(4, dtype=jnp.int32), jnp.arange(4, dtype=jnp.int32), alpha=0.5),
     lambda: jnp.arange(4, dtype=jnp.int32) + 0.5 * jnp.arange(4, dtype=jnp.int32)),  # a float makes floats
    (lambda: ljax.axpby(2, halves(jnp.bfloat16), 1.5, halves(jnp.bfloat16)),
     lambda: 2 * halves(jnp.bfloat16) + 1.5 * halves(jnp.bfloat16)),  # numbers are weak
    (lambda: ljax.fused_add_mul(halves(jnp.float16), halves(jnp.float16), 2),
     lambda: (halves(jnp.float16) + halves(jnp.float16)) * 2),
])
def test_numbers_keep_jax_numpys_result_dtype_and_values(ours, theirs):
    got, want = ours(), theirs()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64))


def test_numbers_lower_to_attributes_of_one_call():
    x = rand(4, 8, dtype=jnp.float32)
    text = cuda_text(lambda a, b: ljax.add(a, b, alpha=2.5), x, x)
    assert f"op = {op_number('elementwise', 'add')} : i32" in text and "alpha = 2.500000e+00 : f64" in text
    text = cuda_text(lambda a, b: ljax.add(a, b, alpha=-3), jnp.arange(4), jnp.arange(4))
    assert "alpha = -3 : i64" in text and "stablehlo.convert" not in text  # integers computed as integers
    text = cuda_text(lambda a, b: ljax.add(a, b, alpha=0.5), jnp.arange(4), jnp.arange(4))
    assert "stablehlo.convert" in text  # a float result: the kernel computes in floats, the inputs converted
    text = cuda_text(ljax.add, x, x)  # no alpha given: a plain add, no attribute
    assert "alpha" not in text
    text = cuda_text(lambda a, b: ljax.axpby(0.5, a, 2, b), x, x)
    assert text.count("@lab_elementwise(") == 1 and f"op = {op_number('elementwise', 'axpby')} : i32" in text
    assert "alpha = 5.000000e-01 : f64" in text and "beta = 2 : i64" in text
    text = cuda_text(lambda a, b: ljax.fused_add_mul(a, b, 4.0), x, x)
    assert f"op = {op_number('elementwise', 'fused_add_mul_scalar')} : i32" in text and "s = 4.000000e+00 : f64" in text
    assert "tensor<f32>" not in text  # the scale is no array
    text = cuda_text(lambda a, b, s: ljax.fused_add_mul(a, b, s), x, x, jnp.float32(4.0))
    assert f"op = {op_number('elementwise', 'fused_add_mul')} : i32" in text  # an array scale: the array op


def test_integer_inputs_reach_a_float_kernel_as_the_results_dtype():
    x = jnp.arange(5, dtype=jnp.int32)
    text = cuda_text(ljax.sqrt, x)
    assert "stablehlo.convert" in text and "@lab_elementwise(" in text
    text = cuda_text(ljax.add, x, x)  # add computes on integers: no conversion
    assert "stablehlo.convert" not in text
    np.testing.assert_allclose(ljax.div(x, x + 1), np.arange(5) / np.arange(1, 6), rtol=1e-7)


REDUCTIONS = [  # name, NumPy float64 formula of (x, axis), extra keywords
    ("sum", lambda x, a: x.sum(a), {}), ("mean", lambda x, a: x.mean(a), {}), ("prod", lambda x, a: x.prod(a), {}),
    ("amax", lambda x, a: x.max(a), {}), ("amin", lambda x, a: x.min(a), {}),
    ("var", lambda x, a: x.var(a, ddof=1), {"ddof": 1}), ("std", lambda x, a: x.std(a), {}),
    ("logsumexp", lambda x, a: np.log(np.exp(x).sum(a)), {}),
]


@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("name, formula, keywords", REDUCTIONS, ids=[row[0] for row in REDUCTIONS])
@pytest.mark.parametrize("shape, axis", [((5, 7), None), ((5, 7), -2), ((3, 4, 5), (0, 2)), ((1,), 0)])
def test_reductions_values_and_gradients(name, formula, keywords, shape, axis):
    x = rand(*shape)
    out = jax.jit(lambda x: getattr(ljax, name)(x, axis, **keywords))(x)
    np.testing.assert_allclose(np.asarray(out), formula(np.asarray(x), axis), rtol=1e-12, atol=1e-12)
    if name in ("amax", "amin"):
        return
    grad = jax.grad(lambda x: getattr(ljax, name)(x, axis, **keywords).sum())(x)
    reference = dict(sum=jnp.sum, mean=jnp.mean, prod=jnp.prod, logsumexp=jax.nn.logsumexp)
    plain = jax.grad(lambda x: (reference[name](x, axis) if name in reference
                                else getattr(jnp, name)(x, axis, ddof=keywords.get("ddof", 0))).sum())(x)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(plain), rtol=1e-12, atol=1e-12)


@pytest.mark.filterwarnings("ignore:Degrees of freedom:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("name, formula, keywords", REDUCTIONS, ids=[row[0] for row in REDUCTIONS])
def test_reductions_keepdims_and_no_axis(name, formula, keywords):
    x = rand(3, 4, 5)
    out = getattr(ljax, name)(x, (0, 2), keepdims=True, **keywords)
    np.testing.assert_allclose(np.asarray(out), np.asarray(formula(np.asarray(x), (0, 2))).reshape(1, 4, 1),
                               rtol=1e-12)
    np.testing.assert_allclose(getattr(ljax, name)(x, (), **keywords), formula(np.asarray(x), ()), rtol=1e-12)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (None, True), (0, False), (-1, True)])
def test_index_reductions(name, axis, keepdims):
    x = rand(4, 9)
    out = jax.jit(lambda x: getattr(ljax, name)(x, axis, keepdims=keepdims))(x)
    np.testing.assert_array_equal(out, getattr(np, name)(np.asarray(x), axis=axis, keepdims=keepdims))
    grad = jax.grad(lambda x: getattr(ljax, name)(x, axis).astype(jnp.float64).sum() + x.sum())(x)
    np.testing.assert_array_equal(grad, np.ones((4, 9)))  # the index contributes nothing


def two_norm(x, a, k):
    return np.sqrt((x * x).sum(a, keepdims=k))


def inf_norm(x, a, k):
    return np.abs(x).max(a, keepdims=k, initial=0)  # jax.numpy's empty inf-norm: 0


NORMS = [(2, two_norm), (1, lambda x, a, k: np.abs(x).sum(a, keepdims=k)), (np.inf, inf_norm), (2.0, two_norm),
         (float("inf"), inf_norm)]


@pytest.mark.parametrize("ord, formula", NORMS, ids=["2", "1", "inf", "2.0", "float-inf"])
@pytest.mark.parametrize("shape, axis, keepdims", [((5, 7), None, False), ((5, 7), -1, True), ((3, 4, 5), (0, 2), False),
                                                   ((0, 3), 0, False)])
def test_vector_norms(ord, formula, shape, axis, keepdims):
    """ord 1, 2, inf over axes; an empty inf-norm is jax.numpy's 0 (no kernel call: nothing to read)."""
    x = rand(*shape)
    out = jax.jit(lambda x: ljax.norm(x, ord, axis, keepdims))(x)
    want = formula(np.asarray(x), axis, keepdims)
    assert out.shape == want.shape and out.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-12, atol=1e-12)
    if 0 not in shape:
        got = jax.grad(lambda x: ljax.norm(x, ord, axis).sum())(x)
        plain = jax.grad(lambda x: jnp.linalg.vector_norm(x, ord=ord, axis=axis).sum())(x)
        np.testing.assert_allclose(np.asarray(got), np.asarray(plain), rtol=1e-12, atol=1e-12)
    text = cuda_text(lambda x: ljax.norm(x, ord, axis), x.astype(jnp.float32))
    name = {1: "norm1", 2: "norm2"}.get(ord, "norm_inf")
    calls = 0 if 0 in shape and name == "norm_inf" else 1
    assert text.count("@lab_reduce(") == calls and (not calls or f"op = {op_number('reduction', name)} : i32" in text)


def test_dot():
    a, b = rand(11), rand(11, dtype=jnp.float32)
    out = jax.jit(ljax.dot)(a, b)
    assert out.dtype == jnp.float64 and out.shape == ()
    np.testing.assert_allclose(out, np.dot(np.asarray(a), np.asarray(b, np.float64)), rtol=1e-6)
    ga, gb = jax.grad(ljax.dot, (0, 1))(a, b.astype(jnp.float64))
    np.testing.assert_allclose(ga, b, rtol=1e-7)
    np.testing.assert_allclose(gb, a, rtol=1e-12)
    np.testing.assert_allclose(jax.vmap(ljax.dot)(rand(3, 5), rand(3, 5)).shape, (3,))


def test_vmap_maps_a_leading_axis_of_every_operand():
    x, y = rand(3, 4, 5), rand(5)
    np.testing.assert_allclose(jax.vmap(ljax.mul, (0, None))(x, y), np.asarray(x) * np.asarray(y), rtol=1e-12)
    np.testing.assert_allclose(jax.vmap(lambda x: ljax.sum(x, axis=1))(x), np.asarray(x).sum(2), rtol=1e-12)
    np.testing.assert_allclose(jax.vmap(lambda x: ljax.var(x, 0, keepdims=True), 1, 1)(x),
                               np.asarray(x).var(0, keepdims=True), rtol=1e-12)
    np.testing.assert_array_equal(jax.vmap(ljax.argmax)(x), np.asarray(x).reshape(3, -1).argmax(1))


def test_lowered_for_cuda_each_op_is_one_call_with_its_number():
    x, w = rand(4, 8, dtype=jnp.bfloat16), rand(8, dtype=jnp.bfloat16)
    text = cuda_text(ljax.mul, x, w)
    assert text.count("stablehlo.custom_call @lab_elementwise(") == 1
    assert f"op = {op_number('elementwise', 'mul')} : i32" in text
    assert "tensor<1x8xbf16>" in text  # w given x's rank, so a vmapped axis lines up
    text = cuda_text(lambda x: ljax.gelu(x, approximate=True), x)
    assert f"op = {op_number('elementwise', 'gelu_tanh')} : i32" in text
    text = cuda_text(lambda x: ljax.sum(x, axis=0), rand(4, 8, 6, dtype=jnp.float32))
    assert "@lab_reduce(" in text and f"op = {op_number('reduction', 'sum')} : i32" in text
    assert "reduced = 4 : i64" in text  # axis 0 of 3 is the third from the last
    text = cuda_text(lambda x: ljax.std(x, ddof=1), x)
    assert "correction = 1.000000e+00 : f64" in text and "reduced = 3 : i64" in text
    text = cuda_text(jax.vmap(lambda x: ljax.mean(x, axis=-1)), rand(3, 4, 8, dtype=jnp.float32))
    assert text.count("@lab_reduce(") == 1 and "reduced = 1 : i64" in text
    text = cuda_text(jax.grad(lambda x: ljax.silu(x).sum()), rand(4, dtype=jnp.float32))
    assert "@lab_elementwise(" not in text  # the forward's value is dead: the gradient is jax.numpy's formula
    text = cuda_text(ljax.swiglu, x, x)
    assert f"op = {op_number('elementwise', 'swiglu')} : i32" in text


@pytest.mark.parametrize("call, error, match", [
    (lambda: ljax.add(jnp.zeros(3, bool), jnp.zeros(3, bool)), TypeError, r"add\(\): argument 'a' has dtype bool"),
    (lambda: ljax.relu(jnp.zeros(3, jnp.int32)), TypeError,
     r"relu\(\): argument 'x' \(int32 \(3,\)\) would give a result of dtype int32; lab's relu kernel "
     r"computes on floats"),
    (lambda: ljax.neg(jnp.zeros(3, jnp.uint32)), TypeError, r"neg\(\): argument 'x' has dtype uint32"),
    (lambda: ljax.add(jnp.zeros(3), jnp.zeros(4)), TypeError,
     r"add\(\): arguments 'a' \(float\d+ \(3,\)\) and 'b' \(float\d+ \(4,\)\): .*incompatible shapes for broadcasting"),
    (lambda: ljax.sum(jnp.zeros((3, 4)), axis=2), ValueError, r"sum\(\): axis 2 is out of range for an input of 2"),
    (lambda: ljax.sum(jnp.zeros(()), axis=0), ValueError, r"sum\(\): axis 0 is out of range for an input of 0"),
    (lambda: ljax.mean(jnp.zeros((3, 4)), axis=(1, -1)), ValueError, r"mean\(\): axis \(1, -1\) names an axis twice"),
    (lambda: ljax.argmax(jnp.zeros((3, 4)), axis=(0, 1)), TypeError,
     r"lab.jax.argmax\(\): argument 'axis' must be an int or None, got tuple"),
    (lambda: ljax.amax(jnp.zeros((0, 4)), axis=0), ValueError, r"zero-size|identity"),
    (lambda: ljax.dot(jnp.zeros(3), jnp.zeros(4)), ValueError, r"dot\(\): arguments 'a' and 'b' have shapes"),
    (lambda: ljax.dot(jnp.zeros(3, jnp.int32), jnp.zeros(3, jnp.int32)), TypeError, r"lab's dot takes floats"),
    (lambda: ljax.add(jnp.zeros(3), jnp.zeros(3), alpha=True), TypeError,
     r"add\(\): argument 'alpha' must be a Python number \(int or float\), got bool"),
    (lambda: ljax.add(jnp.zeros(3), jnp.zeros(3), alpha=jnp.float32(2)), TypeError,
     r"add\(\): argument 'alpha' must be a Python number"),
    (lambda: ljax.add(jnp.zeros(3), jnp.zeros(3), alpha=2**64), OverflowError,
     r"add\(\): argument 'alpha' \(18446744073709551616\) does not fit in int64"),
    (lambda: ljax.axpby(1, jnp.zeros(3), None, jnp.zeros(3)), TypeError,
     r"axpby\(\): argument 'beta' must be a Python number \(int or float\), got NoneType"),
    (lambda: ljax.axpby(2, jnp.arange(3), 3, jnp.arange(3)), TypeError,
     r"axpby\(\): arguments 'x' \(int\d+ \(3,\)\) and 'y' \(int\d+ \(3,\)\) would give a result of dtype int\d+; "
     r"lab's axpby kernel computes on floats"),
    (lambda: ljax.axpby(2.0, jnp.zeros(3), 3.0, jnp.zeros(4)), TypeError, r"incompatible shapes for broadcasting"),
    (lambda: ljax.fused_add_mul(jnp.zeros(3), jnp.zeros(3), True), TypeError,
     r"fused_add_mul\(\): argument 's' has dtype bool"),
    (lambda: ljax.norm(jnp.zeros(3), 3), ValueError, r"norm\(\): ord must be 1, 2 or inf \(the vector norms lab "
     r"computes\), got 3"),
    (lambda: ljax.norm(jnp.zeros(3), True), ValueError, r"norm\(\): ord must be 1, 2 or inf"),
    (lambda: ljax.norm(jnp.zeros((3, 4)), 2, axis=2), ValueError, r"^norm\(\): axis 2 is out of range"),
    (lambda: ljax.norm(jnp.zeros((0, 4)), np.inf, axis=2), ValueError, r"^norm\(\): axis 2 is out of range"),
    (lambda: ljax.norm(jnp.zeros(3, bool)), TypeError, r"^norm\(\): argument 'x' has dtype bool"),
])
def test_bad_arguments_fail_at_trace_time(call, error, match):
    with pytest.raises(error, match=match):
        call()
