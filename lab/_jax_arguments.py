"""lab.jax's argument rules (lab/_arguments.py): an array argument is a JAX array - a traced one
inside jit - or what jax.numpy.asarray makes one of (a NumPy array or scalar, a Python number), made
a JAX array once, before the body. `@checked` on every public function of lab.jax."""
import jax
import jax.numpy as jnp
import numpy as np

from ._arguments import Rules

Array = jax.Array


def _is_array(value) -> bool:
    return isinstance(value, (jax.Array, np.ndarray, np.generic, int, float))


def as_array(value):
    """value as a JAX array: itself where it is one (a traced one too), else jax.numpy.asarray's."""
    return value if isinstance(value, jax.Array) else jnp.asarray(value)


RULES = Rules("lab.jax", {Array: (_is_array, "a JAX array (or a NumPy array or number)", as_array)},
              not_reals=(jax.Array, np.ndarray))
checked = RULES.checked
