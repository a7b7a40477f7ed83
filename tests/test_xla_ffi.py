"""lab's XLA FFI handlers (src/binding/xla_ffi.c) called the way XLA calls them, with call frames built
by hand here (ctypes, the layout of xla/ffi/api/c_api.h) - no jax needed: the metadata query, the API
version check, stages other than execution, buffers of every kind read into lab's arrays, attributes,
and every refusal turned into an XLA error carrying the op driver's message. Without a GPU a frame that
passes every check fails at the first CUDA call, as an XLA error too."""
import ctypes

import pytest

import lab
from xla_frames import BF16, F8, F16, F32, F64, S32, S64, ApiVersion, Extension, Metadata, MetadataExtension, Xla


def f64_attr(value):
    return (F64, ctypes.c_double, value, 3)


def test_every_target_is_offered():
    assert sorted(lab.lab._xla_ffi_targets()) == [
        "lab_attention", "lab_cross_entropy", "lab_elementwise", "lab_glu_backward", "lab_kernel", "lab_layer_norm",
        "lab_layer_norm_backward", "lab_reduce", "lab_rms_norm", "lab_rms_norm_backward", "lab_rope", "lab_softmax",
        "lab_softmax_backward"]


def op_attr(table, name, **numbers):
    """The attribute op naming `name` in _xla_ffi_ops()'s table, plus int64 attributes."""
    number = [row[0] for row in lab.lab._xla_ffi_ops()[table]].index(name)
    attributes = {"op": (S32, ctypes.c_int32, number, 3)}
    attributes.update({key: (S64, ctypes.c_int64, value, 3) for key, value in numbers.items()})
    return attributes


def test_the_op_tables_list_names_inputs_integer_support_and_numbers():
    tables = lab.lab._xla_ffi_ops()
    elementwise, reductions = dict((r[0], r[1:]) for r in tables["elementwise"]), dict((r[0], r[1:])
                                                                                       for r in tables["reduction"])
    assert elementwise["add"] == (2, 1, ("alpha",)) and elementwise["div"] == (2, 0, ())
    assert elementwise["fused_add_mul"] == (3, 0, ()) and elementwise["fused_add_mul_scalar"] == (2, 0, ("s",))
    assert elementwise["axpby"] == (2, 0, ("alpha", "beta"))
    assert elementwise["neg"] == (1, 1, ()) and elementwise["swiglu"] == (2, 0, ()) and "scale" not in elementwise
    assert reductions["sum"] == (1, 1) and reductions["mean"] == (1, 0) and reductions["dot"] == (2, 0)
    assert reductions["argmax"] == (1, 1) and reductions["norm1"] == reductions["norm2"] == reductions["norm_inf"] == (1, 0)


TRACEABLE = {"lab_rms_norm", "lab_layer_norm", "lab_softmax", "lab_softmax_backward", "lab_rope", "lab_elementwise",
             "lab_glu_backward"}  # the others take scratch memory (partials) or the GIL (users' kernels)


@pytest.mark.parametrize("target", sorted(lab.lab._xla_ffi_targets()) + ["elsewhere"])
def test_the_metadata_query_names_the_api_version_and_the_traits(target):
    metadata = Metadata(ctypes.sizeof(Metadata), ApiVersion(ctypes.sizeof(ApiVersion), None, -1, -1), 99)
    extension = MetadataExtension(Extension(ctypes.sizeof(MetadataExtension), 1, None), ctypes.pointer(metadata))
    result, _ = Xla().call(target, [], [], extension=ctypes.cast(ctypes.pointer(extension),
                                                                 ctypes.POINTER(Extension)))
    assert result is None
    traits = 1 if target in TRACEABLE else 0  # 1: XLA may record it into a command buffer
    assert (metadata.api_version.major_version, metadata.api_version.minor_version, metadata.traits) == (0, 1, traits)


def test_another_major_version_is_refused():
    _, (errc, message) = Xla(major=1).call("lab_softmax", [(F32, (2, 3))], [(F32, (2, 3))])
    assert errc == 13 and "not the version lab was written against" in message


def test_stages_before_execution_do_nothing():
    result, _ = Xla().call("lab_softmax", [], [], stage=1)
    assert result is None


