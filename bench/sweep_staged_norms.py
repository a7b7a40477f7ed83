"""Bare staged rms_norm and layer_norm forwards on bfloat16 rows, compiled at run time through CuPy
(NVRTC), beside lab's own as it plans itself and held staged (lab.lab._rowwise_staged_min_vectors, 4 or
8 vectors a thread) and a copy of the same bytes - the yardstick that showed lab's staged rms_norm walk
10% slower than the same layout written bare, and that says how near the copy a layout can come.
rms_norm's prototype modes: m0 a block a row (lab's staged grid); persistent blocks (the grid the SM
holds) m1 with one buffer, m2 with two (the next row's copy in flight while this one is computed), m3
two and the weight staged once. layer_norm's, each a block a row: ln0 lab's arithmetic (two sums about
the row's first element, one reduction of the pair), ln1 the same with the weight and bias of every
step loaded before the reduction, ln2 the exact two passes (the mean, then the squares about it, two
reductions). /tN threads a block, /bN blocks an SM (persistent only). Ten calls back to back per
event-timed sample, the best of two rounds.
    python3 bench/sweep_staged_norms.py [rms_norm] [layer_norm]
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

// layer_norm, a block a row. LN 0: two sums about the row's first element, one reduction of the pair,
// the weight and bias loaded in the output pass. 1: the same, every step's weight and bias loaded
// before the reduction (at most four steps a thread). 2: the mean, then the squares about it.
__device__ __forceinline__ float2 block_sum2(float2 v, float2 *warps) {
    for (int o = 16; o; o >>= 1) { v.x += __shfl_xor_sync(0xffffffffu, v.x, o); v.y += __shfl_xor_sync(0xffffffffu, v.y, o); }
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = v;
    __syncthreads();
    float2 t = make_float2(0.f, 0.f);
    for (int k = 0; k < (int)(blockDim.x >> 5); ++k) { t.x += warps[k].x; t.y += warps[k].y; }
    return t;
}
template <int LN>
__device__ void ln(const uint4 *x, const uint4 *w, const uint4 *bias, uint4 *y, int nvec, float eps, float inv_n) {
    extern __shared__ __align__(16) uint4 smem[];
    __shared__ float2 pairs[32];
    __shared__ float singles[2][32];
    const int T = blockDim.x, row = blockIdx.x;
    const unsigned base = (unsigned)__cvta_generic_to_shared(smem);
    const uint4 *src = x + (long long)row * nvec;
    for (int v = threadIdx.x; v < nvec; v += T) cp16(base + v * 16, src + v);
    commit();
    uint4 wr[4], br[4];
    if (LN == 1) {
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int v = threadIdx.x + k * T;
            if (v < nvec) { wr[k] = w[v]; br[k] = bias[v]; }
        }
    }
    wait0();
    __syncthreads();
    float mean, r;
    if (LN == 2) {
        float s = 0.f;
        for (int v = threadIdx.x; v < nvec; v += T) {
            const uint4 p = smem[v];
            const unsigned q[4] = {p.x, p.y, p.z, p.w};
            #pragma unroll
            for (int k = 0; k < 4; ++k) s += lo(q[k]) + hi(q[k]);
        }
        mean = block_sum(s, singles[0]) * inv_n;
        float s2 = 0.f;
        for (int v = threadIdx.x; v < nvec; v += T) {
            const uint4 p = smem[v];
            const unsigned q[4] = {p.x, p.y, p.z, p.w};
            #pragma unroll
            for (int k = 0; k < 4; ++k) { const float a = lo(q[k]) - mean, c = hi(q[k]) - mean; s2 += a * a + c * c; }
        }
        r = rsqrtf(block_sum(s2, singles[1]) * inv_n + eps);
    } else {
        const float shift = lo(smem[0].x);
        float s1 = 0.f, s2 = 0.f;
        for (int v = threadIdx.x; v < nvec; v += T) {
            const uint4 p = smem[v];
            const unsigned q[4] = {p.x, p.y, p.z, p.w};
            #pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float a = lo(q[k]) - shift, c = hi(q[k]) - shift;
                s1 += a + c; s2 += a * a + c * c;
            }
        }
        const float2 t = block_sum2(make_float2(s1, s2), pairs);
        const float m = t.x * inv_n;
        mean = shift + m;
        r = rsqrtf(fmaxf(t.y * inv_n - m * m, 0.f) + eps);
    }
    uint4 *out = y + (long long)row * nvec;
    for (int v0 = threadIdx.x; v0 < nvec; v0 += 4 * T) {
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int v = v0 + k * T;
            if (v >= nvec) break;
            const uint4 p = smem[v];
            const uint4 ww = LN == 1 ? wr[k] : w[v], bb = LN == 1 ? br[k] : bias[v];
            const unsigned q[4] = {p.x, p.y, p.z, p.w}, g[4] = {ww.x, ww.y, ww.z, ww.w}, h[4] = {bb.x, bb.y, bb.z, bb.w};
            unsigned o[4];
            #pragma unroll
            for (int j = 0; j < 4; ++j)
                o[j] = pack((lo(q[j]) - mean) * r * lo(g[j]) + lo(h[j]), (hi(q[j]) - mean) * r * hi(g[j]) + hi(h[j]));
            out[v] = make_uint4(o[0], o[1], o[2], o[3]);
        }
    }
}
#define L(M, THREADS) extern "C" __global__ void __launch_bounds__(THREADS, 1) ln##M(const uint4 *x, const uint4 *w, const uint4 *b, uint4 *y, int nvec, float eps, float inv_n) { ln<M>(x, w, b, y, nvec, eps, inv_n); }
L(0, 1024) L(1, 512) L(2, 1024) // ln1's registers hold four steps' weight and bias
"""


