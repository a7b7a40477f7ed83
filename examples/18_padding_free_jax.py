"""Example 18 - padding-free training on JAX: samples back to back in one row, attention that keeps
them apart.

A tiny causal language model in plain JAX (an embedding, one attention layer, a head) whose attention
is lab.jax.dot_product_attention on a packed batch: the samples' tokens in one row, cu_seqlens saying
where each starts. No padding is computed, and no token attends across a sample boundary, so the
packed row's loss equals the samples' losses computed one by one (each a batch of its own); the
targets of a row are shifted within each sample, never across. Then a few jitted SGD steps, the
gradients through lab's backward kernels. Run: python3 examples/18_padding_free_jax.py
"""
from _common import need, need_gpu

jax = need("jax")
need_gpu()
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lab.jax as ljax  # noqa: E402

VOCAB, WIDTH, HEADS, HEAD_DIM = 512, 256, 4, 64
lengths = [37, 5, 120, 64, 1, 90]  # not multiples of a tile; one sample of a single token
keys = jax.random.split(jax.random.PRNGKey(0), 4)
params = {"embed": jax.random.normal(keys[0], (VOCAB, WIDTH)) * 0.05,
          "qkv": jax.random.normal(keys[1], (WIDTH, 3 * HEADS * HEAD_DIM)) * WIDTH ** -0.5,
          "out": jax.random.normal(keys[2], (HEADS * HEAD_DIM, WIDTH)) * (HEADS * HEAD_DIM) ** -0.5}
samples = [np.asarray(jax.random.randint(jax.random.fold_in(keys[3], i), (n,), 0, VOCAB)) for i, n in enumerate(lengths)]


def token_losses(params, tokens, cu_seqlens=None, longest=None):
    """Each position's loss at predicting the next token of its sample, for a packed row (tokens,)
    with cu_seqlens, or one sample alone."""
    h = params["embed"][tokens]
    q, k, v = (t.reshape(len(tokens), HEADS, HEAD_DIM).astype(jnp.bfloat16)
               for t in jnp.split(h @ params["qkv"], 3, axis=-1))
    if cu_seqlens is None:  # one sample: a batch of one, (batch, positions, heads, head_dim)
        a = ljax.dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]
    else:
        a = ljax.dot_product_attention(q, k, v, is_causal=True, cu_seqlens_q=cu_seqlens, cu_seqlens_k=cu_seqlens,
                                       max_seqlen_q=longest, max_seqlen_k=longest)
    logits = (h + a.reshape(len(tokens), -1).astype(h.dtype) @ params["out"]) @ params["embed"].T
    return jax.nn.logsumexp(logits[:-1], -1) - jnp.take_along_axis(logits[:-1], tokens[1:, None], -1)[:, 0]


row = jnp.asarray(np.concatenate(samples))
starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
cu_seqlens, longest = jnp.asarray(starts), max(lengths)
# a position predicts the next token only where that token is in its own sample
predicts = np.ones(len(row) - 1, bool)
predicts[starts[1:-1] - 1] = False
predicts = jnp.asarray(predicts)


@jax.jit
def loss(params):
    return jnp.sum(jnp.where(predicts, token_losses(params, row, cu_seqlens, longest), 0.0)) / jnp.sum(predicts)


one_by_one = sum(float(jnp.sum(token_losses(params, jnp.asarray(s)))) for s in samples) / int(predicts.sum())
packed = float(loss(params))
print(f"packed row of {len(row)} tokens in {len(lengths)} samples: loss {packed:.5f}, samples one by one "
      f"{one_by_one:.5f}")
assert abs(packed - one_by_one) <= 2e-3 * abs(one_by_one), "the packed row's loss is the samples' loss"

step = jax.jit(lambda p: jax.tree_util.tree_map(lambda w, g: w - 0.2 * g, p, jax.grad(loss)(p)))
first = packed
for _ in range(20):
    params = step(params)
last = float(loss(params))
print(f"20 SGD steps on the packed row: loss {first:.4f} -> {last:.4f}")
assert last < first
