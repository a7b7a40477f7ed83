"""lab.jax.RawKernel and lab.jax.ElementwiseKernel on a GPU: a user's kernel inside jax.jit, run on
XLA's buffers through the FFI, against NumPy in float64 - several dtypes, broadcasting, numbers as
parameters, several outputs, the position `i`, vmap, an aliased (in-place) output, one registration
reused by later calls, and the same kernel's result through lab's own call on the same data."""
import numpy as np
import pytest

pytestmark = pytest.mark.gpu

jax = pytest.importorskip("jax")

TOLERANCE = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-6, "float64": 1e-12, "int32": 0, "int8": 0}

SCALE = r"""
extern "C" __global__ void scale(const float* x, float a, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
"""


def gpu_or_skip():
    try:
        return jax.devices("cuda")[0]
    except RuntimeError:
        pytest.skip("jax sees no CUDA device")


def put(array, dtype, device):
    import jax.numpy as jnp
    return jax.device_put(jnp.asarray(array, dtype), device)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int32", "int8"])
@pytest.mark.parametrize("shapes", [((0,), (0,)), ((1,), (1,)), ((7, 5), (5,)), ((3, 1, 4), (1, 6, 1)),
                                    ((1031,), ())])
def test_elementwise_kernel_in_jit(dtype, shapes):
    device = gpu_or_skip()
    import lab.jax as ljax
    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(1)
    a = rng.integers(-5, 5, shapes[0]).astype(np.float64)
    b = rng.integers(-5, 5, shapes[1]).astype(np.float64)
    fma1 = ljax.ElementwiseKernel("T x, T y", "T z", "z = x * y + 1", "fma1")
    out = jax.jit(fma1)(put(a, dtype, device), put(b, dtype, device))
    assert out.shape == np.broadcast_shapes(a.shape, b.shape) and out.dtype == np.dtype(out.dtype)
    np.testing.assert_allclose(np.asarray(out, np.float64), a * b + 1, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


def test_elementwise_kernel_numbers_outputs_and_index():
    device = gpu_or_skip()
    import jax.numpy as jnp
    import lab.jax as ljax
    split = ljax.ElementwiseKernel("float32 x, float32 a, int32 shift", "float32 scaled, int32 where",
                                   "scaled = a * x; where = (int)i + shift", "split")
    x = put(np.linspace(-1, 1, 999), jnp.float32, device)
    scaled, where = jax.jit(lambda x: split(x, 3.0, 7))(x)
    np.testing.assert_allclose(np.asarray(scaled), 3.0 * np.asarray(x), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(where), np.arange(999) + 7)
    again = jax.jit(lambda x: split(x, 3.0, 7))(x + 1)  # the same types and numbers: the same registration
    np.testing.assert_allclose(np.asarray(again[0]), 3.0 * (np.asarray(x) + 1), rtol=1e-6)
    assert len(split._registered) == 1
    jax.jit(lambda x: split(x, 2.0, 7))(x)  # a new number: a new registration
    assert len(split._registered) == 2


def test_elementwise_kernel_vmap_and_grad_free_use():
    device = gpu_or_skip()
    import lab.jax as ljax
    add = ljax.ElementwiseKernel("T x, T y", "T z", "z = x + y", "add_in_vmap")
    x = put(np.arange(24).reshape(2, 3, 4), np.float32, device)
    y = put(np.arange(4), np.float32, device)
    out = jax.jit(jax.vmap(add, in_axes=(0, None)))(x, y)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) + np.asarray(y))
    out = jax.jit(jax.vmap(add, in_axes=(None, 0)))(y, x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) + np.asarray(y))


def test_elementwise_kernel_matches_labs_own_call():
    device = gpu_or_skip()
    torch = pytest.importorskip("torch")
    import lab
    import lab.jax as ljax
    operation = "z = sinf(x) * y"
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(4097).astype(np.float32), rng.standard_normal(4097).astype(np.float32)
    in_jit = jax.jit(ljax.ElementwiseKernel("float32 x, float32 y", "float32 z", operation, "sin_mul"))(
        put(a, np.float32, device), put(b, np.float32, device))
    direct = lab.ElementwiseKernel("float32 x, float32 y", "float32 z", operation, "sin_mul")
    z = torch.full((4097,), float("nan"), device="cuda")
    direct(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), z)
    np.testing.assert_array_equal(np.asarray(in_jit), z.cpu().numpy())


@pytest.mark.parametrize("n", [1, 255, 256, 10007])
def test_raw_kernel_in_jit(n):
    device = gpu_or_skip()
    import jax.numpy as jnp
    import lab.jax as ljax
    scale = ljax.RawKernel(SCALE, "scale", out_shapes=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                           grid=lambda x: (x.size + 255) // 256, block=256, signature="const float*, float, int, float*")
    x = put(np.linspace(-3, 3, n), jnp.float32, device)
    y = jax.jit(lambda x: scale(x, 2.5, x.size))(x)
    np.testing.assert_allclose(np.asarray(y), 2.5 * np.asarray(x), rtol=1e-6)
    ys = jax.jit(jax.vmap(lambda x: scale(x, -1.0, x.size)))(jnp.stack([x, 2 * x]))
    np.testing.assert_allclose(np.asarray(ys), -np.stack([np.asarray(x), 2 * np.asarray(x)]), rtol=1e-6)


def test_raw_kernel_without_signature_several_outputs_and_aliasing():
    device = gpu_or_skip()
    import jax.numpy as jnp
    import lab.jax as ljax
    code = r"""
    extern "C" __global__ void stats(const double* x, long long n, double* total, int* count) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            double s = 0; for (long long i = 0; i < n; i++) s += x[i];
            *total = s; *count = (int)n;
        }
    }
    extern "C" __global__ void bump(float* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] += 1.0f;
    }"""
    jax.config.update("jax_enable_x64", True)
    stats = ljax.RawKernel(code, "stats", grid=1, block=1,
                           out_shapes=(jax.ShapeDtypeStruct((), jnp.float64), jax.ShapeDtypeStruct((), jnp.int32)))
    x = put(np.arange(100.0), jnp.float64, device)
    total, count = jax.jit(lambda x: stats(x, 100))(x)  # an int passes as long long without a signature
    assert float(total) == 4950.0 and int(count) == 100
    with pytest.raises(TypeError, match="bytes"):
        jax.jit(lambda x: stats(x, np.int32(100))).lower(x)  # 4 bytes where the kernel takes 8
    bump = ljax.RawKernel(code, "bump", grid=4, block=256, signature="float*, int",
                          out_shapes=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), input_output_aliases={0: 0})
    # aliased: the output is the argument's buffer, so the kernel's one pointer is both; the call
    # passes only the argument, the output's pointer is the same memory
    bumped = jax.jit(lambda x: bump(x, x.size), donate_argnums=0)(put(np.zeros(1000), jnp.float32, device))
    np.testing.assert_array_equal(np.asarray(bumped), np.ones(1000, np.float32))
