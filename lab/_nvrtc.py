"""Runtime compilation with NVRTC: `lab.compile(source, ...)` turns CUDA C++ into a cubin (or PTX)
without a GPU - the first half of running your own kernels on anyone's arrays.

NVRTC is a shared library found and loaded (dlopen, through ctypes) at the first compile, never
linked: `import lab` and every built-in op work without it. Where to look, in order: LAB_NVRTC (a
path to libnvrtc.so), the `nvidia-cuda-nvrtc` package (`pip install nvidia-cuda-nvrtc`, lab's test
requirements install it), CUDA_HOME's lib64, then the dynamic loader's path.

Compiled programs are cached in memory and on disk (LAB_CACHE_DIR, default ~/.cache/lab/kernels),
keyed by the source, the options, the name expressions, NVRTC's version, the architecture and lab's
version. A cache file is written to a temporary name and renamed into place, so a concurrent
process never reads half of one; each file carries a digest of its contents, and one that does not
match (a corrupt or truncated file) is compiled again, never loaded.

Compiling happens once per program, so it is plain Python here; launching - the per-call path -
belongs to the C binding."""
import ctypes
import hashlib
import json
import os
import tempfile
import threading

from . import _vendor
from ._version import __version__


class CompileError(RuntimeError):
    """NVRTC could not compile a program. `.log` holds NVRTC's log (file:line: error ...)."""

    def __init__(self, message, log=""):
        super().__init__(message)
        self.log = log


class Program:
    """A compiled program: `binary` (cubin bytes, or PTX text as bytes), `kind` ('cubin' or 'ptx'),
    `arch` (e.g. 'sm_90'), `lowered_names` (each name expression -> its mangled name) and `log`."""

    __slots__ = ("binary", "kind", "arch", "lowered_names", "log")

    def __init__(self, binary, kind, arch, lowered_names, log):
        self.binary, self.kind, self.arch, self.lowered_names, self.log = binary, kind, arch, lowered_names, log

    def __repr__(self):
        return f"<lab.Program {self.kind} for {self.arch}, {len(self.binary)} bytes>"


_NVRTC_SUCCESS = 0
_lock = threading.Lock()
_library = None
_memory_cache: "dict[str, Program]" = {}


def _candidates():
    return _vendor.candidates("LAB_NVRTC", "libnvrtc", "cuda_nvrtc")


def describe():
    """One line for `python -m lab`: NVRTC's version and where it was found, or why not."""
    try:
        library = nvrtc()
        return f"NVRTC {'.'.join(map(str, version()))} ({library._name}): lab.compile works"
    except CompileError as error:
        return f"NVRTC not found: lab.compile needs it (pip install nvidia-cuda-nvrtc) - {str(error)[:80]}..."


def nvrtc():
    """The loaded NVRTC library (a ctypes.CDLL), loading it on first use."""
    global _library
    with _lock:
        if _library is None:
            tried = []
            for path in _candidates():
                if "builtins" in os.path.basename(path):
                    continue
                try:
                    library = ctypes.CDLL(path)
                    library.nvrtcVersion  # noqa: B018  (a libnvrtc, not some other library)
                except (OSError, AttributeError) as error:
                    tried.append(f"{path} ({error})")
                    continue
                library.nvrtcGetErrorString.restype = ctypes.c_char_p
                _library = library
                break
            else:
                raise CompileError(
                    "lab.compile needs NVRTC, the CUDA runtime compiler, and found none. Install it with "
                    "`pip install nvidia-cuda-nvrtc` (or `pip install lab[jit]`), or point LAB_NVRTC at a "
                    "libnvrtc.so. Tried: " + "; ".join(tried[:6]))
    return _library


