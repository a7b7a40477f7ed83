"""The Python half of lab's CUDA graphs: `with lab.graph(g):` and `lab.make_graphed(fn, sample_args)`.

lab.Graph itself (capture, instantiate, replay) is a C type in src/binding/graph_type.c; these two
are the shapes users know from torch.cuda.graph and torch.cuda.make_graphed_callables, written in
Python because they only arrange calls to it."""
from . import lab as _core
from ._runtime import stream as _stream_scope


class graph:
    """with lab.graph(g, stream=None, *, mode="thread_local"): ... - record the block's lab calls into g.

    Inside the block every lab call without stream= is queued on the capture stream - `stream`, else
    this thread's lab.stream(), else a new lab.Stream - and recorded instead of run; g.replay() then
    runs them all with one launch. Arrays the block allocates (lab.empty, an op's scratch) belong to
    the graph: each replay writes the same memory, so keep them to read the results. If the block
    raises, the capture is dropped and the exception goes on.
    """

    def __init__(self, g, stream=None, *, mode="thread_local"):
        if not isinstance(g, _core.Graph):
            raise TypeError(f"graph(): argument 'g' must be a lab.Graph, got {type(g).__name__}")
        self.graph = g
        self.stream = stream
        self.mode = mode
        self._scope = None

    def __enter__(self):
        capture_stream = self.stream if self.stream is not None else _core.current_stream()
        if capture_stream is None:
            capture_stream = _core.Stream()
        self.graph.capture_begin(stream=capture_stream, mode=self.mode)
        self._scope = _stream_scope(capture_stream)
        self._scope.__enter__()
        return self.graph

    def __exit__(self, exc_type, exc, traceback):
        self._scope.__exit__(exc_type, exc, traceback)
        if exc_type is not None:
            self.graph.reset()
            return False
        self.graph.capture_end()
        return False


def _signature_of(array, func, name):
    """(shape, dtype) of a CUDA array, or TypeError naming the argument it was passed as."""
    try:
        info = _core._array_info(array)
    except TypeError:
        raise TypeError(f"{func}(): {name} must be a CUDA array (an object with __cuda_array_interface__ or "
                        f"__dlpack__), got {type(array).__name__}") from None
    return info["shape"], info["dtype"]


def make_graphed(fn, sample_args, *, warmup=2):
    """fn(*arrays) recorded once as a lab.Graph; returns a function that replays it.

    `sample_args` are arrays (any producer's) of the shapes and dtypes the calls will pass. They are
    copied into inputs the graph owns, fn runs `warmup` times on them (so that what a first call
    does - loading cuBLASLt, compiling a RawKernel, making a workspace - happens outside the
    capture), then once under capture. The returned function copies its arguments into those inputs,
    replays the graph and returns what the captured call returned: the same arrays every time,
    overwritten by each replay (copy them to keep one). Called while its arguments' stream is being
    captured by someone else (torch.cuda.graph, an outer lab.graph), it runs fn itself, so the outer
    capture records the calls rather than a graph inside a graph.
    """
    if not callable(fn):
        raise TypeError(f"make_graphed(): argument 'fn' must be callable, got {type(fn).__name__}")
    if not isinstance(sample_args, (tuple, list)):
        raise TypeError("make_graphed(): argument 'sample_args' must be a tuple of arrays, got "
                        f"{type(sample_args).__name__}")
    if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0:
        raise ValueError(f"make_graphed(): argument 'warmup' must be an int >= 0, got {warmup!r}")
    signatures = [_signature_of(a, "make_graphed", f"sample_args[{i}]") for i, a in enumerate(sample_args)]
    capture_stream = _core.Stream()
    inputs = []
    for a, (shape, dtype) in zip(sample_args, signatures):
        inputs.append(_core.empty(shape, dtype, stream=capture_stream))
        _core.copy(a, inputs[-1], stream=capture_stream)
    inputs = tuple(inputs)
    with _stream_scope(capture_stream):
        for _ in range(warmup):
            fn(*inputs)
    capture_stream.synchronize()
    g = _core.Graph()
    with graph(g, stream=capture_stream):
        outputs = fn(*inputs)

    name = getattr(fn, "__name__", "graphed")

    def graphed(*args):
        if len(args) != len(inputs):
            raise TypeError(f"{name}(): takes {len(inputs)} arrays, as the sample_args it was graphed with, got "
                            f"{len(args)}")
        for i, (a, expected) in enumerate(zip(args, signatures)):
            got = _signature_of(a, name, f"argument {i}")
            if got != expected:
                raise ValueError(f"{name}(): argument {i} must have the shape {expected[0]} and dtype "
                                 f"{expected[1]} it was graphed with, got {got[0]} {got[1]}")
        # where lab would launch fn's calls now: inside someone's capture, they are recorded there
        if args and _core.is_capturing(_core._launch_stream(*args)):
            return fn(*args)
        for a, static in zip(args, inputs):
            _core.copy(a, static, stream=capture_stream)
        g.replay(stream=capture_stream)
        return outputs

    graphed.graph = g
    graphed.inputs = inputs
    return graphed
