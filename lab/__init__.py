"""lab: CUDA kernels you call on the arrays you already have.

    import torch, lab
    a, b, c = (torch.rand(10_000_000, device="cuda") for _ in range(3))
    lab.vector_add(a, b, c)          # c = a + b, zero-copy, on torch's current stream

Any CUDA array works - PyTorch, CuPy, Numba, JAX - because lab reads device pointers from the
arrays' own protocols (__cuda_array_interface__, the DLPack C exchange API). Every op writes into
the `out` array you pass and returns it. The compiled core is lab.lab (src/binding, src/dispatch,
src/kernels); lab.compile (NVRTC, loaded at first use) compiles your own kernels, and lab.matmul
drives cuBLASLt (also loaded at first use).
"""
from ._version import __version__

try:
    from . import lab as _core  # noqa: F401  (first, so a missing build gives the message below)
except ImportError as error:  # the extension is not built
    raise ImportError(
        "lab's compiled extension (lab.lab) is not built or cannot be loaded: "
        f"{error}. Build it from the repository root with `make build` "
        "(python3 setup.py build_ext --inplace) or install with `pip install .`; "
        "nvcc from the CUDA toolkit must be on PATH or CUDA_HOME must point at the toolkit."
    ) from error

from ._nvrtc import CompileError, Program, compile  # noqa: E402  (NVRTC itself loads at the first compile)
from ._jit import RawKernel, RawModule  # noqa: E402
from ._elementwise_kernel import ElementwiseKernel  # noqa: E402
from ._runtime import asarray, stream  # noqa: E402
from ._graphs import graph, make_graphed  # noqa: E402
from .lab import (  # noqa: E402  (re-exported: the public API)
    Array,
    CudaError,
    Event,
    Graph,
    OutOfMemoryError,
    Stream,
    abs,
    add,
    add_relu,
    amax,
    amin,
    argmax,
    argmin,
    attention,
    attention_backward,
    axpby,
    cast_float8,
    bernoulli,
    compiled_architectures,
    copy,
    cross_entropy,
    cross_entropy_backward,
    cuda_driver_version,
    cuda_runtime_version,
    current_stream,
    device_count,
    div,
    dot,
    dropout,
    dropout_add,
    empty,
    empty_cache,
    exp,
    foreach_add,
    foreach_axpby,
    foreach_copy,
    foreach_mul,
    foreach_norm,
    foreach_scale,
    fused_add_mul,
    gelu,
    geglu,
    geglu_backward,
    get_device_properties,
    get_rng_state,
    is_available,
    is_capturing,
    layer_norm,
    layer_norm_backward,
    linear_cross_entropy,
    linear_cross_entropy_plan,
    log_softmax,
    log_softmax_backward,
    logsumexp,
    manual_seed,
    matmul,
    max_memory_allocated,
    maximum,
    mean,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    minimum,
    mul,
    neg,
    norm,
    normal,
    prod,
    randint,
    relu,
    reset_peak_memory_stats,
    rms_norm,
    rms_norm_backward,
    rope,
    rope_backward,
    adam_step,
    set_rng_state,
    sgd_step,
    sigmoid,
    silu,
    softmax,
    softmax_backward,
    sqrt,
    std,
    sub,
    sum,
    swiglu,
    swiglu_backward,
    synchronize,
    uniform,
    var,
    vector_add,
    zeros,
)

__all__ = [
    "__version__", "abs", "adam_step", "add", "add_relu", "amax", "amin", "argmax", "argmin",
    "Array", "asarray", "attention", "attention_backward", "axpby", "bernoulli", "cast_float8", "compile", "compiled_architectures", "CompileError", "copy", "cross_entropy", "cross_entropy_backward",
    "cuda_driver_version", "cuda_runtime_version", "CudaError", "current_stream", "device_count",
    "div", "dot", "dropout", "dropout_add", "ElementwiseKernel", "empty", "empty_cache", "Event", "exp", "foreach_add", "foreach_axpby", "foreach_copy", "foreach_mul",
    "foreach_norm", "foreach_scale", "fused_add_mul", "geglu", "geglu_backward", "gelu", "get_device_properties",
    "get_rng_state", "manual_seed", "normal", "randint", "set_rng_state", "uniform",
    "Graph", "graph", "is_capturing", "make_graphed",
    "is_available", "layer_norm", "layer_norm_backward", "linear_cross_entropy", "linear_cross_entropy_plan", "log_softmax", "log_softmax_backward", "logsumexp", "matmul", "max_memory_allocated", "maximum", "mean", "mem_get_info", "memory_allocated",
    "memory_reserved", "memory_stats",
    "minimum", "mul", "neg", "norm", "OutOfMemoryError", "prod", "Program", "RawKernel", "RawModule", "relu",
    "reset_peak_memory_stats", "rms_norm", "rms_norm_backward", "rope", "rope_backward", "sgd_step", "sigmoid", "silu", "softmax", "softmax_backward", "sqrt",
    "std", "Stream", "stream", "sub", "sum", "swiglu", "swiglu_backward", "synchronize", "var", "vector_add", "zeros",
]


def __getattr__(name):
    # lab.nn is the torch face: imported on first use, so `import lab` never imports torch.
    if name == "nn":
        import importlib

        return importlib.import_module(".nn", __name__)
    raise AttributeError(f"module 'lab' has no attribute {name!r}")