def version():
    """NVRTC's (major, minor)."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(nvrtc().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def supported_architectures():
    """The compute capabilities this NVRTC compiles for, as ints (75, 80, 90, ...)."""
    library = nvrtc()
    count = ctypes.c_int()
    _check(library.nvrtcGetNumSupportedArchs(ctypes.byref(count)), "nvrtcGetNumSupportedArchs")
    archs = (ctypes.c_int * count.value)()
    _check(library.nvrtcGetSupportedArchs(archs), "nvrtcGetSupportedArchs")
    return list(archs)


def _check(result, what):
    if result != _NVRTC_SUCCESS:
        text = nvrtc().nvrtcGetErrorString(result).decode()
        raise CompileError(f"{what} failed: {text} (nvrtcResult {result})")


def kernel_include_dirs():
    """lab's kernel headers (functors.cuh, dtype_traits.cuh, ...) - shipped in the package, or in the
    checkout's src/kernels - and the CUDA headers (with CCCL's cuda/std) when a toolkit is found."""
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [d for d in (os.path.join(here, "include"), os.path.join(os.path.dirname(here), "src", "kernels"))
            if os.path.exists(os.path.join(d, "functors.cuh"))][:1]
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    dirs += [d for d in (os.path.join(home, "include", "cccl"), os.path.join(home, "include")) if os.path.isdir(d)]
    return dirs


_device_arch: "str | None" = None


def _default_arch():
    """The architecture of device 0, where lab puts arrays unless told otherwise (asked once)."""
    global _device_arch
    if _device_arch is None:
        from . import lab as core
        if not core.is_available():
            raise ValueError("lab.compile(): no GPU here to compile for; pass arch, e.g. arch='sm_90'")
        major, minor = core.get_device_properties(0)["capability"]
        _device_arch = f"sm_{major}{minor}"
    return _device_arch


def _check_arch(arch):
    if not isinstance(arch, str) or not arch.startswith(("sm_", "compute_")) or not arch.split("_", 1)[1].isdigit():
        raise ValueError(f"lab.compile(): arch must look like 'sm_90' or 'compute_90', got {arch!r}")


def _target(arch):
    """(the option NVRTC gets, 'cubin' or 'ptx', the arch string): SASS when this NVRTC knows the
    architecture, else PTX for the newest virtual one it knows (the driver compiles it at load)."""
    _check_arch(arch)
    number = int(arch.split("_", 1)[1])
    known = supported_architectures()
    if arch.startswith("compute_"):
        return f"-arch={arch}", "ptx", arch
    if number in known:
        return f"-arch={arch}", "cubin", arch
    newest = max(a for a in known if a <= number) if any(a <= number for a in known) else max(known)
    return f"-arch=compute_{newest}", "ptx", f"compute_{newest}"


def _cache_dir():
    return os.environ.get("LAB_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "lab", "kernels")


_identity: "list | None" = None


def _nvrtc_identity():
    """Which NVRTC a compile would use, without loading it: the library file nvrtc() loads first -
    its path, size and modification time. Loading NVRTC (a 100 MB library) just to read its version
    took most of a cached kernel's start-up in a new process (bench_jit.py, 2026-11-30). Where only
    the loader's path names it, its version (which loads it)."""
    global _identity
    if _identity is None:  # once a process: every compile() call, cache hits too, computes a key
        if _library is not None:
            path = _library._name
        else:
            path = next((p for p in _candidates() if os.path.isfile(p) and "builtins" not in os.path.basename(p)),
                        None)
        if path and os.path.isfile(path):
            info = os.stat(path)
            _identity = [os.path.realpath(path), info.st_size, info.st_mtime_ns]
        else:
            _identity = list(version())
    return _identity


_headers: "list | None" = None


def _headers_identity():
    """lab's kernel headers a source may include, by name, size and modification time: an edited
    header (a checkout between versions) must not bring back a kernel compiled from the old one."""
    global _headers
    if _headers is None:
        folder = next(iter(kernel_include_dirs()), None)
        names = sorted(f for f in os.listdir(folder) if f.endswith((".cuh", ".h"))) if folder else []
        stats = [(n, os.stat(os.path.join(folder, n))) for n in names]
        _headers = [[n, info.st_size, info.st_mtime_ns] for n, info in stats]
    return _headers


def _key(source, options, name_expressions, arch):
    """The cache key: the source, options, name expressions, the requested architecture (with the
    NVRTC it fixes the compiled target), NVRTC, lab's headers and lab's version."""
    text = json.dumps([source, list(options), list(name_expressions), arch, _nvrtc_identity(), _headers_identity(),
                       __version__])
    return hashlib.sha256(text.encode()).hexdigest()


