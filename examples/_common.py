"""Shared by the examples: leave cleanly (exit 0, saying why) where something they need is missing."""
import sys


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
