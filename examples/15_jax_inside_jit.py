"""Example 15 - lab inside jax.jit: lab's kernels and your own, on XLA's stream, differentiable.

lab.jax gives jax code lab's ops as XLA FFI calls (the handlers are C: src/binding/xla_ffi.c): a
jitted loss of an RMSNorm and a cross-entropy, its gradient through lab's backward kernels, checked
against the same function in jax.numpy, and an SGD step with lab's norm and axpby (their numbers the
calls' attributes). Then your own CUDA C++ inside jit: an ElementwiseKernel and
a RawKernel, compiled by NVRTC, launched on XLA's stream. On a jax without a GPU the built-in ops run
their jax.numpy formulas (so the first half still checks out); your own kernels need CUDA.
Run: python3 examples/15_jax_inside_jit.py
"""
from _common import need

jax = need("jax")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lab.jax as ljax  # noqa: E402

on_gpu = any(d.platform == "gpu" for d in jax.devices())
key = jax.random.PRNGKey(0)
x = jax.random.normal(key, (64, 512), jnp.float32)
params = {"w": jnp.ones(512), "head": jax.random.normal(jax.random.PRNGKey(1), (512, 1000)) * 0.05}
target = jax.random.randint(jax.random.PRNGKey(2), (64,), 0, 1000)


@jax.jit
def loss(params, x, target):
    h = ljax.rms_norm(x, params["w"], eps=1e-6)
    return ljax.cross_entropy(h @ params["head"], target)


def plain_loss(params, x, target):
    h = x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * params["w"]
    logits = h @ params["head"]
    return jnp.mean(jax.nn.logsumexp(logits, -1) - jnp.take_along_axis(logits, target[:, None], -1)[:, 0])


value, grads = jax.value_and_grad(loss)(params, x, target)
want, want_grads = jax.value_and_grad(plain_loss)(params, x, target)
np.testing.assert_allclose(value, want, rtol=1e-4)
for name in params:
    np.testing.assert_allclose(grads[name], want_grads[name], rtol=1e-3, atol=1e-5)
where = "lab's kernels through XLA's FFI" if on_gpu else "their jax.numpy formulas (no GPU here)"
print(f"rms_norm + cross_entropy inside jit, with jax.grad: {where}, loss {float(value):.4f} as jax.numpy's")

# The update with lab's elementwise ops and reductions: the gradient's norm and w - lr * g in one pass
# each. lr is a Python number, so it travels as the call's attribute (a traced value would be refused).
lr = 0.1
step = jax.jit(lambda w, g: (ljax.norm(g), ljax.axpby(1.0, w, -lr, g)))
grad_norm, new_head = step(params["head"], grads["head"])
np.testing.assert_allclose(grad_norm, jnp.linalg.vector_norm(grads["head"]), rtol=1e-5)
np.testing.assert_allclose(new_head, params["head"] - lr * grads["head"], rtol=1e-6, atol=1e-7)
print(f"an SGD step inside jit: gradient norm {float(grad_norm):.4f} (ljax.norm), w - lr * g (ljax.axpby)")

if not on_gpu:
    print("skipped: your own kernels inside jit (lab.jax.ElementwiseKernel, RawKernel) need a CUDA GPU")
    raise SystemExit(0)

fma1 = ljax.ElementwiseKernel("T x, T y", "T z", "z = x * y + 1", "fma1")
y = jax.random.normal(jax.random.PRNGKey(3), (512,), jnp.float32)
z = jax.jit(fma1)(x, y)  # y broadcasts over x's rows, as NumPy's rules say
# The GPU contracts x * y + 1 into one fused multiply-add, rounded once: a last bit may differ from
# jax.numpy's two roundings, hence the absolute tolerance for the results near zero.
np.testing.assert_allclose(z, x * y + 1, rtol=1e-6, atol=1e-6)
print("ElementwiseKernel 'z = x * y + 1' inside jit: broadcast, typed by T, matches jax.numpy")

scale = ljax.RawKernel(r"""
extern "C" __global__ void scale(const float* x, float a, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}""", "scale", out_shapes=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
    grid=lambda x: (x.size + 255) // 256, block=256, signature="const float*, float, int, float*")
doubled = jax.jit(lambda x: scale(x, 2.0, x.size))(x)  # parameters: the arguments, then the output
np.testing.assert_allclose(doubled, 2 * x, rtol=1e-6)
print("RawKernel 'scale' inside jit: your kernel's parameters from the arguments, then the output")
