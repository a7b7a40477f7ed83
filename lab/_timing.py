"""Event timing shared by the demo and the benchmarks: the median of repeated event-timed runs after
a warm-up, on the producer's current stream (where lab launches too)."""


def median_ms(fn, new_event, elapsed_ms, repeats=20, warmup=3, before=None):
    """Median milliseconds of fn(), timed by device events from new_event(); elapsed_ms(start, end).
    before(), where given, runs ahead of each timed call, outside the timing."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = new_event(), new_event()
        if before is not None:
            before()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(elapsed_ms(start, end))
    times.sort()
    return times[len(times) // 2]


def torch_timer(torch):
    return (lambda: torch.cuda.Event(enable_timing=True)), (lambda start, end: start.elapsed_time(end))


def cupy_timer(cupy):
    return cupy.cuda.Event, cupy.cuda.get_elapsed_time
