"""Two GPUs: lab on arrays that live on the second device. Runs where lab sees two or more
GPUs (the GPU machine's `nvidia-h200-x2` kind) and skips everywhere else.

On device 1 while the caller's current device is 0: results are right and the caller's current
device is unchanged; operands on two devices are refused naming both (DLPack and CAI operands);
lab.Array and lab.Stream made on device 1; runtime-compiled kernels; an event recorded on one device waited on by a stream
of the other; and a two-process NCCL job where each rank runs lab.adam_step on its own GPU between
all-reduces, the ranks' parameters staying identical."""
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import lab
from producers import producer_or_skip

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(lab.device_count() < 2, reason="needs two GPUs (nvidia-h200-x2)")]


def test_torch_and_cupy_arrays_on_device_1_from_device_0():
    torch = producer_or_skip("torch").torch
    cupy = pytest.importorskip("cupy")
    torch.cuda.set_device(0)
    a = torch.arange(100_003, dtype=torch.float32, device="cuda:1")
    out = torch.full_like(a, float("nan"))
    lab.add(a, a, out, alpha=0.5)
    assert torch.cuda.current_device() == 0
    torch.cuda.synchronize(1)
    assert torch.equal(out, a * 1.5)
    with cupy.cuda.Device(1):
        c = cupy.arange(4099, dtype=cupy.float32)
        c_out = cupy.full_like(c, float("nan"))
    with cupy.cuda.Device(0):
        lab.mul(c, c, c_out)  # CAI: lab locates the memory on device 1
        assert cupy.cuda.runtime.getDevice() == 0
    with cupy.cuda.Device(1):
        cupy.cuda.runtime.deviceSynchronize()
        np.testing.assert_array_equal(cupy.asnumpy(c_out), np.arange(4099, dtype=np.float32) ** 2)


def test_runtime_compiled_kernels_on_device_1():
    """lab.RawKernel and lab.ElementwiseKernel: one compiled library, launched on the
    device the arrays are on (the runtime loads a library into each device's context on first use)."""
    torch = producer_or_skip("torch").torch
    torch.cuda.set_device(0)
    fma = lab.ElementwiseKernel("T x, T y", "T z", "z = x * 2 + y", "fma_two_devices")
    for device in ("cuda:0", "cuda:1"):
        x, y = torch.randn(3, 1000, device=device), torch.randn(1000, device=device)
        z = torch.full_like(x, float("nan"))
        fma(x, y, z)
        assert torch.cuda.current_device() == 0
        torch.testing.assert_close(z, x * 2 + y)
    scale = lab.RawKernel('extern "C" __global__ void scale(float* x, int n) {'
                          " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 3; }", "scale")
    x = torch.ones(1000, device="cuda:1")
    scale(4, 256, (x, np.int32(1000)))
    assert torch.equal(x, torch.full_like(x, 3.0)) and torch.cuda.current_device() == 0


def test_operands_on_two_devices_are_refused_naming_both():
    torch = producer_or_skip("torch").torch
    cupy = pytest.importorskip("cupy")
    a0 = torch.ones(64, device="cuda:0")
    a1 = torch.ones(64, device="cuda:1")
    with pytest.raises(ValueError, match=r"argument 'b' is on cuda:1 but 'out' is on cuda:0"):
        lab.add(a0, a1, a0)
    with cupy.cuda.Device(1):
        c1 = cupy.ones(64, dtype=cupy.float32)
    with pytest.raises(ValueError, match=r"cuda:1.*cuda:0|cuda:0.*cuda:1"):
        lab.add(a0, c1, a0)
    with pytest.raises(ValueError, match=r"'ys\[0\]' is on cuda:1"):
        lab.foreach_add([a0], [a1], [a0])


