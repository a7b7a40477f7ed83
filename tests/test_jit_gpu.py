"""lab.RawKernel / lab.RawModule on a GPU: a kernel written in a string, compiled with
NVRTC, launched on every producer's arrays; scalars of each C type with and without a signature;
templates through name expressions; streams and graph capture; errors naming the kernel."""
import numpy as np
import pytest

import lab
from cuda_graphs import capture_and_replay
from producers import LabProducer, producer_or_skip

pytestmark = pytest.mark.gpu

AXPY = r'''
extern "C" __global__ void axpy(const float* x, const float* y, float* out, float a, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}'''

# Every scalar type lands in out[k] as a double, so the test reads back exactly what was passed.
SCALARS = r'''
#include <cuda_fp16.h>
extern "C" __global__ void scalars(double* out, signed char i8, unsigned char u8, short i16, int i32,
                                   long long i64, unsigned long long u64, float f32, double f64, bool b,
                                   __half f16) {
    out[0] = i8; out[1] = u8; out[2] = i16; out[3] = i32; out[4] = (double)i64; out[5] = (double)u64;
    out[6] = f32; out[7] = f64; out[8] = b ? 1.0 : 0.0; out[9] = __half2float(f16);
}'''
SCALARS_SIGNATURE = ("double*, signed char, unsigned char, short, int, long long, unsigned long long, float, "
                     "double, bool, __half")
SCALAR_VALUES = [-7, 200, -300, -70000, -(2**40), 2**63 + 5, 1.5, -2.25, True, 0.75]

TEMPLATE = r'''
template <typename T> __global__ void fill(T* x, T value, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = value;
}'''


def axpy_kernel():
    return lab.RawKernel(AXPY, "axpy")


