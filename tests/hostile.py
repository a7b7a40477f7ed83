"""Hostile inputs for the binding layer: objects whose own Python code runs while lab reads its
arguments - an __index__, __float__ or __bool__, a __cuda_array_interface__ property, a stream's
__cuda_stream__ - and uses that moment to empty, shrink or refill the list or dict lab is reading,
or to fail; and producer types whose DLPack C exchange table lies (no shape, a negative rank, an
int where a capsule belongs).

They exist to catch the classic C-API bug: a borrowed reference (PyList_GET_ITEM,
PyDict_GetItem, PySequence_Fast items) used after a call that can run Python code, which may have
freed the object it points to. Such a bug crashes the interpreter, so these objects are used in a
child process (test_reentrancy.py), with PYTHONMALLOC=debug so that freed memory is poisoned and
a crash is likely (not certain: a freed block may be reused before the stale read).

Run as a program it is the re-entrancy fuzzer: `python hostile.py EXAMPLES SEED` draws that many
hostile calls with hypothesis and exits 0 when every one ended in one of lab's exceptions (or the
hostile object's own), 1 on any other exception, and dies on a crash. LAB_FUZZ_TRACE=1 prints each
call before it is made, to name the one that crashes.
"""
import ctypes
import gc
import os
import sys

import fakes
from fakes import fake_pointer


class HostileError(Exception):
    """What a hostile object raises when told to fail: a producer's own error, passed through."""


# ---- what a hostile object does when its Python code runs ----

class Action:
    """Run by a hostile object each time lab makes it run Python code. `kind` says what to do to
    `target` (a list or dict of the same call, bound after the call is built): 'clear' it, 'pop'
    one item, 'refill' it with other objects, run the garbage collector ('collect'), or nothing.
    `fail_at` = n raises HostileError on the n-th run, after the mutation."""

    def __init__(self, kind="none", fail_at=None):
        self.kind, self.fail_at, self.target, self.runs = kind, fail_at, None, 0

    def __call__(self):
        self.runs += 1
        target = self.target
        if target is not None:
            if self.kind == "clear":
                target.clear()
            elif self.kind == "pop" and target:
                target.popitem() if isinstance(target, dict) else target.pop(0)
            elif self.kind == "refill":
                if isinstance(target, dict):
                    target.update(shape=(3,), typestr="<f8", data=(fake_pointer(), False), strides=None)
                else:
                    target[:] = [fakes.FakeCudaArray() for _ in range(len(target) + 1)]
        if self.kind == "collect":
            gc.collect(0)  # the young generation: where the objects of this call live
        if self.fail_at is not None and self.runs == self.fail_at:
            raise HostileError(f"hostile object failed on run {self.runs}")

    def __repr__(self):
        target = type(self.target).__name__ if self.target is not None else "-"
        return f"Action({self.kind!r}, fail_at={self.fail_at}, target={target})"


class Hook:
    """A number and a truth value whose conversions run `action` first: an axis, a scalar, a flag."""

    def __init__(self, action, value=0):
        self.action, self.value = action, value

    def __index__(self):
        self.action()
        return int(self.value)

    def __float__(self):
        self.action()
        return float(self.value)

    def __bool__(self):
        self.action()
        return bool(self.value)

    def __repr__(self):
        return f"Hook({self.action!r}, {self.value!r})"


class HostileArray:
    """An array whose __cuda_array_interface__ property runs `action`, then returns a new dict that
    only the caller holds. With `flag_action`, the read-only flag is a Hook whose __bool__ runs
    that action - bound to the dict itself, it empties the dict in the middle of its own reading."""

    def __init__(self, action, shape=(8,), typestr="<f4", flag_action=None, strides=None):
        self.action, self.shape, self.typestr, self.flag_action, self.strides = action, shape, typestr, flag_action, strides
        self.ptr = fake_pointer()

    @property
    def __cuda_array_interface__(self):
        self.action()
        # Tuples made here, held by the dict alone: emptying the dict frees them.
        cai = {"shape": tuple(list(self.shape)), "typestr": self.typestr, "version": 3,
               "data": (self.ptr, Hook(self.flag_action) if self.flag_action else False),
               "stream": 2 ** 40 + len(self.shape)}
        if self.strides is not None:
            cai["strides"] = tuple(list(self.strides))
        if self.flag_action is not None and self.flag_action.target is None:
            self.flag_action.target = cai
        return cai

    def __repr__(self):
        return f"HostileArray({self.action!r}, shape={self.shape}, flag={self.flag_action!r})"


class HostileStream:
    """A stream object whose __cuda_stream__() runs `action`, then names the legacy default stream."""

    def __init__(self, action):
        self.action = action

    def __cuda_stream__(self):
        self.action()
        return (0, 1)

    def __repr__(self):
        return f"HostileStream({self.action!r})"


# ---- producer types whose DLPack exchange table lies ----

_tables = []  # the ctypes objects behind every forged table, kept alive for the process


