"""lab's version, the one place it is written (setup.py reads it for the build)."""
__version__ = "0.1.0"
