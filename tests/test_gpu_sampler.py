"""bench/_gpu_sampler.py's reading of nvidia-smi (the GPU-only benchmarks' clock and power) checked on
the CPU: the CSV lines it parses, what it skips, and an empty summary where nvidia-smi is missing."""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import _gpu_sampler  # noqa: E402


def test_parse_reads_clock_and_power_and_skips_what_it_cannot_read():
    lines = ["1980, 651.20", "[N/A], 120.00", "", "1755, 699.87", "clocks.sm [MHz], power.draw [W]", "1, 2, 3"]
    assert _gpu_sampler.parse(lines) == [(1980.0, 651.2), (1755.0, 699.87)]


def test_summary_is_the_median_of_the_samples():
    sampler = _gpu_sampler.GpuSampler()
    sampler.samples = [(1980.0, 500.0), (1755.0, 700.0), (1800.0, 690.0)]
    assert sampler.summary() == dict(sm_mhz=1800.0, watts=690.0, samples=3)


def test_without_nvidia_smi_nothing_is_sampled(monkeypatch):
    monkeypatch.setattr(_gpu_sampler.shutil, "which", lambda name: None)
    with _gpu_sampler.GpuSampler("00000000:1B:00.0") as sampler:
        pass
    assert sampler.process is None and sampler.summary() == {}


def test_a_sampler_process_is_stopped_and_read(monkeypatch, tmp_path):
    """A stand-in for nvidia-smi that prints two samples and waits to be stopped, as the real one loops."""
    fake, printed = tmp_path / "nvidia-smi", tmp_path / "printed"
    fake.write_text(f"#!/bin/sh\necho '1980, 650.5'\necho '1965, 699.0'\ntouch {printed}\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setattr(_gpu_sampler.shutil, "which", lambda name: str(fake))
    with _gpu_sampler.GpuSampler() as sampler:
        deadline = time.monotonic() + 30
        while not printed.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    assert sampler.summary() == dict(sm_mhz=1972.5, watts=674.75, samples=2)
