"""lab.jax.RawKernel and lab.jax.ElementwiseKernel: your own CUDA kernels inside jax.jit.

    scale = ljax.RawKernel(code, "scale", out_shapes=lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                           grid=lambda x: (x.size + 255) // 256, block=256)
    y = scale(x, 2.0, np.int32(x.size))     # parameters: the arguments in order, then the outputs
    fma1 = ljax.ElementwiseKernel("T x, T y", "T z", "z = x * y + 1", "fma1")
    z = fma1(x, y)                          # outputs of the broadcast shape, of the types the inputs decide

Each wraps the lab kernel of the same name (lab.RawKernel, lab.ElementwiseKernel: the same source,
compiled by NVRTC the same way) as an FFI call to lab's target lab_kernel. At trace time a call
registers with the C binding, once per combination of launch settings, dtypes and numbers, what a
launch needs beyond XLA's buffers - the numbers converted to their parameters' C types, each buffer's
dtype, grid and block - and passes that registration's number as the call's `kernel` attribute.
At run time the handler (src/binding/xla_ffi.c) finds the registration and launches the kernel on
XLA's stream through lab's op driver (src/binding/raw_kernel.c, elementwise_kernel.c). A RawKernel
is compiled at trace time where there is a GPU (its parameter sizes check the call), an
ElementwiseKernel at its first run; each is loaded at its first run.

Numbers (int, float, bool, NumPy scalars) are constants of the traced computation: a new value is
a new registration, as a Python number in jit is a new trace. Arrays are jax arrays (or anything
jnp.asarray takes). Off CUDA devices there is no formula to fall back on: running a user's kernel
on another platform is an error saying so; tracing and lowering work anywhere. vmap: an
ElementwiseKernel maps over a leading axis in one launch (every input is first given the output's
rank, so the mapped axis leads every operand); a RawKernel runs once per mapped element, its grid
being one element's."""
import jax
import jax.numpy as jnp
import numpy as np

from . import lab as _core
from ._elementwise_kernel import _ARRAY_DTYPES, _broadcast
from ._elementwise_kernel import ElementwiseKernel as _ElementwiseKernel
from ._jit import RawKernel as _RawKernel


def _is_number(value):
    return isinstance(value, (bool, int, float, np.generic))


def _number_key(value):
    """A number as part of a registration's key: its type too (1, 1.0 and True are different
    parameters' bytes), and NaN equal to itself."""
    return (type(value), repr(value))


def _lab_dtype(dtype, func, name):
    """The index of a jax dtype among lab's array dtypes (the binding's byte for it)."""
    found = jnp.dtype(dtype).name
    if found not in _ARRAY_DTYPES:
        raise TypeError(f"{func}(): {name} has dtype {found}; lab's kernels take arrays of "
                        f"{', '.join(_ARRAY_DTYPES)}")
    return _ARRAY_DTYPES.index(found)


def _shape_dtype_structs(out_shapes, arrays, func):
    """(tuple of jax.ShapeDtypeStruct, whether one was given rather than a sequence)."""
    spec = out_shapes(*arrays) if callable(out_shapes) else out_shapes
    single = not isinstance(spec, (tuple, list))
    specs = (spec,) if single else tuple(spec)
    if not specs or not all(hasattr(s, "shape") and hasattr(s, "dtype") for s in specs):
        raise TypeError(f"{func}(): out_shapes must give a jax.ShapeDtypeStruct or a non-empty sequence of them, "
                        f"got {spec!r}")
    return tuple(jax.ShapeDtypeStruct(tuple(s.shape), s.dtype) for s in specs), single


def _launch_dimensions(value, arrays, func, what):
    """grid or block: an int or a tuple of 1 to 3 ints, or a function of the array arguments giving one."""
    dims = value(*arrays) if callable(value) else value
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                                          for d in dims):
        raise TypeError(f"{func}(): {what} must be an int or a tuple of 1 to 3 ints (or a function of the array "
                        f"arguments giving one), got {dims!r}")
    return tuple(int(d) for d in dims)


