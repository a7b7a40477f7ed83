"""A bare staged rms_norm forward on bfloat16 rows, compiled at run time through CuPy (NVRTC), beside
lab's rms_norm as it plans itself and held staged (lab.lab._rowwise_staged_min_vectors, 4 or 8
vectors a thread) and a copy of the same bytes - the yardstick that showed lab's staged walk 10% slower
than the same layout written bare. Prototype modes: m0 a block a row (lab's staged grid); persistent
blocks (the grid the SM holds) m1 with one buffer, m2 with two (the next row's copy in flight while
this one is computed), m3 two and the weight staged once; /tN threads a block, /bN blocks an SM
(persistent only). Ten calls back to back per event-timed sample, the best of two rounds.
    python3 bench/sweep_staged_rms.py
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from _peers import prototype_peers  # noqa: E402
from bench_bandwidth import per_call_ms  # noqa: E402  (ten calls back to back per sample)

SOURCE = r"""
__device__ __forceinline__ float lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ unsigned bf(float f) { unsigned u = __float_as_uint(f); return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; }
__device__ __forceinline__ unsigned pack(float a, float b) { return bf(a) | (bf(b) << 16); }
__device__ __forceinline__ void cp16(unsigned s, const void *g) { asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(g)); }
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void wait0() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ float block_sum(float v, float *warps) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int k = 0; k < (int)(blockDim.x >> 5); ++k) t += warps[k];
    return t;
}
// MODE 0: staged, a row a block. 1: persistent, single buffer. 2: persistent, double buffer.
// 3: persistent double buffer + weight staged once.
template <int MODE>
__device__ void rms(const uint4 *x, const uint4 *w, uint4 *y, int rows, int nvec, float eps, float inv_n) {
    extern __shared__ __align__(16) uint4 smem[];
    __shared__ float warps[2][32];
    uint4 *wsh = smem + (MODE >= 2 ? 2 : 1) * nvec;
    const int T = blockDim.x;
    auto stage = [&](uint4 *dst, const uint4 *src) {
        const unsigned base = (unsigned)__cvta_generic_to_shared(dst);
        for (int v = threadIdx.x; v < nvec; v += T) cp16(base + v * 16, src + v);
        commit();
    };
    if (MODE == 3) stage(wsh, w);
    int b = 0, parity = 0;
    if (MODE >= 2 && blockIdx.x < rows) stage(smem, x + (long long)blockIdx.x * nvec);
    for (int row = blockIdx.x; row < rows; row += gridDim.x, parity ^= 1) {
        uint4 *cur = smem + (MODE >= 2 && b ? nvec : 0);
        if (MODE < 2) { __syncthreads(); stage(cur, x + (long long)row * nvec); }
        wait0();
        __syncthreads();
        if (MODE >= 2 && row + gridDim.x < rows) stage(smem + (b ? 0 : nvec), x + (long long)(row + gridDim.x) * nvec);
        float s = 0.f;
        for (int v = threadIdx.x; v < nvec; v += T) {
            const uint4 p = cur[v];
            const unsigned q[4] = {p.x, p.y, p.z, p.w};
            #pragma unroll
            for (int k = 0; k < 4; ++k) { const float a = lo(q[k]), c = hi(q[k]); s += a * a + c * c; }
        }
        const float r = rsqrtf(block_sum(s, warps[parity]) * inv_n + eps);
        uint4 *out = y + (long long)row * nvec;
        for (int v = threadIdx.x; v < nvec; v += T) {
            const uint4 p = cur[v];
            const uint4 ww = MODE == 3 ? wsh[v] : w[v];
            const unsigned q[4] = {p.x, p.y, p.z, p.w}, g[4] = {ww.x, ww.y, ww.z, ww.w};
            unsigned o[4];
            #pragma unroll
            for (int k = 0; k < 4; ++k) o[k] = pack(lo(q[k]) * r * lo(g[k]), hi(q[k]) * r * hi(g[k]));
            out[v] = make_uint4(o[0], o[1], o[2], o[3]);
        }
        b ^= 1;
    }
}
#define K(M, MINB) extern "C" __global__ void __launch_bounds__(1024, MINB) rms##M(const uint4 *x, const uint4 *w, uint4 *y, int rows, int nvec, float eps, float inv_n) { rms<M>(x, w, y, rows, nvec, eps, inv_n); }
K(0, 1) K(1, 1) K(2, 1) K(3, 1)
"""


def main():
    found = prototype_peers("sweep_staged_rms", SOURCE)
    if found is None:
        return 1
    torch, cupy, mod, timer = found
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for rows, n in ((4096, 16384), (8192, 8192), (16384, 4096)):
        x = torch.randn(rows, n, device="cuda").bfloat16()
        w = (torch.rand(n, device="cuda") + 0.5).bfloat16()
        y = torch.empty_like(x)
        rstd = torch.empty(rows, device="cuda")
        ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(1, keepdim=True) + 1e-6) * w.float()).bfloat16()
        nbytes = 2 * x.numel() * 2
        src = torch.empty_like(x)
        results = {"copy": [], "lab": []}
        nvec = n // 8
        for _round in range(2):
            results["copy"].append(per_call_ms(lambda: src.copy_(x), timer))
            results["lab"].append(per_call_ms(lambda: lab.rms_norm(x, w, y, rstd=rstd), timer))
            old_min = lab.lab._rowwise_staged_min_vectors(1)
            for vpt in (4, 8):
                old_vpt = lab.lab._rowwise_staged_vectors_per_thread(vpt)
                results.setdefault(f"lab-staged/{vpt}", []).append(per_call_ms(lambda: lab.rms_norm(x, w, y, rstd=rstd), timer))
                results.setdefault(f"lab-staged/{vpt}-nostat", []).append(per_call_ms(lambda: lab.rms_norm(x, w, y), timer))
                lab.lab._rowwise_staged_vectors_per_thread(old_vpt)
            lab.lab._rowwise_staged_min_vectors(old_min)
            for mode in (0, 1, 2, 3):
                fn = mod.get_function(f"rms{mode}")
                bufs = (2 if mode >= 2 else 1) + (1 if mode == 3 else 0)
                smem = bufs * nvec * 16
                if smem > 48 * 1024:
                    fn.max_dynamic_shared_size_bytes = smem
                for threads in (128, 256, 512):
                    if nvec // threads > 16 or threads > nvec:
                        continue
                    per_sm = 0
                    if mode > 0:
                        per_sm = min(2048 // threads, 233472 // (smem + 256 + 1024), 32)
                        if per_sm == 0:
                            continue
                    grid = rows if mode == 0 else min(rows, per_sm * sms)
                    def run(fn=fn, grid=grid, threads=threads, smem=smem):
                        fn((grid,), (threads,), (x.data_ptr(), w.data_ptr(), y.data_ptr(), rows, nvec,
                                                  cupy.float32(1e-6), cupy.float32(1.0 / n)), shared_mem=smem)
                    y.fill_(float("nan"))
                    run(); torch.cuda.synchronize()
                    err = (y.float() - ref.float()).abs().max().item()
                    assert err < 0.05, (mode, threads, err)
                    results.setdefault(f"m{mode}/t{threads}/b{per_sm}", []).append(per_call_ms(run, timer))
        copy = nbytes / min(results["copy"]) / 1e9
        print(f"== rms_norm bf16 {rows} x {n}: copy {copy:.2f} TB/s; TB/s and % of the copy")
        for k, ms in sorted(results.items(), key=lambda kv: min(kv[1])):
            t = nbytes / min(ms) / 1e9
            print(f"  {k:16s} {t:.2f}  {100 * t / copy:5.1f}%")

    return 0


if __name__ == "__main__":
    sys.exit(main())
