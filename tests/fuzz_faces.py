"""The generated fuzz of lab.nn: every public function, every parameter, hostile arguments.

tests/fuzz_calls.py does this for lab.lab from the binding's signature tables; here the functions
are lab.nn's public ones and their parameters come from their annotations (the same ones
lab/nn/_arguments.py checks with), so a function or a keyword added later is fuzzed the day it
lands. Each call starts from plausible torch tensors - on the GPU where there is one, so the calls
reach lab's kernels through the binding; on the CPU otherwise, where lab.nn runs torch's functions -
and replaces one to three arguments with a draw from the parameter kind's hostile families: None,
wrong types, tensors of the wrong dtype, rank, device or layout, NaN and huge numbers, objects whose
__index__ / __float__ / __bool__ raises or empties a list of the same call (tests/hostile.py).

The faces' contract is the binding's (docs/design.md, "What every entry point guarantees") with
torch's own refusals allowed: no crash and no hang (children, as in fuzz_calls); no exception
outside TypeError, ValueError, OverflowError, IndexError, RuntimeError and NotImplementedError
(torch's), lab.CudaError, ImportError and the hostile object's own - never a SystemError or an
AttributeError from a wrong type reaching code that assumed a tensor; every TypeError names the
argument it is about; and on the GPU, no call leaves an asynchronous CUDA error behind (the stream
is synchronised after each call: a kernel that read or wrote outside its tensors would show here).

    python tests/fuzz_faces.py --calls 100000 --jobs 4     # make fuzz runs it with the others
    python tests/fuzz_faces.py --seed 7 --call 1234         # one call again, printed first
"""
import argparse
import inspect
import json
import os
import random
import sys
import time
import typing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import fuzz_calls  # noqa: E402

ALLOWED_NAMES = fuzz_calls.ALLOWED_NAMES + ("RuntimeError", "NotImplementedError")
NAN, INF = float("nan"), float("inf")


def kind_of(hint) -> typing.Tuple[str, bool]:
    """(kind, accepts None) of a parameter from its type hint."""
    import torch
    parts = typing.get_args(hint) if typing.get_origin(hint) is typing.Union else (hint,)
    none_ok = type(None) in parts
    parts = tuple(p for p in parts if p is not type(None))
    origins = {typing.get_origin(p) for p in parts}
    if parts == (torch.Tensor,):
        return "tensor", none_ok
    if int in parts and len(parts) == 2:  # int or a sequence of ints: a normalized shape
        return "shape", none_ok
    if tuple in origins:
        return "pair", none_ok
    if parts == (int,):
        return "int", none_ok
    if parts == (float,):
        return "real", none_ok
    if parts == (bool,):
        return "flag", none_ok
    if parts == (str,):
        return "choice", none_ok
    if len(parts) == 1 and isinstance(parts[0], type) and issubclass(parts[0], torch.nn.Module):
        return "module", none_ok
    return "any", True


def entry_points():
    """{name: (function, parameters)}: lab.nn's public functions, each parameter (name, kind, accepts
    None, required, positional) as fuzz_calls gives lab.lab's."""
    import lab.nn
    found = {}
    for name in lab.nn.__all__:
        fn = getattr(lab.nn, name)
        if not inspect.isfunction(fn):
            continue  # the modules and Patched: their calls are these functions
        hints = typing.get_type_hints(fn)
        params = []
        for p in inspect.signature(fn).parameters.values():
            kind, none_ok = kind_of(hints.get(p.name, typing.Any))
            params.append((p.name, kind, none_ok or p.default is None, p.default is p.empty,
                           p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)))
        found[f"lab.nn.{name}"] = (fn, tuple(params))
    return found