@pytest.mark.skipif(lab.is_available(), reason="with a GPU, the fake pointers are refused as not device memory")
@pytest.mark.parametrize("target, args, rets, attributes", [
    ("lab_softmax", [(F32, (4, 7))], [(F32, (4, 7))], {"log": (S32, ctypes.c_int32, 1, 3)}),
    ("lab_rms_norm", [(BF16, (2, 3, 8)), (BF16, (8,))], [(BF16, (2, 3, 8)), (F32, (2, 3))], {"eps": f64_attr(1e-6)}),
    ("lab_rms_norm", [(F16, (5, 8))], [(F16, (5, 8)), (F32, (5,))], {}),
    ("lab_rms_norm_backward", [(F32, (5, 8)), (F32, (5, 8)), (F32, (5,)), (F32, (8,))], [(F32, (5, 8)), (F32, (8,))], {}),
    ("lab_softmax_backward", [(F64, (3, 9)), (F64, (3, 9))], [(F64, (3, 9))], {}),
    ("lab_layer_norm", [(BF16, (5, 8)), (BF16, (8,)), (BF16, (8,))], [(BF16, (5, 8)), (F32, (5,)), (F32, (5,))],
     {"eps": f64_attr(1e-5)}),
    ("lab_layer_norm_backward", [(F32, (5, 8)), (F32, (5, 8)), (F32, (5,)), (F32, (5,)), (F32, (8,))],
     [(F32, (5, 8)), (F32, (8,)), (F32, (8,))], {}),
    ("lab_cross_entropy", [(BF16, (6, 11)), (S32, (6,))], [(F32, ()), (BF16, (6, 11))],
     {"ignore_index": (S64, ctypes.c_int64, -1, 3), "label_smoothing": f64_attr(0.1), "reduction": (S32, ctypes.c_int32, 2, 3)}),
    ("lab_rope", [(BF16, (2, 4, 5, 8)), (BF16, (2, 2, 5, 8)), (BF16, (2, 5, 8)), (BF16, (2, 5, 8))],
     [(BF16, (2, 4, 5, 8)), (BF16, (2, 2, 5, 8))], {"interleaved": (S32, ctypes.c_int32, 1, 3)}),
    ("lab_elementwise", [(BF16, (6, 11)), (BF16, (6, 11))], [(BF16, (6, 11))], op_attr("elementwise", "geglu")),
    ("lab_elementwise", [(F32, (6, 1)), (BF16, (1, 11))], [(F32, (6, 11))], op_attr("elementwise", "add")),
    ("lab_elementwise", [(S32, (6, 11))], [(S32, (6, 11))], op_attr("elementwise", "neg")),
    ("lab_elementwise", [(F16, (6, 11)), (F16, (6, 11)), (F32, ())], [(F16, (6, 11))],
     op_attr("elementwise", "fused_add_mul")),
    ("lab_elementwise", [(BF16, (6, 11)), (F32, (6, 11))], [(F32, (6, 11))],
     {**op_attr("elementwise", "axpby", beta=-3), "alpha": f64_attr(0.5)}),
    ("lab_elementwise", [(S32, (6, 11)), (S32, (6, 11))], [(S32, (6, 11))],
     op_attr("elementwise", "add", alpha=2**40)),
    ("lab_elementwise", [(F32, (6, 11)), (F32, (1, 11))], [(F32, (6, 11))],
     {**op_attr("elementwise", "fused_add_mul_scalar"), "s": f64_attr(-2.0)}),
    ("lab_reduce", [(BF16, (6, 11, 4))], [(F32, (6,))], op_attr("reduction", "sum", reduced=0b11)),
    ("lab_reduce", [(F32, (6, 11))], [(S32, (11,))], op_attr("reduction", "argmax", reduced=0b10)),
    ("lab_reduce", [(F64, (6, 11))], [(F64, ())], op_attr("reduction", "var", reduced=0b11)),
    ("lab_reduce", [(BF16, (6, 11))], [(BF16, (6,))], op_attr("reduction", "norm_inf", reduced=0b1)),
    ("lab_reduce", [(F32, (7,)), (F32, (7,))], [(F32, ())], op_attr("reduction", "dot", reduced=1)),
    ("lab_glu_backward", [(F32, (6, 11)), (F32, (6, 11)), (F32, (6, 11))], [(F32, (6, 11)), (F32, (6, 11))], {}),
    ("lab_attention", [(BF16, (2, 4, 5, 64)), (BF16, (2, 2, 5, 64)), (BF16, (2, 2, 5, 64))],
     [(BF16, (2, 4, 5, 64)), (F32, (2, 4, 5))], {"causal": (S32, ctypes.c_int32, 1, 3)}),
    ("lab_attention", [(F16, (2, 5, 4, 64)), (F16, (2, 7, 2, 64)), (F16, (2, 7, 2, 64))],  # jax.nn's layout
     [(F16, (2, 5, 4, 64)), (F32, (2, 4, 5))], {"sequence_major": (S32, ctypes.c_int32, 1, 3)}),
    ("lab_attention", [(BF16, (2, 5, 4, 64))] + [(BF16, (2, 5, 4, 64))] * 3 + [(BF16, (2, 5, 4, 64)), (F32, (2, 4, 5))],
     [(BF16, (2, 5, 4, 64))] * 3, {"backward": (S32, ctypes.c_int32, 1, 3), "sequence_major": (S32, ctypes.c_int32, 1, 3)}),
    ("lab_attention", [(BF16, (9, 4, 64)), (BF16, (9, 2, 64)), (BF16, (9, 2, 64)), (S32, (3,)), (S32, (3,))],
     [(BF16, (9, 4, 64)), (F32, (4, 9))], {"max_seqlen_q": (S64, ctypes.c_int64, 5, 3),
                                           "max_seqlen_k": (S64, ctypes.c_int64, 5, 3)}),
])
def test_frames_that_pass_every_check_reach_cuda(target, args, rets, attributes):
    _, (errc, message) = Xla().call(target, args, rets, attributes)
    assert errc == 13 and "CUDA" in message, message


