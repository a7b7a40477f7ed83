"""Shared test setup: GPU detection, the `gpu` marker, making optional producers importable, and the
row-wise kernels' layout knobs as fixtures.

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


# The row-wise kernels' layout knobs, set for one test by indirect parametrization and put back after it.
@pytest.fixture
def window_depth(request):
    """lab.lab._rowwise_window_depth: the steps of copies cross-entropy's window rows keep in flight (-1:
    lab's default; 0: window rows and the norms' buffered rows off, the streamed walk)."""
    previous = lab.lab._rowwise_window_depth(request.param)
    yield request.param
    lab.lab._rowwise_window_depth(previous)


@pytest.fixture
def cluster_blocks(request):
    """lab.lab._rowwise_cluster_blocks: the blocks of a cluster a row of the norms' backward is cut across
    (-1: lab's default; 0: never; 2, 4, 8: that many wherever the row cuts into slices that fit)."""
    previous = lab.lab._rowwise_cluster_blocks(request.param)
    yield request.param
    lab.lab._rowwise_cluster_blocks(previous)


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU: lab.is_available() is False")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# Without a GPU, thousands of tests skip for one reason; an 's' per test would fill the log with
# letters that say nothing. Skips print nothing while running and are counted by reason at the end
# (run with -v, or -rs, to see each one).
def pytest_report_teststatus(report, config):
    if report.skipped and config.getoption("verbose") <= 0 and "s" not in (config.getoption("reportchars") or ""):
        return "skipped", "", "SKIPPED"
    return None


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons = {}
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    ordered = sorted(reasons.items(), key=lambda item: -item[1])
    shown = "; ".join(f"{count} {reason}" for count, reason in ((c, r) for r, c in ordered[:3]))
    more = f"; {sum(c for _, c in ordered[3:])} for {len(ordered) - 3} other reasons" if len(ordered) > 3 else ""
    terminalreporter.write_line(f"skipped by reason: {shown}{more}")
