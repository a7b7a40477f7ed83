"""Every elementwise op on a real GPU: each op x dtype x size x producer against NumPy float64
references, with the output poisoned first; plus in-place use, the scale/alpha variants, streams,
JAX inputs and the torch fast path. Skipped where there is no GPU."""
import numpy as np
import pytest

import lab
import lab.lab as core
from producers import ALL_DTYPES, FLOAT_DTYPES, PRODUCER_NAMES, producer_or_skip
from reference import OPS, assert_close, expected, random_inputs

pytestmark = pytest.mark.gpu

SIZES = [0, 1, 7, 1_000_003, 2**24 + 5]


def cases():
    for key, op in OPS.items():
        for dtype in ALL_DTYPES:
            if dtype in FLOAT_DTYPES or op.integers:
                yield key, dtype


def run_op(key, dtype, n, producer, rng, in_place=False):
    op = OPS[key]
    integer = dtype not in FLOAT_DTYPES
    pairs = [producer.from_host(values, dtype) for values in random_inputs(op, dtype, n, rng)]
    device_inputs = [p[0] for p in pairs]
    host_inputs = [p[1] for p in pairs]
    out = device_inputs[0] if in_place else producer.empty_poisoned(n, dtype)
    result = op.call(lab, device_inputs, out, integer) if op.call else getattr(lab, op.name)(*device_inputs, out)
    assert result is out
    assert_close(producer.to_host(out), expected(op, dtype, host_inputs), dtype, f"{key} {dtype} n={n}")


@pytest.mark.parametrize("producer_name", PRODUCER_NAMES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("key, dtype", list(cases()))
def test_op(key, dtype, n, producer_name):
    producer = producer_or_skip(producer_name, dtype)
    run_op(key, dtype, n, producer, np.random.default_rng(hash((key, dtype, n)) % 2**32))


@pytest.mark.parametrize("producer_name", PRODUCER_NAMES)
@pytest.mark.parametrize("key", ["add", "mul", "fused_add_mul", "axpby", "relu", "gelu", "copy", "neg"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_in_place(key, dtype, producer_name):
    if dtype == "int32" and not OPS[key].integers:
        pytest.skip("float-only op")
    producer = producer_or_skip(producer_name, dtype)
    run_op(key, dtype, 100_003, producer, np.random.default_rng(7), in_place=True)


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_misaligned_views_use_the_scalar_path(offset):
    torch = producer_or_skip("torch").torch
    base = torch.rand(4099 + offset, device="cuda")
    other = torch.rand(4099 + offset, device="cuda")
    out = torch.full((4099 + offset,), float("nan"), device="cuda")
    a, b, o = base[offset:], other[:-offset], out[offset:]
    assert core._array_info(a)["data"] % 16 != 0
    lab.add(a, b, o)
    torch.cuda.synchronize()
    assert torch.equal(o, a + b)
    assert torch.isnan(out[:offset]).all()  # nothing written before the view


def test_multidimensional_contiguous():
    torch = producer_or_skip("torch").torch
    a, b = torch.rand(3, 5, 7, 11, device="cuda"), torch.rand(3, 5, 7, 11, device="cuda")
    out = torch.empty_like(a)
    lab.mul(a, b, out)
    torch.cuda.synchronize()
    assert torch.equal(out, a * b)


def test_torch_uses_the_dlpack_exchange_api():
    torch = producer_or_skip("torch").torch
    info = core._array_info(torch.zeros(2, 3, dtype=torch.bfloat16, device="cuda"))
    assert info["source"] == "dlpack_exchange" and info["dtype"] == "bfloat16" and info["device"] == 0


def test_torch_requires_grad_tensors_work():
    torch = producer_or_skip("torch").torch
    a = torch.rand(1000, device="cuda", requires_grad=True)
    out = torch.empty(1000, device="cuda")
    lab.relu(a.detach(), out)
    lab.relu(a, out)  # the exchange API reads it without the CAI's requires-grad refusal
    torch.cuda.synchronize()
    assert torch.equal(out, torch.relu(a.detach()))


def test_explicit_torch_stream():
    torch = producer_or_skip("torch").torch
    stream = torch.cuda.Stream()
    a, b = torch.rand(1 << 20, device="cuda"), torch.rand(1 << 20, device="cuda")
    out = torch.empty_like(a)
    torch.cuda.synchronize()
    lab.add(a, b, out, stream=stream)         # torch.cuda.Stream has __cuda_stream__ / .cuda_stream
    lab.mul(out, b, out, stream=stream.cuda_stream)  # a raw int handle
    stream.synchronize()
    assert torch.allclose(out, (a + b) * b)


def test_torch_current_stream_is_used():
    torch = producer_or_skip("torch").torch
    side = torch.cuda.Stream()
    a, b = torch.rand(1 << 22, device="cuda"), torch.rand(1 << 22, device="cuda")
    out = torch.empty_like(a)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        for _ in range(20):  # keep the side stream busy so a launch elsewhere would race
            torch.mul(a, 1.0001, out=a)
        lab.add(a, b, out)  # must queue behind the muls on `side`
    side.synchronize()
    assert torch.equal(out, a + b)


def test_cupy_stream_from_interface():
    cupy = producer_or_skip("cupy").cupy
    with cupy.cuda.Stream() as stream:
        a = cupy.random.rand(1 << 20, dtype=cupy.float32)
        b = cupy.random.rand(1 << 20, dtype=cupy.float32)
        out = cupy.empty_like(a)
        assert core._array_info(out)["stream"] == stream.ptr
        lab.add(a, b, out)
        stream.synchronize()
    assert bool((out == a + b).all())


def test_cupy_stream_object_argument():
    cupy = producer_or_skip("cupy").cupy
    stream = cupy.cuda.Stream(non_blocking=True)
    a = cupy.arange(1000, dtype=cupy.float64)
    out = cupy.empty_like(a)
    cupy.cuda.runtime.deviceSynchronize()
    lab.neg(a, out, stream=stream)
    stream.synchronize()
    assert bool((out == -a).all())


def test_mixed_producers():
    torch = producer_or_skip("torch").torch
    cupy = producer_or_skip("cupy").cupy
    a = torch.rand(12345, device="cuda")
    b = cupy.random.rand(12345, dtype=cupy.float32)
    out = cupy.empty(12345, dtype=cupy.float32)
    lab.add(a, b, out)
    cupy.cuda.runtime.deviceSynchronize()
    np.testing.assert_allclose(cupy.asnumpy(out), a.cpu().numpy() + cupy.asnumpy(b), rtol=1e-6)


def test_jax_inputs_and_readonly_output():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    torch = producer_or_skip("torch").torch
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX sees no GPU")
    a = jax.device_put(jnp.arange(1000, dtype=jnp.float32), gpu)
    b = jax.device_put(jnp.ones(1000, dtype=jnp.float32), gpu)
    a.block_until_ready(), b.block_until_ready()
    out = torch.empty(1000, device="cuda")
    lab.add(a, b, out)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.arange(1000, dtype=torch.float32) + 1)
    with pytest.raises(ValueError, match="argument 'out' is read-only"):
        lab.add(out, out, a)

