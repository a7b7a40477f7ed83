"""No references leak through the binding: refcounts of every object a call touches are the same
after 10^4 calls as before, on succeeding calls (empty arrays launch nothing, so they succeed on any
machine; real launches where there is a GPU) and on each kind of failing call. LAB_LEAK_CALLS
raises the count: `make leak-check` runs this file with 10^6 on the GPU machine."""
import gc
import os
import sys
import tracemalloc

import pytest

import lab
from conftest import HAVE_GPU
from fakes import FakeExchangeTensor, fake_array

CALLS = int(os.environ.get("LAB_LEAK_CALLS", 10_000))


def refcounts(objects):
    return [sys.getrefcount(o) for o in objects]


def run_many(fn):
    for _ in range(CALLS):
        fn()


def failing(fn, error):
    def call():
        try:
            fn()
        except error:
            pass
        else:
            raise AssertionError("expected an error")
    return call


def process_wide(value):
    """None, the booleans and CPython's cached small ints are shared by the whole process: any thread
    moves their counts (jax's and torch's background threads, in a pytest-xdist worker that ran their
    tests), so their counts say nothing about the calls counted."""
    return value is None or isinstance(value, bool) or (type(value) is int and -5 <= value <= 256)


def tracked(*arrays):
    """Everything a call reads: the arrays, their protocol dicts, and the dicts' values (but the
    process-wide ones)."""
    objects = list(arrays)
    for a in arrays:
        cai = getattr(a, "__cuda_array_interface__", None)
        if cai is not None:
            objects.append(cai)
            objects.extend(v for v in cai.values() if not process_wide(v))
    return objects


def assert_no_leak(fn, objects):
    fn()  # first call may intern or cache (the per-type exchange-API cache)
    gc.collect()  # earlier tests' garbage: collected mid-loop, its cycles holding None or True would move
    # those counts
    before = refcounts(objects)
    tracemalloc.start()
    snapshot_before = tracemalloc.take_snapshot()
    run_many(fn)
    after = refcounts(objects)
    gc.collect()  # for the memory count: cycles the calling code made (a ctypes frame's callbacks)
    snapshot_after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert after == before
    growth = sum(stat.size_diff for stat in snapshot_after.compare_to(snapshot_before, "filename"))
    assert growth < 64 * 1024, f"memory grew by {growth} bytes over {CALLS} calls"
    print(f"{CALLS} calls: refcounts unchanged, traced memory grew {growth} bytes")


def test_succeeding_calls_do_not_leak():
    a, b, out = (fake_array(shape=(0, 4), ptr=0) for _ in range(3))
    alpha = 2.5
    assert_no_leak(lambda: lab.add(a, b, out, alpha=alpha), tracked(a, b, out) + [alpha, lab.add])


def test_succeeding_exchange_calls_do_not_leak():
    a, b, out = (FakeExchangeTensor(shape=(0,)) for _ in range(3))
    assert_no_leak(lambda: lab.fused_add_mul(a, b, 3.0, out), [a, b, out, FakeExchangeTensor])


@pytest.mark.parametrize("case", ["bad_type", "integer_inputs", "shape_mismatch", "readonly", "bad_keyword",
                                  "bad_stream", "malformed_typestr", "bad_alpha"])
def test_failing_calls_do_not_leak(case):
    a, b, out = fake_array(), fake_array(), fake_array()
    calls = {
        "bad_type": (lambda: lab.add(a, 3, out), TypeError),
        "integer_inputs": (lambda: lab.sqrt(fake_int, out), TypeError),
        "shape_mismatch": (lambda: lab.add(a, fake_short, out), ValueError),
        "readonly": (lambda: lab.add(a, b, fake_readonly), ValueError),
        "bad_keyword": (lambda: lab.add(a, b, out, bogus=1), TypeError),
        "bad_stream": (lambda: lab.add(a, b, out, stream=stream_object), TypeError),
        "malformed_typestr": (lambda: lab.add(fake_bad_typestr, b, out), ValueError),
        "bad_alpha": (lambda: lab.add(a, b, out, alpha="x"), TypeError),
    }
    fake_int, fake_short = fake_array(typestr="<i4"), fake_array(shape=(3,))
    fake_readonly, fake_bad_typestr, stream_object = fake_array(readonly=True), fake_array(typestr="<q9"), object()
    fn, error = calls[case]
    objects = tracked(a, b, out, fake_int, fake_short, fake_readonly, fake_bad_typestr) + [stream_object]
    assert_no_leak(failing(fn, error), objects)