def exchange_type(fill, name="ForgedTensor", version=(1, 3), functions=True, chain_to_self=False):
    """A new tensor type publishing a DLPack C exchange API whose dltensor_from_py_object_no_sync
    calls fill(tensor) on the DLTensor lab hands it (fill may leave anything in it)."""

    def from_py(obj, out):
        fill(out.contents)
        return 0

    def current_stream(device_type, device_id, out):
        out[0] = 1
        return 0

    keep = [fakes._FROM_PY(from_py), fakes._STREAM(current_stream)]
    api = fakes._ExchangeAPI(fakes._Header(version[0], version[1], None), None, None, None,
                             keep[0] if functions else fakes._FROM_PY(), keep[1] if functions else fakes._STREAM())
    if chain_to_self:
        api.header.prev_api = ctypes.addressof(api)
    capsule_name = ctypes.create_string_buffer(b"dlpack_exchange_api")
    keep += [api, capsule_name]
    _tables.append(keep)
    capsule = fakes._capsule_new(ctypes.addressof(api), ctypes.addressof(capsule_name), None)
    return type(name, (), {"__dlpack_c_exchange_api__": capsule, "__repr__": lambda self: f"<{name}>"})


def _shape_array(values):
    array = (ctypes.c_int64 * max(len(values), 1))(*values)
    _tables.append(array)
    return ctypes.cast(array, ctypes.POINTER(ctypes.c_int64))


def forged_fill(ndim=1, shape=(8,), strides=None, data=fake_pointer(), device_type=2, device_id=0):
    def fill(t):
        t.data = data
        t.device = fakes._DLDevice(device_type, device_id)
        t.ndim = ndim
        t.dtype = fakes._DLDataType(2, 32, 1)
        t.shape = _shape_array(shape) if shape is not None else None
        t.strides = _shape_array(strides) if strides is not None else None
        t.byte_offset = 0
    return fill


def _named_capsule(name):
    buffer = ctypes.create_string_buffer(name)
    _tables.append(buffer)
    return fakes._capsule_new(ctypes.addressof(fakes._api), ctypes.addressof(buffer), None)


def attribute_type(value, name="ForgedAttribute"):
    """A type whose __dlpack_c_exchange_api__ is `value` itself (not a capsule lab can check)."""
    return type(name, (), {"__dlpack_c_exchange_api__": value, "__repr__": lambda self: f"<{name}>"})


def forged_types():
    """Every lying producer type, by what it does wrong."""
    junk = ctypes.create_string_buffer(64)
    _tables.append(junk)
    return {
        "no shape": exchange_type(forged_fill(ndim=2, shape=None)),
        "negative rank": exchange_type(forged_fill(ndim=-1, shape=None)),
        "rank over the limit": exchange_type(forged_fill(ndim=1000, shape=None)),
        "negative device": exchange_type(forged_fill(device_id=-3)),
        "null data": exchange_type(forged_fill(data=None)),
        "negative size": exchange_type(forged_fill(shape=(-4,))),
        "table without functions": exchange_type(forged_fill(), functions=False),
        "table chained to itself": exchange_type(forged_fill(), version=(2, 0), chain_to_self=True),
        "attribute 1": attribute_type(1),
        "attribute -1": attribute_type(-1),
        "attribute is an address": attribute_type(ctypes.addressof(junk)),
        "capsule of another name": attribute_type(_named_capsule(b"not_the_exchange_api")),
    }


# ---- the fuzzer ----