@pytest.mark.parametrize("producer_name", ["torch", "cupy", "numba", "lab"])
def test_axpy_on_every_producer(producer_name):
    n = 100_003
    rng = np.random.default_rng(1)
    x_host, y_host = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    producer = LabProducer() if producer_name == "lab" else producer_or_skip(producer_name)
    (x, _), (y, _) = producer.from_host(x_host, "float32"), producer.from_host(y_host, "float32")
    out = producer.empty_poisoned((n,), "float32")
    axpy_kernel()(((n + 255) // 256,), (256,), (x, y, out, np.float32(2.0), n))
    np.testing.assert_array_equal(producer.to_host(out), (np.float32(2.0) * x_host + y_host).astype(np.float32))


def test_scalars_of_every_type_with_and_without_a_signature():
    torch = producer_or_skip("torch").torch
    out = torch.full((10,), float("nan"), dtype=torch.float64, device="cuda")
    want = [float(v) for v in SCALAR_VALUES]
    typed = lab.RawKernel(SCALARS, "scalars", signature=SCALARS_SIGNATURE)
    typed(1, 1, [out] + SCALAR_VALUES)
    assert out.tolist() == want
    out.fill_(float("nan"))
    numpy_scalars = [np.int8(-7), np.uint8(200), np.int16(-300), np.int32(-70000), np.int64(-(2**40)),
                     np.uint64(2**63 + 5), np.float32(1.5), -2.25, True, np.float16(0.75)]
    lab.RawKernel(SCALARS, "scalars")(1, 1, [out] + numpy_scalars)
    assert out.tolist() == want


def test_parameter_sizes_catch_a_python_int_for_an_int():
    torch = producer_or_skip("torch").torch
    kernel = lab.RawKernel(TEMPLATE.replace("template <typename T>", 'extern "C"').replace("T", "float"), "fill")
    x = torch.zeros(10, device="cuda")
    with pytest.raises(TypeError, match=r"fill\(\): argument 'args\[2\]' passes 8 bytes \(a int\) but the kernel's "
                                        r"parameter 2 is 4 bytes"):
        kernel(1, 32, (x, np.float32(1), 10))
    with pytest.raises(TypeError, match=r"fill\(\): the kernel takes 3 arguments, got 2"):
        kernel(1, 32, (x, np.float32(1)))
    kernel(1, 32, (x, np.float32(3), np.int32(10)))
    assert x.tolist() == [3.0] * 10


def test_templates_through_name_expressions():
    torch = producer_or_skip("torch").torch
    module = lab.RawModule(TEMPLATE, name_expressions=["fill<float>", "fill<double>"])
    xf, xd = torch.zeros(33, device="cuda"), torch.zeros(33, dtype=torch.float64, device="cuda")
    module.get_function("fill<float>", signature="float*, float, int")(1, 64, (xf, 1.25, 33))
    module.get_function("fill<double>")(1, 64, (xd, -0.5, np.int32(33)))
    assert xf.tolist() == [1.25] * 33 and xd.tolist() == [-0.5] * 33
    with pytest.raises(TypeError, match=r"fill<float>\(\): argument 'args\[0\]' has dtype float64; the signature's "
                                        r"parameter 0 points to float32"):
        module.get_function("fill<float>", signature="float*, float, int")(1, 64, (xd, 1.0, 33))


def test_streams_and_graph_capture():
    torch = producer_or_skip("torch").torch
    n = 1 << 20
    x, y, out = (torch.rand(n, device="cuda") for _ in range(3))
    kernel = axpy_kernel()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())  # x, y, out were filled on the default stream
    with torch.cuda.stream(side):  # the producer's current stream
        kernel(n // 256, 256, (x, y, out, np.float32(3), n))
    side.synchronize()
    torch.testing.assert_close(out, 3 * x + y)
    s = lab.Stream()
    out.zero_()
    torch.cuda.synchronize()
    kernel(n // 256, 256, (x, y, out, np.float32(-1), n), stream=s)  # lab orders it after torch's stream
    s.synchronize()
    torch.testing.assert_close(out, y - x)
    capture_and_replay(torch, lambda: kernel(n // 256, 256, (x, y, out, np.float32(0.5), n)),
                       lambda: x.copy_(torch.rand_like(x)), lambda _: torch.testing.assert_close(out, 0.5 * x + y))


@pytest.mark.provokes_cuda_error
def test_errors_name_the_kernel():
    torch = producer_or_skip("torch").torch
    x = torch.zeros(4, device="cuda")
    with pytest.raises(lab.CudaError, match=r"launching kernel 'axpy'"):
        axpy_kernel()(1, 2048, (x, x, x, np.float32(1), 4))  # more threads than a block holds
    with pytest.raises(ValueError, match=r"no kernel named 'axp' in the compiled code"):
        lab.RawKernel(AXPY, "axp")(1, 1, (x, x, x, np.float32(1), 4))
    with pytest.raises(lab.CompileError):
        lab.RawKernel(AXPY.replace("out[i]", "out[j]"), "axpy")(1, 1, (x, x, x, np.float32(1), 4))
    kernel = axpy_kernel()  # a failed launch leaves the kernel and lab usable
    kernel(1, 4, (x, x, x, np.float32(1), 4))
    torch.cuda.synchronize()


def test_kernel_using_lab_headers():
    """lab's kernel headers ship with the package: a user kernel can use its functors."""
    torch = producer_or_skip("torch").torch
    source = r'''
    #include "functors.cuh"
    extern "C" __global__ void gelu(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = lab::GeluOp()(x[i], 0.f, 0.f, lab::OpParams<float>{1.f, 1.f});
    }'''
    x = torch.linspace(-3, 3, 1000, device="cuda")
    y = torch.empty_like(x)
    try:
        kernel = lab.RawKernel(source, "gelu")
        kernel(4, 256, (x, y, np.int32(1000)))
    except lab.CompileError as error:
        pytest.fail(f"lab's headers did not compile in a user kernel: {error.log[:2000]}")
    torch.testing.assert_close(y, torch.nn.functional.gelu(x), rtol=1e-5, atol=1e-5)
