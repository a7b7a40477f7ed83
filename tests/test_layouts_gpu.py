"""Every elementwise op on views and broadcasts, and operands of mixed dtypes, on a GPU.

Each case builds the same views on the host (NumPy) and on the device (the producer's own
slicing), poisons the whole output buffer, runs the op, and checks the output view against NumPy
float64 and every element outside it still poisoned (so a stray write fails as surely as a wrong
one). One test runs above 2^31 elements."""
import numpy as np
import pytest

import lab
import lab.lab as core
from producers import FLOAT_DTYPES, poison_value, producer_or_skip, round_to
from reference import OPS, TOLERANCES, assert_close, expected, random_input

pytestmark = pytest.mark.gpu


def permute(x):
    return x.permute(2, 0, 1) if hasattr(x, "permute") else x.transpose(2, 0, 1)


# name: (input base shapes per input count, input views, output base shape, output view, producers)
IDENTITY = lambda x: x  # noqa: E731
LAYOUTS = {
    "transposed_inputs": ((53, 37), lambda x: x.T, (37, 53), IDENTITY),
    "transposed_output": ((37, 53), IDENTITY, (53, 37), lambda x: x.T),
    "step_slices": ((74, 159), lambda x: x[::2, ::3], (37, 53), IDENTITY),
    "column_slice": ((37, 54), lambda x: x[:, 1:], (37, 54), lambda x: x[:, :-1]),
    "offset_1d": ((1001,), lambda x: x[1:], (1003,), lambda x: x[3:]),
    "negative_steps": ((37, 53), lambda x: x[::-1, ::-1], (37, 106), lambda x: x[:, ::-2]),
    "permuted_3d": ((5, 6, 7), permute, (7, 5, 6), IDENTITY),
    "broadcast_row": ("row", None, (37, 53), IDENTITY),
    "broadcast_outer": ("outer", None, (37, 53), IDENTITY),
    "zero_d": ("zero_d", None, (37, 53), IDENTITY),
    "broadcast_row_packed": ("row_packed", None, (36, 64), IDENTITY),
    "broadcast_outer_packed": ("outer_packed", None, (36, 64), IDENTITY),
}
PACKED = {"broadcast_row_packed", "broadcast_outer_packed"}  # these must take the strided_vectorized path
BROADCAST_SHAPES = {  # input shapes for each number of inputs
    "row": {1: [(53,)], 2: [(37, 53), (53,)], 3: [(37, 53), (53,), (1, 53)]},
    "outer": {1: [(37, 1)], 2: [(37, 1), (1, 53)], 3: [(37, 1), (1, 53), (37, 53)]},
    "zero_d": {1: [()], 2: [(37, 53), ()], 3: [(), (37, 53), ()]},
    "row_packed": {1: [(64,)], 2: [(36, 64), (64,)], 3: [(36, 64), (64,), (1, 64)]},
    "outer_packed": {1: [(36, 1)], 2: [(36, 1), (36, 64)], 3: [(36, 1), (36, 64), (36, 64)]},
}


def run_layout(key, layout, dtype, producer, rng, in_dtypes=None, out_dtype=None):
    op = OPS[key]
    in_dtypes = in_dtypes or [dtype] * op.n_inputs
    out_dtype = out_dtype or dtype
    in_base, in_view, out_base_shape, out_view = LAYOUTS[layout]
    if isinstance(in_base, str):
        shapes, views = BROADCAST_SHAPES[in_base][op.n_inputs], [IDENTITY] * op.n_inputs
    else:
        shapes, views = [in_base] * op.n_inputs, [in_view] * op.n_inputs
    device_inputs, host_inputs = [], []
    for k in range(op.n_inputs):
        values = random_input(op, k, in_dtypes[k], shapes[k], rng)
        device, stored = producer.from_host(values, in_dtypes[k])
        device_inputs.append(views[k](device))
        host_inputs.append(views[k](stored))
    out_base = producer.empty_poisoned(out_base_shape, out_dtype)
    out = out_view(out_base)
    integer = out_dtype not in FLOAT_DTYPES and all(d not in FLOAT_DTYPES for d in in_dtypes)
    result = op.call(lab, device_inputs, out, integer) if op.call else getattr(lab, op.name)(*device_inputs, out)
    assert result is out

    plan = core._plan(out, *device_inputs, integers=op.integers)
    compute = plan["compute_dtype"]
    if layout in PACKED and len(set(in_dtypes + [out_dtype])) == 1:
        assert plan["path"] == "strided_vectorized", plan
    want = expected(op, compute, [np.broadcast_to(x, np.broadcast_shapes(*[h.shape for h in host_inputs]))
                                  for x in host_inputs])
    want = np.broadcast_to(round_to(want, out_dtype), out_view(np.empty(out_base_shape)).shape)
    got_base = producer.to_host(out_base)
    written = np.zeros(out_base_shape, bool)
    out_view(written)[...] = True
    assert_close(out_view(got_base), want, out_dtype if out_dtype in TOLERANCES else compute, f"{key} {layout}")
    untouched = got_base[~written]
    poison = poison_value(out_dtype)
    assert (np.isnan(untouched).all() if out_dtype in FLOAT_DTYPES else (untouched == poison).all()), \
        f"{key} {layout}: elements outside the output view were written"


