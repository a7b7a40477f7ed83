"""What the CPU-side lab.jax tests share (tests/test_jax.py, tests/test_jax_ops.py): jax imported or
the module skipped, float64 enabled, every test on jax's CPU device (on a GPU machine too - the
*_gpu.py files run lab's kernels), random arrays, and a function lowered for CUDA as StableHLO text."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def on_the_cpu():
    """The jax.numpy path: a test module takes it by importing this fixture."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def rand(*shape, dtype=jnp.float64, positive=False):
    """Standard normal values (positive: their magnitudes plus 0.5) as a jax array."""
    values = RNG.standard_normal(shape)
    return jnp.asarray(np.abs(values) + 0.5 if positive else values, dtype)


def cuda_text(fn, *args):
    """fn jitted and lowered for CUDA (no GPU needed): the StableHLO text with its FFI calls."""
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()
