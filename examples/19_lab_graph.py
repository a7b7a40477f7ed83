"""Example 19 - lab's own CUDA graph, with nothing but NumPy: record lab calls once, replay them.

`with lab.graph(g):` records the block's lab calls instead of running them; g.replay() runs them all
with one host call. A loop of 100 small adds costs a launch each from Python, one launch from the
graph. A random draw captured in the graph takes new numbers at each replay (the generator's state
is written to the device before each one), and a dropout's backward inside the capture keeps the
forward's elements. docs/graphs.md explains how.
"""
import time

import numpy as np

from _common import need_gpu

need_gpu()
import lab  # noqa: E402

x, one = lab.asarray(np.zeros(1024, np.float32)), lab.asarray(np.ones(1, np.float32))


def loop():
    for _ in range(100):
        lab.add(x, one, x)


loop()  # warm-up
g = lab.Graph()
with lab.graph(g):
    loop()
print(f"captured {g.node_count} kernels")
for name, run in (("from Python", loop), ("lab.Graph replay", g.replay)):
    lab.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        run()
    lab.synchronize()
    print(f"{name:18s} {1e6 * (time.perf_counter() - start) / 2000:6.2f} us per add")
assert (x.numpy() == 100 + 20 * 100 + 20 * 100).all()

# dropout forward and backward in one graph: new elements each replay, the same in both passes
lab.manual_seed(0)
h = lab.asarray(np.ones(10_000, np.float32))
out, grad_in = lab.empty(10_000), lab.empty(10_000)
dropout = lab.Graph()
with lab.graph(dropout):
    state = lab.get_rng_state()
    lab.dropout(h, 0.5, out)
    lab.dropout(h, 0.5, grad_in, rng_state=state)  # the backward's call, on a gradient of ones
for replay in range(3):
    dropout.replay()
    kept = out.numpy() != 0
    assert (grad_in.numpy() == out.numpy()).all()
    print(f"replay {replay}: kept {kept.mean():.3f} of the elements, first ten {kept[:10].astype(int)}")