@pytest.mark.parametrize("case", ["softmax_empty", "layer_norm_empty", "stats_shape", "residual_alone", "bad_eps",
                                  "overlap", "axis", "loss_none_empty", "target_dtype", "reduction", "glu_pair",
                                  "glu_overlap", "glu_product", "glu_product_shape"])
def test_rowwise_calls_do_not_leak(case):
    """The row-wise runner reads up to eight optional arrays from one table: every path through it,
    succeeding (no rows: nothing launched) and failing, leaves refcounts and memory flat."""
    x, out, w = fake_array(shape=(6, 10)), fake_array(shape=(6, 10)), fake_array(shape=(10,))
    empty, empty_out, no_stats = fake_array(shape=(0, 10)), fake_array(shape=(0, 10)), fake_array(shape=(0,))
    bad_stats, eps = fake_array(shape=(6, 1)), -1.0
    same = fake_array(shape=(6, 10), ptr=x.__cuda_array_interface__["data"][0] + 4)
    targets, targets_empty = fake_array(shape=(6,), typestr="<i8"), fake_array(shape=(0,), typestr="<i8")
    loss, empty_pair, float_targets = fake_array(shape=()), fake_array(shape=(0, 10)), fake_array(shape=(6,))
    empty_product = fake_array(shape=(0, 10))
    calls = {
        "softmax_empty": (lambda: lab.softmax(empty, empty_out), None),
        "layer_norm_empty": (lambda: lab.layer_norm(empty, None, None, empty_out, mean=no_stats, rstd=no_stats), None),
        "stats_shape": (lambda: lab.rms_norm(x, w, out, rstd=bad_stats), ValueError),
        "residual_alone": (lambda: lab.rms_norm(x, w, out, residual=x), TypeError),
        "bad_eps": (lambda: lab.layer_norm(x, w, None, out, eps=eps), ValueError),
        "overlap": (lambda: lab.softmax(x, same), ValueError),
        "axis": (lambda: lab.softmax(x, out, axis=5), ValueError),
        "loss_none_empty": (lambda: lab.cross_entropy(empty, targets_empty, no_stats, reduction="none"), None),
        "target_dtype": (lambda: lab.cross_entropy(x, float_targets, loss), TypeError),
        "reduction": (lambda: lab.cross_entropy(x, targets, loss, reduction="avg", label_smoothing=0.5), ValueError),
        "glu_pair": (lambda: lab.swiglu_backward(empty, empty, empty, empty_out, empty_pair), None),
        "glu_overlap": (lambda: lab.geglu_backward(x, x, x, out, out), ValueError),
        "glu_product": (lambda: lab.swiglu_backward(empty, empty, empty, empty_out, empty_pair, product=empty_product),
                        None),
        "glu_product_shape": (lambda: lab.swiglu_backward(x, x, x, out, same, product=w), ValueError),
    }
    fn, error = calls[case]
    objects = tracked(x, out, w, empty, empty_out, no_stats, bad_stats, same, targets, targets_empty, loss,
                      empty_pair, float_targets, empty_product) + [eps]
    assert_no_leak(fn if error is None else failing(fn, error), objects)


@pytest.mark.parametrize("case", ["empty", "q_alone_empty", "k_alone", "shape", "rotary_dim", "overlap",
                                  "interleaved_raises"])