SHAPES = ((4096, 16384), (8192, 8192), (16384, 4096))


def lab_rows(lab_call, results):
    """lab's own forward as it plans itself, then held staged at 4 and 8 vectors a thread, with and
    without its statistics written."""
    results["lab"].append(lab_call(True))
    old_min = lab.lab._rowwise_staged_min_vectors(1)
    for vpt in (4, 8):
        old_vpt = lab.lab._rowwise_staged_vectors_per_thread(vpt)
        results.setdefault(f"lab-staged/{vpt}", []).append(lab_call(True))
        results.setdefault(f"lab-staged/{vpt}-nostat", []).append(lab_call(False))
        lab.lab._rowwise_staged_vectors_per_thread(old_vpt)
    lab.lab._rowwise_staged_min_vectors(old_min)


def prototype(fn, y, ref, launch, threads, grid, smem, name, results, timer, torch):
    """One prototype launch checked against the float32 reference (a poisoned output first), then timed."""
    if smem > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = smem
    def run():
        launch(fn, grid, threads, smem)
    y.fill_(float("nan"))
    run()
    torch.cuda.synchronize()
    err = (y.float() - ref.float()).abs().max().item()
    assert err < 0.05, (name, err)
    results.setdefault(name, []).append(per_call_ms(run, timer))


def report(op, rows, n, nbytes, results):
    copy = nbytes / min(results["copy"]) / 1e9
    print(f"== {op} bf16 {rows} x {n}: copy {copy:.2f} TB/s; TB/s and % of the copy")
    for k, ms in sorted(results.items(), key=lambda kv: min(kv[1])):
        t = nbytes / min(ms) / 1e9
        print(f"  {k:16s} {t:.2f}  {100 * t / copy:5.1f}%")


def sweep_rms_norm(torch, cupy, mod, timer, sms):
    for rows, n in SHAPES:
        x = torch.randn(rows, n, device="cuda").bfloat16()
        w = (torch.rand(n, device="cuda") + 0.5).bfloat16()
        y = torch.empty_like(x)
        rstd = torch.empty(rows, device="cuda")
        ref = (x.float() * torch.rsqrt(x.float().pow(2).mean(1, keepdim=True) + 1e-6) * w.float()).bfloat16()
        src = torch.empty_like(x)
        results = {"copy": [], "lab": []}
        nvec = n // 8

        def launch(fn, grid, threads, smem):
            fn((grid,), (threads,), (x.data_ptr(), w.data_ptr(), y.data_ptr(), rows, nvec,
                                      cupy.float32(1e-6), cupy.float32(1.0 / n)), shared_mem=smem)
        for _round in range(2):
            results["copy"].append(per_call_ms(lambda: src.copy_(x), timer))
            lab_rows(lambda stats: per_call_ms(lambda: lab.rms_norm(x, w, y, rstd=rstd if stats else None), timer),
                     results)
            for mode in (0, 1, 2, 3):
                bufs = (2 if mode >= 2 else 1) + (1 if mode == 3 else 0)
                smem = bufs * nvec * 16
                for threads in (128, 256, 512):
                    if nvec // threads > 16 or threads > nvec:
                        continue
                    per_sm = 0
                    if mode > 0:
                        per_sm = min(2048 // threads, 233472 // (smem + 256 + 1024), 32)
                        if per_sm == 0:
                            continue
                    grid = rows if mode == 0 else min(rows, per_sm * sms)
                    prototype(mod.get_function(f"rms{mode}"), y, ref, launch, threads, grid, smem,
                              f"m{mode}/t{threads}/b{per_sm}", results, timer, torch)
        report("rms_norm", rows, n, 2 * x.numel() * 2, results)


def sweep_layer_norm(torch, cupy, mod, timer):
    for rows, n in SHAPES:
        x = (torch.randn(rows, n, device="cuda") + 3).bfloat16()  # off zero, as activations are
        w = (torch.rand(n, device="cuda") + 0.5).bfloat16()
        b = torch.randn(n, device="cuda").bfloat16()
        y = torch.empty_like(x)
        mean, rstd = torch.empty(rows, device="cuda"), torch.empty(rows, device="cuda")
        ref = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5).bfloat16()
        src = torch.empty_like(x)
        results = {"copy": [], "lab": []}
        nvec = n // 8

        def launch(fn, grid, threads, smem):
            fn((grid,), (threads,), (x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr(), nvec,
                                      cupy.float32(1e-5), cupy.float32(1.0 / n)), shared_mem=smem)
        for _round in range(2):
            results["copy"].append(per_call_ms(lambda: src.copy_(x), timer))
            lab_rows(lambda stats: per_call_ms(
                lambda: lab.layer_norm(x, w, b, y, mean=mean if stats else None, rstd=rstd if stats else None),
                timer), results)
            for mode in (0, 1, 2):
                for threads in (128, 256, 512, 1024):
                    steps = nvec // threads
                    if steps > 16 or threads > nvec or (mode == 1 and (steps > 4 or threads > 512)):
                        continue
                    prototype(mod.get_function(f"ln{mode}"), y, ref, launch, threads, rows, nvec * 16,
                              f"ln{mode}/t{threads}", results, timer, torch)
        report("layer_norm", rows, n, 2 * x.numel() * 2, results)


def main(ops):
    found = prototype_peers("sweep_staged_norms", SOURCE)
    if found is None:
        return 1
    torch, cupy, mod, timer = found
    if "rms_norm" in ops:
        sweep_rms_norm(torch, cupy, mod, timer, torch.cuda.get_device_properties(0).multi_processor_count)
    if "layer_norm" in ops:
        sweep_layer_norm(torch, cupy, mod, timer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["rms_norm", "layer_norm"]))
