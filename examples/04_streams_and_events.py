"""Example 4 - streams and events: lab launches where your work is, and can be told where to go.

1. Inside `with torch.cuda.stream(side)` lab asks torch (DLPack exchange API) for its current
   stream and launches there, so it queues behind torch's work instead of racing it.
2. `with lab.stream(s)` and stream= send the work elsewhere; lab then orders the streams with events
   (no host sync), both before and after its launch.
3. lab.Event(timing=True) times work on a stream.
"""
from _common import need, need_gpu

torch = need("torch")
need_gpu()
import lab  # noqa: E402

n = 1 << 24
a = torch.zeros(n, device="cuda")
b = torch.full((n,), 2.0, device="cuda")
out = torch.empty(n, device="cuda")
torch.cuda.synchronize()

side = torch.cuda.Stream()
with torch.cuda.stream(side):
    for _ in range(30):                    # a long queue of torch work on `side`...
        torch.mul(a, 1.0000001, out=a)
    a.fill_(1.0)
    lab.add(a, b, out)                     # ...which lab's launch waits for: out = 3
side.synchronize()
assert torch.equal(out, torch.full_like(out, 3.0))
print("1. on torch's side stream: lab queued behind torch's work, out == 3 everywhere")

mine = lab.Stream()
with lab.stream(mine):                     # lab's thread-local current stream
    lab.add(out, b, out)                   # launched on `mine`, after the default stream's work
out.mul_(2)                                # torch's default stream: waits for lab's launch
torch.cuda.synchronize()
assert torch.equal(out, torch.full_like(out, 10.0))
print(f"2. with lab.stream({mine}): ordered with torch's stream both ways, out == 10 everywhere")

start, end = lab.Event(timing=True), lab.Event(timing=True)
start.record(stream=mine)
for _ in range(10):
    lab.gelu(a, out, stream=mine)
end.record(stream=mine)
end.synchronize()
print(f"3. 10 x gelu on {n:,} elements took {start.elapsed_time(end):.3f} ms (lab.Event)")
