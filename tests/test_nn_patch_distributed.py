"""lab.nn.patch under torch's distributed engines in one process (world size 1): a patched model wrapped
in DDP, and sharded with FSDP2 (`fully_shard` on each decoder layer and the root), trains one step
with the loss and every gradient of the unpatched, unwrapped model. FSDP2 holds the parameters as
DTensors and all-gathers them around each layer; the patched modules must read the gathered ones in
forward and backward and leave their gradients to FSDP's reduce-scatter. On the CPU (gloo) lab.nn runs
torch's formulas, so this tests the patch's wiring; on a GPU (NCCL) lab's kernels run. Two processes
on two GPUs are tests/test_two_gpus.py's business."""
import copy
import socket

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
dist = pytest.importorskip("torch.distributed")
import lab.nn  # noqa: E402
from test_nn_patch import batch, tiny  # noqa: E402

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture
def one_process_group(request):
    device = request.param
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    if not dist.is_available():
        pytest.skip("this torch has no torch.distributed")
    tf32 = torch.backends.cuda.matmul.allow_tf32 if device == "cuda" else None
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 products as the reference makes them
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=0, world_size=1)
    try:
        yield device
    finally:
        dist.destroy_process_group()
        if device == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = tf32


def reference_step(model, device):
    """The unpatched model's loss and gradients for the test batch, by parameter name."""
    model.train()
    input_ids, labels = (t.to(device) for t in batch())
    loss = model(input_ids=input_ids, labels=labels).loss
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters()}


def model_on(device):
    """The tiny Llama: float64 on the CPU; float32 on a GPU (the fixture turns TF32 off)."""
    model = tiny("llama")
    return model.to(device) if device == "cpu" else model.float().to(device)


def reference_and_patched_copy(device):
    """(the unpatched model's loss and gradients, a patched copy of the model without gradients, the
    patch's result - undo() it)."""
    original = model_on(device)
    reference = reference_step(original, device)
    model = copy.deepcopy(original)
    model.zero_grad(set_to_none=True)
    return reference, model, lab.nn.patch(model)


def tolerance(device):
    return dict(rtol=1e-5, atol=1e-7) if device == "cpu" else dict(rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("one_process_group", DEVICES, indirect=True)
def test_a_patched_model_under_ddp_trains_like_the_original(one_process_group):
    device = one_process_group
    (want_loss, want_grads), model, patched = reference_and_patched_copy(device)
    try:
        wrapped = torch.nn.parallel.DistributedDataParallel(model)
        got_loss, _ = reference_step(wrapped, device)
        torch.testing.assert_close(got_loss, want_loss, **tolerance(device))
        for name, p in model.named_parameters():
            torch.testing.assert_close(p.grad, want_grads[name], **tolerance(device), msg=name)
    finally:
        patched.undo()


@pytest.mark.parametrize("one_process_group", DEVICES, indirect=True)
def test_a_patched_model_sharded_with_fsdp2_trains_like_the_original(one_process_group):
    device = one_process_group
    fsdp = pytest.importorskip("torch.distributed.fsdp")
    from torch.distributed.device_mesh import init_device_mesh
    if not hasattr(fsdp, "fully_shard"):
        pytest.skip("this torch has no FSDP2 (torch.distributed.fsdp.fully_shard)")
    (want_loss, want_grads), model, patched = reference_and_patched_copy(device)
    try:
        assert patched.counts()["linear_cross_entropy"] == 1
        mesh = init_device_mesh(device, (1,))
        for layer in model.model.layers:
            fsdp.fully_shard(layer, mesh=mesh)
        fsdp.fully_shard(model, mesh=mesh)
        got_loss, got_grads = reference_step(model, device)
        torch.testing.assert_close(got_loss, want_loss, **tolerance(device))
        for name, grad in want_grads.items():
            got = got_grads[name]
            assert type(got).__name__ == "DTensor", name  # FSDP's: the gradient stays sharded
            torch.testing.assert_close(got.full_tensor(), grad, **tolerance(device), msg=name)
    finally:
        patched.undo()
