"""Variants of a whole-array sum's first pass, compiled at run time through CuPy (NVRTC), beside
CuPy's sum (CUB), torch's and lab's on the same 2^28 float32 and bfloat16 elements - to tell which
parts of the kernel decide its bandwidth. A variant's name: g (each load tested against its slice's
end, as lab's loop was) or u (whole rounds untested, then the tail one load at a time); the loads a
thread keeps in flight (2, 4, 8); the load's cache hint (h0 none, h1 L2::256B, h2 .nc with
L1::no_allocate, h3 both); then /wWsS, the grid in W waves of resident blocks, each block walking S
slices. Ten calls back to back per event-timed sample, the best of two rounds; TB/s of the input read.
    python3 bench/sweep_sum_pass.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from _peers import prototype_peers  # noqa: E402
from bench_bandwidth import per_call_ms  # noqa: E402  (ten calls back to back per sample)

SOURCE = r"""
template <bool BF16> __device__ __forceinline__ float add16(float acc, uint4 v) {
    if (BF16) {
        unsigned w[4] = {v.x, v.y, v.z, v.w};
        #pragma unroll
        for (int k = 0; k < 4; ++k) acc += __uint_as_float(w[k] << 16) + __uint_as_float(w[k] & 0xffff0000u);
        return acc;
    } else {
        return acc + __uint_as_float(v.x) + __uint_as_float(v.y) + __uint_as_float(v.z) + __uint_as_float(v.w);
    }
}
template <int HINT> __device__ __forceinline__ uint4 load16(const uint4 *p) {
    uint4 v;
    if (HINT == 1) {
        asm volatile("ld.global.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    } else if (HINT == 2) {
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    } else if (HINT == 3) {
        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    } else {
        v = *p;
    }
    return v;
}
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float warps[32];
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : 0.f;
    if (threadIdx.x < 32) for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    return v;
}
// slices of `per_slice` vectors; block b takes slices b, b + gridDim.x, ... ; GUARDED: lab's per-load tests
template <bool BF16, int INFLIGHT, int HINT, bool GUARDED, int MINB>
__device__ void body(const uint4 *x, long long nvec, long long per_slice, long long slices, float *partials) {
    for (long long s = blockIdx.x; s < slices; s += gridDim.x) {
        const long long begin = s * per_slice;
        const int count = int(min(begin + per_slice, nvec) - begin);
        const uint4 *p = x + begin;
        float acc[INFLIGHT];
        #pragma unroll
        for (int u = 0; u < INFLIGHT; ++u) acc[u] = 0.f;
        const int lanes = blockDim.x;
        int i = threadIdx.x;
        if (GUARDED) {
            for (; i < count; i += INFLIGHT * lanes) {
                uint4 v[INFLIGHT];
                #pragma unroll
                for (int u = 0; u < INFLIGHT; ++u) if (i + u * lanes < count) v[u] = load16<HINT>(p + i + u * lanes);
                #pragma unroll
                for (int u = 0; u < INFLIGHT; ++u) if (i + u * lanes < count) acc[u] = add16<BF16>(acc[u], v[u]);
            }
        } else {
            for (; i + (INFLIGHT - 1) * lanes < count; i += INFLIGHT * lanes) {
                uint4 v[INFLIGHT];
                #pragma unroll
                for (int u = 0; u < INFLIGHT; ++u) v[u] = load16<HINT>(p + i + u * lanes);
                #pragma unroll
                for (int u = 0; u < INFLIGHT; ++u) acc[u] = add16<BF16>(acc[u], v[u]);
            }
            for (; i < count; i += lanes) acc[0] = add16<BF16>(acc[0], load16<HINT>(p + i));
        }
        #pragma unroll
        for (int u = 1; u < INFLIGHT; ++u) acc[0] += acc[u];
        const float t = block_sum(acc[0]);
        if (threadIdx.x == 0) partials[s] = t;
    }
}
#define K(NAME, BF16, INF, HINT, G, MINB) \
extern "C" __global__ void __launch_bounds__(256, MINB) NAME(const uint4 *x, long long nvec, long long per_slice, long long slices, float *partials) { body<BF16, INF, HINT, G, MINB>(x, nvec, per_slice, slices, partials); }
#define ALL(P, BF16) \
K(P##g4h0, BF16, 4, 0, true, 8) K(P##u4h0, BF16, 4, 0, false, 8) K(P##u4h1, BF16, 4, 1, false, 8) \
K(P##u4h2, BF16, 4, 2, false, 8) K(P##u4h3, BF16, 4, 3, false, 8) K(P##u8h0, BF16, 8, 0, false, 4) \
K(P##u8h2, BF16, 8, 2, false, 4) K(P##u2h0, BF16, 2, 0, false, 8) K(P##g4h1, BF16, 4, 1, true, 8)
ALL(f, false)
ALL(b, true)
extern "C" __global__ void combine(const float *partials, long long n, float *out) {
    float acc = 0.f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) acc += partials[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0) *out = acc;
}
"""

VARIANTS = ["g4h0", "g4h1", "u2h0", "u4h0", "u4h1", "u4h2", "u4h3", "u8h0", "u8h2"]
SHAPES = ("w1s1", "w4s1", "w1s4", "w1s16", "w2s8")  # waves of resident blocks, slices a block


def main():
    found = prototype_peers("sweep_sum_pass", SOURCE)
    if found is None:
        return 1
    torch, cupy, module, timer = found
    combine = module.get_function("combine")
    n = 1 << 28
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.randn(n, device="cuda")
    scalar = torch.empty((), device="cuda")
    partials = torch.empty(1 << 20, device="cuda")
    cupy_x, cupy_scalar = cupy.asarray(x), cupy.empty((), cupy.float32)
    for tag, array in (("f", x), ("b", x.bfloat16())):
        vectors, nbytes = n * array.element_size() // 16, n * array.element_size()
        peers_of = {"lab": lambda: lab.sum(array, scalar),
                    "torch": lambda: torch.sum(array, dim=0, dtype=torch.float32, out=scalar)}
        if tag == "f":
            peers_of["cub"] = lambda: cupy.sum(cupy_x, out=cupy_scalar)
        expected = array.double().sum().item()
        results = {}
        for _ in range(2):
            for name, fn in peers_of.items():
                results.setdefault(name, []).append(per_call_ms(fn, timer))
            for variant in VARIANTS:
                kernel = module.get_function(tag + variant)
                blocks_per_sm = 4 if variant[1] == "8" else 8  # the kernel's launch bounds
                for shape in SHAPES:
                    waves, per_block = int(shape[1]), int(shape.split("s")[1])
                    grid = sms * blocks_per_sm * waves
                    per_slice = -(-(-(-vectors // (grid * per_block))) // 16) * 16
                    slices = -(-vectors // per_slice)

                    def run(kernel=kernel, grid=grid, slices=slices, per_slice=per_slice):
                        kernel((grid,), (256,), (array.data_ptr(), vectors, per_slice, slices, partials.data_ptr()))
                        combine((1,), (1024,), (partials.data_ptr(), slices, scalar.data_ptr()))
                    run()
                    got = scalar.item()
                    if abs(got - expected) > 1e-4 * abs(expected) + 1.0:
                        raise SystemExit(f"{variant}/{shape}: sum {got}, expected {expected}")
                    results.setdefault(f"{variant}/{shape}", []).append(per_call_ms(run, timer))
        print(f"== {'float32' if tag == 'f' else 'bfloat16'} sum of 2^28 elements, TB/s (each round)")
        for name, ms in sorted(results.items(), key=lambda item: min(item[1])):
            print(f"  {name:12s} {nbytes / min(ms) / 1e9:.3f}  ({' '.join(f'{nbytes / m / 1e9:.3f}' for m in ms)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
