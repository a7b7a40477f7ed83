"""The source tree keeps the shape docs/design.md gives it, checked on the CPU:

- the four levels are folders, and #include lines point downward only (binding and testing ->
  dispatch -> kernels), with no cycle between units (a .c and its .h are one unit);
- no source file grows past ~500 lines, and every if whose body is not on its own line has braces;
- the kernel headers a user kernel may include (functors.cuh, dtype_traits.cuh) compile with NVRTC
  as well as nvcc;
- editing a kernel header rebuilds the objects that include it and relinks lab.so."""
import functools
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
LEVELS = {"binding": 2, "testing": 2, "dispatch": 3, "kernels": 4}
SOURCE_ENDINGS = (".c", ".h", ".cu", ".cuh", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def source_files():
    for folder in LEVELS:
        for path in sorted(glob.glob(os.path.join(SRC, folder, "*"))):
            if path.endswith(SOURCE_ENDINGS):
                yield os.path.relpath(path, SRC)


def includes(path):
    """The repository files `path` (relative to src/) includes, relative to src/."""
    folder = os.path.dirname(path)
    for name in INCLUDE.findall(open(os.path.join(SRC, path)).read()):
        for candidate in (name, os.path.join(folder, name)):  # "-Isrc" paths, then the file's own folder
            if os.path.exists(os.path.join(SRC, candidate)):
                yield os.path.normpath(candidate)
                break
        else:
            raise AssertionError(f"src/{path} includes {name!r}, which is not in the tree")


def unit(path):
    return os.path.splitext(path)[0]


def test_src_holds_only_the_level_folders():
    assert sorted(e for e in os.listdir(SRC) if not e.startswith(".")) == sorted(LEVELS)


@pytest.mark.parametrize("path", list(source_files()))
def test_includes_point_downward(path):
    level = LEVELS[path.split(os.sep)[0]]
    for target in includes(path):
        target_level = LEVELS[target.split(os.sep)[0]]
        assert target_level >= level, (
            f"src/{path} (level {level}) includes src/{target} (level {target_level}): includes point downward only")


def test_no_include_cycle_between_units():
    graph = {}
    for path in source_files():
        graph.setdefault(unit(path), set()).update(unit(t) for t in includes(path) if unit(t) != unit(path))
    state = {}  # 1: on the current path, 2: finished

    def visit(node, trail):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt]
                raise AssertionError("include cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


@pytest.mark.parametrize("path", list(source_files()))
def test_source_files_stay_small(path):
    lines = open(os.path.join(SRC, path)).read().count("\n")
    assert lines <= 500, f"src/{path} has {lines} lines; split it (one job per file)"


# ---- NVRTC ----

def nvrtc_compile(source):
    """(0, log) when NVRTC compiles `source` for sm_90 with lab's kernel headers on the path, else
    (non-zero, log) - through lab.compile, the same loader and include path user kernels get."""
    import lab._nvrtc as nvrtc
    try:
        return 0, nvrtc.compile(source, arch="sm_90", cache=False).log
    except nvrtc.CompileError as error:
        return 1, error.log or str(error)


USER_KERNEL = r'''
#include "functors.cuh"
#include "dtype_traits.cuh"
// A user kernel built from lab's functors: every functor, float and integer compute types.
extern "C" __global__ void fused(float *out, const __half *a, const __nv_bfloat16 *b, int *counts, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const lab::OpParams<float> p{2.f, 0.5f};
    const float x = lab::load_as_compute(a[i]), y = lab::load_as_compute(b[i]);
    float r = lab::AddOp()(x, y, 0.f, p) + lab::GeluTanhOp()(x, 0.f, 0.f, p) + lab::AbsOp()(y, 0.f, 0.f, p);
    r += lab::MaximumOp()(x, y, 0.f, p) + lab::SiluOp()(x, 0.f, 0.f, p) + lab::AxpbyOp()(x, y, 0.f, p);
    out[i] = lab::store_from_compute<float>(r);
    counts[i] = lab::AddOp()(counts[i], 1, 0, lab::OpParams<int>{3, 1}) + lab::AbsOp()(-counts[i], 0, 0,
                                                                                       lab::OpParams<int>{1, 1});
}
'''


def test_kernel_headers_compile_with_nvrtc():
    rc, log = nvrtc_compile(USER_KERNEL)
    assert rc == 0, f"NVRTC could not compile lab's kernel headers:\n{log}"


def shipped_headers():
    """setup.py's USER_HEADERS: the headers the wheel ships for user kernels (lab/include)."""
    text = open(os.path.join(os.path.dirname(SRC), "setup.py")).read()
    return re.findall(r'"([\w.]+)"', re.search(r"USER_HEADERS = \[(.*?)\]", text, re.S).group(1))


@pytest.mark.parametrize("header", shipped_headers())
def test_every_shipped_header_compiles_with_nvrtc_on_its_own(header):
    rc, log = nvrtc_compile(f'#include "{header}"\n')
    assert rc == 0, f"NVRTC could not compile {header} alone:\n{log}"


def test_nvrtc_reports_errors_in_the_headers_test():
    """The compile test above can fail: a wrong program gives a non-zero result and a log."""
    rc, log = nvrtc_compile('#include "functors.cuh"\nlab::NoSuchOp x;\n')
    assert rc != 0 and "NoSuchOp" in log


# ---- the build ----

def built_module():
    found = glob.glob(os.path.join(ROOT, "lab", "lab*.so"))
    if not found:
        pytest.skip("the extension is not built here")
    return found[0]


def test_editing_a_kernel_header_relinks_the_module(tmp_path):
    """In a copy of the tree (the suite's own lab.so is never rewritten under running tests): a
    second build does nothing; touching list_steps.cuh recompiles only multi_tensor.cu, the one kernel
    file that includes it, and relinks lab.so - and so it does where the object came from the nvcc
    cache."""
    if shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"):
        pytest.skip("no nvcc here")
    built_module()
    import lab
    archs = ";".join(a[3:] for a in lab.compiled_architectures().split() if a.startswith("sm_"))
    copy = tmp_path / "tree"
    for name in ("src", "lab", "build", "setup.py", "pyproject.toml", "README.md", "LICENSE"):
        source = os.path.join(ROOT, name)
        if os.path.isdir(source):
            shutil.copytree(source, copy / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        elif os.path.exists(source):
            shutil.copy2(source, copy / name)
    env = dict(os.environ, LAB_CUDA_ARCH=archs)
    env.pop("LAB_NVCC_CACHE", None)  # this test is about what nvcc compiles, not what a cache holds

    def build():
        result = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=copy, env=env,
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        return result.stdout

    so = glob.glob(str(copy / "lab" / "lab*.so"))[0]
    first = build()  # the copy may differ in build flags from whatever built ROOT: settle it first
    before = os.path.getmtime(so)
    assert "nvcc" not in build(), "a build with nothing changed recompiled a kernel"
    assert os.path.getmtime(so) == before
    os.utime(copy / "src" / "kernels" / "list_steps.cuh")
    output = build()
    compiled = [line for line in output.splitlines() if "nvcc" in line and " -c " in line]
    assert len(compiled) == 1 and "multi_tensor.cu" in compiled[0], compiled or first[-2000:]
    assert os.path.getmtime(so) > before, "lab.so was not relinked after a kernel header changed"

    # An object from LAB_NVCC_CACHE comes with nvcc's list of what it was built from: without it the
    # next edit of any header would compile every unit again.
    env["LAB_NVCC_CACHE"] = str(tmp_path / "nvcc-cache")
    os.utime(copy / "src" / "kernels" / "list_steps.cuh")
    build()  # compiled again, now kept in the cache with its list
    # this interpreter's objects: a build for another Python (make device-build) leaves its own beside them
    temp = f"temp*-{sys.implementation.cache_tag}"
    obj = glob.glob(str(copy / "build" / temp / "cuda" / "multi_tensor.cu.*.o"))[0]
    listed = open(obj + ".d").read()
    os.remove(obj), os.remove(obj + ".d")
    assert "multi_tensor.cu" in build() and open(obj + ".d").read() == listed
    os.utime(copy / "src" / "kernels" / "list_steps.cuh")
    output = build()
    rebuilt = [line for line in output.splitlines() if line.startswith("lab: nvcc [")]
    assert len(rebuilt) == 1 and "multi_tensor.cu" in rebuilt[0] and "from LAB_NVCC_CACHE" in rebuilt[0], output


# Files outside this repository that comments cite by name (other projects' sources, specs).
EXTERNAL_FILES = {"dlpack.h", "Reduce.cuh", "Loops.cuh", "CUDALoops.cuh", "MemoryAccess.cuh", "MultiTensorApply.cuh",
                  "TensorIterator.cpp", "llm.c", "cuda_runtime_api.h", "cuda_fp16.h", "cuda_bf16.h",
                  "Python.h", "c_api.h"}
FILE_NAME = re.compile(r"(?<![\w.-])((?:[\w-]+/)*[\w-]+\.(?:c|h|cu|cuh|def|md|py|cpp))\b")


@functools.lru_cache(maxsize=None)
def existing_names():
    """The repository's file names (bare, from the root, from src/): not what the build, a virtual
    environment or any hidden folder holds - walking .venv cost 1.6 s a source file."""
    names = set()
    for base, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("build", "dist", "__pycache__")]
        for f in files:
            rel = os.path.relpath(os.path.join(base, f), ROOT)
            names.update({f, rel, os.path.relpath(os.path.join(base, f), SRC)})
    return names


@pytest.mark.parametrize("path", list(source_files()))
def test_comments_name_files_that_exist(path):
    names = existing_names()
    text = open(os.path.join(SRC, path)).read()
    text = re.sub(r"^\s*#\s*include\s*[<\"].*$", "", text, flags=re.M)
    stale = sorted({m for m in FILE_NAME.findall(text) if m not in names and os.path.basename(m) not in EXTERNAL_FILES})
    assert not stale, f"src/{path} names files that do not exist: {stale}"


IF_START = re.compile(r"^\s*(\}\s*else\s+if|if|else\s+if)\s*(constexpr\s*)?\(")
ELSE_ALONE = re.compile(r"^\s*(\}\s*)?else\s*$")


def code_of(line):
    """A line without its comments and string contents (what brace and parenthesis counts read)."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line.split("//")[0])
    return re.sub(r"/\*.*?\*/", "", line)


def unbraced_multi_line_ifs(text):
    """Line numbers of ifs (and elses) whose body starts on a later line without a brace."""
    lines, found, i = text.split("\n"), [], 0
    while i < len(lines):
        code = code_of(lines[i])
        if ELSE_ALONE.match(code):
            found.append(i + 1)
        elif IF_START.match(code):
            depth, j = 0, i
            while j < len(lines):
                c = code_of(lines[j])
                depth += c.count("(") - c.count(")")
                if depth <= 0 and "(" in "".join(code_of(x) for x in lines[i:j + 1]):
                    break
                j += 1
            end = code_of(lines[j]).rstrip()
            if (end.endswith(")") or (j > i and not end.endswith("{"))) and lines[j + 1].strip() != "{":
                found.append(i + 1)
            i = j
        i += 1
    return found


def test_the_brace_check_finds_an_unbraced_if():
    assert unbraced_multi_line_ifs("if (x)\n    return 1;\nif (y) return 2;\nif (z) {\n}\n") == [1]
    assert unbraced_multi_line_ifs("if (a &&\n    b) return 1;\n} else\n    y();\n") == [1, 3]


@pytest.mark.parametrize("path", list(source_files()))
def test_multi_line_ifs_have_braces(path):
    found = unbraced_multi_line_ifs(open(os.path.join(SRC, path)).read())
    assert not found, f"src/{path}: an if whose body is on another line needs braces (lines {found})"


# PyUnicode_FromFormat (behind PyErr_Format) knows only these conversions; on Python 3.12 any other
# - a %g for a float - raises SystemError instead of the message, while 3.11 quietly copies the rest of
# the format. CI's Python may be the forgiving one, so the format strings are read here.
FORMAT_CALL = re.compile(r"\b(PyErr_Format|PyUnicode_FromFormat|PyErr_WarnFormat)\s*\(")
FORMAT_CONVERSION = re.compile(r"%[-0-9.]*(?:ll|l|z)?([a-zA-Z%])")


def unsupported_format_conversions(text):
    """(line, conversion) of each conversion PyUnicode_FromFormat lacks, in the literals of its calls."""
    found = []
    for call in FORMAT_CALL.finditer(text):
        literals = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', text[call.end():text.find(";", call.end())]))
        for conversion in FORMAT_CONVERSION.findall(literals):
            if conversion not in "cdiuxspAUVSR%":
                found.append((text.count("\n", 0, call.start()) + 1, "%" + conversion))
    return found


def test_the_format_check_finds_a_float_conversion():
    text = 'PyErr_Format(PyExc_ValueError, "%s(): got %lld and "\n "%g", func, n, x);\nPyErr_Format(e, "%R");'
    assert unsupported_format_conversions(text) == [(1, "%g")]


@pytest.mark.parametrize("path", [p for p in source_files() if p.endswith((".c", ".h"))])
def test_error_formats_use_only_what_python_formats(path):
    found = unsupported_format_conversions(open(os.path.join(SRC, path)).read())
    assert not found, f"src/{path}: PyErr_Format cannot format {found} (pass a Python object with %R)"


# The one kernel source that asks which architecture it is built for: thread-block clusters exist from
# sm_90 on.
ARCHITECTURE_BRANCHES = ["kernels/cluster.cuh"]


def test_only_the_cluster_header_branches_on_the_architecture():
    """CI compiles the kernels for sm_90 alone (.ci/run); a user's default build adds sm_80. That is
    the same code for another target only while no source asks which architecture it is built for -
    a branch on __CUDA_ARCH__ needs its own build in CI, as the cluster header has below."""
    found = [path for path in source_files() if "__CUDA_ARCH__" in open(os.path.join(SRC, path)).read()]
    assert found == ARCHITECTURE_BRANCHES, f"kernel sources branching on __CUDA_ARCH__: {found}"


@pytest.mark.parametrize("arch", ["80", "90"])
def test_the_cluster_header_compiles_for_each_default_architecture(arch, tmp_path):
    """cluster.cuh's two reductions in a kernel, compiled for sm_80 (where they trap) and sm_90 (where
    they write into and read from the other blocks' shared memory): the branches CI's sm_90 build of
    lab does not see."""
    nvcc = shutil.which("nvcc") or (os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc")
                                    if os.environ.get("CUDA_HOME") else None)
    if nvcc is None:
        pytest.skip("no nvcc here")
    source = tmp_path / "cluster_sum.cu"
    source.write_text('#include "kernels/cluster.cuh"\n'
                      "struct Add { __device__ float operator()(float a, float b) const { return a + b; } };\n"
                      "__global__ void cluster_sum(float *out) {\n"
                      "    lab::cluster_reduce_setup();\n"
                      "    const float total = lab::cluster_reduce(float(threadIdx.x), Add{}, 0u);\n"
                      "    const float at_barrier = lab::cluster_reduce_at_barrier(float(threadIdx.x), Add{}, 0u);\n"
                      "    lab::cluster_sync();\n"
                      "    if (threadIdx.x == 0) out[blockIdx.x] = total + at_barrier;\n"
                      "}\n")
    result = subprocess.run([nvcc, "-c", str(source), "-o", str(tmp_path / "cluster_sum.o"), "-std=c++17",
                             f"-I{SRC}", f"-gencode=arch=compute_{arch},code=sm_{arch}"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