@pytest.mark.parametrize("target, args, rets, attributes, match", [
    ("lab_softmax", [(F32, (4, 7))], [(F32, (4, 8))], {}, r"lab_softmax\(\): argument 'out' has shape \(4, 8\)"),
    ("lab_softmax", [(S32, (4, 7))], [(S32, (4, 7))], {}, r"argument 'x' has dtype int32"),
    ("lab_softmax", [(F8, (4, 7))], [(F32, (4, 7))], {}, r"argument 'x' has XLA element type 19"),
    ("lab_softmax", [], [(F32, (4, 7))], {}, r"XLA gave no buffer for 'x'"),
    ("lab_rms_norm", [(F32, (4, 8)), (F32, (7,))], [(F32, (4, 8)), (F32, (4,))], {},
     r"argument 'weight' has shape \(7,\)"),
    ("lab_rms_norm", [(F32, (4, 8))], [(F32, (4, 8)), (F32, (5,))], {}, r"argument 'rstd' has shape \(5,\)"),
    ("lab_rms_norm", [(F32, (4, 8))], [(F32, (4, 8)), (F32, (4,))], {"eps": (F64, ctypes.c_double, 0.0, 4)},
     r"attribute 'eps' must be a number"),
    ("lab_cross_entropy", [(F32, (6, 11)), (F32, (6,))], [(F32, ()), (F32, (6, 11))], {},
     r"argument 'target' has dtype float32; class indices are int64 or int32"),
    ("lab_rope", [(F32, (2, 4, 5, 8)), (F32, (2, 2, 5, 8)), (F32, (5, 3)), (F32, (5, 3))],
     [(F32, (2, 4, 5, 8)), (F32, (2, 2, 5, 8))], {}, r"the rotary dimension is 3"),
    ("lab_attention", [(F32, (2, 4, 5, 64))] * 3, [(F32, (2, 4, 5, 64)), (F32, (2, 4, 5))], {},
     r"lab_attention\(\): argument 'q' has dtype float32; attention takes float16 or bfloat16"),
    ("lab_attention", [(BF16, (2, 4, 5, 64)), (BF16, (2, 3, 5, 64)), (BF16, (2, 3, 5, 64))],
     [(BF16, (2, 4, 5, 64)), (F32, (2, 4, 5))], {}, r"argument 'k' has shape \(2, 3, 5, 64\)"),
    ("lab_attention", [(BF16, (2, 4, 5, 64))] * 3, [(BF16, (2, 4, 5, 64))], {}, r"XLA gave no buffer for 'lse'"),
    ("lab_elementwise", [(F32, (6, 11))], [(F32, (6, 11))], op_attr("elementwise", "swiglu"),
     r"lab_elementwise: swiglu takes 2 arguments and 1 results, XLA gave 1 and 1"),
    ("lab_elementwise", [(F32, (6, 11)), (F32, (6, 12))], [(F32, (6, 11))], op_attr("elementwise", "swiglu"),
     r"lab_elementwise\(\): the inputs cannot be broadcast together: 'gate' has shape \(6, 11\), 'up' has shape "
     r"\(6, 12\)"),
    ("lab_elementwise", [(S32, (6, 11)), (S32, (6, 11))], [(S32, (6, 11))], op_attr("elementwise", "swiglu"),
     r"lab_elementwise\(\): argument 'gate' has dtype int32"),
    ("lab_elementwise", [(F32, (6, 11))], [(F32, (6, 11))], {}, r"attribute 'op' \(-1\) names none of its \d+ ops"),
    ("lab_elementwise", [(S32, (6, 11)), (S32, (6, 11))], [(S32, (6, 11))],
     {**op_attr("elementwise", "add"), "alpha": f64_attr(0.5)},
     r"lab_elementwise\(\): argument 'alpha' must be an int for integer dtype int32, got float"),
    ("lab_elementwise", [(F32, (6, 11)), (F32, (6, 11))], [(F32, (6, 11))],
     {**op_attr("elementwise", "axpby"), "beta": (F64, ctypes.c_double, 0.0, 4)}, r"attribute 'beta' must be a number"),
    ("lab_elementwise", [(F32, (6, 11))], [(F32, (6, 11))], {"op": (S32, ctypes.c_int32, 1000, 3)},
     r"attribute 'op' \(1000\) names none"),
    ("lab_reduce", [(F32, (6, 11))], [(F32, (6,))], op_attr("reduction", "sum", reduced=0b100),
     r"attribute 'reduced' \(4\) must mark axes of 'x', which has 2"),
    ("lab_reduce", [(F32, (6, 11))], [(F32, (11,))], op_attr("reduction", "sum", reduced=0b1),
     r"argument 'out' has shape \(11,\)"),
    ("lab_reduce", [(S32, (6, 11))], [(F32, (6,))], op_attr("reduction", "mean", reduced=0b1),
     r"argument 'x' has integer dtype int32"),
    ("lab_reduce", [(F32, (6, 11))], [(F32, (6,)), (F32, (6,))], op_attr("reduction", "amax", reduced=0b1),
     r"amax takes 1 arguments and 1 results, XLA gave 1 and 2"),
    ("lab_reduce", [(F32, (7,)), (F64, (7,))], [(F32, ())], op_attr("reduction", "dot", reduced=1),
     r"arguments 'a' and 'b' must have the same dtype"),
    ("lab_glu_backward", [(F32, (6, 11)), (F32, (6, 11)), (F32, (6, 11))], [(F32, (6, 11)), (F32, (5, 11))], {},
     r"argument 'grad_up' has shape \(5, 11\)"),
])
def test_refusals_become_xla_errors_with_the_message(target, args, rets, attributes, match):
    import re
    _, (errc, message) = Xla().call(target, args, rets, attributes)
    assert errc == 3 and re.search(match, message), message


