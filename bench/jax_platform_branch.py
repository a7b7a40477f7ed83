"""Does choosing lab's kernel or the jax.numpy formula by platform (jax.lax.platform_dependent, how
lab.jax runs on CPU-only jax too) cost time inside jax.jit on the GPU? bench_jax.py's chains of
swiglu, rms_norm and softmax timed as lab.jax builds them and with the CUDA branch taken at trace
time, side by side, and whether XLA's compiled module still holds a conditional.
    python3 bench/jax_platform_branch.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    import jax.numpy as jnp
    import lab.jax as ljax
    from bench_jax import chained, headline_arrays, median_ms
    x, up, w = headline_arrays()
    tiny = jnp.ones((8, 64), jnp.float32)
    cases = [("swiglu 16384x4096 bf16", ljax.swiglu, (x, up), 20), ("rms_norm 16384x4096 bf16",
             lambda x, w: ljax.rms_norm(x, w, 1e-6), (x, w), 20), ("softmax 16384x4096 bf16", ljax.softmax, (x,), 20),
             ("softmax 8x64 f32 (per op, us)", ljax.softmax, (tiny,), 200)]
    chosen = ljax._on_cuda
    print(f"{'case':32s} {'platform_dependent':>18s} {'CUDA at trace':>14s} {'conditional in HLO':>19s}")
    for name, op, arrays, length in cases:
        times = []
        for on_cuda in (chosen, lambda target, reference, *args: target(*args)):
            ljax._on_cuda = on_cuda
            fn = chained(op, length)
            times.append(median_ms(fn, arrays, 20) / length)
            if on_cuda is chosen:
                conditional = "conditional" in fn.lower(*arrays).compile().as_text()
        ljax._on_cuda = chosen
        scale = 1e3 if "per op" in name else 1.0
        print(f"{name:32s} {times[0] * scale:18.4f} {times[1] * scale:14.4f} {str(conditional):>19s}")


if __name__ == "__main__":
    main()
