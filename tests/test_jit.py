"""lab.RawKernel / lab.RawModule on any machine: signatures, argument marshalling and
every bad input - each a TypeError/ValueError/OverflowError naming the argument, raised before any
CUDA call - through fake producers and a stand-in kernel handle (a capsule that is never launched:
without a GPU the launch itself fails as lab.CudaError, after the arguments were checked)."""
import ctypes

import numpy as np
import pytest

import lab
from fakes import _capsule_new, fake_array
from lab._jit import parse_signature

# ctypes.pythonapi.PyCapsule_New is one object: fakes.py declares its argument types once (void
# pointers), and every capsule made in the tests goes through that declaration.
_CAPSULE_NAME = ctypes.create_string_buffer(b"lab.kernel")  # outlives every capsule made with it


def handle(sizes=None, signature=None, name="scale"):
    """What RawKernel passes to the binding: (kernel, name, parameter sizes, signature codes)."""
    sizes = bytes(sizes) if sizes is not None else None
    return (_capsule_new(0x1000, ctypes.addressof(_CAPSULE_NAME), None), name, sizes,
            parse_signature(signature) if signature is not None else None)


def launch(h, args, grid=1, block=32, shared_mem=0, stream=None):
    lab.lab._launch_kernel(h, grid, block, args, shared_mem, stream)


def launch_reaches_cuda(h, args, **kw):
    """Marshalling accepted the arguments: without a GPU the launch is what fails."""
    if lab.is_available():
        pytest.skip("a GPU is here: tests/test_jit_gpu.py launches for real")
    with pytest.raises(lab.CudaError):
        launch(h, args, **kw)


@pytest.mark.parametrize("signature, codes", [
    ("const float*, float*, int", b"*f*fsi"),
    ("float * __restrict__ out, const double *in, long long n", None),
    ("void*, unsigned char, __half, __nv_bfloat16, bool, size_t", b"*vsBsesEs?sQ"),
    ("", b""),
])
def test_signatures(signature, codes):
    if codes is None:  # parameter names are not part of the grammar lab reads
        with pytest.raises(ValueError, match=r"signature parameter 0 is 'float \* __restrict__ out'"):
            parse_signature(signature)
    else:
        assert parse_signature(signature) == codes


@pytest.mark.parametrize("bad", ["float**", "struct foo", "unsigned short*", "int, matrix"])
def test_unknown_signature_types(bad):
    with pytest.raises(ValueError, match=r"RawKernel: signature parameter \d is .*; lab knows pointers to"):
        parse_signature(bad)
    with pytest.raises(TypeError, match="signature must be a str"):
        parse_signature(["float*"])


def test_module_and_kernel_arguments():
    with pytest.raises(TypeError, match="RawModule: code must be a str"):
        lab.RawModule(b"__global__ void k() {}")
    with pytest.raises(TypeError, match="RawModule: options must be strings"):
        lab.RawModule("", options=[3])
    with pytest.raises(TypeError, match="RawKernel: name must be a str"):
        lab.RawKernel("", 3)
    kernel = lab.RawKernel('extern "C" __global__ void k() {}', "k", signature="")
    assert repr(kernel) == "<lab.RawKernel 'k'>"


def test_argument_count_is_checked():
    with pytest.raises(TypeError, match=r"scale\(\): the kernel takes 3 arguments, got 2"):
        launch(handle(sizes=[8, 8, 4]), (fake_array(), fake_array()))
    with pytest.raises(TypeError, match=r"scale\(\): the kernel takes 2 arguments, got 1"):
        launch(handle(signature="float*, int"), (fake_array(),))


def test_python_int_into_an_int_parameter_says_what_to_do():
    with pytest.raises(TypeError, match=r"scale\(\): argument 'args\[2\]' passes 8 bytes \(a int\) but the kernel's parameter 2 is "
                                        r"4 bytes - pass a NumPy scalar of the parameter's type \(numpy.int32\(n\)\)"):
        launch(handle(sizes=[8, 8, 4]), (fake_array(), fake_array(), 1024))


@pytest.mark.parametrize("value, size", [(np.int32(3), 4), (np.float32(2), 4), (np.int8(1), 1), (np.uint8(1), 1),
                                         (np.float16(1), 2), (np.int64(5), 8), (np.float64(1), 8), (True, 1),
                                         (np.bool_(True), 1), (7, 8), (2.5, 8)])
def test_scalars_pass_as_their_own_type(value, size):
    launch_reaches_cuda(handle(sizes=[8, size]), (fake_array(), value))
    wrong = 4 if size != 4 else 8
    with pytest.raises(TypeError, match=rf"argument 'args\[1\]' passes {size} bytes"):
        launch(handle(sizes=[8, wrong]), (fake_array(), value))


@pytest.mark.parametrize("bad", ["text", [1, 2], None, np.zeros(3, np.float32), object()])
def test_arguments_that_are_not_kernel_arguments(bad):
    with pytest.raises(TypeError, match=r"scale\(\): argument 'args\[1\]' is a [\w.]+, which cannot be a kernel argument"):
        launch(handle(), (fake_array(), bad))


