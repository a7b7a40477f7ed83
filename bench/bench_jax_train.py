"""A training step of a small transformer written in JAX, with lab.jax's ops against the same model in
plain jax.numpy, side by side in one run: the same weights, batch and optimizer, 50 steps each.
Prints ms/step (median after warm-up) and both loss curves, and checks that they agree within
bfloat16 tolerance step by step (2% of the first loss). Each step takes a new batch of sequences that
count up from a random token (something to learn); both versions see the same batches.

The model is a Llama-style decoder: token embedding, then per layer RMSNorm, attention (q, k, v
projections, rotary embedding, causal softmax, output projection) and RMSNorm, SwiGLU MLP, each with
a residual; a final RMSNorm, the head and cross-entropy. Parameters are float32, the computation
bfloat16 (the usual mixed precision), the optimizer plain SGD with momentum. lab.jax supplies
rms_norm, apply_rotary_pos_emb, softmax, swiglu and cross_entropy; the matrix products are XLA's in
both versions.
    python3 bench/bench_jax_train.py [--out-dir DIR] [--quick]   (--quick: a tiny model, any device)
"""
import json
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STEPS = 50
FULL = dict(batch=8, seq=1024, dim=1024, heads=16, layers=4, ffn=2816, vocab=32000)
QUICK = dict(batch=2, seq=32, dim=64, heads=4, layers=2, ffn=128, vocab=256)


def make_ops(jax, jnp, ljax, use_lab):
    """(rms_norm, rope, softmax, swiglu, cross_entropy): lab.jax's, or the plain formulas."""
    if use_lab:
        return (lambda x, w: ljax.rms_norm(x, w, 1e-6), lambda q, k, c, s: ljax.apply_rotary_pos_emb(q, k, c, s),
                ljax.softmax, ljax.swiglu, ljax.cross_entropy)

    def rms_norm(x, w):
        f = x.astype(jnp.float32)
        return (f * jax.lax.rsqrt(jnp.mean(f * f, -1, keepdims=True) + 1e-6) * w.astype(jnp.float32)).astype(x.dtype)

    def rotate_half(x):
        half = x.shape[-1] // 2
        return jnp.concatenate([-x[..., half:], x[..., :half]], -1)

    def rope(q, k, cos, sin):
        c, s = cos[:, None].astype(jnp.float32), sin[:, None].astype(jnp.float32)
        turn = lambda t: (t.astype(jnp.float32) * c + rotate_half(t.astype(jnp.float32)) * s).astype(t.dtype)  # noqa: E731
        return turn(q), turn(k)

    def softmax(x):
        return jax.nn.softmax(x.astype(jnp.float32), -1).astype(x.dtype)

    def swiglu(gate, up):
        return (jax.nn.silu(gate.astype(jnp.float32)) * up.astype(jnp.float32)).astype(gate.dtype)

    def cross_entropy(logits, target):
        f = logits.astype(jnp.float32)
        return jnp.mean(jax.nn.logsumexp(f, -1) - jnp.take_along_axis(f, target[:, None], -1)[:, 0])
    return rms_norm, rope, softmax, swiglu, cross_entropy


def init(jax, jnp, c):
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 4 + 8 * c["layers"]))
    d, f = c["dim"], c["ffn"]

    def dense(*shape):
        return jax.random.normal(next(keys), shape, jnp.float32) / jnp.sqrt(shape[0])
    layers = [dict(norm1=jnp.ones(d), wq=dense(d, d), wk=dense(d, d), wv=dense(d, d), wo=dense(d, d),
                   norm2=jnp.ones(d), gate=dense(d, f), up=dense(d, f), down=dense(f, d)) for _ in range(c["layers"])]
    return dict(embed=jax.random.normal(next(keys), (c["vocab"], d), jnp.float32) * 0.02, layers=layers,
                norm=jnp.ones(d), head=dense(d, c["vocab"]))


