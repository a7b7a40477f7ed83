"""The generated fuzz: every public entry point of lab.lab, every parameter, hostile arguments.

Nothing here lists lab's functions or their parameters by hand. The entry points are the public
names of lab.lab; each one's parameters - name, kind (array, list of arrays, real, int, flag, axis,
choice, stream, ...), whether None is accepted, whether it is required - come from the signature
tables the binding itself parses with (lab.lab._signatures()), so an entry point or a keyword added
later is fuzzed the day it lands. (lab.Stream's and lab.Event's constructors parse with CPython's
own PyArg functions: their parameters' kinds are the one table written here, TYPE_PARAMETERS, and
tests/test_contract.py fails if a public type has no row in it.)

Each call starts from a plausible argument for every parameter (fake CUDA arrays of related shapes,
numbers in range) and replaces one to three of them with a draw from the parameter kind's hostile
families: None where an array is required, wrong types, huge and negative ints, NaN and inf,
objects whose __index__ / __bool__ / __float__ / array property / __cuda_stream__ raises or empties
a list or dict of the same call (tests/hostile.py), __cuda_array_interface__ dicts with each key
missing or malformed, producer types whose DLPack exchange table lies, streams that lie.

Every call must keep lab's contract for bad input (docs/design.md, "What every entry point
guarantees"), and check_outcome() checks exactly that list:
  1. no crash and no hang (the calls run in child processes; a dead child is a failure that prints
     the one-line command reproducing its call);
  2. no exception outside TypeError, ValueError, OverflowError, IndexError, lab.CudaError,
     ImportError (a vendor library that is not installed) and the hostile object's own error -
     a SystemError in particular is always a bug in the binding;
  3. every TypeError, ValueError and OverflowError of a function that takes arguments names the
     argument it is about ('name' in quotes, or 'name[i]' for an item of a list);
  4. a call refused with one of those launched nothing (lab.lab._launch_scopes() did not move).
Without a GPU (CI) no fake pointer can reach a kernel; the fuzz hides the GPUs from its children
(CUDA_VISIBLE_DEVICES=""), so a valid-looking call ends in lab.CudaError where a GPU would launch.

    python tests/fuzz_calls.py --calls 1000000 --jobs 2      # the full run (make fuzz)
    python tests/fuzz_calls.py --seed 7 --call 123456          # one call again, printed first
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

# Constructors of lab.lab's public types, which parse with PyArg rather than a signature table:
# (name, kind, accepts None, required, positional), as lab.lab._signatures() gives the others.
TYPE_PARAMETERS = {
    "Stream": (("device", "device", True, False, True), ("priority", "int", False, False, True)),
    "Event": (("timing", "flag", False, False, True), ("enable_timing", "flag", True, False, False)),
    "Array": (),  # not constructed by callers: lab.empty / lab.zeros / lab.asarray make them
    "Graph": (),  # takes no arguments: a capture's are capture_begin's (tests/test_graph.py)
}

# The valid strings of each choice parameter a fuzzed call may start from (any other string is one
# of its hostile draws); a choice parameter added later starts from a string it refuses, and is
# fuzzed all the same.
CHOICES = {"approximate": ("none", "tanh"), "reduction": ("mean", "sum", "none"),
           "epilogue": ("relu", "gelu_tanh", "dgelu"), "dtype": ("float32", "bfloat16", "float16", "float64")}

ALLOWED_NAMES = ("TypeError", "ValueError", "OverflowError", "IndexError", "CudaError", "ImportError",
                 "HostileError")
MUST_NAME_ARGUMENT = ("TypeError", "ValueError", "OverflowError")


def entry_points():
    """{name: (callable maker, parameters)} for every public callable of lab.lab, and RawKernel's
    launch (lab.lab._KernelLauncher's call, through a stand-in kernel handle)."""
    import lab.lab as core
    tables = core._signatures()
    found = {}
    for name in sorted(dir(core)):
        if name.startswith("_"):
            continue
        obj = getattr(core, name)
        if isinstance(obj, type):
            if issubclass(obj, BaseException):
                continue  # lab.CudaError: an exception type, constructed by lab
            found[name] = (lambda obj=obj: obj, TYPE_PARAMETERS.get(name))
        elif callable(obj):
            found[name] = (lambda obj=obj: obj, tables.get(name))
    found["RawKernel.__call__"] = (stand_in_kernel, tables.get("RawKernel.__call__"))
    return found


_stand_in = None


def stand_in_kernel():
    """A kernel launcher whose handle names no real kernel: its arguments are read, checked and
    marshalled as RawKernel's are; only the launch itself could not happen (no GPU here)."""
    global _stand_in
    if _stand_in is None:
        import lab.lab as core
        from test_jit import handle

        class StandIn(core._KernelLauncher):
            def _prepare(self):
                return handle(sizes=None, signature=None)
        _stand_in = StandIn
    return _stand_in()


# ---- plausible arguments ----

class Call:
    """One fuzzed call being built: its random source and the containers hostile hooks may attack."""

    def __init__(self, rng):
        self.rng = rng
        self.rows, self.n = rng.choice((0, 1, 3)), rng.choice((1, 4, 7))
        self.list_length = rng.choice((0, 1, 2))
        self.containers = []
        self.actions = []

    def shape(self):
        return self.rng.choice(((self.rows, self.n), (self.rows,), (self.n,), (), (self.rows, self.n, 1),
                                (self.n, self.n)))

    def array(self, name):
        import fakes
        typestr = "<i8" if "target" in name else self.rng.choice(("<f4", "<f4", "<f2", "<f8", "<i4"))
        return fakes.FakeCudaArray(shape=self.shape(), typestr=typestr)

    def array_list(self, name):
        items = [self.array(name) for _ in range(self.list_length)]
        self.containers.append(items)
        return items if self.rng.random() < 0.8 else tuple(items)


def plausible(call, kind, name):
    rng = call.rng
    if kind == "array":
        return call.array(name)
    if kind == "arrays":
        return call.array_list(name)
    if kind == "array_or_number":
        return call.array(name) if rng.random() < 0.5 else rng.choice((2, 0.5))
    if kind == "real":
        return rng.choice((0.5, 1, 0.0, 0.1))
    if kind == "int":
        return rng.choice((0, 1, 3))
    if kind == "flag":
        return rng.random() < 0.5
    if kind == "axis":
        return rng.choice((-1, 0, 1))
    if kind == "choice":
        return rng.choice(CHOICES.get(name, ("none",)))
    if kind == "stream":
        return rng.choice((None, 1, 2))
    if kind == "shape":
        return rng.choice(((4,), 3, (2, 3)))
    if kind == "dtype":
        return rng.choice(("float32", "bfloat16", "int64"))
    if kind == "device":
        return 0
    if kind == "dims":
        return rng.choice((1, (1,), (2, 1, 1)))
    if kind == "arguments":
        return tuple(rng.choice((call.array("x"), 3, 2.5)) for _ in range(rng.randint(0, 3)))
    if kind == "event":
        return None  # making a lab.Event needs a GPU
    if kind == "pair":
        return (1, 0)
    raise KeyError(f"no plausible value for a parameter of kind {kind!r}")


# ---- hostile draws ----

NAN, INF = float("nan"), float("inf")
WRONG_TYPES = (object(), "x", b"\x00", 1.5j, [], {}, (), 2 ** 64, -2 ** 63 - 1, 2 ** 200, -1, -2 ** 31, True,
               NAN, INF, -INF, 1e308, -0.0, 0, range(3), type)


def hook(call, value):
    """A number/flag whose conversion runs Python: fails, or empties/refills a container of the call."""
    import hostile
    action = hostile.Action(call.rng.choice(("clear", "pop", "refill", "collect", "none")),
                            call.rng.choice((None, 1, 1, 2)))
    call.actions.append(action)
    return hostile.Hook(action, value)


def malformed_cai(call):
    """A __cuda_array_interface__ dict with one key missing or malformed (or two)."""
    import fakes
    cai = dict(fakes.FakeCudaArray(shape=call.shape()).__cuda_array_interface__)
    for _ in range(call.rng.choice((1, 1, 2))):
        key = call.rng.choice(("shape", "typestr", "data", "version", "strides", "mask", "stream", "descr"))
        if call.rng.random() < 0.2:
            cai.pop(key, None)
            continue
        cai[key] = call.rng.choice({
            "shape": ((-1,), (2 ** 62, 4), (1,) * 9, (1.5,), "3", (True,), [4]),
            "typestr": (">f4", "<c8", "<V2", "|b1", "f4", "", "<f44", 3),
            "data": ((0, False), (-16, False), (2 ** 64, False), (16,), ("x", False), (16, "x"), None, 16),
            "version": (-1, 99, "3", None),
            "strides": ((3,), (2 ** 62,), (4, 4, 4, 4, 4, 4, 4, 4, 4), (-4,), ("x",), 4),
            "mask": (object(), 1, ()),
            "stream": (0, -1, 2 ** 64, "x", 1.5, True),
            "descr": ((), [("", "<f4")], 3),
        }[key] + WRONG_TYPES[:6])
    return cai


def hostile_array(call, name):
    import fakes
    import hostile
    rng = call.rng
    choice = rng.randrange(6)
    if choice == 0:
        return fakes.CudaArrayWithDict(malformed_cai(call))
    if choice == 1:
        action = hostile.Action(rng.choice(("clear", "pop", "refill", "collect", "none")), rng.choice((None, 1)))
        flag = hostile.Action(rng.choice(("clear", "pop", "none")), rng.choice((None, 1))) if rng.random() < 0.5 \
            else None
        call.actions.append(action)
        return hostile.HostileArray(action, shape=call.shape(), flag_action=flag)
    if choice == 2:
        forged = forged_types()
        return forged[rng.choice(sorted(forged))]()
    if choice == 3:
        return fakes.CudaArrayWithDict(rng.choice(WRONG_TYPES))  # the property is not a dict
    if choice == 4:
        return RaisingProperty()
    return rng.choice(WRONG_TYPES + (None,))


class RaisingProperty:
    @property
    def __cuda_array_interface__(self):
        import hostile
        raise hostile.HostileError("the producer's property failed")


class LyingStream:
    """A stream object whose protocol answers nonsense."""

    def __init__(self, answer, how):
        self.answer, self.how = answer, how

    def __cuda_stream__(self):
        if self.how == "raise":
            import hostile
            raise hostile.HostileError("the stream's protocol failed")
        return self.answer

    def __repr__(self):
        return f"LyingStream({self.answer!r}, {self.how!r})"


class AttributeStream:
    def __init__(self, name, value):
        setattr(self, name, value)


_forged = None


def forged_types():
    global _forged
    if _forged is None:
        import hostile
        _forged = hostile.forged_types()
    return _forged


def hostile_value(call, kind, name):
    import hostile
    rng = call.rng
    roll = rng.random()
    if roll < 0.15:
        return None
    if kind == "array" or (kind == "array_or_number" and roll < 0.6):
        return hostile_array(call, name)
    if kind == "arrays":
        items = [call.array(name) for _ in range(call.list_length)]
        items.insert(rng.randrange(len(items) + 1), hostile_array(call, name))
        call.containers.append(items)
        return items if roll < 0.8 else rng.choice(WRONG_TYPES)
    if kind == "stream":
        options = (lambda: hostile.HostileStream(_bound(call, hostile.Action(rng.choice(("clear", "pop", "none")),
                                                                              rng.choice((None, 1))))),
                   lambda: LyingStream(rng.choice(((0, "x"), (0,), 5, (0, -1), (0, 2 ** 64), None)), "answer"),
                   lambda: LyingStream(None, "raise"),
                   lambda: AttributeStream(rng.choice(("cuda_stream", "ptr")), rng.choice((-1, "x", 2 ** 70, 1.5))),
                   lambda: rng.choice(WRONG_TYPES))
        return rng.choice(options)()
    if kind == "event":
        return rng.choice(WRONG_TYPES)
    if roll < 0.45 and kind in ("real", "int", "flag", "axis", "device", "array_or_number", "dims", "shape"):
        valid = plausible(call, kind, name)
        return hook(call, valid if isinstance(valid, (int, float)) else 1)
    if kind in ("dims", "shape", "pair", "arguments") and roll < 0.7:
        inner = (hook(call, 1), -1, 2 ** 64, "x", None, 1.5, hostile_array(call, name))
        return tuple(rng.choice(inner) for _ in range(rng.randint(0, 4)))
    if kind == "choice" and roll < 0.6:
        return rng.choice(("", "NONE", "mean ", "x" * 100, "\udcff"))
    return rng.choice(WRONG_TYPES)


def _bound(call, action):
    call.actions.append(action)
    return action


# ---- one call ----

def make_call(points, names, seed, index):
    """The call numbered `index` of the run seeded `seed`: (entry name, callable, args, kwargs, call)."""
    rng = random.Random(seed * 1000003 + index)
    call = Call(rng)
    name = names[rng.randrange(len(names))]
    maker, params = points[name]
    fn = maker()
    chosen = [p for p in params if p[3] or rng.random() < 0.25]  # every required one, some optional
    hostile_names = {p[0] for p in rng.sample(chosen, min(rng.choice((1, 1, 1, 2, 3)), len(chosen)))}
    args, kwargs = assemble(call, params, chosen, hostile_names, (hostile_value, plausible),
                            positional_only(name, fn))
    return name, fn, args, kwargs


def assemble(call, params, chosen, hostile_names, draws, only_positional=()):
    """(args, kwargs) of one call: each chosen parameter drawn hostile (draws[0]) or plausible
    (draws[1]), passed by position while it can be; then each hostile hook bound to a container."""
    hostile, plausible_value = draws
    rng = call.rng
    args, kwargs, by_position = [], {}, True
    for param in params:
        pname, kind, _none_ok, required, positional = param
        if param not in chosen:
            by_position = False  # a later one can no longer be passed by position
            continue
        value = hostile(call, kind, pname) if pname in hostile_names else plausible_value(call, kind, pname)
        if pname in only_positional or (positional and by_position and (required or rng.random() < 0.5)):
            args.append(value)
        else:
            kwargs[pname] = value
            by_position = False
    for action in call.actions:
        if call.containers and action.target is None:
            action.target = rng.choice(call.containers)
    return args, kwargs


_positional_only = {}


def positional_only(name, fn):
    """The parameters a function takes by position alone ('/' in its text signature)."""
    if name not in _positional_only:
        import inspect
        try:
            found = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            found = ()
        _positional_only[name] = {p.name for p in found if p.kind is p.POSITIONAL_ONLY}
    return _positional_only[name]


def describe(name, args, kwargs, limit=400):
    text = f"{name}(" + ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]) + ")"
    return text if len(text) <= limit else text[:limit] + " ..."