def test_signature_checks_dtypes_and_converts_numbers():
    sig = "const float*, double*, int, unsigned char, __half, float"
    good = (fake_array(), fake_array(typestr="<f8"), 5, 255, 0.5, 3)
    launch_reaches_cuda(handle(signature=sig), good)
    with pytest.raises(TypeError, match=r"scale\(\): argument 'args\[1\]' has dtype float32; the signature's parameter 1 points to float64"):
        launch(handle(signature=sig), (fake_array(), fake_array(), 5, 255, 0.5, 3.0))
    with pytest.raises(OverflowError, match=r"argument 'args\[2\]' = 2147483648 does not fit the parameter's 32-bit signed"):
        launch(handle(signature=sig), good[:2] + (2**31,) + good[3:])
    with pytest.raises(OverflowError, match=r"argument 'args\[3\]' = -1 does not fit the parameter's 8-bit unsigned"):
        launch(handle(signature=sig), good[:3] + (-1,) + good[4:])
    with pytest.raises(TypeError, match=r"argument 'args\[2\]' is a float; this parameter is an integer"):
        launch(handle(signature=sig), good[:2] + (5.0,) + good[3:])
    with pytest.raises(TypeError, match=r"argument 'args\[4\]' must be a number for this scalar parameter, got str"):
        launch(handle(signature=sig), good[:4] + ("0.5",) + good[5:])
    with pytest.raises(TypeError, match=r"scale\(\): argument 'args\[0\]' must be a CUDA array"):
        launch(handle(signature=sig), (1.0,) + good[1:])
    launch_reaches_cuda(handle(signature="void*, void*"), (fake_array(typestr="<i8"), fake_array(typestr="|u1")))


@pytest.mark.parametrize("grid, block, error, pattern", [
    (0, 32, ValueError, r"'grid' sizes must be between 1 and 2\^31 - 1, got 0"),
    ((1, 2, 3, 4), 32, ValueError, r"'grid' must have 1 to 3 dimensions, got 4"),
    (1, 32.0, TypeError, r"'block' must be an int or a tuple of 1 to 3 ints, got float"),
    (1, (True,), TypeError, r"'block' must be an int or a tuple of 1 to 3 ints, got bool"),
    ((), 32, ValueError, r"'grid' must have 1 to 3 dimensions, got 0"),
])
def test_launch_configuration_is_checked(grid, block, error, pattern):
    with pytest.raises(error, match=rf"scale\(\): argument {pattern}"):
        launch(handle(), (fake_array(),), grid=grid, block=block)


def test_other_call_arguments():
    with pytest.raises(ValueError, match=r"scale\(\): argument 'shared_mem' must be an int >= 0, got -1"):
        launch(handle(), (fake_array(),), shared_mem=-1)
    with pytest.raises(TypeError, match=r"scale\(\): argument 'args' must be a tuple or list of the kernel's arguments, got "
                                        r"FakeCudaArray"):
        launch(handle(), fake_array())
    launch_reaches_cuda(handle(), [fake_array(), np.int32(1)], grid=(2, 2), block=[16, 16, 1])
    with pytest.raises(TypeError, match="stream"):
        launch(handle(), (fake_array(),), stream="default")


def test_no_gpu_means_no_default_architecture(monkeypatch):
    if lab.is_available():
        pytest.skip("a GPU is here")
    monkeypatch.setattr(lab._nvrtc, "_device_arch", None)  # another test may have pretended a GPU
    kernel = lab.RawKernel('extern "C" __global__ void k(float* x) { x[0] = 1; }', "k")
    with pytest.raises(ValueError, match="no GPU here to compile for"):
        kernel((1,), (1,), (fake_array(),))


class StandInKernel(lab.RawKernel):
    """A RawKernel whose compiled kernel is the stand-in handle: the C call path without a GPU."""

    def _prepare(self):
        return handle(sizes=[8, 4], name=self.name)


def test_calls_go_through_the_c_launcher():
    kernel = StandInKernel("", "scale")
    assert isinstance(kernel, lab.lab._KernelLauncher) and kernel._handle is None
    with pytest.raises(TypeError, match=r"scale\(\) missing required argument 'args' \(pos 3\)"):
        kernel(1, 32)
    assert kernel._handle is not None and repr(kernel) == "<lab.RawKernel 'scale' (compiled)>"
    with pytest.raises(TypeError, match=r"scale\(\) got an unexpected keyword argument 'shared'"):
        kernel(1, 32, (fake_array(), np.int32(1)), shared=4)
    with pytest.raises(TypeError, match=r"scale\(\): argument 'args\[1\]' passes 8 bytes"):
        kernel(1, 32, (fake_array(), 1))
    with pytest.raises(ValueError, match=r"scale\(\): argument 'shared_mem' must be an int >= 0"):
        kernel(1, 32, (fake_array(), np.int32(1)), shared_mem=-4)
    if not lab.is_available():
        with pytest.raises(lab.CudaError):
            kernel(grid=(1,), block=(32,), args=(fake_array(), np.int32(1)), stream=None)


def test_a_failing_prepare_is_raised_and_retried():
    class Broken(lab.RawKernel):
        calls = 0

        def _prepare(self):
            Broken.calls += 1
            raise lab.CompileError("no")
    kernel = Broken("", "k")
    for _ in range(2):
        with pytest.raises(lab.CompileError):
            kernel(1, 1, ())
    assert Broken.calls == 2 and kernel._handle is None


def test_launches_hold_no_references():
    """Failed and (on a GPU-less machine) refused launches keep no reference to any argument."""
    import sys
    x, h, scalar = fake_array(), handle(sizes=[8, 4]), np.int32(3)
    kernel = StandInKernel("", "scale")
    before = [sys.getrefcount(o) for o in (x, h, scalar, kernel)]
    for _ in range(2000):
        for call in (lambda: launch(h, (x, 1)), lambda: kernel(1, 32, (x, 1)), lambda: kernel(1, 32, (x, scalar)),
                     lambda: launch(h, (x, scalar), grid=0)):
            try:
                call()
            except (TypeError, ValueError, lab.CudaError):
                pass
    assert [sys.getrefcount(o) for o in (x, h, scalar, kernel)] == before
