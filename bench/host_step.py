"""How long the host takes to queue one bench_llama 4 x 2048 training step (the GPU kept busy ~0.2 s
ahead of it, so that queueing never waits on the GPU - unless the step itself synchronizes, and then
the time includes that wait), and with --profile N the N functions where the host's time goes
(cProfile, one step). bench_llama.py's "host ahead" column is what the GPU takes when it never waits.
    python3 bench/host_step.py IMPLEMENTATION [--profile N]"""
import cProfile
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    import argparse
    from bench_llama import IMPLEMENTATIONS, REST_CYCLES, prepared
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("implementation", choices=IMPLEMENTATIONS)
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="print the N costliest functions")
    args = parser.parse_args()
    import torch
    import transformers
    name, top = args.implementation, args.profile
    ready = prepared(torch, transformers, name, "4x2048", warmup=3)
    if ready is None:
        return
    model, ids, step = ready
    host, forward = [], []
    for _ in range(7):
        torch.cuda._sleep(2 * REST_CYCLES)  # ~0.2 s: longer than the host takes to queue a step
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.cuda.synchronize()
        host.append((t2 - t0) * 1e3)
        forward.append((t1 - t0) * 1e3)
    print(f"{name}: host time to queue a step {statistics.median(host):.1f} ms "
          f"(forward {statistics.median(forward):.1f} ms)", flush=True)
    if top:
        torch.cuda._sleep(2 * REST_CYCLES)
        profiler = cProfile.Profile()
        profiler.enable()
        step()
        profiler.disable()
        torch.cuda.synchronize()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    main()