# ---- lab_kernel: a user's kernel registered by lab.jax (here registered by hand, as lab.jax does) ----

SCALE = r"""extern "C" __global__ void scale(const float* x, float a, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}"""
F32_INDEX, F64_INDEX = 2, 3  # lab dtypes: the bytes lab.jax passes


def kernel_attr(number):
    return {"kernel": (S64, ctypes.c_int64, number, 3)}


def registered_raw():
    kernel = lab.RawKernel(SCALE, "scale", signature="const float*, float, int, float*")
    return kernel._ffi_register(4, 256, 0, (None, 2.0, 7, None), bytes([F32_INDEX, F32_INDEX]), bytes([0, 1]), None,
                                kernel._signature)


def registered_elementwise():
    kernel = lab.ElementwiseKernel("T x, float32 a", "T z", "z = a * x", "scale_by")
    return kernel._ffi_register(f"{F32_INDEX}d{F32_INDEX}".encode(), (None, 2.0), b"*f")


def test_a_user_kernel_run_elsewhere_says_it_needs_cuda():
    result, (errc, message) = Xla().call("elsewhere", [(F32, (4,))], [(F32, (4,))], kernel_attr(0))
    assert errc == 12 and "only on CUDA devices" in message
    assert Xla().call("elsewhere", [], [], stage=1)[0] is None


