"""Streams, CUDA graphs and lab's runtime types on a GPU.

Races: a producer's stream is kept busy with a long queue so that a launch on the wrong stream, or
without ordering, reads stale data - each case must still be exact. Capture: lab ops inside
torch.cuda.graph and a CuPy stream capture must be recorded, and replays must recompute from new
inputs. lab.Array must round-trip through torch, CuPy and Numba without a copy, and give its memory
back."""
import threading

import numpy as np
import pytest

import lab
from cuda_graphs import capture_and_replay
from producers import get_producer

pytestmark = pytest.mark.gpu
N = 1 << 22


def need(name):
    producer = get_producer(name)
    if producer is None:
        pytest.skip(f"{name} is not installed or sees no GPU")
    return getattr(producer, name) if name != "numba" else producer.cuda


def busy(torch, x, rounds=40):
    """Queues slow work on the current torch stream that rewrites x (ends as 1.0 everywhere)."""
    for _ in range(rounds):
        torch.mul(x, 1.0000001, out=x)
    x.fill_(1.0)


@pytest.mark.parametrize("repeat", range(5))
def test_torch_side_stream_race(repeat):
    torch = need("torch")
    side = torch.cuda.Stream()
    a = torch.zeros(N, device="cuda")
    b = torch.full((N,), 2.0, device="cuda")
    out = torch.empty(N, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        busy(torch, a)          # a becomes 1.0, late
        lab.add(a, b, out)      # torch's current stream is `side`: lab must queue behind busy()
        out.mul_(10)            # and torch's next op behind lab
    side.synchronize()
    assert torch.equal(out, torch.full_like(out, 30.0))


@pytest.mark.parametrize("kind", ["lab.Stream", "torch.Stream", "int handle"])
def test_explicit_stream_is_ordered_with_the_producer(kind):
    torch = need("torch")
    side = torch.cuda.Stream()
    other = {"lab.Stream": lambda: lab.Stream(), "torch.Stream": lambda: torch.cuda.Stream(),
             "int handle": lambda: torch.cuda.Stream().cuda_stream}[kind]()
    a = torch.zeros(N, device="cuda")
    b = torch.full((N,), 2.0, device="cuda")
    out = torch.empty(N, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        busy(torch, a)
        lab.add(a, b, out, stream=other)  # another stream: must wait for `side`, and `side` for it
        out.mul_(10)
    side.synchronize()
    assert torch.equal(out, torch.full_like(out, 30.0))


def test_lab_stream_context_with_torch_tensors():
    torch = need("torch")
    s = lab.Stream()
    a = torch.zeros(N, device="cuda")
    b = torch.full((N,), 2.0, device="cuda")
    out = torch.empty(N, device="cuda")
    torch.cuda.synchronize()
    busy(torch, a)                 # on torch's default stream
    with lab.stream(s):
        lab.add(a, b, out)         # launched on s, after the default stream's work
    out.mul_(10)                   # default stream, after lab's launch
    torch.cuda.synchronize()
    assert torch.equal(out, torch.full_like(out, 30.0))


def cupy_race(cupy, **lab_kwargs):
    """On a busy non-blocking CuPy stream: a += ..., a = 1, lab.add(a, b, out), out *= 10. lab's
    launch must order after CuPy's work and before CuPy's next op, or out is not all 30."""
    with cupy.cuda.Stream(non_blocking=True) as s:
        a = cupy.zeros(N, dtype=cupy.float32)
        b = cupy.full(N, 2.0, dtype=cupy.float32)
        out = cupy.empty(N, dtype=cupy.float32)
        for _ in range(40):
            cupy.multiply(a, 1.0000001, out=a)
        a.fill(1.0)
        lab.add(a, b, out, **lab_kwargs)
        out *= 10
        s.synchronize()
    return out


def test_cupy_stream_race():
    cupy = need("cupy")
    out = cupy_race(cupy)  # CuPy's CAI declares its stream: lab launches there
    assert bool((out == 30.0).all())


def test_cupy_explicit_other_stream():
    cupy = need("cupy")
    out = cupy_race(cupy, stream=lab.Stream())  # another stream: ordered with CuPy's by events
    assert bool((out == 30.0).all())


def test_torch_graph_capture_and_replay():
    torch = need("torch")
    a = torch.rand(N, device="cuda")
    b = torch.rand(N, device="cuda")
    out = torch.empty(N, device="cuda")

    def launch():
        lab.fused_add_mul(a, b, 0.5, out)
        lab.relu(out, out)

    def refill():
        a.copy_(torch.randn(N, device="cuda"))
        out.fill_(float("nan"))

    capture_and_replay(torch, launch, refill,
                       lambda _: torch.testing.assert_close(out, torch.relu((a + b) * 0.5)), replays=3)


def test_torch_graph_of_100_lab_ops():
    torch = need("torch")
    x = torch.rand(4096, device="cuda")
    step = torch.full((4096,), 0.25, device="cuda")
    acc = torch.empty_like(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        lab.copy(x, acc)
        for _ in range(99):
            lab.add(acc, step, acc)
    for value in (1.0, -3.0):
        x.fill_(value)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.allclose(acc, torch.full_like(acc, value + 99 * 0.25))


def test_cupy_stream_capture():
    cupy = need("cupy")
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        a = cupy.random.rand(N, dtype=cupy.float32)
        b = cupy.random.rand(N, dtype=cupy.float32)
        out = cupy.empty_like(a)
        s.synchronize()
        s.begin_capture()
        lab.mul(a, b, out)
        lab.sqrt(out, out)
        graph = s.end_capture()
        for _ in range(2):
            a[...] = cupy.random.rand(N, dtype=cupy.float32)
            out.fill(cupy.nan)
            graph.launch()
            s.synchronize()
            assert bool(cupy.allclose(out, cupy.sqrt(a * b)))


# ---- lab.Array ----

@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8"])
def test_array_numpy_round_trip(dtype):
    host = (np.arange(1000) % 97).astype(dtype).reshape(10, 100)
    arr = lab.asarray(host)
    assert arr.shape == (10, 100) and arr.dtype == dtype and arr.nbytes == host.nbytes
    assert arr.strides == host.strides and arr.device == 0
    np.testing.assert_array_equal(arr.numpy(), host)


def test_array_ops_with_numpy_only():
    a = lab.asarray(np.linspace(-2, 2, 10007, dtype=np.float32))
    b = lab.asarray(np.full(10007, 0.5, dtype=np.float32))
    out = lab.empty(10007)
    lab.fused_add_mul(a, b, 3.0, out)
    np.testing.assert_allclose(out.numpy(), (a.numpy() + 0.5) * 3.0, rtol=1e-6)
    z = lab.zeros((3, 4), "int32")
    np.testing.assert_array_equal(z.numpy(), np.zeros((3, 4), np.int32))
    assert lab.asarray(a) is a
    cast = lab.asarray(a, "float16")
    np.testing.assert_allclose(cast.numpy(), a.numpy().astype(np.float16))


def test_array_on_its_own_stream():
    s = lab.Stream()
    with lab.stream(s):
        a = lab.asarray(np.arange(100, dtype=np.float32))
        out = lab.empty(100)
        lab.relu(a, out)
    assert a.stream == s.handle and out.stream == s.handle
    np.testing.assert_array_equal(out.numpy(), np.arange(100, dtype=np.float32))


@pytest.mark.parametrize("how", ["stream=", "lab.stream()", "inherited"])
def test_array_keeps_its_last_stream_alive(how):
    """An array freed after the lab.Stream it was last used on: the free is queued on that stream,
    so the array must keep the stream object alive until then."""
    import gc
    host = np.arange(1 << 20, dtype=np.float32)
    s = lab.Stream()
    if how == "stream=":
        a = lab.asarray(host, stream=s)
        out = lab.empty(host.shape, stream=s)
    elif how == "lab.stream()":
        with lab.stream(s):
            a, out = lab.asarray(host), lab.empty(host.shape)
    else:
        a = lab.asarray(host)                # on the default stream
        out = lab.empty(host.shape, stream=s)
        lab.relu(a, out)                     # launched on out's stream, s: a was last used there too
        assert a.stream == s.handle
    for _ in range(20):
        lab.add(a, a, out)
    del s
    gc.collect()
    values = out.numpy()
    del a, out
    gc.collect()
    lab.synchronize()
    np.testing.assert_array_equal(values, host * 2)


def test_array_through_torch_without_copy():
    torch = need("torch")
    arr = lab.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    via_cai = torch.as_tensor(arr, device="cuda")
    via_dlpack = torch.from_dlpack(arr)
    assert via_cai.data_ptr() == arr.data_ptr == via_dlpack.data_ptr()
    via_dlpack.mul_(2)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(arr.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) * 2)
    bf16 = lab.empty((5,), "bfloat16")
    t = torch.from_dlpack(bf16)
    assert t.dtype == torch.bfloat16 and t.data_ptr() == bf16.data_ptr
    del arr
    assert via_dlpack.sum().item() == 2 * 66  # the tensor keeps the memory alive


def test_array_through_cupy_and_numba_without_copy():
    cupy = need("cupy")
    arr = lab.asarray(np.arange(64, dtype=np.int32))
    assert cupy.asarray(arr).data.ptr == arr.data_ptr
    assert cupy.from_dlpack(arr).data.ptr == arr.data_ptr
    cuda = need("numba")
    view = cuda.as_cuda_array(arr)
    assert view.device_ctypes_pointer.value == arr.data_ptr
    np.testing.assert_array_equal(view.copy_to_host(), np.arange(64, dtype=np.int32))


def test_array_memory_is_given_back():
    # lab's own pool counters, not the device's free memory: other test processes share the GPU.
    lab.synchronize()
    allocated_before, reserved_before = lab.memory_allocated(), lab.memory_reserved()
    held = lab.empty(1 << 18)  # 1 MiB, alive across the loop
    assert lab.memory_allocated() >= allocated_before + (1 << 20)
    for _ in range(10_000):
        a = lab.empty(1 << 18)
        del a
    del held
    lab.synchronize()
    assert lab.memory_allocated() == allocated_before
    assert lab.memory_reserved() <= reserved_before + (64 << 20)


def test_memory_stats_follow_arrays_and_scratch():
    # lab's own pools, not the device's free memory: other test processes share the GPU.
    lab.synchronize()
    before = lab.memory_stats()
    assert set(before) == {"allocated_bytes.current", "allocated_bytes.peak", "reserved_bytes.current",
                           "reserved_bytes.peak", "scratch_bytes.current", "scratch_bytes.peak",
                           "scratch_reserved_bytes.current", "scratch_reserved_bytes.peak", "num_allocs",
                           "num_frees", "device_free_bytes", "device_total_bytes"}
    size = 64 << 20
    held = lab.empty(size // 4)
    during = lab.memory_stats()
    assert during["allocated_bytes.current"] >= before["allocated_bytes.current"] + size
    assert during["allocated_bytes.peak"] >= during["allocated_bytes.current"]
    assert during["num_allocs"] == before["num_allocs"] + 1
    assert lab.max_memory_allocated() == lab.memory_stats()["allocated_bytes.peak"]
    del held
    lab.synchronize()
    after = lab.memory_stats()
    assert after["num_frees"] == before["num_frees"] + 1
    assert after["allocated_bytes.current"] == before["allocated_bytes.current"]
    assert after["allocated_bytes.peak"] >= before["allocated_bytes.current"] + size  # the peak stays
    lab.reset_peak_memory_stats()
    assert lab.max_memory_allocated() == lab.memory_stats()["allocated_bytes.current"]

    big = lab.zeros(1 << 22)  # foreach_norm keeps its chunks' partial sums in scratch memory
    lab.foreach_norm([big], lab.empty(1))
    lab.synchronize()
    assert lab.memory_stats()["scratch_reserved_bytes.peak"] > 0
    del big
    lab.empty_cache()
    emptied = lab.memory_stats()
    assert emptied["scratch_reserved_bytes.current"] == emptied["scratch_bytes.current"] == 0
    assert emptied["reserved_bytes.current"] <= max(emptied["allocated_bytes.current"], 0) + (32 << 20)


def test_out_of_memory_says_what_lab_holds_and_leaves_lab_working():
    held = lab.zeros(1 << 20)
    with pytest.raises(lab.OutOfMemoryError) as caught:
        lab.empty((1 << 40,), "float32")  # 4 TiB
    error = caught.value
    assert isinstance(error, MemoryError) and isinstance(error, lab.CudaError)
    assert error.name == "cudaErrorMemoryAllocation"
    message = str(error)
    assert "empty(): CUDA error during cudaMallocAsync of 4398046511104 bytes" in message
    assert "MiB in lab.Arrays" in message and "MiB of kernel scratch" in message
    assert "the device has" in message and "lab.empty_cache()" in message
    out = lab.empty(1 << 20)
    lab.add(held, held, out)  # not sticky: the context still works
    assert float(out.numpy().sum()) == 0.0


def test_dlpack_export_options():
    arr = lab.zeros(8)
    assert arr.__dlpack_device__() == (2, 0)
    with pytest.raises(BufferError):
        arr.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        arr.__dlpack__(dl_device=(1, 0))
    with pytest.raises(ValueError, match="ambiguous"):
        arr.__dlpack__(stream=0)
    arr.__dlpack__(stream=-1)  # unconsumed capsules free their tensor
    arr.__dlpack__(max_version=(1, 0))


# ---- events, streams ----

def test_event_timing_agrees_with_torch():
    torch = need("torch")
    x = torch.rand(1 << 26, device="cuda")
    y = torch.empty_like(x)
    stream = torch.cuda.current_stream()
    start, end = lab.Event(timing=True), lab.Event(timing=True)
    t_start, t_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    lab.gelu(x, y)
    start.record(stream=stream)
    t_start.record()
    for _ in range(20):
        lab.gelu(x, y)
    t_end.record()
    end.record(stream=stream)
    end.synchronize()
    assert end.query()
    ours, theirs = start.elapsed_time(end), t_start.elapsed_time(t_end)
    assert abs(ours - theirs) <= 0.05 * theirs, (ours, theirs)


def test_event_and_stream_methods():
    s, t = lab.Stream(), lab.Stream(priority=-1)
    assert t.priority <= 0 and s.device == 0 and s.__cuda_stream__() == (0, s.handle)
    e = lab.Event()
    e.record(stream=s)
    t.wait_event(e)
    t.wait_stream(s)
    s.synchronize()
    t.synchronize()
    assert s.query() and t.query() and e.query()
    with pytest.raises(ValueError, match="timing=True"):
        e.elapsed_time(lab.Event())
    with pytest.raises(TypeError, match="expected a lab.Event"):
        s.wait_event(5)
    lab.synchronize()
    free, total = lab.mem_get_info()
    assert 0 < free <= total
    props = lab.get_device_properties(0)
    assert props["multi_processor_count"] > 0 and props["l2_cache_size"] > 0


def test_thread_local_streams_decide_the_launch():
    """Two threads, each inside its own `with lab.stream(...)`, on arrays made on a third stream:
    each launch goes on its thread's stream (a lab.Array records the stream it was last used on)."""
    maker = lab.Stream()
    host = np.arange(1 << 16, dtype=np.float32)
    results, errors = {}, []
    barrier = threading.Barrier(2)

    def worker(name):
        try:
            own = lab.Stream()
            x = lab.asarray(host, stream=maker)
            out = lab.empty(host.shape, stream=maker)
            barrier.wait()
            with lab.stream(own):
                for _ in range(100):
                    lab.add(x, x, out)
            results[name] = (out.stream == own.handle, out.numpy())
        except Exception as error:  # surfaced in the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for name in ("a", "b"):
        launched_on_own, values = results[name]
        assert launched_on_own
        np.testing.assert_array_equal(values, host * 2)


def test_torch_and_cupy_spellings_of_stream_and_event_methods():
    s, other = lab.Stream(), lab.Stream()
    assert s.cuda_stream == s.ptr == s.handle  # torch's and CuPy's names for the handle
    start, end = lab.Event(enable_timing=True), lab.Event(enable_timing=True)
    start.record(s)  # positional stream, as torch.cuda.Event.record / cupy.cuda.Event.record
    x = lab.zeros(1 << 20, stream=s)
    lab.add(x, x, x, stream=s)
    recorded = s.record_event(end)
    assert recorded is end
    made = s.record_event()
    assert isinstance(made, lab.Event)
    made.wait(other)  # other waits for s's work so far, with no host wait
    y = lab.empty(1 << 20, stream=other)
    lab.copy(x, y, stream=other)
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    np.testing.assert_array_equal(y.numpy(), np.zeros(1 << 20, np.float32))
    with pytest.raises(TypeError, match=r"Stream.record_event\(\): argument 'event' must be a lab.Event or None, got str"):
        s.record_event("x")
