"""lab.jax.RawKernel and lab.jax.ElementwiseKernel without a GPU, where jax is installed: a call traces
and lowers to one FFI call of lab_kernel carrying its registration's number; the types the outputs
get, broadcasting and vmap's shapes; one registration per combination of types and numbers; every
check of the arguments made at trace time with the argument named; and running on the CPU is an
error saying a user's CUDA kernel runs only on CUDA devices (tests/test_jax_kernels_gpu.py runs them)."""
import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import lab.jax as ljax  # noqa: E402

SCALE = r"""extern "C" __global__ void scale(const float* x, float a, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}"""


def lowered(function, *args):
    return jax.jit(function).lower(*args).as_text()


def kernel_numbers(text):
    return [int(n) for n in re.findall(r"custom_call @lab_kernel\(.*kernel = (\d+) : i64", text)]


def scale_kernel(**options):
    return ljax.RawKernel(SCALE, "scale", out_shapes=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=lambda x: (x.size + 255) // 256, block=256, **options)


@pytest.mark.parametrize("dtype, out_dtype", [("float32", "float32"), ("bfloat16", "bfloat16"), ("int8", "int8"),
                                              ("float16", "float16")])
@pytest.mark.parametrize("shapes, out_shape", [(((4, 3), (3,)), (4, 3)), (((0,), (1,)), (0,)), (((5, 1), (1, 7)), (5, 7)),
                                               (((), ()), ())])
def test_elementwise_kernel_traces_to_one_ffi_call(dtype, out_dtype, shapes, out_shape):
    fma1 = ljax.ElementwiseKernel("T x, T y", "T z", "z = x * y + 1", "fma1")
    x, y = jnp.zeros(shapes[0], dtype), jnp.zeros(shapes[1], dtype)
    out = jax.eval_shape(fma1, x, y)
    assert out.shape == out_shape and out.dtype == jnp.dtype(out_dtype)
    text = lowered(fma1, x, y)
    assert text.count("custom_call @lab_kernel") == 1 and len(kernel_numbers(text)) == 1


def test_elementwise_kernel_outputs_take_the_parameters_types():
    split = ljax.ElementwiseKernel("T x, float32 a", "float32 scaled, int32 where", "scaled = a * x; where = i",
                                   "split_types")
    scaled, where = jax.eval_shape(lambda x: split(x, 2.0), jnp.zeros((3, 5), jnp.float16))
    assert (scaled.dtype, where.dtype, scaled.shape, where.shape) == (jnp.float32, jnp.int32, (3, 5), (3, 5))


def test_elementwise_kernel_registers_once_per_types_and_numbers():
    add = ljax.ElementwiseKernel("T x, T y", "T z", "z = x + y", "add_once")
    f32, f16 = jnp.zeros(4, jnp.float32), jnp.zeros(4, jnp.float16)
    first = kernel_numbers(lowered(lambda x: add(x, 1.0), f32))
    assert kernel_numbers(lowered(lambda x: add(x, 1.0), f32 + 1)) == first
    assert kernel_numbers(lowered(lambda x: add(x, 2.0), f32)) != first
    assert kernel_numbers(lowered(lambda x: add(x, 1), f32)) != first  # an int is another parameter type
    assert kernel_numbers(lowered(lambda x: add(x, 1.0), f16)) != first
    assert len(add._registered) == 4


def test_elementwise_kernel_gives_every_input_the_outputs_rank_so_vmap_maps_a_leading_axis():
    add = ljax.ElementwiseKernel("T x, T y", "T z", "z = x + y", "add_vmap")
    x, y = jnp.zeros((2, 4, 3), jnp.float32), jnp.zeros(3, jnp.float32)
    text = lowered(jax.vmap(add, in_axes=(0, None)), x, y)
    assert re.search(r"custom_call @lab_kernel\(.*\(tensor<2x4x3xf32>, tensor<1x1x3xf32>\) -> tensor<2x4x3xf32>", text)
    assert jax.eval_shape(jax.vmap(add, in_axes=(None, 0)), y, x).shape == (2, 4, 3)


@pytest.mark.parametrize("call, error, match", [
    (lambda k: k(jnp.zeros(3, jnp.float32)), TypeError, r"fma1\(\) takes 2 inputs"),
    (lambda k: k(jnp.zeros(3, jnp.float32), jnp.zeros(3, jnp.float16)), TypeError, r"argument 'y' has dtype float16"),
    (lambda k: k(jnp.zeros(3), jnp.zeros(4)), ValueError, r"cannot be broadcast"),
    (lambda k: k(jnp.zeros(3, bool), jnp.zeros(3, bool)), TypeError, r"argument 'x' has dtype bool"),
    (lambda k: k(jnp.zeros(3, jnp.int32), 2 ** 40), OverflowError, r"does not fit"),
    (lambda k: k(True, False), TypeError, r"output .z. would be bool"),
])
def test_elementwise_kernel_refuses_bad_arguments_at_trace_time(call, error, match):
    fma1 = ljax.ElementwiseKernel("T x, T y", "T z", "z = x * y + 1", "fma1")
    with pytest.raises(error, match=match):
        jax.eval_shape(lambda: call(fma1))


def test_raw_kernel_traces_with_outputs_and_aliases():
    scale = scale_kernel(signature="const float*, float, int, float*")
    x = jnp.zeros(1000, jnp.float32)
    text = lowered(lambda x: scale(x, 2.0, x.size), x)
    assert re.search(r"custom_call @lab_kernel\(%arg0\).*\(tensor<1000xf32>\) -> tensor<1000xf32>", text)
    bump = ljax.RawKernel('extern "C" __global__ void bump(float* x, int n) {}', "bump", grid=4, block=256,
                          signature="float*, int", out_shapes=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                          input_output_aliases={0: 0})
    assert "output_operand_aliases" in lowered(lambda x: bump(x, x.size), x)
    several = ljax.RawKernel(SCALE, "scale", grid=1, block=1, out_shapes=[jax.ShapeDtypeStruct((2,), jnp.float32)],
                             signature="const float*, float, int, float*")
    assert isinstance(jax.eval_shape(lambda x: several(x, 1.0, 2), x), tuple)


@pytest.mark.parametrize("make, call, error, match", [
    (lambda: scale_kernel(signature="const float*, float, int, float*"), lambda k, x: k(x, 2.0), TypeError,
     r"scale\(\): the kernel takes 4 arguments, got 3"),
    (lambda: scale_kernel(signature="const float*, float, int, float*"), lambda k, x: k(x.astype(jnp.int32), 2.0, 3),
     TypeError, r"'args\[0\]' has dtype int32; the signature's parameter 0 points to float32"),
    (lambda: scale_kernel(signature="const float*, float, int, float*"), lambda k, x: k(x, 2.0, 2 ** 40),
     OverflowError, r"'args\[2\]' = 1099511627776 does not fit"),
    (lambda: ljax.RawKernel(SCALE, "scale", out_shapes=3, grid=1, block=1), lambda k, x: k(x, 2.0, 3), TypeError,
     r"out_shapes must give a jax.ShapeDtypeStruct"),
    (lambda: ljax.RawKernel(SCALE, "scale", out_shapes=jax.ShapeDtypeStruct((3,), jnp.float32), grid=(1, 1, 1, 1),
                            block=1), lambda k, x: k(x, 2.0, 3), TypeError, r"grid must be an int or a tuple of 1 to 3"),
    (lambda: ljax.RawKernel(SCALE, "scale", out_shapes=jax.ShapeDtypeStruct((3,), jnp.float32), grid=1, block=0),
     lambda k, x: k(x, 2.0, 3), ValueError, r"'block' sizes must be between 1"),
    (lambda: ljax.RawKernel(SCALE, "scale", out_shapes=jax.ShapeDtypeStruct((3,), jnp.complex64), grid=1, block=1),
     lambda k, x: k(x, 2.0, 3), TypeError, r"output 0 has dtype complex64"),
])
def test_raw_kernel_refuses_bad_arguments_at_trace_time(make, call, error, match):
    kernel = make()
    with pytest.raises(error, match=match):
        jax.eval_shape(lambda x: call(kernel, x), jnp.zeros(3, jnp.float32))


def test_running_a_user_kernel_on_the_cpu_says_it_needs_cuda():
    fma1 = ljax.ElementwiseKernel("T x, T y", "T z", "z = x * y + 1", "fma1")
    with jax.default_device(jax.devices("cpu")[0]):
        with pytest.raises(Exception, match="run CUDA C\\+\\+ and only on CUDA devices"):
            jax.block_until_ready(jax.jit(fma1)(jnp.ones(3), jnp.ones(3)))
