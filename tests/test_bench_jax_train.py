"""bench/bench_jax_train.py --quick on the CPU: the benchmark's two models (lab.jax's ops, plain
jax.numpy) build, train and agree - on a CPU-only jax both run the jax.numpy formulas, so their loss
curves must match closely - and the script does not rot between GPU runs."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_quick_training_benchmark_runs_and_its_curves_agree(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "bench_jax_train.py"), "--quick", "--out-dir",
                           str(tmp_path)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "loss curves within 2% of the first loss, every step" in done.stdout
    import json
    result = json.loads((tmp_path / "jax_train.json").read_text())
    assert len(result["losses"]["lab"]) == len(result["losses"]["jnp"]) == result["steps"]
    assert result["losses"]["lab"][-1] < result["losses"]["lab"][0]  # it learns
    assert result["goals"][1][2], result["goals"][1]
