"""One CUDA-graph check the GPU tests share: what lab launches is captured by torch's graph capture
and replayed on fresh inputs, with lab resolving the capturing stream and allocating nothing."""


def capture_and_replay(torch, launch, refill, check, replays=2):
    """Runs `launch` once on a side stream (the warm-up torch's docs ask for before a capture),
    captures it in a torch.cuda.CUDAGraph, then `replays` times: `refill()` the inputs, replay, and
    `check(captured)`, where `captured` is what `launch` returned during the capture."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launch()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = launch()
    for _ in range(replays):
        refill()
        graph.replay()
        torch.cuda.synchronize()
        check(captured)
