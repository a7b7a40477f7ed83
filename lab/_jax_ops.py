"""lab.jax's elementwise ops and reductions inside jax.jit: each one FFI call to lab_elementwise or
lab_reduce (src/binding/xla_ffi_ops.c), the op named by its row's number in the tables the C module
lists (_xla_ffi_ops()), so that what an op means is written once, in C.

Each function takes and returns jax arrays with jax.numpy's rules: the result's shape and dtype are
what the jax.numpy formula gives (jax.eval_shape of it: broadcasting, promotion, weak types), so
ljax.add(x, 1.0) is x's dtype, as x + 1.0 is. lab's kernel reads the inputs as they are and writes the
result in that dtype; an op whose kernel computes only on floats (div, sqrt, mean, ...) gets integer
inputs converted to the result's float dtype first, as jax.numpy does.

Gradients are jax's autodiff of the same jax.numpy formula (a custom_vjp whose backward is the
formula's): lab has no backward kernels for these ops, and the few elementwise steps of their
derivatives are what XLA fuses well. vmap: inputs are given the result's rank before the call and the
reduced axes are counted from the last, so a mapped axis is one more leading axis of every operand and
one launch serves the whole batch (vmap_method="broadcast_all"); dot, whose kernel takes vectors, runs
once per mapped element."""
from functools import partial
from typing import Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from . import lab as _core
from ._jax_arguments import Array, as_array, checked

_TABLES = _core._xla_ffi_ops()
_ELEMENTWISE = {row[0]: (number,) + row[1:] for number, row in enumerate(_TABLES["elementwise"])}
_REDUCTIONS = {row[0]: (number,) + row[1:] for number, row in enumerate(_TABLES["reduction"])}
# What lab's kernels read and write (bool and the unsigned types but uint8 are not among them).
_DTYPES = tuple(jnp.dtype(t) for t in (jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64, jnp.int8,
                                       jnp.int16, jnp.int32, jnp.int64, jnp.uint8))


def _with_reference_gradient(call, reference, args):
    """call(*args) on CUDA devices and reference(*args) everywhere else (the same results, in
    jax.numpy); jax.grad differentiates the reference."""
    @jax.custom_vjp
    def run(*args):
        return jax.lax.platform_dependent(*args, cuda=call, default=reference)

    def backward(saved, grad):
        return jax.vjp(reference, *saved)[1](grad)
    run.defvjp(lambda *args: (run(*args), args), backward)
    return run(*args)


def _as_array(func, name, value):
    """An argument @checked left as it came (fused_add_mul's s: an array or a number) as a JAX array."""
    try:
        return as_array(value)
    except TypeError as error:
        raise TypeError(f"{func}(): argument '{name}' is not an array jax.numpy takes: {error}") from error


def _checked(func, names, arrays):
    arrays = tuple(_as_array(func, name, a) for name, a in zip(names, arrays))
    for name, a in zip(names, arrays):
        if jnp.dtype(a.dtype) not in _DTYPES:
            raise TypeError(f"{func}(): argument '{name}' has dtype {a.dtype}; lab's kernels read float16, "
                            f"bfloat16, float32, float64, int8, int16, int32, int64 and uint8")
    return arrays


def _named(names, arrays):
    """"argument 'x' (float32 (3, 4))" or "arguments 'a' (...) and 'b' (...)": for messages."""
    parts = [f"'{name}' ({a.dtype} {a.shape})" for name, a in zip(names, arrays)]
    return ("argument " if len(parts) == 1 else "arguments ") + " and ".join(parts)


def _for_float_kernel(arrays, integers, dtype):
    """Integer inputs converted to the result's dtype where the kernel computes on floats only."""
    if integers:
        return arrays
    return tuple(a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.integer) else a for a in arrays)


# ---- the elementwise ops ----

_ELEMENTWISE_REFERENCES = {
    "add": lambda a, b, alpha=None: jnp.add(a, b) if alpha is None else a + alpha * b,
    "sub": jnp.subtract, "mul": jnp.multiply, "div": jnp.true_divide,
    "maximum": jnp.maximum, "minimum": jnp.minimum, "add_relu": lambda a, b: jax.nn.relu(a + b),
    "fused_add_mul": lambda a, b, s: (a + b) * s, "neg": jnp.negative, "abs": jnp.abs, "sqrt": jnp.sqrt,
    "exp": jnp.exp, "relu": jax.nn.relu, "sigmoid": jax.nn.sigmoid, "silu": jax.nn.silu,
    "gelu": partial(jax.nn.gelu, approximate=False), "gelu_tanh": partial(jax.nn.gelu, approximate=True),
    "axpby": lambda x, y, alpha, beta: alpha * x + beta * y, "fused_add_mul_scalar": lambda a, b, s: (a + b) * s,
}