def make_loss(jax, jnp, ops, c):
    rms_norm, rope, softmax, swiglu, cross_entropy = ops
    heads, seq, dim = c["heads"], c["seq"], c["dim"]
    head_dim = dim // heads
    inv_freq = 1.0 / (10000 ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * inv_freq[None]
    emb = jnp.concatenate([angles, angles], -1)[None]
    cos, sin = jnp.cos(emb).astype(jnp.bfloat16), jnp.sin(emb).astype(jnp.bfloat16)
    causal = jnp.tril(jnp.ones((seq, seq), bool))

    def loss(params, tokens, target):
        bf = lambda w: w.astype(jnp.bfloat16)  # noqa: E731
        x = bf(params["embed"])[tokens]
        batch = x.shape[0]
        for p in params["layers"]:
            h = rms_norm(x, bf(p["norm1"]))
            split = lambda t: t.reshape(batch, seq, heads, head_dim).transpose(0, 2, 1, 3)  # noqa: E731
            q, k, v = split(h @ bf(p["wq"])), split(h @ bf(p["wk"])), split(h @ bf(p["wv"]))
            q, k = rope(q, k, cos, sin)
            scores = (q @ k.transpose(0, 1, 3, 2)) * jnp.asarray(head_dim ** -0.5, jnp.bfloat16)
            scores = jnp.where(causal, scores, jnp.asarray(-1e4, jnp.bfloat16))
            attended = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(batch, seq, dim)
            x = x + attended @ bf(p["wo"])
            h = rms_norm(x, bf(p["norm2"]))
            x = x + swiglu(h @ bf(p["gate"]), h @ bf(p["up"])) @ bf(p["down"])
        logits = rms_norm(x, bf(params["norm"])) @ bf(params["head"])
        return cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
    return loss


def train(jax, jnp, loss, params, batches):
    """(losses, ms per step): SGD with momentum over the batches (tokens, targets), the step jitted with
    its buffers donated."""
    def step(params, velocity, tokens, target):
        value, grads = jax.value_and_grad(loss)(params, tokens, target)
        velocity = jax.tree_util.tree_map(lambda v, g: 0.9 * v + g, velocity, grads)
        params = jax.tree_util.tree_map(lambda p, v: p - 0.05 * v, params, velocity)
        return params, velocity, value
    step = jax.jit(step, donate_argnums=(0, 1))
    velocity = jax.tree_util.tree_map(jnp.zeros_like, params)
    losses, times = [], []
    for tokens, target in batches:
        start = time.perf_counter()
        params, velocity, value = step(params, velocity, tokens, target)
        losses.append(float(value))  # waits for the step
        times.append((time.perf_counter() - start) * 1e3)
    warm = sorted(times[5:]) or sorted(times)
    return losses, warm[len(warm) // 2]


def main():
    from _peers import bench_args
    args = bench_args(__doc__.split("\n")[0])
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        print(f"bench_jax_train.py: needs jax ({e})")
        return 0
    if not args.quick and not any(d.platform == "gpu" for d in jax.devices()):
        print("bench_jax_train.py: needs jax with a CUDA device (--quick runs a tiny model anywhere)")
        return 0
    import lab.jax as ljax
    c = QUICK if args.quick else FULL
    # token streams with structure to learn (each sequence counts up from a random start, modulo the
    # vocabulary), a new batch each step, the same batches for both
    batches = []
    for step in range(STEPS):
        start = jax.random.randint(jax.random.PRNGKey(step), (c["batch"], 1), 0, c["vocab"])
        tokens = (start + jnp.arange(c["seq"] + 1)[None]) % c["vocab"]
        batches.append((tokens[:, :-1], tokens[:, 1:]))
    results = {}
    for name, use_lab in (("jax.numpy", False), ("lab.jax", True)):
        loss = make_loss(jax, jnp, make_ops(jax, jnp, ljax, use_lab), c)
        results[name] = train(jax, jnp, loss, init(jax, jnp, c), batches)
    (plain, plain_ms), (ours, ours_ms) = results["jax.numpy"], results["lab.jax"]
    tokens_per_step = c["batch"] * c["seq"]
    print(f"\nmodel {c}, {STEPS} steps of SGD with momentum, bf16 compute")
    print(f"{'implementation':12s} {'ms/step':>9s} {'tokens/s':>10s} {'first loss':>11s} {'last loss':>10s}")
    for name, (losses, ms) in results.items():
        print(f"{name:12s} {ms:9.2f} {tokens_per_step / ms * 1e3:10.0f} {losses[0]:11.4f} {losses[-1]:10.4f}")
    gap = max(abs(a - b) for a, b in zip(ours, plain)) / plain[0]
    print(f"\nlargest gap between the loss curves, over the first loss: {gap:.4f}")
    goals = [("jax.numpy ms / lab.jax ms > 1", plain_ms / ours_ms, plain_ms > ours_ms),
             ("loss curves within 2% of the first loss, every step", gap, gap <= 0.02)]
    from _peers import print_met_goals
    print_met_goals(goals, width=50, digits=4)
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "jax_train.json"), "w") as f:
            json.dump(dict(jax=jax.__version__, config=c, steps=STEPS, ms_per_step=dict(lab=ours_ms, jnp=plain_ms),
                           losses=dict(lab=ours, jnp=plain), goals=[list(g) for g in goals]), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
