"""lab.compile on any machine: NVRTC compiles without a GPU, so compile
results, errors with NVRTC's log, options, name expressions, lab's own headers and the on-disk
cache (hit, miss, corrupt entry, concurrent writers) are all tested here."""
import os
import subprocess
import sys

import pytest

import lab
import lab._nvrtc as nvrtc
from conftest import HAVE_GPU

KERNEL = 'extern "C" __global__ void twice(float *x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2.f; }'


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Each test gets its own cache directory and an empty in-memory cache."""
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(nvrtc, "_memory_cache", {})
    return tmp_path / "cache"


def cache_files(root):
    return sorted(p for p in root.rglob("*.bin")) if root.exists() else []


def test_compiles_to_a_cubin_without_a_gpu():
    program = lab.compile(KERNEL, arch="sm_90")
    assert program.kind == "cubin" and program.arch == "sm_90" and program.binary[:4] == b"\x7fELF"
    assert "cubin for sm_90" in repr(program)


def test_ptx_for_virtual_and_unknown_architectures():
    assert lab.compile(KERNEL, arch="compute_90").kind == "ptx"
    newest = max(nvrtc.supported_architectures())
    program = lab.compile(KERNEL, arch=f"sm_{newest + 1000}")  # newer than this NVRTC knows
    assert program.kind == "ptx" and program.arch == f"compute_{newest}"
    assert b".visible .entry twice" in program.binary


def test_compile_errors_carry_nvrtcs_log():
    with pytest.raises(lab.CompileError, match=r"NVRTC could not compile") as caught:
        lab.compile('__global__ void k() {\n    undefined_thing();\n}', arch="sm_90")
    assert 'lab_kernel.cu(2): error: identifier "undefined_thing" is undefined' in caught.value.log


def test_options_reach_the_compiler():
    source = "static_assert(WIDTH == 3, \"WIDTH\");\n" + KERNEL
    assert lab.compile(source, arch="sm_90", options=["-DWIDTH=3"]).kind == "cubin"
    with pytest.raises(lab.CompileError) as caught:
        lab.compile(source, arch="sm_90", options=["-DWIDTH=4"])
    assert "WIDTH" in caught.value.log


def test_name_expressions_give_the_lowered_names_of_templates():
    source = "template <typename T, int N> __global__ void scale(T *x) { x[threadIdx.x] *= T(N); }"
    program = lab.compile(source, arch="sm_90", name_expressions=["scale<float, 2>", "scale<double, 3>"])
    assert program.lowered_names == {"scale<float, 2>": "_Z5scaleIfLi2EEvPT_", "scale<double, 3>": "_Z5scaleIdLi3EEvPT_"}


def test_user_kernels_include_labs_headers():
    source = '''#include "functors.cuh"
#include "dtype_traits.cuh"
extern "C" __global__ void gelu(const __half *x, float *out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = lab::GeluOp()(lab::load_as_compute(x[i]), 0.f, 0.f, lab::OpParams<float>{1.f, 1.f});
}'''
    assert lab.compile(source, arch="sm_90").kind == "cubin"


@pytest.mark.parametrize("call, error, pattern", [
    (lambda: lab.compile(b"bytes", arch="sm_90"), TypeError, "source must be a str"),
    (lambda: lab.compile(KERNEL, arch="90"), ValueError, "arch must look like 'sm_90'"),
    (lambda: lab.compile(KERNEL, arch="sm_x"), ValueError, "arch must look like"),
    (lambda: lab.compile(KERNEL, arch="sm_90", options=[3]), TypeError, "options must be strings"),
    (lambda: lab.compile(KERNEL, arch="sm_90", name_expressions=[None]), TypeError, "name_expressions must be"),
])
def test_bad_arguments(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


@pytest.mark.skipif(HAVE_GPU, reason="checks the behaviour without a GPU")
def test_without_a_gpu_the_architecture_must_be_given():
    with pytest.raises(ValueError, match="no GPU here to compile for; pass arch"):
        lab.compile(KERNEL)


def test_without_arch_the_gpus_architecture_is_used(monkeypatch):
    from lab import lab as core
    monkeypatch.setattr(core, "is_available", lambda: True)
    monkeypatch.setattr(nvrtc, "_device_arch", None)  # asked once per process: ask again, and forget after
    monkeypatch.setattr(core, "get_device_properties", lambda device: {"capability": (8, 0)})
    assert lab.compile(KERNEL).arch == "sm_80"


def test_python_m_lab_reports_nvrtc():
    assert nvrtc.describe().startswith("NVRTC 1")


def test_missing_nvrtc_says_what_to_install(monkeypatch):
    monkeypatch.setattr(nvrtc, "_library", None)
    monkeypatch.setattr(nvrtc, "_candidates", lambda: iter(["/nonexistent/libnvrtc.so.13"]))
    with pytest.raises(lab.CompileError, match=r"pip install nvidia-cuda-nvrtc.*LAB_NVRTC"):
        lab.compile(KERNEL, arch="sm_90", cache=False)
    monkeypatch.undo()


def test_cache_hit_in_memory_and_on_disk(private_cache, monkeypatch):
    first = lab.compile(KERNEL, arch="sm_90")
    assert lab.compile(KERNEL, arch="sm_90") is first  # memory
    (path,) = cache_files(private_cache)
    monkeypatch.setattr(nvrtc, "_memory_cache", {})
    monkeypatch.setattr(nvrtc, "_compile", lambda *a: pytest.fail("compiled although the disk cache had it"))
    again = lab.compile(KERNEL, arch="sm_90")
    assert again.binary == first.binary and again is not first


def test_cache_misses_when_anything_in_the_key_changes(private_cache):
    lab.compile(KERNEL, arch="sm_90")
    lab.compile(KERNEL, arch="sm_80")
    lab.compile(KERNEL, arch="sm_90", options=["-DX=1"])
    lab.compile(KERNEL + "\n", arch="sm_90")
    assert len(cache_files(private_cache)) == 4


@pytest.mark.parametrize("damage", ["truncate", "flip_a_byte", "garbage"])
def test_a_corrupt_entry_is_compiled_again_never_loaded(private_cache, monkeypatch, damage):
    good = lab.compile(KERNEL, arch="sm_90")
    (path,) = cache_files(private_cache)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[:-100])
    elif damage == "flip_a_byte":
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    else:
        path.write_bytes(b"not a cache file")
    monkeypatch.setattr(nvrtc, "_memory_cache", {})
    compiled = []
    real = nvrtc._compile
    monkeypatch.setattr(nvrtc, "_compile", lambda *a: compiled.append(1) or real(*a))
    again = lab.compile(KERNEL, arch="sm_90")
    assert compiled == [1] and again.binary == good.binary
    assert path.read_bytes() == data  # rewritten whole


def test_concurrent_writers_leave_one_whole_entry(private_cache):
    """Two processes compile the same program into an empty cache at once: both succeed, and the
    entry left is whole (written to a temporary name, then renamed)."""
    script = ("import lab, sys; p = lab.compile(sys.argv[1], arch='sm_90'); "
              "print(len(p.binary))")
    env = dict(os.environ, LAB_CACHE_DIR=str(private_cache),
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                           os.environ.get("PYTHONPATH", "")]))
    procs = [subprocess.Popen([sys.executable, "-c", script, KERNEL + f"\n// {i // 2}"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    files = cache_files(private_cache)
    assert len(files) == 2 and not list(private_cache.rglob(".tmp-*"))
    for path in files:
        assert nvrtc._read_cache(str(path)) is not None


def test_a_cache_hit_never_loads_nvrtc(monkeypatch):
    """A new process with the program on disk: lab.compile returns it without loading NVRTC (loading
    it was most of a cached kernel's start-up)."""
    first = lab.compile(KERNEL, arch="sm_90")
    monkeypatch.setattr(nvrtc, "_memory_cache", {})
    monkeypatch.setattr(nvrtc, "_library", None)

    def no_nvrtc():
        raise AssertionError("NVRTC was loaded for a cached program")
    monkeypatch.setattr(nvrtc, "nvrtc", no_nvrtc)
    again = lab.compile(KERNEL, arch="sm_90")
    assert again.binary == first.binary and again.arch == "sm_90"