def check_outcome(name, params, error, before, after):
    """The contract, for one call that raised `error` (None: it returned). Returns a list of broken
    clauses (empty: kept)."""
    if error is None:
        return []
    kind = type(error).__name__
    broken = []
    if kind not in ALLOWED_NAMES:
        broken.append(f"raised {kind}, which the contract does not allow: {error}")
    if kind in MUST_NAME_ARGUMENT and params:  # a function of no parameters has none to name
        message = str(error)
        if not any(f"'{p[0]}'" in message or f"'{p[0]}[" in message for p in params):
            broken.append(f"{kind} names no argument: {message}")
    if kind in MUST_NAME_ARGUMENT + ("IndexError",) and after != before:
        broken.append(f"{kind} after a launch scope was opened ({after - before}): {error}")
    return broken


def run_range(seed, start, stop, trace=None):
    """Runs calls [start, stop) of the seeded run; returns its summary (a dict)."""
    import lab.lab as core
    points = entry_points()
    names = sorted(points)
    missing = [n for n in names if points[n][1] is None]
    if missing:
        return {"error": f"no parameter table for {missing}"}
    counts, violations = {}, []
    for index in traced(start, stop, trace):
        name, fn, args, kwargs = make_call(points, names, seed, index)
        before = core._launch_scopes()
        _, error = outcome_of(fn, args, kwargs)
        broken = check_outcome(name, points[name][1], error, before, core._launch_scopes())
        record(counts, violations, index, (name, args, kwargs), error, broken)
    return {"counts": counts, "violations": violations}


