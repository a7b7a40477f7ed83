"""bench/profile_llama.py's reading of a profiler trace (device_gaps), on a hand-made trace: the
stretches without a kernel, longest first, what the host's runtime did during each (launches left
out), and the Python that queued the kernel ending each - so the GPU-only tool is checked on the CPU."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import profile_llama  # noqa: E402


def kernel(name, ts, dur, correlation, cat="kernel"):
    return {"cat": cat, "name": name, "ts": ts, "dur": dur, "args": {"correlation": correlation}}


def host(cat, name, ts, dur, tid=7, correlation=None):
    event = {"cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid}
    if correlation is not None:
        event["args"] = {"correlation": correlation}
    return event


def test_gaps_longest_first_with_what_the_host_did(tmp_path):
    events = [
        kernel("first", 0, 10, 1),
        kernel("second", 50, 10, 2),     # 40 us after the first ends
        kernel("memset", 62, 1, 3, cat="gpu_memset"),  # 2 us after the second
        kernel("third", 63, 5, 4),       # touching: no gap
        host("cuda_runtime", "cudaStreamSynchronize", 15, 20),
        host("cuda_runtime", "cudaLaunchKernel", 45, 2, correlation=2),
        host("cuda_runtime", "cudaLaunchKernel", 58, 1, correlation=3),
        host("python_function", "model.py(3): forward", 40, 12),
        host("cpu_op", "aten::mm", 44, 4),
        host("cpu_op", "aten::mm", 44, 4, tid=8),  # another thread: not what launched it
    ]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    gaps, total = profile_llama.device_gaps(str(path), 5)
    assert total == 42
    assert [g[0] for g in gaps] == [40, 2]
    gap, before, after, calls, frames = gaps[0]
    assert (before, after) == ("first", "second")
    assert calls == {"cudaStreamSynchronize": 20}  # the launches are not listed
    assert frames == ["model.py(3): forward", "aten::mm"]
    assert gaps[1][1:3] == ("second", "memset")


def test_as_many_gaps_as_asked(tmp_path):
    events = [kernel(f"k{i}", i * 20, 10, i) for i in range(6)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    gaps, total = profile_llama.device_gaps(str(path), 3)
    assert len(gaps) == 3 and total == 50
    assert all(g[3] == {} and g[4] == [] for g in gaps)  # no host events, no launches found