class RawKernel:
    """A CUDA C++ kernel as a function of jax arrays, usable inside jax.jit.

    `code`, `name`, `options`, `signature`: as lab.RawKernel's. `out_shapes`: the outputs - a
    jax.ShapeDtypeStruct, a sequence of them, or a function of the array arguments giving either.
    `grid`, `block`: an int or a tuple of 1 to 3 ints, or a function of the array arguments giving
    one. `shared_mem`: dynamic shared memory in bytes. `input_output_aliases`: {argument index: output
    index} - the output is the argument's buffer, written in place (jax.ffi.ffi_call's; the argument
    index counts arrays only), and has no parameter of its own.

    `kernel(*args)` launches it with these parameters: each argument in order - an array as its
    device pointer, a number (fixed at trace time) as its C type (the signature's, or its own) - then
    one pointer per output not aliased. It returns the output, or a tuple of them when out_shapes gave a sequence.
    Every check lab.RawKernel makes at a call (parameter count, sizes, signature dtypes) is made at
    trace time."""

    def __init__(self, code, name, *, out_shapes, grid, block, shared_mem=0, options=(), signature=None,
                 input_output_aliases=None):
        self.kernel = _RawKernel(code, name, options=options, signature=signature)
        self.name = name
        self.out_shapes, self.grid, self.block, self.shared_mem = out_shapes, grid, block, shared_mem
        self.input_output_aliases = dict(input_output_aliases or {})
        self._registered = {}

    def __call__(self, *args):
        func = self.name
        arrays = [jnp.asarray(a) for a in args if not _is_number(a)]
        outs, single = _shape_dtype_structs(self.out_shapes, arrays, func)
        grid = _launch_dimensions(self.grid, arrays, func, "grid")
        block = _launch_dimensions(self.block, arrays, func, "block")
        dtypes = bytes([_lab_dtype(a.dtype, func, f"array argument {k}") for k, a in enumerate(arrays)]
                       + [_lab_dtype(o.dtype, func, f"output {k}") for k, o in enumerate(outs)])
        aliased = set(self.input_output_aliases.values())
        own = [o for o in range(len(outs)) if o not in aliased]  # an aliased output is its argument's memory
        items = tuple(a if _is_number(a) else None for a in args) + (None,) * len(own)
        parameter_buffers = bytes(list(range(len(arrays))) + [len(arrays) + o for o in own])
        key = (grid, block, self.shared_mem, dtypes, parameter_buffers,
               tuple(_number_key(a) if a is not None else None for a in items))
        number = self._registered.get(key)
        if number is None:
            number = self._register(grid, block, items, dtypes, parameter_buffers)
            self._registered[key] = number
        call = jax.ffi.ffi_call("lab_kernel", outs, vmap_method="sequential",
                                input_output_aliases=self.input_output_aliases)
        results = call(*arrays, kernel=np.int64(number))
        return results[0] if single else tuple(results)

    def _register(self, grid, block, items, dtypes, parameter_buffers):
        """Registers the launch, checked against the kernel's parameter sizes: compiled now (for the
        GPU it will load on) where there is a GPU; where there is none, nothing can run it, and the
        signature alone (if given) is checked."""
        sizes = self.kernel.module._lowered_and_sizes(self.name)[1] if _core.is_available() else None
        return self.kernel._ffi_register(grid, block, self.shared_mem, items, dtypes, parameter_buffers, sizes,
                                         self.kernel._signature)

    def __repr__(self):
        return f"<lab.jax.RawKernel {self.name!r}>"


class ElementwiseKernel:
    """lab.ElementwiseKernel (CuPy's syntax: in_params, out_params, operation, name, preamble,
    options) as a function of jax arrays, usable inside jax.jit. `kernel(*inputs)` returns the
    outputs (one array, or a tuple for several) of the inputs' broadcast shape and of the types the
    parameters resolve to; inputs are jax arrays or numbers (fixed at trace time)."""

    def __init__(self, in_params, out_params, operation, name="kernel", *, preamble="", options=()):
        self.kernel = _ElementwiseKernel(in_params, out_params, operation, name, preamble=preamble, options=options)
        self.name = name
        self._registered = {}

    def __call__(self, *inputs):
        kernel, func = self.kernel, self.name
        if len(inputs) != len(kernel.inputs):
            raise TypeError(f"{func}() takes {len(kernel.inputs)} inputs (the outputs are returned), "
                            f"got {len(inputs)}")
        arrays, values, key = [], [], []
        for param, value in zip(kernel.inputs, inputs):
            if _is_number(value):
                key.append({bool: "?", int: "q", float: "d"}.get(type(value)) or kernel._number_letter(param, value))
                values.append(value)
            else:
                array = jnp.asarray(value)
                key.append(str(_lab_dtype(array.dtype, func, f"argument '{param.name}'")))
                arrays.append(array)
                values.append(None)
        n_outputs = len(kernel.outputs)
        out_types = [ptype for _, ptype in kernel._resolve(("".join(key) + "-" * n_outputs).encode())[1][len(inputs):]]
        for param, ptype in zip(kernel.outputs, out_types):
            if ptype not in _ARRAY_DTYPES:
                raise TypeError(f"{func}(): output '{param.name}' would be {ptype}, which is not an array dtype of lab's")
        full_key = ("".join(key) + "".join(str(_ARRAY_DTYPES.index(t)) for t in out_types)).encode()
        shape = _broadcast([a.shape for a in arrays], func)
        arrays = [a.reshape((1,) * (len(shape) - a.ndim) + a.shape) for a in arrays]
        registration = (full_key, tuple(_number_key(v) if v is not None else None for v in values))
        number = self._registered.get(registration)
        if number is None:
            letters = kernel._input_letters(kernel._resolve(full_key)[1])
            number = kernel._ffi_register(full_key, tuple(values), letters)
            self._registered[registration] = number
        outs = tuple(jax.ShapeDtypeStruct(shape, jnp.dtype(t)) for t in out_types)
        results = jax.ffi.ffi_call("lab_kernel", outs, vmap_method="expand_dims")(*arrays, kernel=np.int64(number))
        return results[0] if n_outputs == 1 else tuple(results)

    def source(self, *types):
        """The CUDA source for arguments of these types (see lab.ElementwiseKernel.source)."""
        return self.kernel.source(*types)

    def __repr__(self):
        return f"<lab.jax.ElementwiseKernel {self.name!r}>"
