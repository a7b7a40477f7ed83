"""The examples run as users would run them, each checking its own result (GPU machine only)."""
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
SCRIPTS = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py") and f[0].isdigit())


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs(script):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(EXAMPLES), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr}"