def traced(start, stop, trace=None):
    """The call numbers [start, stop), each written to the trace file (if any) before it runs: after a
    crash, its last line names the call that crashed."""
    trace_file = open(trace, "w") if trace else None
    for index in range(start, stop):
        if trace_file:
            trace_file.write(f"{index}\n")
            trace_file.flush()
        yield index


def outcome_of(fn, args, kwargs):
    """(what the call returned, None) or (None, what it raised): every exception is an outcome."""
    try:
        return fn(*args, **kwargs), None
    except BaseException as caught:  # noqa: B902 - every outcome is classified
        if isinstance(caught, KeyboardInterrupt):
            raise
        return None, caught


def record(counts, violations, index, call, error, broken):
    """One call's outcome counted under its entry point, and its broken clauses kept (the first 20)."""
    name, args, kwargs = call
    outcome = "returned" if error is None else type(error).__name__
    per = counts.setdefault(name, {})
    per[outcome] = per.get(outcome, 0) + 1
    if broken and len(violations) < 20:
        violations.append({"call": index, "what": describe(name, args, kwargs), "broken": broken})


def reproducer(seed, index, script=__file__):
    return f"python {os.path.relpath(os.path.abspath(script), os.path.dirname(HERE))} --seed {seed} --call {index}"


def run_children(calls, seed, jobs, chunk, timeout, script=__file__, hide_gpus=True):
    """The run, in child processes of `chunk` calls each (`script --seed S --range LO HI`, which prints
    run_range's summary as its last line); a crash or a hang is found, its call named. hide_gpus: the
    children see no GPU (fake pointers must not reach one)."""
    env = dict(os.environ, PYTHONFAULTHANDLER="1", **({"CUDA_VISIBLE_DEVICES": ""} if hide_gpus else {}))
    ranges = [(start, min(start + chunk, calls)) for start in range(0, calls, chunk)]
    running, totals, failures = [], {}, []

    def start_child(lo, hi, trace=None):
        command = [sys.executable, os.path.abspath(script), "--seed", str(seed), "--range", str(lo), str(hi)]
        if trace:
            command += ["--trace", trace]
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish(lo, hi, child):
        try:
            out, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            out, err = None, "timed out"
        if child.returncode == 0 and out:
            summary = json.loads(out.strip().splitlines()[-1])
            if "error" in summary:
                failures.append(summary["error"])
                return
            for name, per in summary["counts"].items():
                target = totals.setdefault(name, {})
                for outcome, n in per.items():
                    target[outcome] = target.get(outcome, 0) + n
            for v in summary["violations"]:
                failures.append(f"call {v['call']}: {v['what']}\n    " + "\n    ".join(v["broken"]) +
                                f"\n    again: {reproducer(seed, v['call'], script)}")
            return
        # a crash or a hang: run the range again, tracing, to name the call
        trace = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"lab-fuzz-{seed}-{lo}.trace")
        again = start_child(lo, hi, trace)
        try:
            again.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            again.kill()
            again.communicate()
        lines = open(trace).read().split()
        index = int(lines[-1]) if lines else lo
        what = "hung" if err == "timed out" else f"died (exit {child.returncode})"
        failures.append(f"calls {lo}..{hi} {what}; the call: {reproducer(seed, index, script)}\n    {(err or '')[-600:]}")

    pending = list(ranges)
    while pending or running:
        while pending and len(running) < jobs:
            lo, hi = pending.pop(0)
            running.append((lo, hi, start_child(lo, hi)))
        lo, hi, child = running.pop(0)
        finish(lo, hi, child)
    return totals, failures