def _read_cache(path):
    """A cached Program, or None when the file is missing or does not check out."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    header, _, binary = data.partition(b"\n")
    try:
        meta = json.loads(header)
        if hashlib.sha256(binary).hexdigest() != meta["digest"] or len(binary) != meta["size"]:
            return None
        return Program(binary, meta["kind"], meta["arch"], meta["lowered_names"], meta["log"])
    except (ValueError, KeyError, TypeError):
        return None


def _write_cache(path, program):
    meta = dict(digest=hashlib.sha256(program.binary).hexdigest(), size=len(program.binary), kind=program.kind,
                arch=program.arch, lowered_names=program.lowered_names, log=program.log)
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        with os.fdopen(handle, "wb") as f:
            f.write(json.dumps(meta).encode() + b"\n" + program.binary)
        os.replace(temporary, path)  # atomic: readers see the old file or the whole new one
    except OSError:
        pass  # an unwritable cache only costs the next process a compile


def _compile(source, options, name_expressions, arch_option, kind, arch):
    library = nvrtc()
    program = ctypes.c_void_p()
    _check(library.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"lab_kernel.cu", 0, None, None),
           "nvrtcCreateProgram")
    try:
        for expression in name_expressions:
            _check(library.nvrtcAddNameExpression(program, expression.encode()), "nvrtcAddNameExpression")
        encoded = [o.encode() for o in (arch_option, "--std=c++17", *options)]
        encoded += [f"-I{d}".encode() for d in kernel_include_dirs()]
        result = library.nvrtcCompileProgram(program, len(encoded), (ctypes.c_char_p * len(encoded))(*encoded))
        size = ctypes.c_size_t()
        library.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log_buffer = ctypes.create_string_buffer(size.value)
        library.nvrtcGetProgramLog(program, log_buffer)
        log = log_buffer.value.decode(errors="replace")
        if result != _NVRTC_SUCCESS:
            raise CompileError(f"NVRTC could not compile the program:\n{log}", log)
        get_size, get = ((library.nvrtcGetCUBINSize, library.nvrtcGetCUBIN) if kind == "cubin"
                         else (library.nvrtcGetPTXSize, library.nvrtcGetPTX))
        _check(get_size(program, ctypes.byref(size)), "nvrtcGet" + kind.upper() + "Size")
        binary = ctypes.create_string_buffer(size.value)
        _check(get(program, binary), "nvrtcGet" + kind.upper())
        lowered = {}
        for expression in name_expressions:
            name = ctypes.c_char_p()
            _check(library.nvrtcGetLoweredName(program, expression.encode(), ctypes.byref(name)),
                   "nvrtcGetLoweredName")
            lowered[expression] = name.value.decode()
        return Program(binary.raw[:size.value], kind, arch, lowered, log)
    finally:
        library.nvrtcDestroyProgram(ctypes.byref(program))


def check_program(who, source, options, name_expressions, source_name="source"):
    """The arguments of a program (lab.compile's, RawModule's): the source (called `source_name`) a
    str, options and name expressions sequences of str, returned as tuples. TypeError naming `who`
    otherwise."""
    if not isinstance(source, str):
        raise TypeError(f"{who}: {source_name} must be a str of CUDA C++, got {type(source).__name__}")
    options, name_expressions = tuple(options), tuple(name_expressions)
    for what, values in (("options", options), ("name_expressions", name_expressions)):
        if not all(isinstance(v, str) for v in values):
            raise TypeError(f"{who}: {what} must be strings")
    return options, name_expressions


def compile(source, *, options=(), name_expressions=(), arch=None, cache=True):  # noqa: A001 (lab.compile)
    """Compile CUDA C++ `source` with NVRTC into a Program (cubin bytes, or PTX where this NVRTC does
    not know the architecture). No GPU is needed when `arch` is given ('sm_90', 'compute_90');
    without it, the current GPU's. `options`: NVRTC options ('-DN=4', '--use_fast_math'); lab's
    kernel headers (functors.cuh, dtype_traits.cuh) are on the include path. `name_expressions`:
    C++ names to instantiate and look up ('add<float>'), their mangled names in .lowered_names.
    A compile error raises lab.CompileError with NVRTC's log. Cached in memory and on disk
    (LAB_CACHE_DIR) unless cache=False."""
    options, name_expressions = check_program("lab.compile()", source, options, name_expressions)
    requested = arch if arch is not None else _default_arch()
    _check_arch(requested)
    if not cache:
        return _compile(source, options, name_expressions, *_target(requested))
    key = _key(source, options, name_expressions, requested)
    program = _memory_cache.get(key)
    if program is not None:
        return program
    path = os.path.join(_cache_dir(), key[:2], key + ".bin")
    program = _read_cache(path)
    if program is None:  # only a miss loads NVRTC
        program = _compile(source, options, name_expressions, *_target(requested))
        _write_cache(path, program)
    _memory_cache[key] = program
    return program
