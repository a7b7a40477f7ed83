"""How a split reduction's first pass is cut: the whole-array sums (float32 and bfloat16, 2^28 elements)
and a few outputs over long rows, with the first pass's blocks in 1 to 16 waves
(lab.lab._reduce_slice_waves; one wave fills every multiprocessor once), beside torch's and CuPy's
sums of the same arrays. Ten calls back to back per event-timed sample, as bench_bandwidth.py times;
TB/s of the input read. The order of the columns alternates so that no setting always runs first.
    python3 bench/sweep_reductions.py [--waves 1 2 4 ...]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import lab  # noqa: E402
from lab._timing import torch_timer  # noqa: E402
from _peers import peers  # noqa: E402
from bench_bandwidth import per_call_ms  # noqa: E402  (ten calls back to back per sample)


def cases(torch, cupy):
    """(name, bytes read, lab call, [(peer, call)])"""
    n = 1 << 28
    x = torch.randn(n, device="cuda")
    xb, scalar = x.bfloat16(), torch.empty((), device="cuda")
    cupy_sum = []
    if cupy is not None:
        cx, c_scalar = cupy.asarray(x), cupy.empty((), cupy.float32)
        cupy_sum = [("cupy", lambda: cupy.sum(cx, out=c_scalar))]
    yield ("sum, 2^28 float32", 4 * n, lambda: lab.sum(x, scalar),
           [("torch", lambda: torch.sum(x, dim=0, out=scalar))] + cupy_sum)
    yield ("sum, 2^28 bfloat16", 2 * n, lambda: lab.sum(xb, scalar),
           [("torch", lambda: torch.sum(xb, dim=0, dtype=torch.float32, out=scalar))])
    rows = x.view(8, n // 8)
    eight = torch.empty(8, device="cuda")
    yield ("sum(dim=1), 8 x 2^25 float32", 4 * n, lambda: lab.sum(rows, eight, axis=1),
           [("torch", lambda: torch.sum(rows, dim=1, out=eight))])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--waves", type=int, nargs="+", default=[1, 2, 3, 4, 8, 16])
    args = parser.parse_args()
    found = peers("sweep_reductions")
    if found is None:
        return 1
    torch, cupy = found
    timer = torch_timer(torch)
    default = lab.lab._reduce_slice_waves(1)
    lab.lab._reduce_slice_waves(default)
    print(f"TB/s of the input read; lab with its first pass in N waves (lab's default: {default})")
    for name, nbytes, lab_fn, peer_fns in cases(torch, cupy):
        results = {}
        for order in (args.waves, list(reversed(args.waves))):
            for waves in order:
                lab.lab._reduce_slice_waves(waves)
                results.setdefault(f"lab/{waves}", []).append(per_call_ms(lab_fn, timer))
            lab.lab._reduce_slice_waves(default)
            for peer, fn in peer_fns:
                results.setdefault(peer, []).append(per_call_ms(fn, timer))
        cells = "  ".join(f"{key} {nbytes / min(ms) / 1e9:.2f}" for key, ms in results.items())
        print(f"{name:32s} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
