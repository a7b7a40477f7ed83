"""lab.ElementwiseKernel on any machine: parameters, type resolution, the generated
source (compiled here with NVRTC for sm_90), which outputs the kernel loads first, and the C call
path - keys, specializations, every bad input a clear error naming the argument - through fake
producers and stand-in kernels (capsules that are never launched: without a GPU the launch fails
as lab.CudaError after everything was checked)."""
import sys

import numpy as np
import pytest

import lab
from fakes import fake_array
from lab._elementwise_kernel import _assigned_only, _code_only
from test_jit import handle


class StandIn(lab.ElementwiseKernel):
    """Compiles nothing: specializations are stand-in kernels, so the C path runs without a GPU."""

    def _specialize(self, key):
        bound, resolved = self._resolve(key)
        _, vector = self._source(bound, resolved)
        self.keys = getattr(self, "keys", []) + [key]
        letters = bytes(ord("*") if storage is not None else ord("f" if ptype in ("float16", "bfloat16", "float32")
                                                                    else lab._elementwise_kernel._TYPES[ptype][1])
                        for storage, ptype in resolved[:len(self.inputs)])
        return (handle()[0], handle()[0], letters, self.uses_index, vector)


def reaches_cuda(call):
    """Everything was checked: without a GPU the launch is what fails."""
    if lab.is_available():
        pytest.skip("a GPU is here: tests/test_elementwise_kernel_gpu.py launches for real")
    with pytest.raises(lab.CudaError):
        call()


@pytest.mark.parametrize("args, error, match", [
    (("float32 x", "float32 y", "y = x", "bad name"), ValueError, "name must be a C identifier"),
    (("float32 x", "", "x", "k"), ValueError, "out_params must name at least one output"),
    (("float32", "float32 y", "y = 1", "k"), ValueError, r"parameter 'float32' must be '<type> <name>'"),
    (("float32 x y", "float32 z", "z = 1", "k"), ValueError, "must be '<type> <name>'"),
    (("raw T x", "T y", "y = x[i]", "k"), ValueError, "raw parameters .* not supported; .* lab.RawKernel"),
    (("float32 x", "float32 x", "x = 1", "k"), ValueError, "parameter names must differ"),
    (("float32 i", "float32 y", "y = i", "k"), ValueError, "parameter name 'i' is reserved"),
    (("float32 lab_x", "float32 y", "y = 1", "k"), ValueError, "parameter name 'lab_x' is reserved"),
    ((3, "float32 y", "y = 1", "k"), TypeError, "in_params must be a str"),
    (("float32 x", "float32 y", 5, "k"), TypeError, "operation must be a str"),
])
def test_bad_definitions_are_named(args, error, match):
    with pytest.raises(error, match=match):
        lab.ElementwiseKernel(*args)


def test_bad_options_and_preamble():
    with pytest.raises(TypeError, match="options must be strings"):
        lab.ElementwiseKernel("float32 x", "float32 y", "y = x", "k", options=(3,))
    with pytest.raises(TypeError, match="preamble must be a str"):
        lab.ElementwiseKernel("float32 x", "float32 y", "y = x", "k", preamble=1)


@pytest.mark.parametrize("operation, name, assigned_only", [
    ("z = x + y", "z", True),
    ("z = x > 0 ? x : 0;", "z", True),
    ("float t = x * 2; z = t;", "z", True),
    ("{ z = x; }", "z", True),
    ("z += x", "z", False),
    ("z = z * 2", "z", False),
    ("if (x > 0) z = x;", "z", False),
    ("z = x; // if (x) z = 0", "z", True),
    ("f(z)", "z", False),
    ("w = 1", "z", False),  # never assigned: keeps its values
    ("y = (z = x)", "z", False),
    ("a.z = 1; z = 2", "z", True),
    ("z == x ? 1 : 0", "z", False),
])
def test_which_outputs_are_loaded_first(operation, name, assigned_only):
    assert _assigned_only(_code_only(operation), name) is assigned_only


def test_the_index_is_carried_only_when_used():
    assert lab.ElementwiseKernel("T x", "T y", "y = x * i", "k").uses_index
    assert lab.ElementwiseKernel("T x", "T y", "y = x * _ind.size()", "k").uses_index is False
    assert lab.ElementwiseKernel("T x", "T y", "y = x; // i", "k").uses_index is False
    assert lab.ElementwiseKernel("T x", "T y", "y = s.i", "k").uses_index is False


