"""lab.Graph, lab.graph and lab.make_graphed on any machine: what is refused before CUDA is asked
(the state a call needs, the stream, the mode, the arguments of make_graphed), and without a driver
a CudaError rather than a crash. The captures themselves are tests/test_graph_gpu.py's."""
import sys

import pytest

import lab
from conftest import HAVE_GPU
from fakes import fake_array

no_gpu_only = pytest.mark.skipif(HAVE_GPU, reason="checks the behaviour without a driver")


def test_a_new_graph_is_empty():
    g = lab.Graph()
    assert (g.captured, g.capturing, g.device, g.node_count, g.stream, g.random_groups) == (False, False, -1, 0,
                                                                                           None, 0)
    assert repr(g) == "<lab.Graph empty device=-1>"
    g.reset()  # nothing to drop: no error


def test_graph_takes_no_arguments():
    with pytest.raises(TypeError, match="0 arguments"):
        lab.Graph(1)
    with pytest.raises(TypeError):
        lab.Graph(stream=1)


@pytest.mark.parametrize("call, error, message", [
    (lambda g: g.replay(), RuntimeError, "nothing to replay: capture something first"),
    (lambda g: g.capture_end(), RuntimeError, "not capturing; call capture_begin"),
    (lambda g: g.capture_begin(), ValueError, "needs a stream to capture on"),
    (lambda g: g.capture_begin(stream=0), ValueError, "legacy default stream"),
    (lambda g: g.capture_begin(stream=5, mode="sometimes"), ValueError, "'mode' must be 'global', 'thread_local'"),
    (lambda g: g.capture_begin(stream=5, mode=3), ValueError, "'mode' must be"),
    (lambda g: g.capture_begin(stream="s"), TypeError, "stream"),
    (lambda g: g.replay(stream=1.5), TypeError, "stream"),
    (lambda g: g.debug_dot("/tmp/graph.dot"), RuntimeError, "nothing captured yet"),
    (lambda g: g.debug_dot(None), TypeError, "'path' must be a str, bytes or os.PathLike, got NoneType"),
])
def test_what_a_graph_refuses_before_asking_cuda(call, error, message):
    g = lab.Graph()
    with pytest.raises(error, match=message):
        call(g)
    assert not g.capturing


def test_graph_refuses_what_is_not_a_graph():
    with pytest.raises(TypeError, match="'g' must be a lab.Graph, got int"):
        lab.graph(3)


def test_is_capturing_reads_its_stream_argument():
    with pytest.raises(TypeError, match="stream"):
        lab.is_capturing("a stream")
    with pytest.raises(TypeError):
        lab.is_capturing(1, 2)


@no_gpu_only
def test_without_a_driver_capture_and_query_raise_cuda_errors():
    g = lab.Graph()
    with pytest.raises(lab.CudaError):
        g.capture_begin(stream=0x1000)
    with pytest.raises(lab.CudaError):
        with lab.graph(g, stream=0x1000):
            pass
    with pytest.raises(lab.CudaError):
        lab.is_capturing(0x1000)
    assert not g.capturing and not g.captured


@pytest.mark.parametrize("fn, sample_args, warmup, error, message", [
    (3, (), 1, TypeError, "'fn' must be callable"),
    (len, [1, 2], 1, TypeError, r"sample_args\[0\] must be a CUDA array"),
    (len, 7, 1, TypeError, "'sample_args' must be a tuple of arrays"),
    (len, (), -1, ValueError, "'warmup' must be an int >= 0"),
    (len, (), True, ValueError, "'warmup' must be an int >= 0"),
])
def test_make_graphed_checks_its_arguments(fn, sample_args, warmup, error, message):
    with pytest.raises(error, match=message):
        lab.make_graphed(fn, sample_args, warmup=warmup)


@no_gpu_only
def test_make_graphed_without_a_driver_raises_a_cuda_error():
    with pytest.raises(lab.CudaError):
        lab.make_graphed(len, (fake_array((4,)),))


def test_graph_objects_do_not_leak():
    g = lab.Graph()
    before = sys.getrefcount(g)
    for _ in range(100):
        with pytest.raises(RuntimeError):
            g.replay()
        _ = (g.stream, g.device, g.node_count, repr(g))
    assert sys.getrefcount(g) == before