def _is_number(value):
    """A Python or NumPy real number, not a bool (nor an array or a traced value)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _number(func, name, value):
    """A Python (or NumPy) real number as the attribute the kernel reads: an int stays exact (int64), a
    float is float64; anything else - a bool, an array, a tracer - is a TypeError naming the argument."""
    if not _is_number(value):
        raise TypeError(f"{func}(): argument '{name}' must be a Python number (int or float), got "
                        f"{type(value).__name__}")
    if isinstance(value, (int, np.integer)):
        if not -2**63 <= int(value) < 2**63:
            raise OverflowError(f"{func}(): argument '{name}' ({int(value)}) does not fit in int64")
        return int(value)
    return float(value)


def elementwise_number(name):
    """The number lab_elementwise's attribute op takes for the op `name` (lab.jax's GLUs use it too)."""
    return _ELEMENTWISE[name][0]


def _elementwise(name, names, *inputs, func=None, numbers=None):
    """One lab_elementwise call of the op `name` on `inputs` (named `names` in messages), with its row's
    number attributes from `numbers` (name -> int or float, read by _number)."""
    func = func or name
    number, _, integers, attributes = _ELEMENTWISE[name]
    numbers = numbers or {}
    assert set(numbers) <= set(attributes), (name, numbers)  # a row of the C table names them
    reference = partial(_ELEMENTWISE_REFERENCES[name], **numbers)
    arrays = _checked(func, names, inputs)
    try:
        result = jax.eval_shape(reference, *arrays)  # jax.numpy's broadcasting and dtype rules
    except TypeError as error:
        raise TypeError(f"{func}(): {_named(names, arrays)}: {error}") from error
    if jnp.dtype(result.dtype) not in _DTYPES:
        raise TypeError(f"{func}(): {_named(names, arrays)} would give a result of dtype {result.dtype}, which "
                        f"lab's kernels do not write")
    if not integers and jnp.issubdtype(result.dtype, jnp.integer):
        raise TypeError(f"{func}(): {_named(names, arrays)} would give a result of dtype {result.dtype}; lab's "
                        f"{func} kernel computes on floats (give it float inputs)")
    # A float result from numbers (int32 + 2.5 * int32): the kernel must compute in floats, so the
    # integer inputs are converted as for a float-only kernel; it plans its compute type from the arrays.
    float_result = not jnp.issubdtype(result.dtype, jnp.integer)
    arrays = _for_float_kernel(arrays, integers and not (numbers and float_result), result.dtype)
    # Every input with the result's rank (a reshape, no copy): a leading axis vmap adds lines up.
    arrays = tuple(a.reshape((1,) * (result.ndim - a.ndim) + a.shape) for a in arrays)
    target = jax.ffi.ffi_call("lab_elementwise", jax.ShapeDtypeStruct(result.shape, result.dtype),
                              vmap_method="broadcast_all")
    attrs = {key: np.int64(v) if isinstance(v, int) else np.float64(v) for key, v in numbers.items()}
    return _with_reference_gradient(lambda *a: target(*a, op=np.int32(number), **attrs), reference, arrays)


@checked
def add(a: Array, b: Array, *, alpha=1):
    """a + alpha * b by NumPy's broadcasting and jax.numpy's promotion, in lab's kernel; alpha is a
    Python number (as torch.add's); the int 1 is a plain a + b."""
    if type(alpha) is int and alpha == 1:
        return _elementwise("add", ("a", "b"), a, b)
    return _elementwise("add", ("a", "b"), a, b, numbers={"alpha": _number("add", "alpha", alpha)})


@checked
def axpby(alpha, x: Array, beta, y: Array):
    """alpha * x + beta * y in one pass (lab.axpby's order of arguments); alpha and beta are Python
    numbers."""
    numbers = {"alpha": _number("axpby", "alpha", alpha), "beta": _number("axpby", "beta", beta)}
    return _elementwise("axpby", ("x", "y"), x, y, numbers=numbers)


@checked
def sub(a: Array, b: Array):
    """a - b."""
    return _elementwise("sub", ("a", "b"), a, b)


@checked
def mul(a: Array, b: Array):
    """a * b."""
    return _elementwise("mul", ("a", "b"), a, b)


@checked
def div(a: Array, b: Array):
    """a / b (true division: integers give floats)."""
    return _elementwise("div", ("a", "b"), a, b)


@checked
def maximum(a: Array, b: Array):
    """max(a, b) elementwise; NaN propagates."""
    return _elementwise("maximum", ("a", "b"), a, b)


@checked
def minimum(a: Array, b: Array):
    """min(a, b) elementwise; NaN propagates."""
    return _elementwise("minimum", ("a", "b"), a, b)


@checked
def add_relu(a: Array, b: Array):
    """relu(a + b) in one pass."""
    return _elementwise("add_relu", ("a", "b"), a, b)


@checked
def fused_add_mul(a: Array, b: Array, s):
    """(a + b) * s in one pass; s an array, or a Python number (read by the kernel as a parameter, no
    array made for it)."""
    if _is_number(s):
        return _elementwise("fused_add_mul_scalar", ("a", "b"), a, b, func="fused_add_mul",
                            numbers={"s": _number("fused_add_mul", "s", s)})
    return _elementwise("fused_add_mul", ("a", "b", "s"), a, b, s)


@checked
def neg(x: Array):
    """-x."""
    return _elementwise("neg", ("x",), x)


@checked
def abs(x: Array):  # noqa: A001 (jax.numpy's name)
    """|x|."""
    return _elementwise("abs", ("x",), x)


@checked
def sqrt(x: Array):
    """sqrt(x)."""
    return _elementwise("sqrt", ("x",), x)


@checked
def exp(x: Array):
    """e ** x."""
    return _elementwise("exp", ("x",), x)


@checked
def relu(x: Array):
    """max(x, 0); NaN stays NaN."""
    return _elementwise("relu", ("x",), x)


@checked
def sigmoid(x: Array):
    """1 / (1 + exp(-x))."""
    return _elementwise("sigmoid", ("x",), x)


@checked
def silu(x: Array):
    """x * sigmoid(x)."""
    return _elementwise("silu", ("x",), x)


@checked
def gelu(x: Array, approximate: bool = False):
    """x * Phi(x) with erf, or its tanh approximation (approximate=True), as jax.nn.gelu."""
    return _elementwise("gelu_tanh" if approximate else "gelu", ("x",), x, func="gelu")


# ---- the reductions ----

def _reduced_axes(func, ndim, axis):
    """axis (None: all, an int or a tuple of ints, negative from the end) as sorted distinct axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    normalized = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or not -ndim <= a < ndim:
            raise ValueError(f"{func}(): axis {a!r} is out of range for an input of {ndim} dimensions")
        normalized.append(int(a) % ndim)
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"{func}(): axis {axis!r} names an axis twice")
    return tuple(sorted(normalized))


def _reduce(name, x, axis, keepdims, reference, correction=0.0, vmap_method="broadcast_all", func=None):
    """One lab_reduce call of the row `name`; `func` names the function in messages (name by default)."""
    number, _, integers = _REDUCTIONS[name]
    (x,) = _checked(func or name, ("x",), (x,))
    axes = _reduced_axes(func or name, x.ndim, axis)
    result = jax.eval_shape(reference, x)  # keepdims=False: the shape lab writes
    (x,) = _for_float_kernel((x,), integers, result.dtype)
    reduced = np.int64(np.sum([1 << (x.ndim - 1 - a) for a in axes], dtype=np.int64))
    target = jax.ffi.ffi_call("lab_reduce", jax.ShapeDtypeStruct(result.shape, result.dtype), vmap_method=vmap_method)
    out = _with_reference_gradient(lambda x: target(x, op=np.int32(number), reduced=reduced,
                                                    correction=np.float64(correction)), reference, (x,))
    if keepdims:
        out = out.reshape(tuple(1 if d in axes else n for d, n in enumerate(x.shape)))
    return out


@checked
def sum(x: Array, axis: Optional[Union[int, Sequence[int]]] = None,  # noqa: A001 (jax.numpy's name)
        keepdims: bool = False):
    """The sum over axis (None: all), in float32 for half types; jax.numpy's result dtype."""
    return _reduce("sum", x, axis, keepdims, lambda x: jnp.sum(x, axis))


@checked
def mean(x: Array, axis: Optional[Union[int, Sequence[int]]] = None, keepdims: bool = False):
    """The mean over axis."""
    return _reduce("mean", x, axis, keepdims, lambda x: jnp.mean(x, axis))


@checked
def prod(x: Array, axis: Optional[Union[int, Sequence[int]]] = None, keepdims: bool = False):
    """The product over axis."""
    return _reduce("prod", x, axis, keepdims, lambda x: jnp.prod(x, axis))


@checked
def amax(x: Array, axis: Optional[Union[int, Sequence[int]]] = None, keepdims: bool = False):
    """The largest element over axis; NaN propagates. An empty reduction has no value (an error)."""
    return _reduce("amax", x, axis, keepdims, lambda x: jnp.max(x, axis))


@checked
def amin(x: Array, axis: Optional[Union[int, Sequence[int]]] = None, keepdims: bool = False):
    """The smallest element over axis."""
    return _reduce("amin", x, axis, keepdims, lambda x: jnp.min(x, axis))


def _index_reduction(name, x, axis, keepdims, reference):
    if axis is None:  # the index into the flattened array, as jax.numpy's
        out = _reduce(name, jnp.asarray(x).reshape(-1), 0, False, lambda x: reference(x, 0))
        return out.reshape((1,) * jnp.ndim(x)) if keepdims else out
    return _reduce(name, x, axis, keepdims, lambda x: reference(x, axis))


@checked
def argmax(x: Array, axis: Optional[int] = None, keepdims: bool = False):
    """The index of the first largest element along axis (None: of the flattened array)."""
    return _index_reduction("argmax", x, axis, keepdims, jnp.argmax)


@checked
def argmin(x: Array, axis: Optional[int] = None, keepdims: bool = False):
    """The index of the first smallest element along axis."""
    return _index_reduction("argmin", x, axis, keepdims, jnp.argmin)


@checked
def var(x: Array, axis: Optional[Union[int, Sequence[int]]] = None, ddof: float = 0,
        keepdims: bool = False):
    """The variance over axis, divided by n - ddof (jax.numpy's default ddof=0; torch's is 1)."""
    return _reduce("var", x, axis, keepdims, lambda x: jnp.var(x, axis, ddof=ddof), correction=float(ddof))


@checked
def std(x: Array, axis: Optional[Union[int, Sequence[int]]] = None, ddof: float = 0,
        keepdims: bool = False):
    """The standard deviation over axis (sqrt of var)."""
    return _reduce("std", x, axis, keepdims, lambda x: jnp.std(x, axis, ddof=ddof), correction=float(ddof))


@checked
def logsumexp(x: Array, axis: Optional[Union[int, Sequence[int]]] = None, keepdims: bool = False):
    """log(sum(exp(x))) over axis, computed stably (the max taken out)."""
    return _reduce("logsumexp", x, axis, keepdims, lambda x: jax.nn.logsumexp(x, axis))


_NORMS = {1: "norm1", 2: "norm2", np.inf: "norm_inf"}  # ord -> the row of lab_reduce's table


@checked
def norm(x: Array, ord=2,  # noqa: A002 (jax.numpy's and lab.norm's name)
         axis: Optional[Union[int, Sequence[int]]] = None, keepdims: bool = False):
    """The vector norm over axis (None: every element), as jnp.linalg.vector_norm and lab.norm: ord=2
    sqrt(sum(x**2)), ord=1 sum(|x|), ord=inf max(|x|); NaN propagates. An empty inf-norm is 0, as
    jax.numpy's (lab.norm on torch's terms refuses it): made here, there being nothing to read."""
    is_number = isinstance(ord, (int, float, np.integer, np.floating)) and not isinstance(ord, (bool, np.bool_))
    name = _NORMS.get(ord) if is_number else None
    if name is None:
        raise ValueError(f"norm(): ord must be 1, 2 or inf (the vector norms lab computes), got {ord!r}")
    (x,) = _checked("norm", ("x",), (x,))
    if name == "norm_inf" and 0 in [x.shape[a] for a in _reduced_axes("norm", x.ndim, axis)]:
        return jnp.linalg.vector_norm(x, ord=ord, axis=axis, keepdims=keepdims)
    return _reduce(name, x, axis, keepdims, partial(jnp.linalg.vector_norm, ord=ord, axis=axis), func="norm")


@checked
def dot(a: Array, b: Array):
    """The inner product of two vectors of one length, in their promoted dtype."""
    a, b = _checked("dot", ("a", "b"), (a, b))
    if a.ndim != 1 or b.shape != a.shape:
        raise ValueError(f"dot(): arguments 'a' and 'b' have shapes {a.shape} and {b.shape}; dot takes two vectors "
                         f"of one length")
    dtype = jnp.result_type(a, b)
    number = _REDUCTIONS["dot"][0]
    if jnp.issubdtype(dtype, jnp.integer):
        raise TypeError(f"dot(): arguments 'a' and 'b' are integers ({a.dtype}, {b.dtype}); lab's dot takes floats")
    a, b = a.astype(dtype), b.astype(dtype)
    target = jax.ffi.ffi_call("lab_reduce", jax.ShapeDtypeStruct((), dtype), vmap_method="sequential")
    return _with_reference_gradient(lambda a, b: target(a, b, op=np.int32(number), reduced=np.int64(1)), jnp.dot,
                                    (a, b))