def test_types_are_resolved_like_cupy():
    k = lab.ElementwiseKernel("T x, T y, float32 a", "T z", "z = (x + y) * a", "axpy")
    bound, resolved = k._resolve(b"22d2")  # float32 arrays, a Python float
    assert bound == {"T": "float32"} and resolved[2] == (None, "float32")
    with pytest.raises(TypeError, match=r"argument 'y' has dtype float64 but another argument already made T float32"):
        k._resolve(b"23d2")
    bound, _ = k._resolve(b"qqd-")  # only numbers decide T: a Python int is int64
    assert bound == {"T": "int64"}
    with pytest.raises(TypeError, match="output 'z' must be an array"):
        k._resolve(b"22dd")
    with pytest.raises(TypeError, match=r"argument 'x' has dtype float32; the parameter is int32"):
        lab.ElementwiseKernel("int32 x", "float32 y", "y = x", "k")._resolve(b"22")
    with pytest.raises(TypeError, match=r"output 'y' has dtype int32; the kernel writes float32"):
        lab.ElementwiseKernel("float32 x", "float32 y", "y = x", "k")._resolve(b"26")
    with pytest.raises(TypeError, match="no argument decides U"):
        lab.ElementwiseKernel("T x", "U y", "y = x", "k")._resolve(b"2-")
    # a lower kind or a narrower float may be read and written: float16 in, float64 out
    assert lab.ElementwiseKernel("float32 x", "float32 y", "y = x", "k")._resolve(b"03")[1] == [
        ("float16", "float32"), ("float64", "float32")]


SOURCES = [
    ("T x, T y", "T z", "z = x + y", ("float32", "float32", "float32")),
    ("T x, T y, float32 a", "T z", "z = (x + y) * a", ("bfloat16", "bfloat16", "float", "bfloat16")),
    ("float32 x, int64 y", "float64 z, T w", "if (x > 0) z = x; w = z + i + _ind.size();",
     ("float16", "int32", "float64", "int8")),
    ("T x", "T y, T z", "y = x / 2; z = -x", ("int16", "int16", "int16")),
    ("bool b, T x", "T y", "y = b ? x : T(0)", ("bool", "uint8", "uint8")),
]


@pytest.mark.parametrize("in_params, out_params, operation, types", SOURCES)
def test_generated_sources_compile(in_params, out_params, operation, types):
    kernel = lab.ElementwiseKernel(in_params, out_params, operation, "k")
    source = kernel.source(*types)
    assert "lab::jit::vectorized(Op{" in source and "lab::jit::strided(Op{" in source
    program = lab.compile(source, arch="sm_90")
    assert program.kind == "cubin" and len(program.binary) > 0


def test_a_compile_error_points_into_the_operation():
    kernel = lab.ElementwiseKernel("T x", "T y", "y = x +* 2", "broken")
    with pytest.raises(lab.CompileError, match=r"broken: operation\(1\)"):
        lab.compile(kernel.source("float32", "float32"), arch="sm_90", cache=False)


def test_calls_go_through_the_c_launcher():
    k = StandIn("T x, T y, float32 a", "T z", "z = (x + y) * a", "axpy")
    x, y, z = fake_array((5, 3)), fake_array((3,)), fake_array((5, 3))
    reaches_cuda(lambda: k(x, y, 2.0, z))
    reaches_cuda(lambda: k(x, y, np.float32(2.0), z))
    reaches_cuda(lambda: k(x, y, 2, z))  # an int for a float32 parameter converts
    assert k.keys == [b"22d2", b"22f2", b"22q2"]  # one specialization a combination of types
    reaches_cuda(lambda: k(x, y, 3.0, z))
    assert len(k._specializations) == 3 and len(k.keys) == 3


@pytest.mark.parametrize("call, error, match", [
    (lambda k, x, z: k(x, fake_array((4,)), 1.0, z), ValueError, r"axpy\(\): the inputs cannot be broadcast"),
    (lambda k, x, z: k(x, x, 1.0, fake_array((1, 3))), ValueError, r"argument 'z' has shape \(1, 3\)"),
    (lambda k, x, z: k(x, x, "a", z), TypeError, r"axpy\(\): argument 'a' must be a CUDA array"),
    (lambda k, x, z: k(x, x, 1.0, 3), TypeError, r"argument 'z' must be a CUDA array"),
    (lambda k, x, z: k(x, x, 1.0, z, z), TypeError, r"takes 3 inputs and 1 outputs \(the outputs may be left out\), got 5"),
    (lambda k, x, z: k(x, x, 1.0, z, bad=1), TypeError, r"unexpected keyword argument 'bad' \(it takes stream=\)"),
    (lambda k, x, z: k(x, x, 1.0, z, stream="s"), TypeError, "stream"),
    (lambda k, x, z: k(x, x, 1.0, fake_array((5, 3), readonly=True)), ValueError, "'z' is read-only"),
    (lambda k, x, z: k(x, fake_array((5, 3), typestr="<f8"), 1.0, z), TypeError, "argument 'y' has dtype float64"),
    (lambda k, x, z: k(x, x, 1.0, fake_array((5, 3), typestr="<i4")), TypeError, "argument 'z' has dtype int32"),
])
def test_bad_calls_are_named_before_any_cuda_call(call, error, match):
    k = StandIn("T x, T y, float32 a", "T z", "z = (x + y) * a", "axpy")
    with pytest.raises(error, match=match):
        call(k, fake_array((5, 3)), fake_array((5, 3)))