def test_rope_calls_do_not_leak(case):
    """Every path through the rope binding - the options, the six arrays, k left out - succeeding (no
    positions: nothing launched) and failing."""
    q, k = fake_array(shape=(2, 4, 5, 8)), fake_array(shape=(2, 2, 5, 8))
    q_out, k_out, cos = fake_array(shape=(2, 4, 5, 8)), fake_array(shape=(2, 2, 5, 8)), fake_array(shape=(5, 8))
    empty_q, empty_k, empty_cos = fake_array(shape=(2, 4, 0, 8)), fake_array(shape=(2, 2, 0, 8)), fake_array(shape=(0, 8))
    empty_q_out, empty_k_out, rotary_dim = fake_array(shape=(2, 4, 0, 8)), fake_array(shape=(2, 2, 0, 8)), 6

    class Truthless:
        def __bool__(self):
            raise RuntimeError("no truth")
    truthless = Truthless()
    calls = {
        "empty": (lambda: lab.rope(empty_q, empty_k, empty_cos, empty_cos, empty_q_out, empty_k_out), None),
        "q_alone_empty": (lambda: lab.rope_backward(empty_q, None, empty_cos, empty_cos, empty_q_out, None), None),
        "k_alone": (lambda: lab.rope(q, k, cos, cos, q_out, None), TypeError),
        "shape": (lambda: lab.rope(q, k, cos, cos, k_out, q_out), ValueError),
        "rotary_dim": (lambda: lab.rope(q, k, cos, cos, q_out, k_out, rotary_dim=rotary_dim), ValueError),
        "overlap": (lambda: lab.rope(q, k, cos, cos, cos, k_out), ValueError),
        "interleaved_raises": (lambda: lab.rope(q, k, cos, cos, q_out, k_out, interleaved=truthless), RuntimeError),
    }
    fn, error = calls[case]
    objects = tracked(q, k, q_out, k_out, cos, empty_q, empty_k, empty_cos, empty_q_out, empty_k_out) + [
        rotary_dim, truthless]
    assert_no_leak(fn if error is None else failing(fn, error), objects)


@pytest.mark.parametrize("case", ["raw_overflow", "raw_signature_dtype", "raw_count", "elementwise_number",
                                  "elementwise_disagree", "frame_unknown_number", "frame_buffer_dtype"])
def test_jit_registrations_and_refused_frames_do_not_leak(case):
    """lab.jax's registration of a user's kernel, refused (a registration that succeeds is kept for the
    life of the process, by design), and lab_kernel frames refused against a registration."""
    import ctypes
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from xla_frames import F32, F64, S64, Xla
    raw = lab.RawKernel('extern "C" __global__ void k(const float* x, int n, float* y) {}', "k",
                        signature="const float*, int, float*")
    fma = lab.ElementwiseKernel("T x, float32 a", "T z", "z = a * x", "scale_by")
    f32 = bytes([2])
    big, two, items = 2 ** 40, 2.0, (None, 7, None)
    registered = raw._ffi_register(1, 32, 0, items, f32 * 2, bytes([0, 1]), None, raw._signature)
    attr = {"kernel": (S64, ctypes.c_int64, registered, 3)}
    target = lab.lab._xla_ffi_targets()["lab_kernel"]
    calls = {
        "raw_overflow": (lambda: raw._ffi_register(1, 32, 0, (None, big, None), f32 * 2, bytes([0, 1]), None,
                                                   raw._signature), OverflowError),
        "raw_signature_dtype": (lambda: raw._ffi_register(1, 32, 0, items, bytes([3, 2]), bytes([0, 1]), None,
                                                          raw._signature), TypeError),
        "raw_count": (lambda: raw._ffi_register(1, 32, 0, (None, 7), f32, bytes([0]), None, raw._signature), TypeError),
        "elementwise_number": (lambda: fma._ffi_register(b"2d2", (None, "two"), b"*f"), TypeError),
        "elementwise_disagree": (lambda: fma._ffi_register(b"2d2", (two, two), b"*f"), ValueError),
        "frame_unknown_number": (lambda: Xla().call(target, [(F32, (4,))], [(F32, (4,))],
                                                    {"kernel": (S64, ctypes.c_int64, -1, 3)}), None),
        "frame_buffer_dtype": (lambda: Xla().call(target, [(F64, (4,))], [(F32, (4,))], attr), None),
    }
    fn, error = calls[case]
    assert_no_leak(fn if error is None else failing(fn, error), [raw, fma, big, two, items])


