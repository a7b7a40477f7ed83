"""The minimal extension's checks (`make first-hour` runs them on any machine, before lab is built):
every refusal on plain objects, and the borrowed-reference case - a read-only flag whose __bool__
empties the interface dict - read correctly (strong references), in a child process so that a read
of freed memory would fail this test rather than end the run."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try_minimal = pytest.importorskip("try_minimal", reason="build it first: python3 examples/minimal_extension/setup.py "
                                  "build_ext --inplace")


def test_every_refusal_names_the_argument_and_comes_before_cuda():
    messages = dict(try_minimal.refusals())
    assert messages["two arguments"] == "TypeError: add(a, b, out) takes 3 arguments, got 2"
    assert "'out' must be a CUDA array, got list" in messages["a plain list"]
    assert "'b' must be a 1-D float32 CUDA array" in messages["float64"]
    assert "'b' must be a 1-D float32 CUDA array" in messages["2-D"]
    assert "'b' must be contiguous" in messages["strided"]
    assert "'out' is read-only" in messages["a read-only out"]
    assert "the vectors differ in length" in messages["lengths that differ"]


def test_a_flag_that_empties_its_dict_does_not_free_what_is_being_read():
    """The dict's shape tuple lives only in the dict: a borrowed reference to it would be read after
    the flag's __bool__ freed it. Read through strong references, the shape is 999: the lengths differ."""
    code = ("import try_minimal\n"
            "print(dict(try_minimal.refusals())['a flag that empties its dict'])\n")
    child = subprocess.run([sys.executable, "-X", "dev", "-c", code], cwd=HERE, capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, PYTHONMALLOC="debug"))
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == "ValueError: add(): the vectors differ in length"