def test_lab_array_and_stream_on_device_1():
    s = lab.Stream(device=1)
    assert s.device == 1
    x = lab.asarray(np.arange(1 << 16, dtype=np.float32), device=1, stream=s)
    assert x.device == 1
    lab.mul(x, x, x, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(x.numpy(), np.arange(1 << 16, dtype=np.float32) ** 2)


def test_an_event_on_one_device_orders_a_stream_of_the_other():
    s0, s1 = lab.Stream(device=0), lab.Stream(device=1)
    big = lab.zeros(1 << 26, device=0, stream=s0)
    for _ in range(20):  # keep device 0 busy for a while
        lab.add(big, big, big, stream=s0)
    event = lab.Event()
    event.record(s0)
    s1.wait_event(event)
    marker = lab.zeros(1, device=1, stream=s1)
    lab.add(marker, marker, marker, stream=s1)
    s1.synchronize()
    assert event.query()  # s1's work waited for s0's, so s0's is done when s1's is


DISTRIBUTED = textwrap.dedent("""
    import sys
    import torch, torch.distributed as dist
    import lab
    rank = int(sys.argv[1])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=rank, world_size=2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(4)]).cuda()
    params = [p.detach() for p in model.parameters()]
    initial = torch.cat([p.flatten() for p in params]).clone()
    exp_avgs = [torch.zeros_like(p) for p in params]
    exp_avg_sqs = [torch.zeros_like(p) for p in params]
    gen = torch.Generator(device="cuda").manual_seed(1 + rank)  # each rank its own data
    for step in range(1, 21):
        model.zero_grad()
        x = torch.randn(32, 64, device="cuda", generator=gen)
        model(x).square().mean().backward()
        grads = [p.grad for p in model.parameters()]
        for g in grads:
            dist.all_reduce(g)
            g /= 2
        lab.adam_step(params, grads, exp_avgs, exp_avg_sqs, step=step, lr=1e-3)
    flat = torch.cat([p.flatten() for p in params])
    gathered = [torch.empty_like(flat) for _ in range(2)]
    dist.all_gather(gathered, flat)
    print("rank", rank, "identical" if torch.equal(gathered[0], gathered[1]) else "DIFFERENT",
          "unchanged" if torch.equal(flat, initial) else "moved")
    dist.destroy_process_group()
""")


def run_two_ranks(script, timeout):
    """`script` in two processes (argv: the rank, a free port for NCCL's rendezvous): their (stdout,
    stderr), each having exited 0."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = dict(os.environ, NCCL_NVLS_ENABLE="0")  # multicast stays off (the machine's rule)
    ranks = [subprocess.Popen([sys.executable, "-c", script, str(rank), port], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for rank in range(2)]
    outputs = [rank.communicate(timeout=timeout) for rank in ranks]
    for rank, (out, err) in zip(ranks, outputs):
        assert rank.returncode == 0, err[-3000:]
    return outputs


def test_two_ranks_stay_identical_with_lab_adam_between_all_reduces():
    producer_or_skip("torch")
    outputs = run_two_ranks(DISTRIBUTED, 300)
    lines = sorted(out.strip() for out, _ in outputs)
    assert lines == ["rank 0 identical moved", "rank 1 identical moved"], outputs


PATCHED_TRAINING = textwrap.dedent("""
    import json, sys
    import torch, torch.distributed as dist
    import transformers
    import lab.nn
    rank = int(sys.argv[1])
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:" + sys.argv[2], rank=rank, world_size=2)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    config = transformers.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      tie_word_embeddings=False)
    results = {}
    for engine in ("ddp", "fsdp2"):
        for patched in (False, True):
            torch.manual_seed(0)
            model = transformers.LlamaForCausalLM(config).to(device="cuda", dtype=torch.bfloat16)
            if patched:
                lab.nn.patch(model)
            if engine == "ddp":
                wrapped = torch.nn.parallel.DistributedDataParallel(model)
            else:
                mesh = init_device_mesh("cuda", (2,))
                for layer in model.model.layers:
                    fully_shard(layer, mesh=mesh)
                wrapped = fully_shard(model, mesh=mesh)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            gen = torch.Generator(device="cuda").manual_seed(1 + rank)  # each rank its own data
            losses = []
            for step in range(20):
                ids = torch.randint(0, 512, (4, 64), device="cuda", generator=gen)
                loss = wrapped(input_ids=ids, labels=ids).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                mean = loss.detach().float().clone()
                dist.all_reduce(mean)
                losses.append(mean.item() / 2)
            if engine == "ddp":  # both ranks hold every parameter: they must be the same
                flat = torch.cat([p.detach().float().flatten() for p in model.parameters()])
                gathered = [torch.empty_like(flat) for _ in range(2)]
                dist.all_gather(gathered, flat)
                assert torch.equal(gathered[0], gathered[1]), "the DDP ranks' parameters differ"
            results[engine + (" lab" if patched else "")] = losses
    print(json.dumps(results))
    dist.destroy_process_group()
""")


def test_a_patched_llama_trains_under_ddp_and_fsdp2_on_two_gpus():
    """lab.nn.patch under both engines across two ranks, 20 AdamW steps on each rank's own data: the
    loss curve tracks the same run without lab within bf16 tolerance, and DDP's ranks stay identical."""
    producer_or_skip("torch")
    pytest.importorskip("transformers")
    outputs = run_two_ranks(PATCHED_TRAINING, 600)
    import json
    curves = json.loads(outputs[0][0].strip().splitlines()[-1])
    for engine in ("ddp", "fsdp2"):
        plain, ours = np.array(curves[engine]), np.array(curves[engine + " lab"])
        assert ours[-1] < ours[0], (engine, ours)  # it trains
        np.testing.assert_allclose(ours, plain, rtol=0.03, atol=0.03, err_msg=engine)