@pytest.mark.gpu
def test_rowwise_launches_do_not_leak():
    """Real launches, the weight-gradient partials taken from and given back to the scratch pool."""
    torch = pytest.importorskip("torch")
    x, dy = torch.randn(64, 4096, device="cuda"), torch.randn(64, 4096, device="cuda")
    w, grad_w, rstd = torch.randn(4096, device="cuda"), torch.empty(4096, device="cuda"), torch.empty(64, device="cuda")
    out, grad_x = torch.empty_like(x), torch.empty_like(x)
    lab.rms_norm(x, w, out, rstd=rstd)
    assert_no_leak(lambda: lab.rms_norm_backward(dy, x, w, rstd, grad_x, grad_w), [x, dy, w, grad_w, rstd, grad_x])
    torch.cuda.synchronize()


@pytest.mark.skipif(HAVE_GPU, reason="needs a machine without a GPU")
def test_cuda_error_path_does_not_leak():
    a, b, out = fake_array(), fake_array(), fake_array()
    assert_no_leak(failing(lambda: lab.add(a, b, out), lab.CudaError), tracked(a, b, out) + [lab.CudaError])


@pytest.mark.gpu
def test_real_launches_do_not_leak():
    torch = pytest.importorskip("torch")
    a, b, out = (torch.ones(1024, device="cuda") for _ in range(3))
    assert_no_leak(lambda: lab.add(a, b, out), [a, b, out])
    torch.cuda.synchronize()
    assert bool((out == 2).all())


@pytest.mark.gpu
def test_real_launches_on_lab_arrays_and_cai_do_not_leak():
    """lab.Array (its stream bookkeeping) and a CAI operand (the located-memory cache)."""
    import numpy as np
    x = lab.asarray(np.ones(1024, dtype=np.float32))
    y = lab.asarray(np.ones(1024, dtype=np.float32))
    view = fake_array(shape=(1024,), ptr=y.__cuda_array_interface__["data"][0])
    assert_no_leak(lambda: lab.add(x, view, y), tracked(x, y, view))
    lab.synchronize()


@pytest.mark.gpu
def test_refused_host_memory_does_not_leak():
    import numpy as np
    if lab.get_device_properties(0)["pageable_memory_access"]:
        pytest.skip("this GPU reads pageable host memory")
    host = np.zeros(64, dtype=np.float32)
    x = lab.asarray(np.ones(64, dtype=np.float32))
    a = fake_array(shape=(64,), ptr=host.ctypes.data)
    assert_no_leak(failing(lambda: lab.add(a, x, x), ValueError), tracked(a, x))


def test_module_refcounts_stable():
    before = sys.getrefcount(lab.CudaError)
    for _ in range(100):
        try:
            lab.add(1, 2, 3)
        except TypeError:
            pass
    after = sys.getrefcount(lab.CudaError)  # computed outside the assert: pytest's rewriting holds temporaries
    assert after == before


def test_hundred_thousand_failing_calls_do_not_leak():
    """The CI figure: 10^5 failing calls, refcounts and traced memory flat."""
    a, out = fake_array(), fake_array(readonly=True)
    fn = failing(lambda: lab.relu(a, out), ValueError)
    fn()
    gc.collect()  # as assert_no_leak does
    before = refcounts(tracked(a, out))
    tracemalloc.start()
    snapshot_before = tracemalloc.take_snapshot()
    for _ in range(100_000):
        fn()
    snapshot_after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    assert refcounts(tracked(a, out)) == before
    growth = sum(stat.size_diff for stat in snapshot_after.compare_to(snapshot_before, "filename"))
    assert growth < 64 * 1024, f"memory grew by {growth} bytes over 10^5 calls"
