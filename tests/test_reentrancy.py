"""No input crashes the interpreter: Python code that runs while lab reads its arguments (an
__index__, a __bool__, a protocol property) and empties the list or dict being read; producer types
whose DLPack exchange table lies; and the messages for bad arguments that used to be CPython's own.

A crash would kill the test run, so every case that could crash runs in a child process (with
PYTHONMALLOC=debug, which poisons freed memory so that a use after free is likely to crash - not
certain, since the freed block may be reused before the stale read - and no visible GPU, so that
nothing reaches a device): a dead child is a failing test, and so is a wrong message. The objects
themselves are in hostile.py; `make fuzz` runs its fuzzer at full strength."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lab
import lab.lab as core
from fakes import FakeCudaArray, fake_array

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TESTS)
EXAMPLES = int(os.environ.get("LAB_FUZZ_EXAMPLES", "300"))


def run_child(*sources, timeout=120):
    """Runs the sources (each dedented) in a fresh interpreter; returns its output, failing the test
    if it died."""
    env = dict(os.environ, PYTHONMALLOC="debug", PYTHONFAULTHANDLER="1", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([ROOT, TESTS]))
    prelude = "import lab, lab.lab as core\nfrom hostile import *\nfrom fakes import FakeCudaArray, fake_array\n"
    program = prelude + "".join(textwrap.dedent(source) for source in sources)
    proc = subprocess.run([sys.executable, "-c", program], cwd=TESTS, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (f"the child process ended with {proc.returncode} (negative: killed by that "
                                  f"signal)\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
    return proc.stdout


# Every outcome a child accepts from a call: lab's errors, the hostile object's own, or a return.
CALL = """
def attempt(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
        return "returned"
    except (TypeError, ValueError, OverflowError, HostileError, lab.CudaError) as error:
        assert not isinstance(error, SystemError), error
        return f"{type(error).__name__}: {error}"
"""

MULTI_AXIS = ["sum", "mean", "prod", "amax", "amin", "logsumexp", "norm", "var", "std"]


def test_axis_list_emptied_by_an_items_index():
    out = run_child(CALL, f"""
    class Evil:
        def __init__(self, items):
            self.items = items
        def __index__(self):
            self.items.clear()
            return 0
    for name in {MULTI_AXIS!r}:
        axes = []
        axes += [Evil(axes), 1]  # the list holds the only reference to Evil
        print(name, attempt(getattr(lab, name), fake_array((4, 4)), fake_array(()), axis=axes))
    """)
    assert out.count("\n") == len(MULTI_AXIS)


LIST_OPS = """
def list_calls(make_list):
    yield "foreach_add", lambda: lab.foreach_add(make_list(), make_list(), make_list())
    yield "foreach_mul", lambda: lab.foreach_mul(make_list(), make_list(), make_list())
    yield "foreach_axpby", lambda: lab.foreach_axpby(2.0, make_list(), 3.0, make_list(), make_list())
    yield "foreach_scale", lambda: lab.foreach_scale(make_list(), 2.0, make_list())
    yield "foreach_copy", lambda: lab.foreach_copy(make_list(), make_list())
    yield "foreach_norm", lambda: lab.foreach_norm(make_list(), fake_array((2,)))
    yield "sgd_step", lambda: lab.sgd_step(make_list(), make_list(), make_list(), lr=0.1, momentum=0.9)
    yield "adam_step", lambda: lab.adam_step(make_list(), make_list(), make_list(), make_list(), step=1, lr=0.1)
"""


@pytest.mark.parametrize("then_raise", [False, True], ids=["clears", "clears-then-raises"])
def test_list_emptied_by_an_items_protocol_property(then_raise):
    out = run_child(CALL, LIST_OPS, f"""
    def make_list():
        items = []
        action = Action("clear", fail_at=1 if {then_raise} else None)
        action.target = items
        items += [HostileArray(action), FakeCudaArray()]
        return items
    for name, call in list_calls(make_list):
        result = attempt(call)
        if {then_raise}:
            assert result.startswith("HostileError"), (name, result)  # the producer's own error, as it is
        print(name, result)
    """)
    assert out.count("\n") == 8


def test_cai_dict_emptied_by_the_read_only_flags_bool():
    out = run_child("""
    flag = Action("clear")
    array = HostileArray(Action(), shape=(4,), strides=(4,), flag_action=flag)
    info = core._array_info(array)
    assert flag.runs == 1 and flag.target == {}, flag  # the dict was emptied while lab read it
    assert info["shape"] == (4,) and info["strides"] == (1,), info  # and lab read what it held
    print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.parametrize("forgery", ["attribute 1", "attribute -1", "attribute is an address", "capsule of another name"])
def test_forged_exchange_attribute_is_a_type_error(forgery):
    out = run_child(f"""
    forged = forged_types()[{forgery!r}]()
    for call in (lambda: core._array_info(forged), lambda: lab.add(forged, forged, forged),
                 lambda: lab.foreach_add([forged], [forged], [forged])):
        try:
            call()
            raise AssertionError("accepted")
        except TypeError as error:
            assert "__dlpack_c_exchange_api__" in str(error) and "capsule named" in str(error), error
            print(error)
    """)
    assert "argument 'obj'" in out and "argument 'a'" in out and "argument 'xs[0]'" in out


@pytest.mark.parametrize("forgery, error, words", [
    ("no shape", "ValueError", "no shape"),
    ("negative rank", "ValueError", "has -1 dimensions"),
    ("rank over the limit", "ValueError", "has 1000 dimensions"),
    ("negative device", "ValueError", "reports device -3"),
    ("null data", "ValueError", "null data pointer"),
    ("negative size", "ValueError", "negative dimension"),
    ("table without functions", "TypeError", "must be a CUDA array"),
    ("table chained to itself", "TypeError", "must be a CUDA array"),
])
def test_lying_exchange_table_is_refused(forgery, error, words):
    out = run_child(CALL, f"""
    forged = forged_types()[{forgery!r}]()
    print(attempt(core._array_info, forged))
    print(attempt(lab.add, forged, forged, forged))
    """)
    for line in out.splitlines():
        assert line.startswith(error) and words in line, line


def test_reentrancy_fuzz_never_crashes():
    proc = subprocess.run([sys.executable, os.path.join(TESTS, "hostile.py"), str(EXAMPLES), "1"], cwd=TESTS,
                          env=dict(os.environ, PYTHONMALLOC="debug", PYTHONFAULTHANDLER="1",
                                   PYTHONPATH=os.pathsep.join([ROOT, TESTS])),
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, (f"the fuzzer ended with {proc.returncode}; rerun `LAB_FUZZ_TRACE=1 python "
                                  f"tests/hostile.py {EXAMPLES} 1` to see the call\n{proc.stdout[-3000:]}\n"
                                  f"{proc.stderr[-5000:]}")
    assert "re-entrancy fuzz:" in proc.stdout


# ---- messages that name the argument (no crash possible: run in this process) ----

class FailsOnce:
    """A producer whose property fails on its first read and works after (lab must not read twice)."""

    def __init__(self):
        self.reads = 0
        self.inner = FakeCudaArray()

    @property
    def __cuda_array_interface__(self):
        self.reads += 1
        if self.reads == 1:
            raise ValueError("the producer failed once")
        return self.inner.__cuda_array_interface__


@pytest.mark.parametrize("op", ["foreach_add", "adam_step", "kernel"])
def test_a_failing_property_is_read_once_and_its_error_kept(op):
    array = FailsOnce()
    with pytest.raises(ValueError, match="the producer failed once"):
        if op == "foreach_add":
            lab.foreach_add([fake_array(), array], [fake_array()] * 2, [fake_array()] * 2)
        elif op == "adam_step":
            lab.adam_step([array], [fake_array()], [fake_array()], [fake_array()], step=1, lr=0.1)
        else:
            from test_jit import handle
            core._launch_kernel(handle(), 1, 32, (array,), 0, None)
    assert array.reads == 1


def test_a_bad_list_item_is_named_by_its_index():
    with pytest.raises(TypeError, match=r"foreach_add\(\): argument 'ys\[1\]' must be a CUDA array"):
        lab.foreach_add([fake_array()] * 2, [fake_array(), object()], [fake_array()] * 2)
    from test_jit import handle
    with pytest.raises(TypeError, match=r"argument 'args\[2\]'"):
        core._launch_kernel(handle(), 1, 32, (fake_array(), 1, fake_array(typestr="<c16")), 0, None)


@pytest.mark.parametrize("dtype", [b",", ",", "U4", "M8[s]", object, "complex64"])
def test_asarray_checks_dtype_before_numpy(dtype):
    with pytest.raises(TypeError, match="asarray\\(\\): argument 'dtype' must be one of lab's dtypes"):
        lab.asarray(np.ones(4, "M8[s]"), dtype)


def test_asarray_bfloat16_from_the_host_says_how():
    with pytest.raises(TypeError, match="NumPy has no bfloat16"):
        lab.asarray(np.ones(4, np.float32), "bfloat16")


@pytest.mark.parametrize("method", ["sgd_step", "adam_step"])
@pytest.mark.parametrize("written", [0, 2])
def test_optimizer_refuses_a_broadcast_state_it_writes(method, written):
    lists = [[fake_array((8,))] for _ in range(4 if method == "adam_step" else 3)]
    lists[written] = [fake_array((8,), strides=(0,))]
    name = ["params", "grads", "momentum_bufs" if method == "sgd_step" else "exp_avgs"][written]
    kwargs = {"lr": 0.1, **({"step": 1} if method == "adam_step" else {"momentum": 0.9})}
    with pytest.raises(ValueError, match=rf"argument '{name}\[0\]' has stride 0"):
        getattr(lab, method)(*lists, **kwargs)


class StreamAttribute:
    __cuda_stream__ = 5


@pytest.mark.parametrize("call, error, words", [
    (lambda: lab.add(fake_array(), fake_array(), fake_array(), stream=StreamAttribute()), TypeError,
     "argument 'stream': its __cuda_stream__ must be a method returning (version, handle), got int"),
    (lambda: lab.empty((4,), device="x"), TypeError, "argument 'device' must be an int, got str"),
    (lambda: lab.empty((4,), device=2 ** 70), OverflowError, "argument 'device' = 1180591620717411303424 does not fit"),
    (lambda: lab.empty((4,), device=-1), ValueError, "argument 'device' must be a CUDA device ordinal"),
    (lambda: lab.Stream(device="x"), TypeError, "Stream(): argument 'device' must be an int"),
    (lambda: lab.Stream(priority="x"), TypeError, "Stream(): argument 'priority' must be an int"),
    (lambda: lab.Stream(priority=2 ** 40), OverflowError, "argument 'priority' = 1099511627776 does not fit a C int"),
    (lambda: lab.add(fake_array(), fake_array(), fake_array(), alpha=2 ** 2000), OverflowError,
     "add(): argument 'alpha' is too large to convert to a float"),
    (lambda: lab.fused_add_mul(fake_array(), fake_array(), 2 ** 2000, fake_array()), OverflowError,
     "argument 's' is too large"),
    (lambda: lab.axpby(2 ** 2000, fake_array(), 1.0, fake_array(), fake_array()), OverflowError,
     "argument 'alpha' is too large"),
    (lambda: lab.rms_norm(fake_array((2, 4)), fake_array((4,)), fake_array((2, 4)), eps=2 ** 2000), OverflowError,
     "argument 'eps' is too large"),
    (lambda: lab.adam_step([fake_array()], [fake_array()], [fake_array()], [fake_array()], step=2 ** 63, lr=0.1),
     OverflowError, "argument 'step' = 9223372036854775808 does not fit in int64"),
    (lambda: lab.sum(fake_array((4,)), fake_array(()), axis=2 ** 70), ValueError,
     "argument 'axis' = 1180591620717411303424 is out of range"),
    (lambda: core._array_info(FakeCudaArray(typestr="<f\ud800")), ValueError,
     "argument 'obj': malformed typestr"),
])
def test_messages_name_the_argument(call, error, words):
    with pytest.raises(error) as raised:
        call()
    assert words in str(raised.value)


class LongerThanItSays(list):
    """A list whose __iter__ yields one array more than len() counts."""

    def __iter__(self):
        yield from super().__iter__()
        yield FakeCudaArray()


def test_norms_out_must_hold_the_arrays_actually_read():
    """foreach_norm checks out's length against the arrays it read, not against len(xs): a kernel
    writing one norm per array read would otherwise write past out's end."""
    xs = LongerThanItSays([FakeCudaArray(), FakeCudaArray()])
    with pytest.raises(ValueError, match="'out' must be a contiguous 1-D float32 array of 3 elements"):
        lab.foreach_norm(xs, fake_array((2,)))
