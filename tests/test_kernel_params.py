"""RawKernel's parameter sizes, read from the compiled binary (lab/_kernel_params.py) instead of
asking the runtime past the last parameter: cubins of several architectures and PTX, from NVRTC,
which compiles without a GPU."""
import pytest

import lab
from lab._kernel_params import cubin_parameter_sizes, parameter_sizes, ptx_parameter_sizes

SOURCE = r'''
extern "C" __global__ void mixed(float *x, int n, double d, char c, float4 v, short s) { if (n) x[0] = d + c + v.x + s; }
struct Big { char b[40]; };
extern "C" __global__ void big(Big big, int unused, long long q) { }
struct Huge { char b[300]; };
extern "C" __global__ void huge(Huge h, float *out) { out[0] = h.b[0]; }
extern "C" __global__ void none() { }
template <typename T> __global__ void templated(T *x, T a) { x[0] = a; }
'''
WANT = {"mixed": [8, 4, 8, 1, 16, 2], "big": [40, 4, 8], "huge": [255, 8], "none": [], "templated<double>": [8, 8]}


def nvrtc_or_skip():
    try:
        lab._nvrtc.version()
    except Exception as error:  # noqa: BLE001 - any reason NVRTC cannot load here
        pytest.skip(f"NVRTC is not available here: {error}")


@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_90", "compute_80", "compute_90"])
def test_sizes_from_the_binary_match_the_declarations(arch):
    nvrtc_or_skip()
    program = lab.compile(SOURCE, arch=arch, cache=False, name_expressions=["templated<double>"])
    assert program.kind == ("ptx" if arch.startswith("compute") else "cubin")
    for name, sizes in WANT.items():
        lowered = program.lowered_names.get(name, name)
        assert list(parameter_sizes(program, lowered)) == sizes, (arch, name)  # 300 bytes: capped at 255
    assert parameter_sizes(program, "no_such_kernel") is None


def test_what_is_not_a_kernel_binary_says_nothing():
    assert cubin_parameter_sizes(b"not an ELF file at all" * 4, "k") is None
    assert ptx_parameter_sizes(".version 8.0\n.target sm_90\n", "k") is None
    assert ptx_parameter_sizes(".visible .entry k(\n\t.param .weird k_param_0\n)\n{ ret; }", "k") is None