def test_outputs_are_checked_against_each_other_and_the_inputs():
    k = StandIn("T x", "T y, T z", "y = x; z = -x", "split")
    x, y = fake_array((6,)), fake_array((6,))
    with pytest.raises(ValueError, match=r"outputs 'y' and 'z' share memory"):
        k(x, y, y)
    with pytest.raises(ValueError, match=r"output 'z' has shape \(3,\) but output 'y' has shape \(6,\)"):
        k(x, y, fake_array((3,)))
    base = y.__cuda_array_interface__["data"][0]
    shifted = fake_array((6,), ptr=base + 4)
    with pytest.raises(ValueError, match=r"argument 'x' overlaps 'y'"):
        k(shifted, y, fake_array((6,)))
    reaches_cuda(lambda: k(y, y, fake_array((6,))))  # in place: the very view


def test_integer_parameters_refuse_floats_and_overflow():
    k = StandIn("int32 n, T x", "T y", "y = x * n", "scale")
    x, y = fake_array((4,)), fake_array((4,))
    with pytest.raises(TypeError, match=r"scale\(\): argument 'n' is a float; this parameter is an integer"):
        k(1.5, x, y)
    with pytest.raises(OverflowError, match=r"argument 'n' = 4294967296 does not fit the parameter's 32-bit"):
        k(2**32, x, y)
    reaches_cuda(lambda: k(np.int32(3), x, y))


def test_a_failing_specialization_is_raised_and_retried():
    class Broken(lab.ElementwiseKernel):
        calls = 0

        def _specialize(self, key):
            Broken.calls += 1
            raise lab.CompileError("no")
    k = Broken("T x", "T y", "y = x", "k")
    for _ in range(2):
        with pytest.raises(lab.CompileError):
            k(fake_array(), fake_array())
    assert Broken.calls == 2 and len(k._specializations) == 0


def test_calls_hold_no_references():
    k = StandIn("T x, float32 a", "T y", "y = x * a", "scale")
    x, y, a = fake_array((7,)), fake_array((7,)), np.float32(2)
    calls = [lambda: k(x, a, y), lambda: k(x, "bad", y), lambda: k(x, a, fake_array((3,))), lambda: k(x, a, y, bad=1)]
    for call in calls:  # warm: specializations made, types learned
        try:
            call()
        except (lab.CudaError, TypeError, ValueError):
            pass
    before = [sys.getrefcount(o) for o in (x, y, a, k)]
    for _ in range(2000):
        for call in calls:
            try:
                call()
            except (lab.CudaError, TypeError, ValueError):
                pass
    assert [sys.getrefcount(o) for o in (x, y, a, k)] == before


def test_a_specialization_finds_its_kernels_with_their_parameter_sizes(monkeypatch):
    """The real _specialize: compiled by NVRTC (no GPU needed), then each kernel looked up with the
    parameter sizes read from the cubin, so the C side never probes the runtime for them."""
    found = []

    class Library:  # the C module's library entry points, recorded instead of loaded
        def _library_load(self, binary):
            assert isinstance(binary, bytes) and binary
            return "library"

        def _library_kernel(self, library, name, sizes, /):
            found.append((library, name, sizes))
            return handle()[0], sizes

    monkeypatch.setattr(lab._nvrtc, "_device_arch", "sm_90")
    monkeypatch.setattr(lab._elementwise_kernel, "_core", Library())
    kernel = lab.ElementwiseKernel("T x, T y, float32 a", "T z", "z = (x + y) * a", "axpy_sizes")
    vectorized, strided, letters, uses_index, _ = kernel._specialize(b"22f2")
    assert letters == b"**f" and uses_index is False
    assert [name for _, name, _ in found] == ["axpy_sizes_vectorized", "axpy_sizes_strided"]
    assert all(library == "library" and isinstance(sizes, bytes) and len(sizes) > 0 for library, _, sizes in found)
