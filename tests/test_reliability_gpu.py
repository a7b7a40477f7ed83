"""Reliability on the GPU: memory the GPU cannot reach is refused before launch, an
asynchronous fault surfaces as lab.CudaError saying the context is gone, and eight threads on
their own streams get exact results."""
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import lab
from fakes import fake_array
from producers import producer_or_skip

pytestmark = pytest.mark.gpu


def pageable_memory_access():
    return lab.get_device_properties(0)["pageable_memory_access"]


def test_host_memory_in_a_dict_is_refused_before_launch():
    """A hand-written dict holding an ordinary host address: a ValueError naming the argument (unless
    the GPU reads pageable host memory itself, when the result must simply be right)."""
    host_a = np.arange(1000, dtype=np.float32)
    host_out = np.full(1000, np.nan, dtype=np.float32)
    b = lab.asarray(np.ones(1000, dtype=np.float32))
    device_out = lab.empty(1000)
    a = fake_array(shape=(1000,), ptr=host_a.ctypes.data)
    out = fake_array(shape=(1000,), ptr=host_out.ctypes.data)
    if pageable_memory_access():
        lab.add(a, b, out)
        lab.synchronize()
        np.testing.assert_array_equal(host_out, host_a + 1)
        return
    with pytest.raises(ValueError, match=r"add\(\): argument 'a' points to memory the GPU cannot access"):
        lab.add(a, b, device_out)
    with pytest.raises(ValueError, match=r"argument 'out' points to memory the GPU cannot access"):
        lab.add(b, b, out)
    assert np.isnan(host_out).all()  # nothing was written
    lab.synchronize()  # and the context is still healthy


@pytest.mark.parametrize("address", [0x10, 0x7F0000000000])
def test_unmapped_addresses_are_refused(address):
    if pageable_memory_access():
        pytest.skip("this GPU reads pageable host memory (HMM/ATS): an unmapped address faults instead")
    b = lab.asarray(np.ones(8, dtype=np.float32))
    with pytest.raises(ValueError, match=r"argument 'x' points to memory the GPU cannot access"):
        lab.relu(fake_array(shape=(8,), ptr=address), b)


def test_foreach_names_the_list_and_index_of_host_memory():
    if pageable_memory_access():
        pytest.skip("this GPU reads pageable host memory (HMM/ATS)")
    host = np.zeros(64, dtype=np.float32)
    good = [lab.asarray(np.ones(64, dtype=np.float32)) for _ in range(3)]
    ys = [good[0], fake_array(shape=(64,), ptr=host.ctypes.data), good[1]]
    with pytest.raises(ValueError, match=r"foreach_add\(\): argument 'ys\[1\]' points to memory the GPU cannot access"):
        lab.foreach_add(good, ys, good)


def test_page_locked_host_memory_is_reachable():
    """Pinned host memory is mapped into the device's address space: lab computes on it directly."""
    torch = pytest.importorskip("torch")
    a = torch.arange(4099, dtype=torch.float32).pin_memory()
    out = torch.full((4099,), float("nan")).pin_memory()
    dev_b = torch.full((4099,), 2.0, device="cuda")
    lab.mul(fake_array(shape=(4099,), ptr=a.data_ptr()), dev_b, fake_array(shape=(4099,), ptr=out.data_ptr()))
    lab.synchronize()
    np.testing.assert_array_equal(out.numpy(), a.numpy() * 2)


def test_cai_arrays_are_located_on_their_device():
    """CAI says nothing about the device; lab asks the driver, so a CAI operand and a DLPack operand
    agree on the device (and on two GPUs, disagree with a ValueError: tests/test_two_gpus.py)."""
    cupy, torch = producer_or_skip("cupy"), producer_or_skip("torch")
    a, a_host = cupy.from_host(np.arange(4097), "float32")
    out = torch.empty_poisoned((4097,), "float32")
    lab.add(a, a, out)
    lab.synchronize()
    np.testing.assert_array_equal(torch.to_host(out), 2 * a_host)


STICKY_FAULT = textwrap.dedent("""
    import numpy as np
    import lab
    small = lab.asarray(np.ones(16, dtype=np.float32))
    ptr = small.__cuda_array_interface__["data"][0]

    class Runaway:  # a dict claiming 2^32 elements over a 64-byte allocation
        __cuda_array_interface__ = {"shape": (1 << 32,), "typestr": "<f4", "data": (ptr, False), "version": 3}

    lab.relu(Runaway(), Runaway())  # queued: the fault happens on the GPU, later
    for attempt in ("synchronize", "next op"):
        try:
            lab.synchronize() if attempt == "synchronize" else lab.relu(small, small)
            print(attempt, "no error")
        except lab.CudaError as e:
            print(attempt, "|", e.name, "|", e)
""")


def test_an_asynchronous_fault_is_reported_as_a_sticky_cuda_error():
    """Run in a child: after an illegal address the context is unusable for the rest of the process."""
    child = subprocess.run([sys.executable, "-c", STICKY_FAULT], capture_output=True, text=True, timeout=120)
    lines = child.stdout.splitlines()
    assert child.returncode == 0, child.stderr
    assert len(lines) == 2, child.stdout + child.stderr
    for line, attempt in zip(lines, ("synchronize", "next op")):
        assert line.startswith(attempt + " | cudaErrorIllegalAddress |"), line
        assert "the CUDA context is now unusable" in line, line


def test_eight_threads_each_on_its_own_stream_get_exact_results():
    """8 Python threads, each with its own lab.Stream and arrays, 10^4 mixed integer ops each
    (wrapping int32 arithmetic, so exact), checked against the same sequence in NumPy."""
    n, steps, n_threads = 4099, 10_000, 8
    results, errors = {}, []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            x_host = rng.integers(-1000, 1000, n, dtype=np.int32)
            y_host = rng.integers(-1000, 1000, n, dtype=np.int32)
            stream = lab.Stream()
            with lab.stream(stream):
                x, y = lab.asarray(x_host), lab.asarray(y_host)
                expected = x_host.copy()
                for step in range(steps):
                    kind = step % 5
                    if kind == 0:
                        lab.add(x, y, x)
                        expected = expected + y_host
                    elif kind == 1:
                        lab.mul(x, y, x)
                        expected = expected * y_host
                    elif kind == 2:
                        lab.sub(x, y, x)
                        expected = expected - y_host
                    elif kind == 3:
                        lab.maximum(x, y, x)
                        expected = np.maximum(expected, y_host)
                    else:
                        lab.add(x, y, x, alpha=3)
                        expected = expected + 3 * y_host
            stream.synchronize()
            results[seed] = (x.numpy(), expected)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    with np.errstate(over="ignore"):
        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    assert sorted(results) == list(range(n_threads))
    for got, expected in results.values():
        np.testing.assert_array_equal(got, expected)