class Call(fuzz_calls.Call):
    """One call being built: its random source, hostile hooks, and the shapes its tensors share."""

    def __init__(self, rng, device):
        super().__init__(rng)
        import torch
        self.torch, self.device = torch, device
        self.dtype = rng.choice((torch.float32, torch.bfloat16, torch.float16))
        self.rows, self.width = rng.choice((0, 1, 3, 17)), rng.choice((8, 64, 1000))
        self.heads, self.positions = rng.choice((1, 2, 4)), rng.choice((0, 1, 5, 33))
        self.four_d = rng.random() < 0.5

    def tensor(self, name):
        torch, rng = self.torch, self.rng
        if "target" in name:
            return torch.randint(0, max(self.width, 1), (self.rows,), device=self.device)
        if "cu_seqlens" in name:
            return torch.tensor([0, self.positions], dtype=torch.int32, device=self.device)
        if "position" in name:
            return torch.arange(self.positions, device=self.device)[None]
        if name in ("weight", "bias"):
            shape = rng.choice(((self.width,), (self.width, self.width), (7, self.width)))
        elif self.four_d:
            shape = (1, self.heads, self.positions, 64)
        else:
            shape = (self.rows, self.width)
        return torch.randn(shape, device=self.device).to(self.dtype)


def plausible(call, kind, name):
    rng = call.rng
    if kind == "tensor":
        return call.tensor(name)
    if kind == "shape":
        return rng.choice((call.width, (call.width,)))
    if kind == "pair":
        return rng.choice((None, (3, 0), (-1, -1)))
    if kind == "int":
        return {"dim": rng.choice((-1, 0, 1)), "ignore_index": -100, "unsqueeze_dim": 1}.get(
            name, call.positions if "max_seqlen" in name else None if "bytes" in name else 1)
    if kind == "real":
        return {"eps": 1e-5, "scale": rng.choice((None, 0.125))}.get(name, 0.0)
    if kind == "flag":
        return rng.random() < 0.5
    if kind == "choice":
        return rng.choice(("mean", "sum", "none"))
    if kind == "module":
        return call.torch.nn.Linear(4, 4)
    return None


def hostile_tensor(call, name):
    torch, rng = call.torch, call.rng
    good = call.tensor(name)
    options = (lambda: good.to(rng.choice((torch.int64, torch.bool, torch.float64, torch.uint8))),
               lambda: torch.zeros((), dtype=good.dtype, device=good.device),  # rank 0
               lambda: good.reshape(1, 1, *good.shape, 1) if good.dim() < 4 else good[0],  # another rank
               lambda: good.cpu() if good.is_cuda else good.to(torch.float64),
               lambda: good.transpose(0, -1),  # strided (itself where it has one dimension)
               lambda: good[..., :0],  # empty
               lambda: good.reshape(-1)[:1].expand(*good.shape) if good.numel() else good,  # stride 0
               lambda: good.requires_grad_(good.is_floating_point()),
               lambda: rng.choice(fuzz_calls.WRONG_TYPES),
               lambda: [good])
    return rng.choice(options)()


def hostile_value(call, kind, name):
    rng = call.rng
    roll = rng.random()
    if roll < 0.15:
        return None
    if kind == "tensor":
        return hostile_tensor(call, name)
    if roll < 0.4 and kind in ("int", "real", "flag", "shape"):
        valid = plausible(call, kind, name)
        return fuzz_calls.hook(call, valid if isinstance(valid, (int, float)) else 1)
    if kind == "int":
        return rng.choice((-1, 2 ** 63, -2 ** 63 - 1, 2 ** 31, 1.5, "1", True))
    if kind == "real":
        return rng.choice((NAN, INF, -INF, -1.0, 1e300, "x", 1j, -0.0))
    if kind in ("shape", "pair"):
        items = [rng.choice((fuzz_calls.hook(call, 1), -1, 0, 2 ** 40, "a", None, 1.5)) for _ in range(rng.randint(0, 3))]
        call.containers.append(items)
        return rng.choice((items, tuple(items), -1, 0, 2 ** 40))
    if kind == "choice":
        return rng.choice(("", "bogus", "mean ", 1, b"mean"))
    return rng.choice(fuzz_calls.WRONG_TYPES)


def device():
    import torch
    import lab
    return "cuda" if lab.is_available() and torch.cuda.is_available() else "cpu"