@pytest.mark.parametrize("number", [-1, 10 ** 9])
def test_lab_kernel_refuses_a_number_nothing_registered(number):
    _, (errc, message) = Xla().call("lab_kernel", [(F32, (4,))], [(F32, (4,))], kernel_attr(number))
    assert errc == 3 and "is no kernel lab.jax registered" in message, message


def test_registrations_are_numbered_in_order():
    first, second = registered_raw(), registered_elementwise()
    assert second == first + 1


@pytest.mark.parametrize("registered, args, rets, match", [
    (registered_raw, [(F32, (7,))], [], r"scale: XLA gave 1 buffers; the launch lab.jax registered takes 2"),
    (registered_raw, [(F64, (7,))], [(F32, (7,))], r"scale: buffer 0 has dtype float64; the launch was registered for float32"),
    (registered_elementwise, [(F32, (7,)), (F32, (7,))], [(F32, (7,))], r"XLA gave 2 inputs and 1 outputs; the call was "
                                                                        r"registered with 1 and 1"),
    (registered_elementwise, [(F32, (7,))], [(F64, (7,))], r"scale_by: 'z' has dtype float64; the call was registered "
                                                           r"for float32"),
])
def test_user_kernel_frames_are_checked_against_the_registration(registered, args, rets, match):
    import re
    number = registered()
    _, (errc, message) = Xla().call("lab_kernel", args, rets, kernel_attr(number))
    assert errc == 3 and re.search(match, message), message


@pytest.mark.skipif(lab.is_available(), reason="with a GPU, the fake pointers are refused as not device memory")
@pytest.mark.parametrize("registered, args, rets", [
    (registered_raw, [(F32, (7,))], [(F32, (7,))]),
    (registered_elementwise, [(F32, (3, 7))], [(F32, (3, 7))]),
])
def test_user_kernel_frames_that_pass_every_check_reach_compiling_for_the_gpu(registered, args, rets):
    _, (errc, message) = Xla().call("lab_kernel", args, rets, kernel_attr(registered()))
    assert "no GPU here" in message, message


@pytest.mark.parametrize("register, error, match", [
    (lambda k: k._ffi_register(4, 256, 0, (None, 2.0, 7), bytes([F32_INDEX]), bytes([0]), None, k._signature),
     TypeError, r"scale\(\): the kernel takes 4 arguments, got 3"),
    (lambda k: k._ffi_register(4, 256, 0, (None, 2.0, 2 ** 40, None), bytes([F32_INDEX] * 2), bytes([0, 1]), None,
                               k._signature), OverflowError, r"'args\[2\]' = 1099511627776 does not fit"),
    (lambda k: k._ffi_register(4, 256, 0, (None, 2.0, 7, None), bytes([F64_INDEX, F32_INDEX]), bytes([0, 1]), None,
                               k._signature), TypeError, r"'args\[0\]' has dtype float64; the signature's parameter 0"),
    (lambda k: k._ffi_register(4, 0, 0, (None, 2.0, 7, None), bytes([F32_INDEX] * 2), bytes([0, 1]), None, k._signature),
     ValueError, r"'block' sizes must be between 1"),
    (lambda k: k._ffi_register(4, 256, -1, (None, 2.0, 7, None), bytes([F32_INDEX] * 2), bytes([0, 1]), None,
                               k._signature), ValueError, r"'shared_mem' must be an int >= 0"),
    (lambda k: k._ffi_register(4, 256, 0, (None, 2.0, 7, None), bytes([F32_INDEX] * 2), bytes([0, 5]), None,
                               k._signature), ValueError, r"parameter buffer 5 of 2 buffers"),
    (lambda k: k._ffi_register(4, 256, 0, (None, 2.0, 7, None), bytes([99, F32_INDEX]), bytes([0, 1]), None,
                               k._signature), ValueError, r"buffer 0 has no lab dtype"),
    (lambda k: k._ffi_register(4, 256, 0, (None, 2.0, 7, None), bytes([F32_INDEX] * 2), bytes([0]), None, k._signature),
     ValueError, r"argument .args\[3\]. is a buffer beyond the 1 given"),
    (lambda k: k._ffi_register(4, 256, 0, (None, 2.0, 7, None), bytes([F32_INDEX] * 2)), TypeError, r"_ffi_register\("),
])
def test_raw_registration_makes_a_calls_checks(register, error, match):
    kernel = lab.RawKernel(SCALE, "scale", signature="const float*, float, int, float*")
    with pytest.raises(error, match=match):
        register(kernel)


