"""The generated fuzz of the Python faces: every public function of lab.nn (torch) or lab.jax,
every parameter, hostile arguments.

tests/fuzz_calls.py does this for lab.lab from the binding's signature tables; here the functions
are a face's public ones and their parameters come from their annotations (the ones lab/_arguments.py
checks with), so a function or a keyword added later is fuzzed the day it lands. Each call starts
from plausible arrays - on the GPU where there is one, so the calls reach lab's kernels (lab.jax's
through XLA's FFI); on the CPU otherwise, where the faces run the frameworks' own formulas - and
replaces one to three arguments with a draw from the parameter kind's hostile families: None, wrong
types, arrays of the wrong dtype, rank, device or layout, NaN and huge numbers, objects whose
__index__ / __float__ / __bool__ raises or empties a list of the same call (tests/hostile.py).

The faces' contract is the binding's (docs/design.md, "What every entry point guarantees") with the
frameworks' own refusals allowed: no crash and no hang (children, as in fuzz_calls); no exception
but a TypeError, ValueError, OverflowError, IndexError, RuntimeError or NotImplementedError (or a
subclass: torch and jax raise their own), lab.CudaError, ImportError or the hostile object's own -
never a SystemError, nor an AttributeError from a wrong type reaching code that assumed an array;
every TypeError names the argument it is about; and on the GPU, no call leaves an asynchronous CUDA
error behind (each call's work is waited for: a kernel that read or wrote outside its arrays would
show here).

    python tests/fuzz_faces.py --face nn --calls 200000 --jobs 4   # make fuzz runs both faces
    python tests/fuzz_faces.py --face jax --seed 7 --call 1234     # one call again, printed first
"""
import inspect
import os
import random
import sys
import typing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import fuzz_calls  # noqa: E402
from hostile import HostileError  # noqa: E402

NAN, INF = float("nan"), float("inf")
FLOATS = ("float32", "bfloat16", "float16")


class TorchFace:
    """lab.nn on torch tensors."""
    name = "nn"

    def __init__(self):
        import torch
        import lab
        import lab.nn
        self.torch, self.module = torch, lab.nn
        self.array_types = (torch.Tensor,)
        self.on_gpu = lab.is_available() and torch.cuda.is_available()
        self.device = "cuda" if self.on_gpu else "cpu"

    def array(self, values, dtype):
        torch = self.torch
        return torch.from_numpy(values).to(self.device, getattr(torch, dtype))

    def hostile_arrays(self, good, rng):
        torch = self.torch
        return (lambda: good.to(rng.choice((torch.int64, torch.bool, torch.float64, torch.uint8))),
                lambda: torch.zeros((), dtype=good.dtype, device=good.device),  # rank 0
                lambda: good.reshape(1, 1, *good.shape, 1) if good.dim() < 4 else good[0],  # another rank
                lambda: good.cpu() if good.is_cuda else good.to(torch.float64),
                lambda: good.transpose(0, -1),  # strided (itself where it has one dimension)
                lambda: good[..., :0],  # empty
                lambda: good.reshape(-1)[:1].expand(*good.shape) if good.numel() else good,  # stride 0
                lambda: good.requires_grad_(good.is_floating_point()))

    def module_value(self):
        return self.torch.nn.Linear(4, 4)

    def wait(self, result):
        """None, or the asynchronous CUDA error the call left."""
        if not self.on_gpu:
            return None
        try:
            self.torch.cuda.synchronize()
        except RuntimeError as caught:
            return caught
        return None


class JaxFace:
    """lab.jax on JAX arrays, called as they are (each call traced and compiled by jax.jit's machinery)."""
    name = "jax"

    def __init__(self):
        import jax
        import jax.numpy as jnp
        import lab.jax
        self.jax, self.jnp, self.module = jax, jnp, lab.jax
        self.array_types = (jax.Array,)
        self.on_gpu = any(d.platform == "gpu" for d in jax.devices())

    def array(self, values, dtype):
        return self.jnp.asarray(values, dtype=getattr(self.jnp, dtype))

    def hostile_arrays(self, good, rng):
        jnp = self.jnp
        return (lambda: good.astype(rng.choice((jnp.int32, jnp.bool_, jnp.uint8))),
                lambda: jnp.zeros((), good.dtype),  # rank 0
                lambda: good.reshape(1, 1, *good.shape, 1) if good.ndim < 4 else good[0],  # another rank
                lambda: good.T,  # the axes reversed
                lambda: good[..., :0],  # empty
                lambda: __import__("numpy").asarray(good, dtype="float64"))  # a NumPy array

    def module_value(self):
        return None

    def wait(self, result):
        if not self.on_gpu:
            return None
        try:
            self.jax.block_until_ready(result)
        except Exception as caught:  # noqa: BLE001 - only a device fault counts, below
            text = str(caught)
            return caught if "illegal" in text or "CUDA_ERROR" in text or "cudaError" in text else None
        return None


