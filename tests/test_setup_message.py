"""The build's first line of defence: setup.py run with a setuptools too old for pyproject.toml's
license metadata (PEP 639 needs 77; a stock Debian or pyenv Python 3.11 has 65) says so in one line
and how to fix it, instead of a page of schema errors. Run in a scratch virtual environment whose
setuptools is the old one."""
import os
import subprocess
import sys
import venv

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def old_setuptools_python(tmp_path_factory):
    """A venv's python with setuptools 65.5 (ensurepip's on Python 3.11; installed from PyPI on newer
    Pythons, whose ensurepip has none), or a skip saying why there is none."""
    env_dir = tmp_path_factory.mktemp("old-setuptools")
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    probe = [python, "-c", "import setuptools; print(setuptools.__version__)"]
    found = subprocess.run(probe, capture_output=True, text=True)
    if found.returncode != 0 or not found.stdout.startswith("65."):
        installed = subprocess.run([python, "-m", "pip", "install", "-q", "--retries", "0", "--timeout", "10",
                                    "setuptools==65.5.0"], capture_output=True,
                                   text=True, timeout=300)
        if installed.returncode != 0:
            last_line = (installed.stderr.strip().splitlines() or ["pip failed"])[-1]
            pytest.skip(f"no setuptools 65 to test with: {last_line[-200:]}")
    return python


@pytest.mark.parametrize("command", [["--version"], ["build_ext", "--inplace"], ["sdist"]])
def test_old_setuptools_gets_one_line(old_setuptools_python, command):
    python = old_setuptools_python
    proc = subprocess.run([python, "setup.py", *command], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "needs setuptools >= 77 (this Python has 65.5.0)" in lines[0]
    assert "pip install 'setuptools>=77,<85'" in lines[0] and "pip install ." in lines[0]
