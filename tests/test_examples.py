"""The examples run as users would run them - `python3 examples/NN_name.py` from a checkout, with no
PYTHONPATH set - each checking its own result (GPU machine only)."""
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
SCRIPTS = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py") and f[0].isdigit())


@pytest.mark.gpu
@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs(script):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # examples/_common.py finds lab
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)], capture_output=True, text=True,
                            timeout=300, env=env, cwd=os.path.dirname(EXAMPLES))
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr}"


def test_an_example_finds_lab_from_any_folder(tmp_path):
    """As the docstrings say - `python3 examples/06_...py` after `make build`, no PYTHONPATH - from
    another folder too; without a GPU it says so and exits 0."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, "06_lab_array_numpy_only.py")],
                            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ModuleNotFoundError" not in result.stderr


def test_the_minimal_extension_builds_and_checks_its_arguments_anywhere():
    """Example 7 needs nvcc, not a GPU: it builds the 90-line extension and shows each refusal, so a
    learner without a GPU sees the first lesson work (the GPU part runs where there is one)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, "07_minimal_extension.py")],
                            capture_output=True, text=True, timeout=300, env=env, cwd=os.path.dirname(EXAMPLES))
    assert result.returncode == 0, result.stdout + result.stderr
    if result.stdout.startswith("skipped: nvcc"):
        pytest.skip("nvcc is not installed")
    for refusal in ("takes 3 arguments", "'out' must be a CUDA array", "'b' must be contiguous", "'out' is read-only",
                    "differ in length"):
        assert refusal in result.stdout, result.stdout


def test_the_jax_example_checks_its_first_half_anywhere():
    """Example 15 on a jax without a GPU: the built-in ops run their jax.numpy formulas inside jit and
    check out against plain jax; the user's kernels are skipped, saying why."""
    pytest.importorskip("jax")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["JAX_PLATFORMS"] = "cpu"
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, "15_jax_inside_jit.py")], capture_output=True,
                            text=True, timeout=300, env=env, cwd=os.path.dirname(EXAMPLES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "rms_norm + cross_entropy inside jit, with jax.grad: their jax.numpy formulas" in result.stdout
    assert "skipped: your own kernels inside jit" in result.stdout