def _strategies():
    from hypothesis import strategies as st

    kinds = st.sampled_from(["clear", "pop", "refill", "collect", "none"])
    actions = st.builds(Action, kinds, st.one_of(st.none(), st.integers(1, 3)))
    forged = forged_types()

    @st.composite
    def array(draw, pending, shapes=((8,), (0,), (2, 4))):
        """A plain fake array, a hostile one (its action bound later to a container of the call),
        or an instance of a lying producer type."""
        choice = draw(st.integers(0, 9))
        shape = draw(st.sampled_from(shapes))
        if choice < 3:
            return fakes.FakeCudaArray(shape=shape)
        if choice < 9:
            action = draw(actions)
            pending.append(action)
            flag = None
            if draw(st.booleans()):
                flag = draw(actions)  # bound to the array's own dict when it is made
            strides = draw(st.sampled_from([None, tuple(4 for _ in shape), tuple(0 for _ in shape)]))
            return HostileArray(action, shape=shape, flag_action=flag, strides=strides)
        return forged[draw(st.sampled_from(sorted(forged)))]()

    @st.composite
    def scalar(draw, pending, value):
        if draw(st.booleans()):
            return value
        action = draw(actions)
        pending.append(action)
        return Hook(action, value)

    @st.composite
    def call(draw):
        import lab
        import lab.lab as core

        pending, containers = [], []

        def array_list(length):
            items = [draw(array(pending)) for _ in range(length)]
            containers.append(items)
            return items

        def stream():
            if draw(st.integers(0, 3)):
                return None
            action = draw(actions)
            pending.append(action)
            return HostileStream(action)

        n = draw(st.integers(0, 4))
        entry = draw(st.sampled_from([
            "reduction", "foreach_add", "foreach_scale", "foreach_norm", "sgd_step", "adam_step", "add",
            "fused_add_mul", "softmax", "matmul", "array_info", "kernel"]))
        if entry == "reduction":
            name = draw(st.sampled_from(["sum", "mean", "prod", "amax", "amin", "logsumexp", "norm", "var", "std",
                                         "argmax"]))
            axes = [draw(scalar(pending, draw(st.integers(-2, 1)))) for _ in range(draw(st.integers(0, 3)))]
            containers.append(axes)
            axis = axes if name != "argmax" else (axes[0] if axes else None)
            fn, args, kwargs = getattr(lab, name), (draw(array(pending)), draw(array(pending))), {
                "axis": axis, "keepdim": draw(scalar(pending, False)), "stream": stream()}
        elif entry in ("foreach_add", "foreach_scale", "foreach_norm"):
            xs = array_list(n)
            fn = getattr(lab, entry)
            if entry == "foreach_add":
                args, kwargs = (xs, array_list(n), array_list(n)), {"alpha": draw(scalar(pending, 2.0))}
            elif entry == "foreach_scale":
                args, kwargs = (xs, draw(scalar(pending, 0.5)), array_list(n)), {}
            else:
                args, kwargs = (xs, draw(array(pending))), {}
            kwargs["stream"] = stream()
        elif entry == "sgd_step":
            fn = lab.sgd_step
            args = (array_list(n), array_list(n), array_list(n))
            kwargs = {"lr": draw(scalar(pending, 0.1)), "momentum": draw(scalar(pending, 0.9)),
                      "nesterov": draw(scalar(pending, False)), "stream": stream()}
        elif entry == "adam_step":
            fn = lab.adam_step
            args = tuple(array_list(n) for _ in range(4))
            kwargs = {"step": draw(scalar(pending, 1)), "lr": draw(scalar(pending, 0.1)),
                      "eps": draw(scalar(pending, 1e-8)), "decoupled_weight_decay": draw(scalar(pending, True)),
                      "stream": stream()}
        elif entry == "add":
            fn, args = lab.add, (draw(array(pending)), draw(array(pending)), draw(array(pending)))
            kwargs = {"alpha": draw(scalar(pending, 2)), "stream": stream()}
        elif entry == "fused_add_mul":
            fn = lab.fused_add_mul
            args = (draw(array(pending)), draw(array(pending)), draw(scalar(pending, 3)), draw(array(pending)))
            kwargs = {"stream": stream()}
        elif entry == "softmax":
            fn, args = lab.softmax, (draw(array(pending)), draw(array(pending)))
            kwargs = {"axis": draw(scalar(pending, -1)), "stream": stream()}
        elif entry == "matmul":
            square = ((2, 2), (2, 2), (0, 2))
            fn, args = lab.matmul, tuple(draw(array(pending, square)) for _ in range(3))
            kwargs = {"alpha": draw(scalar(pending, 0.5)), "allow_tf32": draw(scalar(pending, False)),
                      "bias": draw(st.one_of(st.none(), array(pending, ((2,),)))), "stream": stream()}
        elif entry == "array_info":
            fn, args, kwargs = core._array_info, (draw(array(pending)),), {}
        else:
            from test_jit import handle
            items = [draw(st.one_of(array(pending), scalar(pending, 3))) for _ in range(n)]
            containers.append(items)
            grid = [draw(scalar(pending, 1)) for _ in range(draw(st.integers(1, 3)))]
            containers.append(grid)
            fn = core._launch_kernel
            args, kwargs = (handle(sizes=None, signature=None), grid, 32, items, 0, stream()), {}
        for action in pending:  # each hostile object now gets a container of this call to attack
            if containers and action.target is None:
                action.target = containers[draw(st.integers(0, len(containers) - 1))]
        return fn, args, kwargs

    return call()


# ImportError: lab.matmul's first product on a machine without cuBLASLt (CI's)
ALLOWED = (TypeError, ValueError, OverflowError, ImportError, HostileError)


def fuzz(examples, seed):
    """Draws `examples` hostile calls; returns how many ended in each exception type."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed

    import lab

    trace = os.environ.get("LAB_FUZZ_TRACE") == "1"
    outcomes = {}

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(_strategies())
    def one(drawn):
        fn, args, kwargs = drawn
        if trace:
            print(f"{getattr(fn, '__name__', fn)}{args!r} {kwargs!r}", file=sys.stderr, flush=True)
        try:
            fn(*args, **kwargs)
            outcome = "returned"
        except ALLOWED + (lab.CudaError,) as error:
            outcome = type(error).__name__
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    one()
    return outcomes


if __name__ == "__main__":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # fake pointers must never reach a GPU: launches fail cleanly
    counts = fuzz(int(sys.argv[1]), int(sys.argv[2]))
    print("re-entrancy fuzz:", sum(counts.values()), "calls;", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
