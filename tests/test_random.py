"""lab's random numbers, on the CPU: the Philox4x32-10 generator of src/kernels/philox.cuh against
Random123's known-answer vectors (tests/philox_vectors.cu, built with nvcc for the host)."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_philox_matches_the_known_answer_vectors(tmp_path):
    nvcc = shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    if not os.path.exists(nvcc):
        pytest.skip("nvcc is not installed")
    program = str(tmp_path / "philox_vectors")
    subprocess.run([nvcc, "-std=c++17", "-O1", "-I" + os.path.join(ROOT, "src", "kernels"), "-o", program,
                    os.path.join(ROOT, "tests", "philox_vectors.cu")], check=True, capture_output=True, timeout=300)
    done = subprocess.run([program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip().endswith("0 failures"), done.stdout
