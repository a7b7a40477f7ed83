"""bench/_gpu_sampler.py's reading of nvidia-smi (the GPU-only benchmarks' clock and power) checked on
the CPU: the CSV lines it parses, what it skips, and an empty summary where nvidia-smi is missing."""
import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import _gpu_sampler  # noqa: E402


def test_parse_reads_clock_power_and_reasons_and_skips_what_it_cannot_read():
    lines = ["1980, 651.20, 0x0000000000000000", "[N/A], 120.00, 0x0", "", "1755, 699.87, 0x0000000000000004",
             "clocks.sm [MHz], power.draw.instant [W], clocks_event_reasons.active", "1, 2, 3, 4", "1, 2, zz"]
    assert _gpu_sampler.parse(lines) == [(1980.0, 651.2, 0), (1755.0, 699.87, 4)]


def test_parse_reads_an_older_driver_without_reasons():
    assert _gpu_sampler.parse(["1980, 651.20", "1755, 699.87"]) == [(1980.0, 651.2, None), (1755.0, 699.87, None)]


def test_summary_is_the_median_of_the_samples_and_the_share_power_capped():
    sampler = _gpu_sampler.GpuSampler()
    sampler.samples = [(1980.0, 500.0, 0x1), (1755.0, 700.0, 0x4), (1800.0, 690.0, 0x5), (1600.0, 699.0, 0x4)]
    assert sampler.summary() == dict(sm_mhz=1777.5, watts=694.5, samples=4, power_capped=0.75)
    sampler.samples = [(1980.0, 500.0, None)]
    assert sampler.summary() == dict(sm_mhz=1980.0, watts=500.0, samples=1)


def test_without_nvidia_smi_nothing_is_sampled(monkeypatch):
    monkeypatch.setattr(_gpu_sampler.shutil, "which", lambda name: None)
    with _gpu_sampler.GpuSampler("00000000:1B:00.0") as sampler:
        pass
    assert sampler.process is None and sampler.summary() == {}


def fake_nvidia_smi(tmp_path, knows_reasons):
    """A stand-in for nvidia-smi: asked once, it prints one sample (or fails on the newer fields, as an
    older driver does); asked to loop, it prints two samples and waits to be stopped, as the real one."""
    fake, printed = tmp_path / "nvidia-smi", tmp_path / "printed"
    reasons = ", 0x4" if knows_reasons else ""
    older = "" if knows_reasons else 'case "$1" in *instant*) echo "Field is not a valid field"; exit 2;; esac\n'
    fake.write_text(f"#!/bin/sh\n{older}echo '1980, 650.5{reasons}'\n"
                    f'case "$*" in *-lms*) ;; *) exit 0;; esac\n'
                    f"echo '1965, 699.0{reasons}'\ntouch {printed}\nexec sleep 60\n")
    fake.chmod(0o755)
    return fake, printed


@pytest.mark.parametrize("knows_reasons", [True, False])
def test_a_sampler_process_is_stopped_and_read(monkeypatch, tmp_path, knows_reasons):
    fake, printed = fake_nvidia_smi(tmp_path, knows_reasons)
    monkeypatch.setattr(_gpu_sampler.shutil, "which", lambda name: str(fake))
    with _gpu_sampler.GpuSampler() as sampler:
        deadline = time.monotonic() + 30
        while not printed.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    expected = dict(sm_mhz=1972.5, watts=674.75, samples=2)
    assert sampler.summary() == (dict(expected, power_capped=1.0) if knows_reasons else expected)
