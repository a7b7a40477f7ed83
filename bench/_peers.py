"""The peers a benchmark measures lab against, where installed, for the bench/ scripts."""
import lab


def peers(script):
    """(torch, cupy), each None where not installed; None instead of the pair when this machine
    cannot run `script` (it says why): every benchmark needs a CUDA GPU and PyTorch."""
    try:
        import torch
    except ImportError:
        torch = None
    try:
        import cupy
    except ImportError:
        cupy = None
    if not lab.is_available() or torch is None:
        print(f"{script}: needs a CUDA GPU and PyTorch")
        return None
    return torch, cupy
