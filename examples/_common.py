"""Shared by the examples (each imports it first): find lab in a checkout, and leave cleanly (exit 0,
saying why) where something they need is missing."""
import importlib.util
import os
import sys

# `python3 examples/01_vector_add_torch.py` from a checkout after `make build`: Python puts examples/
# on sys.path, not the repository root where lab/ is. Add it when lab is not installed.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if importlib.util.find_spec("lab") is None and os.path.exists(os.path.join(_ROOT, "lab", "__init__.py")):
    sys.path.insert(0, _ROOT)


def need_gpu():
    import lab
    if not lab.is_available():
        print("skipped: no CUDA GPU here (`python3 -m lab` says what is missing)")
        sys.exit(0)


def need(module_name):
    try:
        return __import__(module_name)
    except ImportError:
        print(f"skipped: {module_name} is not installed")
        sys.exit(0)


def need_nvcc():
    """Examples that build a CUDA extension need nvcc (CUDA_HOME/bin or the PATH), not a GPU."""
    import shutil
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if not (shutil.which("nvcc") or os.path.exists(os.path.join(home, "bin", "nvcc"))):
        print("skipped: nvcc is not installed (CUDA_HOME/bin/nvcc or the PATH)")
        sys.exit(0)
