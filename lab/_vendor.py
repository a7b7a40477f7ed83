"""Where NVIDIA's shared libraries are on this machine: the one search that lab.compile (NVRTC) and
lab.matmul (cuBLASLt) share. Both libraries are loaded at first use, never linked, so `import lab`
works where neither is installed.

In order: the environment variable naming the file (LAB_NVRTC, LAB_CUBLASLT); the NVIDIA wheels'
library folders (nvidia/cu13/lib for CUDA 13's packages, nvidia/<name>/lib for CUDA 12's, which
torch and CuPy install too); CUDA_HOME's (or CUDA_PATH's) lib64; then the bare name, for the
dynamic loader's own search."""
import glob
import os


def candidates(env_var, library, wheel_folder):
    """Paths to try for `library` ('libnvrtc', 'libcublasLt'), best first. `wheel_folder` is the
    CUDA 12 wheel's folder under nvidia/ ('cuda_nvrtc', 'cublas')."""
    if os.environ.get(env_var):
        yield os.environ[env_var]
    try:
        import nvidia  # type: ignore[import-untyped]  # a namespace package without stubs
        for base in nvidia.__path__:
            for folder in ("cu*", wheel_folder):
                yield from sorted(glob.glob(os.path.join(base, folder, "lib", f"{library}.so*")), reverse=True)
    except ImportError:
        pass
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    yield from sorted(glob.glob(os.path.join(home, "lib64", f"{library}.so*")), reverse=True)
    yield f"{library}.so"  # the loader's path
