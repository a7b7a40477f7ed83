"""Fuzzing the protocol reader and the planner with hypothesis: protocol dicts of wrong types, huge
and negative shapes, odd strides, absurd pointers, bad typestrs, extra or missing keys, properties
that raise or return non-dicts, shapes of non-ints. Whatever comes in, lab answers with a
TypeError, ValueError or OverflowError (or, with no GPU, lab.CudaError) - never a crash, a hang or
a SystemError. LAB_FUZZ_EXAMPLES sets the number of examples (CI: 300 per test; `make fuzz`:
100000). Only lab.lab._array_info and _plan run where there is a GPU: they never call CUDA, while a
valid-looking dict with an absurd pointer must never reach a real kernel. RawKernel's argument
marshalling is fuzzed the same way, through a stand-in kernel handle (CPU only)."""
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lab
import lab.lab as core
from conftest import HAVE_GPU

EXAMPLES = int(os.environ.get("LAB_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
ALLOWED = (TypeError, ValueError, OverflowError, lab.CudaError)

integers = st.one_of(st.integers(-2**70, 2**70), st.integers(-3, 10), st.sampled_from([0, 1, 2**31, 2**63 - 1, 2**64]))
anything = st.one_of(st.none(), st.booleans(), integers, st.floats(allow_nan=True), st.text(max_size=6),
                     st.binary(max_size=4), st.lists(integers, max_size=3))
shapes = st.one_of(st.lists(st.integers(0, 6), max_size=9).map(tuple), st.lists(integers, max_size=3).map(tuple),
                   anything)
typestrs = st.one_of(st.sampled_from(["<f4", "<f2", "<f8", "|i1", "<i8", "|u1", ">f4", "<V2", "<c8", "|b1", "f4",
                                      "<f", "<f44", "<x4", "", "<u2", "=f4", "|f4"]), st.text(max_size=5), anything)
pointers = st.one_of(st.sampled_from([0, 16, 2**40, 2**63, 2**64 - 16, -16]), integers)
datas = st.one_of(st.tuples(pointers, st.booleans()), st.tuples(pointers), st.tuples(anything, anything), anything)
strides = st.one_of(st.none(), st.lists(integers, max_size=9).map(tuple), st.lists(st.integers(-64, 64), max_size=4)
                    .map(tuple), anything)


@st.composite
def interfaces(draw):
    cai = {"shape": draw(shapes), "typestr": draw(typestrs), "data": draw(datas), "version": draw(st.one_of(
        st.sampled_from([0, 1, 2, 3]), anything))}
    for key, values in (("strides", strides), ("mask", anything), ("stream", st.one_of(st.none(), integers, anything)),
                        ("descr", anything), ("extra", anything)):
        if draw(st.booleans()):
            cai[key] = draw(values)
    for key in list(cai):
        if draw(st.integers(0, 9)) == 0:
            del cai[key]
    return cai if draw(st.integers(0, 19)) else draw(anything)


class Producer:
    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


class Raising:
    @property
    def __cuda_array_interface__(self):
        raise ValueError("the producer's property failed")


def call_safely(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except ALLOWED:
        pass


@FUZZ
@given(interfaces())
def test_array_info_never_crashes(cai):
    call_safely(core._array_info, Producer(cai))


@FUZZ
@given(interfaces(), interfaces(), interfaces())
def test_plan_never_crashes(a, b, out):
    call_safely(core._plan, Producer(out), Producer(a), Producer(b))


@pytest.mark.skipif(HAVE_GPU, reason="a fuzzed dict may be valid with an absurd pointer: never launch it on a GPU")
@FUZZ
@given(interfaces(), interfaces(), interfaces(), st.sampled_from(["add", "mul", "gelu", "fused_add_mul", "copy"]),
       st.one_of(st.none(), integers, anything))
def test_ops_never_crash(a, b, out, name, stream):
    fn = getattr(lab, name)
    if name in ("gelu", "copy"):
        call_safely(fn, Producer(a), Producer(out), stream=stream)
    elif name == "fused_add_mul":
        call_safely(fn, Producer(a), Producer(b), 2.0, Producer(out), stream=stream)
    else:
        call_safely(fn, Producer(a), Producer(b), Producer(out), stream=stream)


@FUZZ
@given(st.lists(st.one_of(interfaces(), st.just("raise")), max_size=4))
def test_foreach_lists_never_crash(cais):
    arrays = [Raising() if c == "raise" else Producer(c) for c in cais]
    if HAVE_GPU:
        return  # as above: list ops launch once validated
    call_safely(lab.foreach_add, arrays, arrays, arrays)
    call_safely(lab.foreach_norm, arrays, Producer({"shape": (len(arrays),), "typestr": "<f4", "data": (16, False),
                                                     "version": 3}))


ROWWISE = {"softmax": 2, "log_softmax": 2, "softmax_backward": 3, "log_softmax_backward": 3, "layer_norm": 4,
           "layer_norm_backward": 8, "rms_norm": 3, "rms_norm_backward": 6, "cross_entropy": 3,
           "swiglu_backward": 5, "geglu_backward": 5}


@st.composite
def row_arrays(draw, rows, n):
    """Nearly valid operands of a row-wise op: the input's shape, its leading part or its row length,
    one of the float typestrs, any strides (zero and negative too), pointers that may overlap."""
    shape = draw(st.sampled_from([(rows, n), (rows,), (n,), (rows, n, 1), (n, rows), ()]))
    cai = {"shape": shape, "typestr": draw(st.sampled_from(["<f4", "<f2", "<f8", "<i4", "<i8"])), "version": 3,
           "data": (draw(st.sampled_from([2**40, 2**40 + 4, 2**40 + 64, 2**41])), draw(st.booleans()))}
    if draw(st.booleans()):
        cai["strides"] = tuple(draw(st.sampled_from([0, 4, -4, 8, 4 * n, -4 * n, 6])) for _ in shape)
    return Producer(cai)


@pytest.mark.skipif(HAVE_GPU, reason="a fuzzed dict may be valid with an absurd pointer: never launch it on a GPU")
@FUZZ
@given(st.sampled_from(sorted(ROWWISE)), st.data())
def test_rowwise_never_crashes(name, data):
    rows, n = data.draw(st.integers(0, 5)), data.draw(st.integers(0, 7))
    operand = st.one_of(row_arrays(rows, n), interfaces().map(Producer), st.none())
    args = [data.draw(operand) for _ in range(ROWWISE[name])]
    keywords = {}
    if name in ("layer_norm", "rms_norm"):
        keywords = {key: data.draw(operand) for key in ("rstd", "mean", "residual", "residual_out")
                    if data.draw(st.booleans()) and not (key == "mean" and name == "rms_norm")}
        keywords["eps"] = data.draw(st.one_of(st.none(), st.floats(allow_nan=True), integers, anything))
    elif name.startswith(("softmax", "log_softmax")):
        keywords["axis"] = data.draw(st.one_of(st.integers(-4, 4), anything))
    elif name == "cross_entropy":
        keywords = {"grad": data.draw(operand), "reduction": data.draw(st.sampled_from(["mean", "sum", "none", "x"])),
                    "ignore_index": data.draw(st.one_of(st.integers(-2**64, 2**64), anything)),
                    "label_smoothing": data.draw(st.one_of(st.floats(allow_nan=True), integers, anything))}
    call_safely(getattr(lab, name), *args, **keywords)


@FUZZ
@given(st.one_of(shapes, st.integers(-5, 5)), st.one_of(typestrs, st.just("float32")))
def test_empty_and_zeros_arguments_never_crash(shape, dtype):
    if HAVE_GPU:
        return  # valid arguments would allocate: fine, but not what this test is about
    call_safely(lab.empty, shape, dtype)


def test_raising_property_propagates_its_own_error():
    with pytest.raises(ValueError, match="the producer's property failed"):
        core._array_info(Raising())


# ---- RawKernel's argument marshalling (no launch reaches a GPU: the kernel is a stand-in) ----

numpy_scalars = st.sampled_from(["int8", "uint8", "int16", "int32", "int64", "uint64", "float16", "float32",
                                 "float64", "bool"]).flatmap(
    lambda dtype: st.integers(0, 100).map(lambda v: __import__("numpy").dtype(dtype).type(v)))
kernel_arguments = st.one_of(anything, numpy_scalars, st.floats(allow_nan=True), integers,
                             interfaces().map(Producer))
signature_types = st.sampled_from(["float*", "const double*", "void*", "int", "unsigned char", "long long",
                                   "__half", "__nv_bfloat16", "bool", "float", "size_t", "short*", "matrix", "int**"])


@pytest.mark.skipif(HAVE_GPU, reason="stand-in kernel handles must not reach a real GPU")
@FUZZ
@given(args=st.lists(kernel_arguments, max_size=6), sizes=st.one_of(st.none(), st.lists(st.integers(0, 255),
                                                                                          max_size=6)),
       signature=st.one_of(st.none(), st.lists(signature_types, max_size=6)),
       grid=st.one_of(integers, st.tuples(integers), anything), shared=st.one_of(integers, anything))
def test_kernel_arguments_never_crash(args, sizes, signature, grid, shared):
    from test_jit import handle
    try:
        h = handle(sizes=sizes, signature=", ".join(signature) if signature is not None else None)
    except ValueError:  # a type lab cannot check: refused when the kernel is made
        return
    call_safely(core._launch_kernel, h, grid, 32, tuple(args), shared, None)
