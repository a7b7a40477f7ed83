"""cuBLASLt, the library behind lab.matmul: where to find it. The C binding (src/binding/matmul.c)
asks for these paths at the first product that computes, dlopens the first that works and fills
its function table (src/dispatch/cublaslt.c); nothing here runs on the per-call path.

    pip install nvidia-cublas        # CUDA 13 (or nvidia-cublas-cu12; `pip install lab[blas]`)
    LAB_CUBLASLT=/path/to/libcublasLt.so.13 python ...   # or name the file
"""
from . import _vendor


def cublaslt_candidates():
    """The paths the first lab.matmul tries, in order (see lab._vendor.candidates)."""
    return list(_vendor.candidates("LAB_CUBLASLT", "libcublasLt", "cublas"))


def describe():
    """One line for `python -m lab`: the cuBLASLt lab.matmul loads, or what it would try."""
    from . import lab as _core
    loaded = _core._cublaslt_info()
    if loaded:
        return f"cuBLASLt {loaded['version']} ({loaded['path']}): lab.matmul works"
    found = [path for path in cublaslt_candidates() if "/" in path]
    if found:
        return f"cuBLASLt: not loaded yet; lab.matmul's first call loads {found[0]}"
    return "cuBLASLt not found: lab.matmul needs it (pip install nvidia-cublas, or set LAB_CUBLASLT)"