@pytest.mark.parametrize("producer_name", ["torch", "cupy"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("key", list(OPS))
def test_layout(key, layout, producer_name):
    producer = producer_or_skip(producer_name)
    if layout == "negative_steps" and producer_name == "torch":
        pytest.skip("torch views cannot have negative strides")
    run_layout(key, layout, "float32", producer, np.random.default_rng(abs(hash((key, layout))) % 2**32))


@pytest.mark.parametrize("layout", ["transposed_inputs", "broadcast_row", "step_slices", "broadcast_row_packed"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64", "int8", "int32", "uint8"])
@pytest.mark.parametrize("key", ["add_alpha", "mul", "maximum", "abs", "copy", "fused_add_mul", "gelu"])
def test_layout_dtypes(key, dtype, layout):
    if dtype not in FLOAT_DTYPES and not OPS[key].integers:
        pytest.skip("float-only op")
    run_layout(key, layout, dtype, producer_or_skip("torch", dtype), np.random.default_rng(11))


MIXES = [  # (op, input dtypes, out dtype)
    ("add", ["float16", "float32"], "float32"),
    ("add", ["float32", "float16"], "float16"),
    ("add_alpha", ["bfloat16", "float32"], "bfloat16"),
    ("mul", ["float16", "bfloat16"], "float32"),
    ("fused_add_mul", ["float16", "float32", "float64"], "float64"),
    ("axpby", ["float32", "float64"], "float32"),
    ("sub", ["int32", "float32"], "float64"),
    ("mul", ["int8", "uint8"], "int16"),
    ("add", ["int8", "int8"], "int32"),
    ("maximum", ["int64", "int16"], "int64"),
    ("add_relu", ["int16", "float16"], "float32"),
    ("div", ["int32", "float32"], "float64"),
    ("gelu", ["float16"], "float32"),
    ("copy", ["float32"], "float16"),
    ("copy", ["float64"], "bfloat16"),
    ("copy", ["int32"], "float32"),
    ("copy", ["uint8"], "int64"),
    ("copy", ["int64"], "int8"),
    ("neg", ["int8"], "int16"),
    ("abs", ["float64"], "float32"),
]


@pytest.mark.parametrize("layout", ["transposed_output", "broadcast_row", "offset_1d"])
@pytest.mark.parametrize("key, in_dtypes, out_dtype", MIXES, ids=lambda v: str(v))
def test_mixed_dtypes(key, in_dtypes, out_dtype, layout):
    producer = producer_or_skip("torch")
    run_layout(key, layout, None, producer, np.random.default_rng(5), in_dtypes=in_dtypes, out_dtype=out_dtype)


@pytest.mark.parametrize("key, in_dtypes, out_dtype", [("add", ["float16", "float32"], "float32"),
                                                       ("copy", ["int32"], "float64")])
def test_mixed_dtypes_cupy(key, in_dtypes, out_dtype):
    run_layout(key, "negative_steps", None, producer_or_skip("cupy"), np.random.default_rng(6), in_dtypes=in_dtypes,
               out_dtype=out_dtype)


def test_in_place_on_a_view():
    torch = producer_or_skip("torch").torch
    base = torch.rand(64, 65, device="cuda")
    expect = base.clone()
    view = base[:, 1:]
    lab.mul(view, view, view)
    torch.cuda.synchronize()
    expect[:, 1:] *= expect[:, 1:].clone()
    assert torch.equal(base, expect)


def test_partial_overlap_is_refused_on_real_arrays():
    torch = producer_or_skip("torch").torch
    x = torch.rand(100, device="cuda")
    with pytest.raises(ValueError, match="overlaps 'out'"):
        lab.add(x[:-1], x[:-1], x[1:])


def test_expanded_output_is_refused():
    torch = producer_or_skip("torch").torch
    out = torch.empty(5, device="cuda").expand(4, 5)
    with pytest.raises(ValueError, match="stride 0"):
        lab.relu(torch.rand(4, 5, device="cuda"), out)


def test_more_than_two_to_the_31_elements():
    """~8.6 GB: int8 arrays of 2^31 + 4099 elements, contiguous (vectorized path, 64-bit packet
    index) and a strided view (the 64-bit division path)."""
    torch = producer_or_skip("torch").torch
    n = 2**31 + 4099
    a = torch.ones(n, dtype=torch.int8, device="cuda")
    b = torch.arange(n, device="cuda", dtype=torch.int64).remainder_(101).to(torch.int8)
    out = torch.empty(n, dtype=torch.int8, device="cuda")
    lab.add(a, b, out)
    assert core._plan(out, a, b)["path"] == "vectorized"
    torch.cuda.synchronize()
    assert torch.equal(out, b + 1)
    del a
    base = torch.zeros(2 * n, dtype=torch.int8, device="cuda")
    base[::2] = 3
    strided = base[::2]
    assert core._plan(out, strided, b)["path"] == "strided"
    out.fill_(0)
    lab.add(strided, b, out)
    torch.cuda.synchronize()
    assert torch.equal(out, b + 3)
