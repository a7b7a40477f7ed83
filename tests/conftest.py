"""Shared test setup: GPU detection, the `gpu` marker, and making optional producers importable.

GPU tests are marked `gpu` and skip where lab.is_available() is False (CI). The Numba shipped on
the GPU machine imports numpy.row_stack, which NumPy 2.5 removed; the alias below restores it before
anything imports Numba (np.vstack is what row_stack always was)."""
import os

import numpy as np
import pytest

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX must not take 75% of the GPU

import lab  # noqa: E402

HAVE_GPU = lab.is_available()


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU: lab.is_available() is False")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
