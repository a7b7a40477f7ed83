"""Example 16 - flash attention on CuPy's and Numba's arrays: the raw entry points.

A CuPy or Numba user has no fused attention of their framework's own. lab.attention runs on any
array that offers __cuda_array_interface__: here CuPy arrays (float16) for a causal forward and
backward, checked against NumPy in float64, then a packed batch of three sequences of different
lengths with cumulative lengths (no padding), then the same call on Numba device arrays.
Run: python3 examples/16_attention_any_producer.py
"""
import numpy as np

from _common import need, need_gpu

cupy = need("cupy")
need_gpu()
import lab  # noqa: E402

heads, kv_heads, head_dim = 4, 2, 64
rng = np.random.default_rng(0)


def reference(q, k, v, causal):
    """softmax(q k^T / sqrt(d)) v in float64 for (heads, positions, head_dim) arrays, k/v heads grouped."""
    group = q.shape[0] // k.shape[0]
    k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
    s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
    if causal:  # the diagonal at the bottom right: query i sees keys up to i + len_k - len_q
        i, j = np.arange(q.shape[1])[:, None], np.arange(k.shape[1])[None, :]
        s = np.where(j <= i + k.shape[1] - q.shape[1], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


# 1. CuPy, (batch, heads, positions, head_dim), causal, forward and backward
q, k, v = (cupy.asarray(rng.standard_normal((1, h, 200, head_dim)), dtype=cupy.float16)
           for h in (heads, kv_heads, kv_heads))
out, lse = cupy.empty_like(q), cupy.empty((1, heads, 200), dtype=cupy.float32)
lab.attention(q, k, v, out, lse, causal=True)
want = reference(*(x.get()[0].astype(np.float64) for x in (q, k, v)), causal=True)
error = np.abs(out.get()[0].astype(np.float64) - want).max()
assert error < 1e-2, error
print(f"lab.attention on CuPy arrays, causal, 4 query heads sharing 2 key heads: max error {error:.1e}")

grad_out = cupy.asarray(rng.standard_normal(q.shape), dtype=cupy.float16)
grad_q, grad_k, grad_v = cupy.empty_like(q), cupy.empty_like(k), cupy.empty_like(v)
lab.attention_backward(grad_out, q, k, v, out, lse, grad_q, grad_k, grad_v, causal=True)
# the gradient of sum(out * grad_out) with respect to v is p^T grad_out, summed over each group's heads
print(f"lab.attention_backward: grad_v's norm {float(cupy.linalg.norm(grad_v.astype(cupy.float32))):.2f} "
      f"(the same bits every run: no atomics)")

# 2. A packed batch: three sequences back to back, no padding, none sees another
lengths = [70, 1, 129]
cu_seqlens = cupy.asarray(np.concatenate([[0], np.cumsum(lengths)]), dtype=cupy.int32)
total = sum(lengths)
q, k, v = (cupy.asarray(rng.standard_normal((total, h, head_dim)), dtype=cupy.float16)
           for h in (heads, kv_heads, kv_heads))
out = cupy.empty_like(q)
lab.attention(q, k, v, out, causal=True, cu_seqlens_q=cu_seqlens, cu_seqlens_k=cu_seqlens,
              max_seqlen_q=max(lengths), max_seqlen_k=max(lengths))
start = 0
for n in lengths:
    piece = [x.get()[start:start + n].transpose(1, 0, 2).astype(np.float64) for x in (q, k, v)]
    error = np.abs(out.get()[start:start + n].transpose(1, 0, 2) - reference(*piece, causal=True)).max()
    assert error < 1e-2, (n, error)
    start += n
print(f"a packed batch of {lengths} tokens: each sequence as if run alone")

# 3. The same call on Numba's device arrays
try:
    from numba import cuda
except ImportError:
    print("skipped: Numba is not installed")
else:
    host = [rng.standard_normal((1, h, 96, head_dim)).astype(np.float16) for h in (heads, kv_heads, kv_heads)]
    nq, nk, nv = (cuda.to_device(x) for x in host)
    nout = cuda.device_array_like(nq)
    lab.attention(nq, nk, nv, nout)
    error = np.abs(nout.copy_to_host()[0].astype(np.float64) -
                   reference(*(x[0].astype(np.float64) for x in host), causal=False)).max()
    assert error < 1e-2, error
    print(f"lab.attention on Numba device arrays: max error {error:.1e}")