@pytest.mark.parametrize("key, inputs, letters, error, match", [
    (f"{F32_INDEX}d{F32_INDEX}".encode(), (None, "two"), b"*f", TypeError, r"argument 'a' must be a number"),
    (f"{F32_INDEX}d{F32_INDEX}".encode(), (2.0, 2.0), b"*f", ValueError, r"'x': the key, the inputs and the letters "
                                                                          r"disagree"),
    (f"{F32_INDEX}dd".encode(), (None, 2.0), b"*f", ValueError, r"'z': the key, the inputs and the letters disagree"),
    (f"{F32_INDEX}d".encode(), (None, 2.0), b"*f", TypeError, r"_ffi_register\(key: 3 bytes"),
])
def test_elementwise_registration_checks_its_arguments(key, inputs, letters, error, match):
    kernel = lab.ElementwiseKernel("T x, float32 a", "T z", "z = a * x", "scale_by")
    with pytest.raises(error, match=match):
        kernel._ffi_register(key, inputs, letters)


# ---- the GIL: built-in targets never take it, users' kernels do ----

@pytest.mark.parametrize("target, args, rets, attributes, expected", [
    ("lab_softmax", [(F32, (4, 7))], [(F32, (4, 7))], {}, r"CUDA|cannot access"),  # reaches the driver's CUDA steps
    ("lab_softmax", [(F32, (4, 7))], [(F32, (4, 8))], {}, r"argument 'out' has shape \(4, 8\)"),
    ("lab_reduce", [(F32, (6, 11))], [(F32, (6,))], op_attr("reduction", "sum", reduced=0b100),
     r"attribute 'reduced' \(4\) must mark axes"),
    ("lab_rope", [(F32, (2, 4, 5, 8)), (F32, (2, 2, 5, 8)), (F32, (5, 3)), (F32, (5, 3))],
     [(F32, (2, 4, 5, 8)), (F32, (2, 2, 5, 8))], {}, r"the rotary dimension is 3"),
])
def test_built_in_targets_run_while_a_python_thread_holds_the_gil(target, args, rets, attributes, expected):
    """XLA's thread must not wait for a Python thread that holds the GIL: a handler that took it would
    not return before the caller here lets go of it (after 10 s)."""
    import re
    xla = Xla()
    frame = xla.frame(args, rets, attributes)
    finished, message = lab.lab._call_ffi_holding_gil(xla.target(target), ctypes.addressof(frame), 10.0)
    assert finished, f"{target} waited for the GIL"
    assert message and re.search(expected, message), message


def test_user_kernels_take_the_gil_and_report_through_the_same_record():
    xla = Xla()
    frame = xla.frame([(F32, (4,))], [(F32, (4,))], kernel_attr(10 ** 9))
    finished, message = lab.lab._call_ffi_holding_gil(xla.target("lab_kernel"), ctypes.addressof(frame), 0.2)
    assert not finished  # it waited for the GIL, and finished once the caller let go of it
    assert "is no kernel lab.jax registered" in message, message
