"""docs/add-an-op.md's worked example, applied to a scratch copy of the tree on the CPU: its functor,
its ops.def row, its ops_table.h row and its stub - read from the doc's own code blocks, so the doc
cannot drift from what passes. The edited files must pass the format check, the functor must
compile with NVRTC, the binding file that expands the table must compile, and the stub must name the
parameters the docstring's text signature gives. (The full `make test` of such a change - a build
and stubtest - is minutes of nvcc; these are the steps the doc once got wrong.)"""
import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

import lab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = open(os.path.join(ROOT, "docs", "add-an-op.md")).read()


def block(language, starting):
    """The doc's code block in `language` whose text starts with `starting`."""
    for lang, text in re.findall(r"```(\w+)\n(.*?)```", DOC, re.S):
        if lang == language and text.lstrip().startswith(starting):
            return text
    raise AssertionError(f"docs/add-an-op.md has no {language} block starting {starting!r}")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A copy of src/ with the doc's three C snippets inserted where the doc says."""
    root = tmp_path_factory.mktemp("add-an-op")
    shutil.copytree(os.path.join(ROOT, "src"), root / "src")
    shutil.copy(os.path.join(ROOT, ".clang-format"), root / ".clang-format")
    functors = root / "src" / "kernels" / "functors.cuh"
    text = functors.read_text()
    end = text.rindex("} // namespace lab")
    functors.write_text(text[:end] + block("cpp", "struct SoftplusOp") + "\n" + text[end:])
    ops = root / "src" / "kernels" / "ops.def"
    text = ops.read_text()
    relu_row = re.search(r"^LAB_OP\(RELU.*\n", text, re.M)
    ops.write_text(text[:relu_row.end()] + block("c", "LAB_OP(SOFTPLUS") + text[relu_row.end():])
    table = root / "src" / "binding" / "ops_table.h"
    text = table.read_text()
    relu_row = re.search(r"^LAB_PY_OP\(relu,.*\n.*\n", text, re.M)
    table.write_text(text[:relu_row.end()] + block("c", "LAB_PY_OP(softplus") + text[relu_row.end():])
    return root


def clang_format():
    found = shutil.which("clang-format", path=os.path.dirname(sys.executable)) or shutil.which("clang-format")
    if not found:
        pytest.skip("clang-format is not installed (make test installs it)")
    return found


@pytest.mark.parametrize("edited", ["src/kernels/functors.cuh", "src/binding/ops_table.h"])
def test_the_edited_files_pass_the_format_check(tree, edited):
    result = subprocess.run([clang_format(), "--dry-run", "--Werror", edited], cwd=tree, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_functor_compiles_with_nvrtc(tree):
    try:
        lab._nvrtc.version()
    except Exception as error:  # noqa: BLE001 - any reason NVRTC cannot load here
        pytest.skip(f"NVRTC is not available here: {error}")
    source = ('#include "functors.cuh"\n__global__ void k(float *x, double *y) {\n'
              '    x[0] = lab::SoftplusOp()(x[0], 0.f, 0.f, lab::OpParams<float>{1.f, 1.f});\n'
              '    y[0] = lab::SoftplusOp()(y[0], 0.0, 0.0, lab::OpParams<double>{1.0, 1.0});\n}\n')
    lab.compile(source, options=(f"-I{tree / 'src' / 'kernels'}",), arch="sm_90", cache=False)


def test_the_binding_file_with_the_table_row_compiles(tree):
    compiler = shutil.which("gcc") or shutil.which("cc")
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if not compiler or not os.path.exists(os.path.join(cuda, "include", "cuda_runtime_api.h")):
        pytest.skip("no C compiler or CUDA headers here")
    result = subprocess.run([compiler, "-fsyntax-only", "-std=c11", "-Wall", "-Werror", f"-I{tree / 'src'}",
                             f"-I{sysconfig.get_paths()['include']}", f"-I{os.path.join(cuda, 'include')}",
                             str(tree / "src" / "binding" / "elementwise.c")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_stub_names_the_docstrings_parameters():
    stub = re.search(r"`(def softplus\(.*?\) -> _CudaArray: \.\.\.)`", DOC, re.S).group(1)
    function = ast.parse(stub).body[0]
    names = [a.arg for a in function.args.args] + ["*"] + [a.arg for a in function.args.kwonlyargs]
    docstring_signature = re.search(r'"softplus\((.*?)\)\\n--', block("c", "LAB_PY_OP(softplus")).group(1)
    assert names == [p.strip().split("=")[0] for p in docstring_signature.split(",")]
    existing = open(os.path.join(ROOT, "lab", "lab.pyi")).read()
    assert "def relu(x: _CudaArray, out: _CudaArray, *, stream: _StreamLike = None) -> _CudaArray: ..." in existing, \
        "the doc's stub follows relu's: if relu's stub changed, change the doc's"
