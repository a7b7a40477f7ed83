"""lab's contract for bad input (docs/design.md, "What every entry point guarantees"), checked.

- The generated fuzz (tests/fuzz_calls.py) reaches every public entry point: each one's parameters
  are declared in a signature table the binding parses with, and that table agrees with the
  function's text signature (names, order, which are positional, which required, None accepted
  wherever None is the default). An entry point without a table row fails here, so nothing new
  goes unfuzzed.
- A seeded slice of the fuzz runs on every submission (LAB_CONTRACT_CALLS, 300000 by default: about
  15 s on two cores, in child processes, so a crash is a failing test that prints the call); `make
  fuzz` runs 10^6 under PYTHONMALLOC=debug.
- The defects the fuzz exists for stay fixed: each once crashed or misbehaved.
"""
import inspect
import os
import subprocess
import sys

import pytest

import lab
import lab.lab as core
from fakes import FakeCudaArray
import fuzz_calls

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = {"array", "arrays", "array_or_number", "real", "int", "flag", "axis", "choice", "stream", "shape", "dtype",
         "device", "dims", "arguments", "event", "pair"}


def public_entry_points():
    return fuzz_calls.entry_points()


def test_every_public_callable_has_a_parameter_table():
    missing = sorted(name for name, (_, params) in public_entry_points().items() if params is None)
    assert not missing, (f"{missing}: public entry points of lab.lab with no signature table row - parse their "
                         "arguments with lab_parse_args against a lab_signature listed in the file's "
                         "*_signatures table (or, for a type, add it to fuzz_calls.TYPE_PARAMETERS)")


@pytest.mark.parametrize("name", sorted(core._signatures()))
def test_signature_table_matches_the_text_signature(name):
    """What the fuzz draws from (the C table) is what help() shows a user (the docstring)."""
    table = core._signatures()[name]
    if name == "RawKernel.__call__":
        pytest.skip("RawKernel documents its call in its class docstring: kernel(grid, block, args, *, ...)")
    shown = inspect.signature(getattr(core, name)).parameters.values()
    assert [p.name for p in shown] == [row[0] for row in table], "parameter names or order differ"
    for p, (pname, kind, accepts_none, required, positional) in zip(shown, table):
        assert kind in KINDS, f"{pname}: unknown kind {kind!r}"
        assert (p.default is inspect.Parameter.empty) == required, f"{pname}: required in one, not the other"
        assert (p.kind is not p.KEYWORD_ONLY) == positional, f"{pname}: positional in one, not the other"
        if p.default is None:
            assert accepts_none, f"{pname}: its default is None, but the table refuses None"


def test_types_table_matches_their_text_signatures():
    for name, params in fuzz_calls.TYPE_PARAMETERS.items():
        if not params:
            continue
        shown = inspect.signature(getattr(core, name)).parameters.values()
        assert [p.name for p in shown] == [row[0] for row in params], name


def test_a_refused_call_launches_nothing():
    before = core._launch_scopes()
    with pytest.raises(TypeError, match="argument 'out'"):
        lab.add(FakeCudaArray(), FakeCudaArray(), None)
    assert core._launch_scopes() == before


# ---- the defects that made the fuzz generated (each crashed or misbehaved before) ----

@pytest.mark.parametrize("position", range(4))
def test_linear_cross_entropy_refuses_none_for_each_required_array(position):
    """None for hidden, weight, target or loss read through a NULL lab_array: SIGSEGV."""
    args = [FakeCudaArray((4, 8)), FakeCudaArray((5, 8)), FakeCudaArray((4,), "<i8"), FakeCudaArray(())]
    name = ("hidden", "weight", "target", "loss")[position]
    args[position] = None
    code = ("import sys; sys.path.insert(0, %r); import lab; from fakes import FakeCudaArray as F\n"
            "args = [F((4, 8)), F((5, 8)), F((4,), '<i8'), F(())]; args[%d] = None\n"
            "try:\n    lab.linear_cross_entropy(*args)\nexcept TypeError as e:\n    print(e)\n") % (HERE, position)
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert child.returncode == 0, f"the interpreter died ({child.returncode}): {child.stderr[-500:]}"
    assert f"argument '{name}' must be a CUDA array, not None" in child.stdout


