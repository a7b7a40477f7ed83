"""Which kernels lab.jax's rms_norm, layer_norm, softmax and swiglu run inside jax.jit, and how long each takes,
against XLA's own formulas - for Nsight Compute (`make profile-jax`). bench_jax.py measured lab's
kernels slower inside jit than on torch tensors; this shows whether XLA adds kernels (copies around
the custom calls) or lab's kernel itself runs slower there. Each case is bench_jax.py's chain of three
applications, compiled and run once before the profiler starts (torch.cuda.profiler: ncu runs with
--profile-from-start off); its name goes to stderr before its kernels. With --hlo it prints XLA's
compiled module of each chain instead."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    import jax
    import torch
    import lab.jax as ljax
    from bench_jax import chained, headline_arrays, xla_layer_norm, xla_rms_norm, xla_softmax, xla_swiglu
    x, up, w = headline_arrays()
    cases = [("lab rms_norm", lambda x, w: ljax.rms_norm(x, w, 1e-6), (x, w)), ("XLA rms_norm", xla_rms_norm, (x, w)),
             ("lab layer_norm", lambda x, w, b: ljax.layer_norm(x, w, b), (x, w, w)),
             ("XLA layer_norm", xla_layer_norm, (x, w, w)),
             ("lab softmax", ljax.softmax, (x,)), ("XLA softmax", xla_softmax, (x,)),
             ("lab swiglu", ljax.swiglu, (x, up)), ("XLA swiglu", xla_swiglu, (x, up))]
    runs = [(name, chained(op, 3), arrays) for name, op, arrays in cases]
    if "--hlo" in sys.argv:  # XLA's compiled module of each chain instead: what it runs around lab's calls
        for name, fn, arrays in runs:
            print(f"==== {name}\n{fn.lower(*arrays).compile().as_text()}")
        return
    for _, fn, arrays in runs:
        jax.block_until_ready(fn(*arrays))
    torch.cuda.init()
    torch.cuda.profiler.start()
    for name, fn, arrays in runs:
        print(name, file=sys.stderr, flush=True)
        jax.block_until_ready(fn(*arrays))
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