def print_summary(totals, calls, seconds):
    outcomes = sorted({o for per in totals.values() for o in per})
    width = max(len(n) for n in totals) if totals else 10
    print(f"{'entry point':<{width}} {'calls':>7} " + " ".join(f"{o:>13}" for o in outcomes))
    for name in sorted(totals):
        per = totals[name]
        print(f"{name:<{width}} {sum(per.values()):>7} " + " ".join(f"{per.get(o, 0):>13}" for o in outcomes))
    all_counts = {o: sum(per.get(o, 0) for per in totals.values()) for o in outcomes}
    print(f"{'all':<{width}} {sum(all_counts.values()):>7} " + " ".join(f"{all_counts[o]:>13}" for o in outcomes))
    print(f"generated fuzz: {calls} calls over {len(totals)} entry points in {seconds:.0f} s")


def parser_for(description, calls, chunk, timeout):
    """The fuzzers' shared command line (this one's and tests/fuzz_faces.py's)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--calls", type=int, default=calls)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--chunk", type=int, default=chunk, help="calls per child process")
    parser.add_argument("--timeout", type=float, default=timeout, help="seconds a child may take")
    parser.add_argument("--range", type=int, nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--trace", help=argparse.SUPPRESS)
    parser.add_argument("--call", type=int, help="make call number CALL of the seeded run alone, printing it first")
    return parser


def run_command(args, run_range, show_call, script=__file__, hide_gpus=True, reproducer_flags=""):
    """What the command line asked: a child's range (its summary as one JSON line), one call again
    (printed first: `show_call(seed, index)`), or the whole run in children, summarised."""
    if args.range:
        print(json.dumps(run_range(args.seed, args.range[0], args.range[1], args.trace)))
        return 0
    if args.call is not None:
        print(show_call(args.seed, args.call), flush=True)
        summary = run_range(args.seed, args.call, args.call + 1)
        print(json.dumps(summary, indent=1))
        return 1 if summary.get("violations") else 0
    started = time.time()
    totals, failures = run_children(args.calls, args.seed, args.jobs, args.chunk, args.timeout, script, hide_gpus)
    print_summary(totals, args.calls, time.time() - started)
    name = os.path.basename(script)
    for failure in failures:
        print("CONTRACT BROKEN:", failure.replace(f"{name} --seed", f"{name}{reproducer_flags} --seed"))
    print(f"{len(failures)} contract failures")
    return 1 if failures else 0


def show_call(seed, index):
    points = entry_points()
    name, fn, call_args, kwargs = make_call(points, sorted(points), seed, index)
    return describe(name, call_args, kwargs, limit=10000)


def main():
    args = parser_for(__doc__.split("\n")[0], calls=20000, chunk=5000, timeout=600).parse_args()
    if args.call is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    return run_command(args, run_range, show_call)


if __name__ == "__main__":
    sys.exit(main())