class RaisingBool:
    def __bool__(self):
        raise ZeroDivisionError("this flag cannot be read")


def test_sgd_step_stops_at_the_first_flag_that_fails():
    """The second flag was read with the first one's exception pending: a SystemError."""
    params = [FakeCudaArray((4,))]
    with pytest.raises(ZeroDivisionError, match="this flag cannot be read"):
        lab.sgd_step(params, params, params, lr=0.1, momentum=0.9, nesterov=RaisingBool(), first_step=RaisingBool())


@pytest.mark.parametrize("keyword, value, message", [
    ("dampening", -1, r"sgd_step\(\): argument 'dampening' must be a number in \[0, 1\], got -1$"),
    ("lr", -1, r"sgd_step\(\): argument 'lr' must be a finite number >= 0, got -1$"),
    ("momentum", float("nan"), r"argument 'momentum' must be a finite number >= 0, got nan$"),
    ("weight_decay", float("inf"), r"argument 'weight_decay' must be a finite number >= 0, got inf$"),
])
def test_sgd_step_names_exactly_the_argument_out_of_range(keyword, value, message):
    """dampening=-1 reached CUDA; lr=-1 gave one message naming three arguments."""
    params = [FakeCudaArray((4,))]
    kwargs = {"lr": 0.1, "momentum": 0.9, keyword: value}
    with pytest.raises(ValueError, match=message):
        lab.sgd_step(params, params, params, **kwargs)


@pytest.mark.parametrize("keyword, value, message", [
    ("beta1", 1.0, r"argument 'beta1' must be a number in \[0, 1\), got 1.0"),
    ("eps", -1e-8, r"argument 'eps' must be a finite number >= 0"),
    ("step", 0, r"argument 'step' must be an int >= 1, got 0"),
    ("lr", True, r"argument 'lr' must be a finite number >= 0, got bool"),
])
def test_adam_step_names_exactly_the_argument_out_of_range(keyword, value, message):
    params = [FakeCudaArray((4,))]
    kwargs = {"step": 1, "lr": 0.1, keyword: value}
    with pytest.raises((ValueError, TypeError), match=message):
        lab.adam_step(params, params, params, params, **kwargs)


@pytest.mark.parametrize("call, message", [
    (lambda a: lab.matmul(None, a), "matmul(): argument 'a' must be a CUDA array, not None"),
    (lambda a: lab.rope(a, None, None, a, a, None), "rope(): argument 'cos' must be a CUDA array, not None"),
    (lambda a: lab.layer_norm_backward(a, a, None, None, a, a), "argument 'mean' must be a CUDA array, not None"),
    (lambda a: lab.foreach_add([a], None, [a]), "argument 'ys' must be a list or tuple of CUDA arrays, not None"),
    (lambda a: lab.sum(a, a, keepdim=None), "argument 'keepdim' must be True or False, not None"),
    (lambda a: lab.cross_entropy(a, a, a, reduction=None), "argument 'reduction' must be a str, not None"),
])
def test_none_is_refused_where_the_table_says_so(call, message):
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(FakeCudaArray((2, 2)))


# ---- the seeded slice of the generated fuzz ----

def test_generated_fuzz_slice_keeps_the_contract():
    calls = int(os.environ.get("LAB_CONTRACT_CALLS", "300000"))
    child = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_calls.py"), "--calls", str(calls), "--seed",
                            os.environ.get("LAB_CONTRACT_SEED", "1"), "--jobs", str(min(os.cpu_count() or 1, 4))],
                           capture_output=True, text=True, timeout=1500)
    print(child.stdout[-6000:])
    assert child.returncode == 0, child.stdout[-6000:] + child.stderr[-2000:]
    assert f"generated fuzz: {calls} calls" in child.stdout
