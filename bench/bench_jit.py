"""Runtime-compiled kernels: per-call cost of lab.RawKernel on torch tensors
against CuPy's RawKernel on CuPy arrays and the bare launch floor, lab.ElementwiseKernel against
CuPy's ElementwiseKernel (per call) and against lab's built-in fused_add_mul (bandwidth, the same
expression), a cached kernel's start-up in a new process, and a fresh compile against cuda.core's
where it is installed.
    python3 bench/bench_jit.py [--out-dir DIR] [--compile-only]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from _peers import peers, print_met_goals  # noqa: E402
from bench_elementwise import median, median_ratio, per_call_rounds  # noqa: E402
from lab._timing import median_ms, torch_timer  # noqa: E402

ADD = r'''extern "C" __global__ void add3(const float* a, const float* b, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}'''

# A new process: the CUDA context first (its start-up is not the kernel's), then the clock runs
# from constructing the RawKernel to its first launch finishing - the on-disk cache's case.
CHILD = r'''
import time, numpy as np, lab
x = lab.empty(1024); lab.synchronize()
start = time.perf_counter()
kernel = lab.RawKernel(SOURCE, "add3")
kernel(4, 256, (x, x, x, np.int32(1024)))
lab.synchronize()
print((time.perf_counter() - start) * 1e3)
'''


# (x + y) * s, as lab.fused_add_mul computes it: the bandwidth goal compares the two
FUSED = ("T x, T y, T s", "T z", "z = (x + y) * s", "fused_add_mul_jit")
BANDWIDTH_N = 1 << 26
ADD_FLOOR = "floor: _bare_add(raw pointers)"


def elementwise_kernel_cases(torch, cupy, cases, sync_torch):
    """ElementwiseKernel's per-call cases (lab's on torch and CuPy, CuPy's on CuPy) added to cases;
    returns {dtype: (lab ElementwiseKernel TB/s, built-in fused_add_mul TB/s)} on BANDWIDTH_N elements."""
    kernel = lab.ElementwiseKernel(*FUSED)
    a, b, s, out = (torch.rand(1024, device="cuda") for _ in range(4))
    kernel(a, b, s, out)
    torch.testing.assert_close(out, (a + b) * s)
    cases.append(("lab.ElementwiseKernel on torch", lambda: kernel(a, b, s, out), sync_torch))
    if cupy is not None:
        ca, cb, cs, cout = (cupy.random.rand(1024, dtype=cupy.float32) for _ in range(4))
        theirs = cupy.ElementwiseKernel(*FUSED)
        sync = cupy.cuda.runtime.deviceSynchronize
        cases.append(("cupy.ElementwiseKernel on CuPy", lambda: theirs(ca, cb, cs, cout), sync))
        cases.append(("lab.ElementwiseKernel on CuPy", lambda: kernel(ca, cb, cs, cout), sync))
    timer = torch_timer(torch)
    bandwidth = {}
    for dtype in (torch.float32, torch.bfloat16):
        x, y, z, o = (torch.rand(BANDWIDTH_N, device="cuda").to(dtype) for _ in range(4))
        moved = 4 * BANDWIDTH_N * x.element_size()
        jit_ms = median_ms(lambda: kernel(x, y, z, o), *timer)
        torch.testing.assert_close(o, (x + y) * z)
        builtin_ms = median_ms(lambda: lab.fused_add_mul(x, y, z, o), *timer)
        bandwidth[str(dtype).split(".")[1]] = (moved / jit_ms / 1e9, moved / builtin_ms / 1e9)
    return bandwidth


def fresh_compile_ms(source, repeats=5, arch=None):
    times = []
    for k in range(repeats):
        start = time.perf_counter()
        lab.compile(source + f"\n// {k} {time.time()}", arch=arch, cache=False)
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def cuda_core_compile_ms(source, repeats=5, arch=None):
    """cuda.core's Program compiling the same source to a cubin (None where it is not installed);
    arch None: device 0's."""
    try:
        from cuda.core import Program, ProgramOptions
    except ImportError:
        try:
            from cuda.core.experimental import Program, ProgramOptions
        except ImportError:
            return None
    if arch is None:
        from cuda.core import Device
        Device(0).set_current()
        arch = "sm_" + "".join(map(str, Device(0).compute_capability))
    times = []
    for k in range(repeats):
        start = time.perf_counter()
        Program(source + f"\n// {k} {time.time()}", "c++", ProgramOptions(arch=arch)).compile("cubin")
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def compile_only():
    """--compile-only: the fresh-compile comparison alone, for sm_90, on a machine without a GPU."""
    core_ms = cuda_core_compile_ms(ADD, repeats=9, arch="sm_90")
    lab_ms = fresh_compile_ms(ADD, repeats=9, arch="sm_90")
    print(f"fresh compile of the kernel for sm_90: lab {lab_ms:.1f} ms, cuda.core "
          f"{'not installed' if core_ms is None else f'{core_ms:.1f} ms (lab / cuda.core {lab_ms / core_ms:.2f})'}")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir")
    parser.add_argument("--compile-only", action="store_true", help="only lab.compile against cuda.core (no GPU)")
    args = parser.parse_args()
    if args.compile_only:
        return compile_only()
    found = peers("bench_jit")
    if found is None:
        return 1
    torch, cupy = found
    sync_torch = torch.cuda.synchronize
    la, lb, lout = lab.empty(1024), lab.empty(1024), lab.empty(1024)
    pointers = (lout.__cuda_array_interface__["data"][0], la.__cuda_array_interface__["data"][0],
                lb.__cuda_array_interface__["data"][0], 1024)
    kernel, typed = lab.RawKernel(ADD, "add3"), lab.RawKernel(ADD, "add3", signature="const float*, const float*, float*, int")
    a, b, out = (torch.rand(1024, device="cuda") for _ in range(3))
    n32 = np.int32(1024)
    kernel(4, 256, (a, b, out, n32))
    torch.testing.assert_close(out, a + b)
    cases = [(ADD_FLOOR, lambda: lab.lab._bare_add(*pointers), lab.synchronize),
             ("lab.RawKernel on torch", lambda: kernel(4, 256, (a, b, out, n32)), sync_torch),
             ("lab.RawKernel on torch, signature", lambda: typed(4, 256, (a, b, out, 1024)), sync_torch),
             ("lab.RawKernel on lab.Array", lambda: kernel(4, 256, (la, lb, lout, n32)), lab.synchronize)]
    if cupy is not None:
        ca, cb, cout = (cupy.random.rand(1024, dtype=cupy.float32) for _ in range(3))
        raw = cupy.RawKernel(ADD, "add3")
        sync = cupy.cuda.runtime.deviceSynchronize
        cases.append(("cupy.RawKernel on CuPy", lambda: raw((4,), (256,), (ca, cb, cout, n32)), sync))
        cases.append(("lab.RawKernel on CuPy", lambda: kernel(4, 256, (ca, cb, cout, n32)), sync))
    bandwidth = elementwise_kernel_cases(torch, cupy, cases, sync_torch)
    samples = per_call_rounds(cases)
    rows = {name: median(values) for name, values in samples.items()}
    child = subprocess.run([sys.executable, "-c", CHILD.replace("SOURCE", repr(ADD))], capture_output=True, text=True,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cached_ms = float(child.stdout.strip().splitlines()[-1]) if child.returncode == 0 else None
    if cached_ms is None:
        print("cached start-up: the child process failed:", child.stderr[-2000:])
    compile_ms, core_ms = fresh_compile_ms(ADD), cuda_core_compile_ms(ADD)
    # an ElementwiseKernel's first call with new types: its generated source, compiled afresh
    ew_compile_ms = fresh_compile_ms(lab.ElementwiseKernel(*FUSED).source("float32", "float32", "float32", "float32"))

    print(f"\n{'runtime-compiled kernel, 1024 float32':40s} {'us':>8s}  (median of {len(samples[ADD_FLOOR])} "
          "alternating rounds; ratios below are medians of per-round ratios)")
    for what, us in rows.items():
        print(f"{what:40s} {us:8.2f}")
    print(f"\n{'(x + y) * s, 2^26 elements':28s} {'ElementwiseKernel':>18s} {'fused_add_mul':>14s}  (TB/s)")
    for dtype, (jit_tbs, builtin_tbs) in bandwidth.items():
        print(f"{dtype:28s} {jit_tbs:18.2f} {builtin_tbs:14.2f}")
    print(f"\ncached kernel ready in a new process: {cached_ms if cached_ms is None else f'{cached_ms:.2f} ms'}")
    print(f"fresh compile of the kernel: lab {compile_ms:.1f} ms, cuda.core "
          f"{'not installed' if core_ms is None else f'{core_ms:.1f} ms'}")
    print(f"fresh compile of an ElementwiseKernel's specialization ((x + y) * s, float32): {ew_compile_ms:.1f} ms")
    above_floor = median([o - f for o, f in zip(samples["lab.RawKernel on torch"], samples[ADD_FLOOR])])
    goals = [("RawKernel on torch <= floor + 0.7 us", above_floor, above_floor <= 0.7)]
    if "cupy.RawKernel on CuPy" in rows:
        ratio = median_ratio(samples, "lab.RawKernel on torch", "cupy.RawKernel on CuPy")
        goals.append(("RawKernel on torch <= 0.8x CuPy RawKernel on CuPy", ratio, ratio <= 0.8))
    if "cupy.ElementwiseKernel on CuPy" in rows:
        ratio = median_ratio(samples, "lab.ElementwiseKernel on torch", "cupy.ElementwiseKernel on CuPy")
        goals.append(("ElementwiseKernel on torch <= 0.8x CuPy's on CuPy", ratio, ratio <= 0.8))
    for dtype, (jit_tbs, builtin_tbs) in bandwidth.items():
        goals.append((f"ElementwiseKernel {dtype} >= 0.95x fused_add_mul", jit_tbs / builtin_tbs,
                      jit_tbs >= 0.95 * builtin_tbs))
    if cached_ms is not None:
        goals.append(("cached kernel ready in a new process <= 5 ms", cached_ms, cached_ms <= 5))
    if core_ms is not None:
        goals.append(("fresh compile <= cuda.core's (ratio)", compile_ms / core_ms, compile_ms <= core_ms))
    print_met_goals(goals)
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "jit.json"), "w") as f:
            json.dump(dict(gpu=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), per_call_us=rows,
                           per_call_rounds_us=samples,
                           elementwise_kernel_tbs={k: dict(elementwise_kernel=v[0], fused_add_mul=v[1])
                                                   for k, v in bandwidth.items()},
                           cached_start_ms=cached_ms, fresh_compile_ms=compile_ms,
                           elementwise_kernel_compile_ms=ew_compile_ms, cuda_core_compile_ms=core_ms),
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