FACES = {"nn": TorchFace, "jax": JaxFace}


def kind_of(hint, array_types) -> typing.Tuple[str, bool]:
    """(kind, accepts None) of a parameter from its type hint."""
    parts = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
    none_ok = type(None) in parts
    parts = tuple(p for p in parts if p is not type(None))
    origins = {typing.get_origin(p) for p in parts}
    if len(parts) == 1 and parts[0] in array_types:
        return "array", none_ok
    if int in parts and len(parts) == 2 and origins & {tuple}:  # an int or (left, right): a window
        return "pair", none_ok
    if int in parts and len(parts) == 2:  # an int or a sequence of ints: a shape or axes
        return "shape", none_ok
    if tuple in origins:
        return "pair", none_ok
    simple = {(int,): "int", (float,): "real", (bool,): "flag", (str,): "choice"}
    if parts in simple:
        return simple[parts], none_ok
    if len(parts) == 1 and isinstance(parts[0], type) and parts[0].__name__ == "Module":
        return "module", none_ok
    return "any", True


def entry_points(face):
    """{name: (function, parameters)}: the face's public functions, each parameter (name, kind,
    accepts None, required, positional) as fuzz_calls gives lab.lab's."""
    module = face.module
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    found = {}
    for name in names:
        fn = getattr(module, name)
        if not inspect.isfunction(fn) or not fn.__module__.startswith("lab"):
            continue  # classes (modules, kernels), and what the face imports (jax, partial)
        hints = typing.get_type_hints(fn)
        params = []
        for p in inspect.signature(fn).parameters.values():
            kind, none_ok = kind_of(hints.get(p.name, typing.Any), face.array_types)
            params.append((p.name, kind, none_ok or p.default is None, p.default is p.empty,
                           p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)))
        found[f"{module.__name__}.{name}"] = (fn, tuple(params))
    return found


class Call(fuzz_calls.Call):
    """One call being built: its random source, hostile hooks, and the shapes its arrays share."""

    def __init__(self, rng, face):
        super().__init__(rng)
        import numpy as np
        self.face, self.np = face, np
        self.values = np.random.default_rng(rng.randrange(2 ** 32))
        self.dtype = rng.choice(FLOATS)
        self.rows, self.width = rng.choice((0, 1, 3, 17)), rng.choice((8, 64, 1000))
        self.heads, self.positions = rng.choice((1, 2, 4)), rng.choice((0, 1, 5, 33))
        self.four_d = rng.random() < 0.5

    def array(self, name):
        np, rng = self.np, self.rng
        if "target" in name:
            return self.face.array(self.values.integers(0, self.width, self.rows), "int32")
        if "cu_seqlens" in name:
            return self.face.array(np.array([0, self.positions]), "int32")
        if "position" in name:
            return self.face.array(np.arange(self.positions)[None], "int32")
        if name in ("weight", "bias") and not self.four_d:
            shape = rng.choice(((self.width,), (self.width, self.width), (7, self.width)))
        elif self.four_d:
            shape = (1, self.heads, self.positions, 64)
        else:
            shape = (self.rows, self.width)
        return self.face.array(self.values.standard_normal(shape).astype(np.float32), self.dtype)


def plausible(call, kind, name):
    rng = call.rng
    if kind == "array":
        return call.array(name)
    if kind == "shape":
        return rng.choice((-1, 0, (0, 1), None)) if name == "axis" else rng.choice((call.width, (call.width,)))
    if kind == "pair":
        return rng.choice((None, (3, 0), (-1, -1), 4))
    if kind == "int":
        return {"dim": rng.choice((-1, 0, 1)), "axis": rng.choice((-1, 0)), "ignore_index": -100,
                "unsqueeze_dim": 1}.get(name, call.positions if "max_seqlen" in name else None if "bytes" in name else 1)
    if kind == "real":
        return {"eps": 1e-5, "scale": rng.choice((None, 0.125)), "ddof": rng.choice((0, 1))}.get(name, 0.0)
    if kind == "flag":
        return rng.random() < 0.5
    if kind == "choice":
        return rng.choice(("mean", "sum", "none"))
    if kind == "module":
        return call.face.module_value()
    if name in ("alpha", "beta", "s"):  # the elementwise ops' Python numbers
        return rng.choice((2, 0.5))
    if name == "ord":
        return rng.choice((1, 2, float("inf")))
    return None