def make_call(points, names, seed, index, on):
    """Call `index` of the run seeded `seed`: (name, function, args, kwargs)."""
    rng = random.Random(seed * 1000003 + index)
    call = Call(rng, on)
    name = names[rng.randrange(len(names))]
    fn, params = points[name]
    chosen = [p for p in params if p[3] or rng.random() < 0.3]
    hostile_names = {p[0] for p in rng.sample(chosen, min(rng.choice((1, 1, 1, 2, 3)), len(chosen)))}
    args, kwargs, by_position = [], {}, True
    for param in params:
        pname, kind, _none_ok, required, positional = param
        if param not in chosen:
            by_position = False
            continue
        value = hostile_value(call, kind, pname) if pname in hostile_names else plausible(call, kind, pname)
        if positional and by_position and (required or rng.random() < 0.5):
            args.append(value)
        else:
            kwargs[pname] = value
            by_position = False
    for action in call.actions:
        if call.containers and action.target is None:
            action.target = rng.choice(call.containers)
    return name, fn, args, kwargs


def check_outcome(params, error, cuda_error):
    """The broken clauses of the faces' contract for one call (empty: kept)."""
    broken = []
    if cuda_error is not None:
        broken.append(f"left an asynchronous CUDA error: {cuda_error}")
    if error is None:
        return broken
    kind = type(error).__name__
    if kind not in ALLOWED_NAMES:
        broken.append(f"raised {kind}, which the contract does not allow: {error}")
    if kind == "TypeError" and not any(f"'{p[0]}'" in str(error) for p in params):
        broken.append(f"TypeError names no argument: {error}")
    return broken


def run_range(seed, start, stop, trace=None):
    import torch
    points = entry_points()
    names = sorted(points)
    on = device()
    counts, violations = {}, []
    trace_file = open(trace, "w") if trace else None
    for index in range(start, stop):
        if trace_file:
            trace_file.write(f"{index}\n")
            trace_file.flush()
        name, fn, args, kwargs = make_call(points, names, seed, index, on)
        error = cuda_error = None
        try:
            fn(*args, **kwargs)
        except BaseException as caught:  # noqa: B902 - every outcome is classified
            if isinstance(caught, KeyboardInterrupt):
                raise
            error = caught
        if on == "cuda":
            try:
                torch.cuda.synchronize()
            except RuntimeError as caught:
                cuda_error = caught
        broken = check_outcome(points[name][1], error, cuda_error)
        outcome = "returned" if error is None else type(error).__name__
        per = counts.setdefault(name, {})
        per[outcome] = per.get(outcome, 0) + 1
        if broken and len(violations) < 20:
            violations.append({"call": index, "what": fuzz_calls.describe(name, args, kwargs), "broken": broken})
        if cuda_error is not None:
            break  # the context is lost: the rest of the range would only repeat it
    return {"counts": counts, "violations": violations, "device": on}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--chunk", type=int, default=2500, help="calls per child process")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a child may take")
    parser.add_argument("--range", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--trace", help=argparse.SUPPRESS)
    parser.add_argument("--call", type=int, help="make call number CALL of the seeded run alone, printing it first")
    args = parser.parse_args()
    if args.range:
        print(json.dumps(run_range(args.seed, args.range[0], args.range[1], args.trace)))
        return 0
    if args.call is not None:
        points = entry_points()
        name, fn, call_args, kwargs = make_call(points, sorted(points), args.seed, args.call, device())
        print(fuzz_calls.describe(name, call_args, kwargs, limit=10000), flush=True)
        summary = run_range(args.seed, args.call, args.call + 1)
        print(json.dumps(summary, indent=1))
        return 1 if summary.get("violations") else 0
    started = time.time()
    totals, failures = fuzz_calls.run_children(args.calls, args.seed, args.jobs, args.chunk, args.timeout,
                                               script=__file__, hide_gpus=False)
    fuzz_calls.print_summary(totals, args.calls, time.time() - started)
    for failure in failures:
        print("CONTRACT BROKEN:", failure)
    print(f"{len(failures)} contract failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
