"""What every op should compute, in NumPy float64 (int64 for integers), and how close is close enough.

OPS maps each Python-level op (and the fused/gelu variants) to: the number of array inputs, the
NumPy reference, the input ranges it is tested on, and whether integer dtypes are allowed."""
import math

import numpy as np

try:
    from scipy.special import erf as _erf
except ImportError:  # scipy is optional; math.erf vectorized is exact enough, only slower
    _erf = np.vectorize(math.erf, otypes=[np.float64])

ALPHA, BETA, SCALE = 2.5, -0.75, 1.5
INT_ALPHA = 3


class Op:
    def __init__(self, name, n_inputs, reference, integers=False, ranges=None, call=None):
        self.name, self.n_inputs, self.reference, self.integers = name, n_inputs, reference, integers
        self.ranges = ranges or [(-3.0, 3.0)] * n_inputs
        self.call = call  # how to call lab with (lab, inputs, out); default lab.<name>(*inputs, out)


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _add_alpha_reference(a, b, integer):
    return a + (INT_ALPHA if integer else ALPHA) * b


DIV_RANGES = [(-3.0, 3.0), (0.5, 2.0)]  # |b| kept away from 0; the sign is flipped for half of b below

OPS = {
    "vector_add": Op("vector_add", 2, lambda a, b, integer: a + b, integers=True),
    "add": Op("add", 2, lambda a, b, integer: a + b, integers=True),
    "add_alpha": Op("add", 2, _add_alpha_reference, integers=True,
                    call=lambda lab, ins, out, integer: lab.add(*ins, out, alpha=INT_ALPHA if integer else ALPHA)),
    "sub": Op("sub", 2, lambda a, b, integer: a - b, integers=True),
    "mul": Op("mul", 2, lambda a, b, integer: a * b, integers=True),
    "div": Op("div", 2, lambda a, b, integer: a / b, ranges=DIV_RANGES),
    "maximum": Op("maximum", 2, lambda a, b, integer: np.maximum(a, b), integers=True),
    "minimum": Op("minimum", 2, lambda a, b, integer: np.minimum(a, b), integers=True),
    "fused_add_mul": Op("fused_add_mul", 3, lambda a, b, s, integer: (a + b) * s),
    "fused_add_mul_scalar": Op("fused_add_mul", 2, lambda a, b, integer: (a + b) * SCALE,
                               call=lambda lab, ins, out, integer: lab.fused_add_mul(ins[0], ins[1], SCALE, out)),
    "axpby": Op("axpby", 2, lambda x, y, integer: ALPHA * x + BETA * y,
                call=lambda lab, ins, out, integer: lab.axpby(ALPHA, ins[0], BETA, ins[1], out)),
    "add_relu": Op("add_relu", 2, lambda a, b, integer: np.maximum(a + b, 0.0)),
    "neg": Op("neg", 1, lambda x, integer: -x, integers=True),
    "abs": Op("abs", 1, lambda x, integer: np.abs(x), integers=True),
    "sqrt": Op("sqrt", 1, lambda x, integer: np.sqrt(x), ranges=[(0.0, 9.0)]),
    "exp": Op("exp", 1, lambda x, integer: np.exp(x), ranges=[(-5.0, 5.0)]),
    "relu": Op("relu", 1, lambda x, integer: np.maximum(x, 0.0)),
    "sigmoid": Op("sigmoid", 1, lambda x, integer: 1.0 / (1.0 + np.exp(-x)), ranges=[(-8.0, 8.0)]),
    "silu": Op("silu", 1, lambda x, integer: x / (1.0 + np.exp(-x)), ranges=[(-8.0, 8.0)]),
    "gelu": Op("gelu", 1, lambda x, integer: _gelu(x), ranges=[(-5.0, 5.0)]),
    "gelu_tanh": Op("gelu", 1, lambda x, integer: _gelu_tanh(x), ranges=[(-5.0, 5.0)],
                    call=lambda lab, ins, out, integer: lab.gelu(ins[0], out, approximate="tanh")),
    "swiglu": Op("swiglu", 2, lambda g, u, integer: g / (1.0 + np.exp(-g)) * u, ranges=[(-8.0, 8.0), (-3.0, 3.0)]),
    "geglu": Op("geglu", 2, lambda g, u, integer: _gelu_tanh(g) * u, ranges=[(-5.0, 5.0), (-3.0, 3.0)]),
    "copy": Op("copy", 1, lambda x, integer: x, integers=True),
}

# |got - want| <= atol + rtol * |want|. Half types: one rounding of a float32 result (2^-11, 2^-8
# relative) plus the float32 math; float32: a few ulp of expf/erff/tanhf, and cancellation in
# 1 + erf(x) for gelu at large negative x, which atol (relative to inputs of order 1) absorbs.
TOLERANCES = {
    "float16": (1e-3, 1e-3),
    "bfloat16": (8e-3, 8e-3),
    "float32": (2e-6, 1e-6),
    "float64": (1e-12, 1e-12),
}


def random_input(op, k, dtype, shape, rng):
    """Host values for input k of op, in the op's range (integers: the dtype's full range)."""
    if dtype in ("int8", "int16", "int32", "int64", "uint8"):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
    low, high = op.ranges[k]
    values = rng.uniform(low, high, size=shape)
    if op is OPS["div"] and k == 1:
        values *= rng.choice([-1.0, 1.0], size=shape)
    return values


def random_inputs(op, dtype, n, rng):
    return [random_input(op, k, dtype, n, rng) for k in range(op.n_inputs)]


def expected(op, dtype, host_inputs):
    """The op on stored input values, computed in float64 (integers: in int64, wrapped to dtype, the
    compute dtype)."""
    integer = dtype in ("int8", "int16", "int32", "int64", "uint8")
    if integer:
        with np.errstate(over="ignore"):
            result = op.reference(*[x.astype(np.int64) for x in host_inputs], integer)
        return np.asarray(result, dtype=np.int64).astype(dtype).astype(np.int64)  # wrap like the dtype does
    return op.reference(*host_inputs, integer)


def assert_close(got, want, dtype, what=""):
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    if dtype not in TOLERANCES:
        mismatch = np.flatnonzero(got != want)
        assert mismatch.size == 0, f"{what}: {mismatch.size} elements differ, first at {mismatch[:5]}: " \
                                   f"got {got[mismatch[:5]]}, want {want[mismatch[:5]]}"
        return
    rtol, atol = TOLERANCES[dtype]
    assert not np.isnan(got).any(), f"{what}: NaN in output (unwritten element or bad math) at " \
                                    f"{np.flatnonzero(np.isnan(got))[:5]}"
    error = np.abs(got - want)
    bad = np.flatnonzero(error > atol + rtol * np.abs(want))
    assert bad.size == 0, f"{what}: {bad.size} elements out of tolerance, first at {bad[:5]}: " \
                          f"got {got[bad[:5]]}, want {want[bad[:5]]}"
