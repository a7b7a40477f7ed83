"""`python -m lab`: what lab was built with and what it finds on this machine."""
import importlib
import platform

import lab


def _producer_line(module_name):
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # not installed, or broken: say which
        reason = "not installed" if isinstance(error, ModuleNotFoundError) else f"import failed: {error}"
        return f"{module_name:6s} {reason}"
    version = getattr(module, "__version__", "?")
    detail = ""
    if module_name == "torch":
        detail = f"CUDA {module.version.cuda}, GPU {'yes' if module.cuda.is_available() else 'no'}, " \
                 f"DLPack exchange API {'yes' if hasattr(module.Tensor, '__dlpack_c_exchange_api__') else 'no'}"
    elif module_name == "cupy":
        try:
            detail = f"{module.cuda.runtime.getDeviceCount()} GPU(s)"
        except Exception as error:
            detail = f"no GPU ({type(error).__name__})"
    elif module_name == "jax":
        try:
            detail = f"devices: {[str(d) for d in module.devices()]}"
        except Exception as error:
            detail = f"no devices ({type(error).__name__})"
    return f"{module_name:6s} {version}  {detail}".rstrip()


def describe():
    lines = [
        f"lab {lab.__version__} (Python {platform.python_version()}, {platform.machine()})",
        f"CUDA runtime (static, built with): {'.'.join(map(str, lab.cuda_runtime_version()))}",
        f"GPU code compiled in: {lab.compiled_architectures()}",
    ]
    driver = lab.cuda_driver_version()
    lines.append(f"CUDA driver: {'.'.join(map(str, driver)) if driver else 'none installed'}")
    count = lab.device_count()
    if count == 0:
        lines.append("GPUs: none - lab imports and validates arguments here, but every op raises lab.CudaError "
                     "(no CUDA driver/GPU was found)")
    for i in range(count):
        p = lab.get_device_properties(i)
        lines.append(f"GPU {i}: {p['name']}, compute capability {p['capability'][0]}.{p['capability'][1]}, "
                     f"{p['multi_processor_count']} SMs, {p['total_memory'] / 2**30:.1f} GiB, "
                     f"L2 {p['l2_cache_size'] / 2**20:.0f} MiB")
    from lab._nvrtc import describe as describe_nvrtc
    lines.append(describe_nvrtc())
    from lab._blas import describe as describe_blas
    lines.append(describe_blas())
    lines.append("producers:")
    lines.extend("  " + _producer_line(name) for name in ("torch", "cupy", "numba", "jax"))
    return "\n".join(lines)