def hostile_array(call, name):
    rng = call.rng
    good = call.array(name)
    options = call.face.hostile_arrays(good, rng) + (lambda: rng.choice(fuzz_calls.WRONG_TYPES), lambda: [good])
    return rng.choice(options)()


def hostile_value(call, kind, name):
    rng = call.rng
    roll = rng.random()
    if roll < 0.15:
        return None
    if kind == "array":
        return hostile_array(call, name)
    if roll < 0.4 and kind in ("int", "real", "flag", "shape"):
        valid = plausible(call, kind, name)
        return fuzz_calls.hook(call, valid if isinstance(valid, (int, float)) else 1)
    if kind == "int":
        return rng.choice((-1, 2 ** 63, -2 ** 63 - 1, 2 ** 31, 1.5, "1", True))
    if kind == "real":
        return rng.choice((NAN, INF, -INF, -1.0, 1e300, "x", 1j, -0.0))
    if kind in ("shape", "pair"):
        draws = (fuzz_calls.hook(call, 1), -1, 0, 2 ** 40, "a", None, 1.5)
        items = [rng.choice(draws) for _ in range(rng.randint(0, 3))]
        call.containers.append(items)
        return rng.choice((items, tuple(items), -1, 0, 2 ** 40))
    if kind == "choice":
        return rng.choice(("", "bogus", "mean ", 1, b"mean"))
    return rng.choice(fuzz_calls.WRONG_TYPES + (NAN, True, 2 ** 70, None))


def make_call(points, names, seed, index, face):
    """Call `index` of the run seeded `seed`: (name, function, args, kwargs)."""
    rng = random.Random(seed * 1000003 + index)
    call = Call(rng, face)
    name = names[rng.randrange(len(names))]
    fn, params = points[name]
    chosen = [p for p in params if p[3] or rng.random() < 0.3]
    hostile_names = {p[0] for p in rng.sample(chosen, min(rng.choice((1, 1, 1, 2, 3)), len(chosen)))}
    args, kwargs = fuzz_calls.assemble(call, params, chosen, hostile_names, (hostile_value, plausible))
    return name, fn, args, kwargs


def allowed_errors():
    import lab
    return (TypeError, ValueError, OverflowError, IndexError, RuntimeError, NotImplementedError, lab.CudaError,
            ImportError, HostileError)


def check_outcome(params, error, device_error):
    """The broken clauses of the faces' contract for one call (empty: kept)."""
    broken = []
    if device_error is not None:
        broken.append(f"left an asynchronous CUDA error: {device_error}")
    if error is None:
        return broken
    if not isinstance(error, allowed_errors()):
        broken.append(f"raised {type(error).__name__}, which the contract does not allow: {error}")
    if type(error) is TypeError and not any(f"'{p[0]}'" in str(error) for p in params):
        broken.append(f"TypeError names no argument: {error}")
    return broken


def the_face():
    return FACES[os.environ.get("LAB_FUZZ_FACE", "nn")]()


def run_range(seed, start, stop, trace=None):
    """Runs calls [start, stop) of the seeded run of the face LAB_FUZZ_FACE names; returns its summary."""
    face = the_face()
    points = entry_points(face)
    names = sorted(points)
    counts, violations = {}, []
    for index in fuzz_calls.traced(start, stop, trace):
        name, fn, args, kwargs = make_call(points, names, seed, index, face)
        result, error = fuzz_calls.outcome_of(fn, args, kwargs)
        device_error = face.wait(result)
        broken = check_outcome(points[name][1], error, device_error)
        fuzz_calls.record(counts, violations, index, (name, args, kwargs), error, broken)
        if device_error is not None:
            break  # the context is lost: the rest of the range would only repeat it
    return {"counts": counts, "violations": violations, "on_gpu": face.on_gpu}


def show_call(seed, index):
    face = the_face()
    points = entry_points(face)
    name, fn, call_args, kwargs = make_call(points, sorted(points), seed, index, face)
    return fuzz_calls.describe(name, call_args, kwargs, limit=10000)


def main():
    parser = fuzz_calls.parser_for(__doc__.split("\n")[0], calls=5000, chunk=2500, timeout=1200)
    parser.add_argument("--face", choices=sorted(FACES), default=os.environ.get("LAB_FUZZ_FACE", "nn"))
    args = parser.parse_args()
    os.environ["LAB_FUZZ_FACE"] = args.face  # the children's face (run_children passes the environment on)
    return fuzz_calls.run_command(args, run_range, show_call, script=__file__, hide_gpus=False,
                                  reproducer_flags=f" --face {args.face}")


if __name__ == "__main__":
    sys.exit(main())
