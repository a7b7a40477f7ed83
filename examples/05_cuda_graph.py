"""Example 5 - lab inside a CUDA graph.

lab's launch path makes no host sync and no allocation, and launches on torch's current stream, so
torch.cuda.graph records lab kernels like its own. Replaying the graph reruns them on whatever the
static input tensors hold now - here 50 lab ops for the host cost of one replay.
"""
from _common import need, need_gpu

torch = need("torch")
need_gpu()
import lab  # noqa: E402

x = torch.rand(1 << 20, device="cuda")
bias = torch.full_like(x, 0.01)
y = torch.empty_like(x)

graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    lab.copy(x, y)
    for _ in range(49):
        lab.add(y, bias, y)

for value in (0.0, 1.0, -2.0):
    x.fill_(value)            # new input in the same memory
    graph.replay()
    torch.cuda.synchronize()
    assert torch.allclose(y, torch.full_like(y, value + 49 * 0.01), atol=1e-5)
    print(f"replay with x = {value:+.1f}: y = {y[0].item():+.4f} (x + 49 * 0.01)")
