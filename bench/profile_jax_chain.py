"""Which kernels lab.jax's rms_norm, softmax and swiglu run inside jax.jit, and how long each takes,
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
    import jax.numpy as jnp
    import torch
    import lab.jax as ljax
    from bench_jax import chained
    key = jax.random.PRNGKey(0)
    x = jax.random.normal(key, (16384, 4096), jnp.bfloat16)
    up = jax.random.normal(jax.random.PRNGKey(2), (16384, 4096), jnp.bfloat16)
    w = jax.random.normal(key, (4096,), jnp.bfloat16)

    def xla_rms_norm(x, w):
        f = x.astype(jnp.float32)
        return (f * jax.lax.rsqrt(jnp.mean(f * f, -1, keepdims=True) + 1e-6) * w.astype(jnp.float32)).astype(x.dtype)

    cases = [("lab rms_norm", lambda x, w: ljax.rms_norm(x, w, 1e-6), (x, w)), ("XLA rms_norm", xla_rms_norm, (x, w)),
             ("lab softmax", ljax.softmax, (x,)),
             ("XLA softmax", lambda x: jax.nn.softmax(x.astype(jnp.float32), -1).astype(x.dtype), (x,)),
             ("lab swiglu", ljax.swiglu, (x, up)),
             ("XLA swiglu", lambda g, u: (jax.nn.silu(g.astype(jnp.float32)) * u.astype(jnp.float32)).astype(g.dtype),
              (x, up))]
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
