"""lab.Graph on a GPU: every op kind captured with `with lab.graph(g):` and replayed gives what the
same call gives eagerly (bitwise for lab's own kernels), and reads its inputs' contents at each
replay; arrays allocated in the capture hold each replay's results; captured random draws take new
numbers each replay, the same as eager draws from the same state; make_graphed; the capture's
boundaries (another framework's capture, a replay inside a capture, streams). Outputs are poisoned
first, and the poison must survive the capture itself: a capture runs nothing."""
import numpy as np
import pytest

import lab
from producers import LabProducer, producer_or_skip
from test_jit_gpu import AXPY

pytestmark = pytest.mark.gpu


def scalar(value):
    """A one-element float32 lab.Array, which lab's binary ops broadcast (they take arrays, not numbers)."""
    return lab.asarray(np.array(value, np.float32))


LAB = LabProducer()
poisoned, host = LAB.empty_poisoned, LAB.to_host


# ---- one case per op kind: inputs (host arrays, by seed), outputs (shape, dtype), the launch, exact? ----

def case_elementwise(rng):
    inputs = {"a": rng.standard_normal(1031).astype(np.float32), "b": rng.standard_normal(1031).astype(np.float32)}

    def launch(i, o):
        lab.add(i["a"], i["b"], o["out"], alpha=0.5)
        lab.mul(o["out"], i["a"], o["out"])
    return inputs, {"out": ((1031,), "float32")}, launch, True


def case_reduction(rng):
    inputs = {"x": rng.standard_normal((64, 1031)).astype(np.float32)}
    return inputs, {"out": ((64,), "float32")}, lambda i, o: lab.sum(i["x"], o["out"], axis=1), True


def case_rowwise(rng):
    inputs = {"x": rng.standard_normal((37, 1000)).astype(np.float32), "w": rng.standard_normal(1000).astype(np.float32),
              "target": rng.integers(0, 1000, 37).astype(np.int64)}

    def launch(i, o):
        lab.rms_norm(i["x"], i["w"], o["norm"])
        lab.softmax(i["x"], o["softmax"])
        lab.cross_entropy(i["x"], i["target"], o["loss"], reduction="none", grad=o["grad"])
    outputs = {"norm": ((37, 1000), "float32"), "softmax": ((37, 1000), "float32"), "loss": ((37,), "float32"),
               "grad": ((37, 1000), "float32")}
    return inputs, outputs, launch, True


def case_foreach(rng):
    inputs = {f"{n}{k}": rng.standard_normal(s).astype(np.float32) for k, s in enumerate((7, 4099)) for n in "xy"}

    def launch(i, o):
        lab.foreach_add([i["x0"], i["x1"]], [i["y0"], i["y1"]], [o["o0"], o["o1"]], alpha=2.0)
    return inputs, {"o0": ((7,), "float32"), "o1": ((4099,), "float32")}, launch, True


def case_matmul(rng):
    inputs = {"a": rng.standard_normal((128, 96)).astype(np.float32), "b": rng.standard_normal((96, 80)).astype(np.float32)}
    return inputs, {"out": ((128, 80), "float32")}, lambda i, o: lab.matmul(i["a"], i["b"], o["out"]), False


def case_linear_ce(rng):
    inputs = {"hidden": rng.standard_normal((64, 128)).astype(np.float32),
              "weight": (0.1 * rng.standard_normal((1000, 128))).astype(np.float32),
              "target": rng.integers(0, 1000, 64).astype(np.int64)}

    def launch(i, o):
        lab.linear_cross_entropy(i["hidden"], i["weight"], i["target"], o["loss"], grad_hidden=o["grad_hidden"])
    return inputs, {"loss": ((), "float32"), "grad_hidden": ((64, 128), "float32")}, launch, False


def case_rope(rng):
    inputs = {"q": rng.standard_normal((2, 4, 9, 64)).astype(np.float32),
              "cos": rng.standard_normal((9, 64)).astype(np.float32), "sin": rng.standard_normal((9, 64)).astype(np.float32)}

    def launch(i, o):
        lab.rope(i["q"], None, i["cos"], i["sin"], o["q_out"], None)
    return inputs, {"q_out": ((2, 4, 9, 64), "float32")}, launch, True


def case_attention(rng):
    inputs = {n: rng.standard_normal((1, 4, 200, 64)).astype(np.float32) for n in "qkv"}

    def launch(i, o):
        q, k, v = (lab.empty(i[n].shape, "bfloat16") for n in "qkv")  # the graph's own memory
        for n, x in zip("qkv", (q, k, v)):
            lab.copy(i[n], x)
        lab.attention(q, k, v, o["out"], o["lse"], causal=True)
    return inputs, {"out": ((1, 4, 200, 64), "bfloat16"), "lse": ((1, 4, 200), "float32")}, launch, True


def case_user_kernel(rng):
    inputs = {"x": rng.standard_normal(1031).astype(np.float32), "y": rng.standard_normal(1031).astype(np.float32)}
    kernel = lab.RawKernel(AXPY, "axpy")

    def launch(i, o):
        kernel((5,), (256,), (i["x"], i["y"], o["out"], np.float32(3.0), np.int64(1031)))
    return inputs, {"out": ((1031,), "float32")}, launch, True


def case_elementwise_kernel(rng):
    inputs = {"x": rng.standard_normal(1031).astype(np.float32), "y": rng.standard_normal(1031).astype(np.float32)}
    fma = lab.ElementwiseKernel("T x, T y, T a", "T z", "z = x * a + y", "graph_fma")

    def launch(i, o):
        fma(i["x"], i["y"], np.float32(0.5), o["out"])
    return inputs, {"out": ((1031,), "float32")}, launch, True


CASES = {name[len("case_"):]: f for name, f in globals().items() if name.startswith("case_")}


def compare(got, want, exact):
    for name in want:
        g, w = host(got[name]), host(want[name])
        if exact:
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_op_kind_replays_what_it_computes_eagerly(kind):
    host_inputs, output_spec, launch, exact = CASES[kind](np.random.default_rng(0))
    inputs = {n: lab.asarray(x) for n, x in host_inputs.items()}
    launch(inputs, {n: poisoned(*spec) for n, spec in output_spec.items()})  # warm-up: vendor libraries, NVRTC
    eager = {n: poisoned(*spec) for n, spec in output_spec.items()}
    launch(inputs, eager)
    captured = {n: poisoned(*spec) for n, spec in output_spec.items()}
    g = lab.Graph()
    with lab.graph(g):
        launch(inputs, captured)
    lab.synchronize()
    assert g.captured and g.node_count >= 1
    for name, a in captured.items():
        assert np.isnan(host(a)).all() or a.dtype.startswith("int"), f"{name}: the capture ran something"
    g.replay()
    compare(captured, eager, exact)
    # the replay reads what its inputs hold now
    for n, x in CASES[kind](np.random.default_rng(1))[0].items():
        lab.copy(lab.asarray(x), inputs[n])
    launch(inputs, eager)
    g.replay()
    compare(captured, eager, exact)


def test_arrays_allocated_in_the_capture_hold_each_replays_results():
    x, one, two = lab.asarray(np.arange(4099, dtype=np.float32)), scalar(1), scalar(2)
    g = lab.Graph()
    with lab.graph(g):  # host copies (lab.asarray) cannot be captured: the scalars are made before
        y = lab.empty(4099, "float32")
        lab.mul(x, two, y)
        z = lab.empty(4099, "float32")
        lab.add(y, one, z)
    for scale in (1.0, -3.0):
        lab.copy(lab.asarray(scale * np.arange(4099, dtype=np.float32)), x)
        g.replay()
        np.testing.assert_array_equal(z.numpy(), 2 * scale * np.arange(4099, dtype=np.float32) + 1)


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("replayed", [False, True])
def test_arrays_of_a_capture_are_freed_quietly_whether_or_not_it_ran(replayed):
    """An array allocated in a capture is a node of the graph's memory: freeing it after a replay gives
    the memory back; before any replay (or after a dropped capture) there is nothing to give back,
    and that is no error to report."""
    x, two = lab.asarray(np.ones(1024, np.float32)), scalar(2)
    g = lab.Graph()
    with lab.graph(g):
        y = lab.empty(1024, "float32")
        lab.mul(x, two, y)
    if replayed:
        g.replay()
        np.testing.assert_array_equal(y.numpy(), 2)
    g.reset()
    del y
    lab.synchronize()
    with pytest.raises(ZeroDivisionError):
        with lab.graph(g):
            z = lab.empty(1024, "float32")
            1 / 0
    del z
    lab.synchronize()


def test_a_loop_of_small_calls_replays_with_one_launch():
    x, one = lab.asarray(np.ones(1024, np.float32)), scalar(1)
    g = lab.Graph()
    with lab.graph(g):
        for _ in range(100):
            lab.add(x, one, x)
    assert g.node_count == 100
    for replays in (1, 2):
        g.replay()
        np.testing.assert_array_equal(x.numpy(), 1 + 100 * replays)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_captured_draws_are_new_each_replay_and_those_of_the_eager_draws_from_the_same_state(dtype):
    n = 4099
    lab.manual_seed(1234)
    out = lab.empty(n, dtype)
    g = lab.Graph()
    with lab.graph(g):
        lab.normal(out, 0.0, 1.0)
        lab.uniform(lab.empty(7, dtype))  # a second draw: the replay's advance covers both
    per_group = {"float64": (2, 2), "bfloat16": (4, 8)}.get(dtype, (4, 4))  # (normal, uniform) elements a group
    groups = -(-n // per_group[0]) + -(-7 // per_group[1])
    assert g.random_groups == groups
    assert lab.get_rng_state() == (1234, 0), "a capture draws nothing"
    draws = []
    for replay in range(3):
        state = lab.get_rng_state()
        g.replay()
        assert lab.get_rng_state() == (1234, (replay + 1) * groups)
        got = host(out)
        eager = lab.empty(n, dtype)
        lab.set_rng_state(*state)
        lab.normal(eager, 0.0, 1.0)
        lab.set_rng_state(1234, (replay + 1) * groups)
        np.testing.assert_array_equal(got, host(eager))
        draws.append(got)
    assert not np.array_equal(draws[0], draws[1]) and not np.array_equal(draws[1], draws[2])


def test_a_captured_dropout_and_its_backward_keep_the_same_elements_each_replay():
    n, p = 10_007, 0.3
    x = lab.asarray(np.ones(n, np.float32))
    out, grad_in, mask = lab.empty(n, "float32"), lab.empty(n, "float32"), lab.empty(n, "uint8")
    g = lab.Graph()
    with lab.graph(g):
        state = lab.get_rng_state()
        lab.dropout(x, p, out, mask_out=mask)
        lab.dropout(x, p, grad_in, rng_state=state)  # the backward: the forward's state, inside the capture
    masks = []
    for _ in range(2):
        g.replay()
        kept = mask.numpy().astype(bool)
        np.testing.assert_array_equal(out.numpy(), np.where(kept, np.float32(1 / (1 - p)), 0))
        np.testing.assert_array_equal(grad_in.numpy(), out.numpy())
        masks.append(kept)
    assert abs(masks[0].mean() - (1 - p)) < 0.03 and not np.array_equal(masks[0], masks[1])


def test_the_generator_cannot_be_set_during_a_capture():
    g = lab.Graph()
    with lab.graph(g):
        with pytest.raises(RuntimeError, match="manual_seed.*capturing"):
            lab.manual_seed(1)
        with pytest.raises(RuntimeError, match="set_rng_state.*capturing"):
            lab.set_rng_state(1, 2)


def test_a_capture_that_raises_is_dropped_and_the_stream_released():
    g = lab.Graph()
    s = lab.Stream()
    x, two = lab.zeros(5), scalar(2)
    with pytest.raises(ZeroDivisionError):
        with lab.graph(g, stream=s):
            lab.add(x, two, x)
            1 / 0
    assert not g.captured and not g.capturing and not lab.is_capturing(s)
    with lab.graph(g, stream=s):  # the same graph captures again
        lab.add(x, two, x)
    g.replay()
    np.testing.assert_array_equal(x.numpy(), 2)


def test_the_graph_refuses_what_would_break_the_capture():
    g, s = lab.Graph(), lab.Stream()
    with lab.graph(g, stream=s):
        assert lab.is_capturing() and lab.is_capturing(s) and g.capturing
        with pytest.raises(RuntimeError, match="capturing already"):
            g.capture_begin(stream=s)
        with pytest.raises(RuntimeError, match="being captured already"):
            lab.Graph().capture_begin(stream=s)
    with pytest.raises(RuntimeError, match="holds a capture already"):
        g.capture_begin(stream=s)
    inner = lab.Graph()
    with lab.graph(inner, stream=s):
        with pytest.raises(RuntimeError, match="not replayed inside another capture"):
            g.replay(stream=s)
    g.reset()
    assert not g.captured
    with pytest.raises(RuntimeError, match="nothing to replay"):
        g.replay()


def test_replay_on_another_stream_is_seen_by_the_captures_consumers():
    x, three = lab.asarray(np.arange(1 << 20, dtype=np.float32)), scalar(3)
    g = lab.Graph()
    with lab.graph(g):
        y = lab.empty(1 << 20, "float32")
        lab.mul(x, three, y)
    other = lab.Stream()
    g.replay(stream=other)
    np.testing.assert_array_equal(y.numpy(), 3 * np.arange(1 << 20, dtype=np.float32))


def test_make_graphed_replays_fn_on_new_arguments():
    def step(a, b):
        out = lab.empty(a.shape, "float32")
        lab.add(a, b, out, alpha=2.0)
        return out, lab.sum(out, lab.empty((), "float32"))

    rng = np.random.default_rng(0)
    a, b = (lab.asarray(rng.standard_normal(1000).astype(np.float32)) for _ in range(2))
    graphed = lab.make_graphed(step, (a, b))
    for _ in range(3):
        a, b = (lab.asarray(rng.standard_normal(1000).astype(np.float32)) for _ in range(2))
        out, total = graphed(a, b)
        want = a.numpy() + 2 * b.numpy()
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(total.numpy(), want.sum(dtype=np.float64), rtol=1e-4)
    with pytest.raises(ValueError, match="shape"):
        graphed(lab.zeros(3), lab.zeros(3))
    with pytest.raises(TypeError, match="takes 2 arrays"):
        graphed(a)


@pytest.mark.parametrize("producer_name", ["torch", "cupy", "numba"])
def test_a_graph_of_lab_calls_on_another_producers_arrays(producer_name):
    producer = producer_or_skip(producer_name)
    x, _ = producer.from_host(np.arange(4099), "float32")
    out = producer.empty_poisoned((4099,), "float32")
    two = scalar(2)
    g = lab.Graph()
    with lab.graph(g):
        lab.mul(x, two, out)
        lab.add(out, x, out)
    g.replay()
    lab.synchronize()
    np.testing.assert_array_equal(producer.to_host(out), 3 * np.arange(4099))


def test_inside_torchs_capture_lab_is_recorded_and_its_generator_refused():
    torch = pytest.importorskip("torch")
    x = torch.arange(4099, dtype=torch.float32, device="cuda")
    two = torch.tensor(2.0, device="cuda")
    out, inner = torch.zeros_like(x), torch.zeros_like(x)
    lab.mul(x, two, out)  # warm-up
    graphed = lab.make_graphed(lambda a: lab.mul(a, two, inner), (x,))
    torch.cuda.synchronize()
    tg = torch.cuda.CUDAGraph()
    with torch.cuda.graph(tg):
        lab.mul(x, two, out)
        assert graphed(x) is inner  # inside torch's capture: fn itself runs, recorded into torch's graph
        with pytest.raises(lab.CudaError, match="not a lab.Graph's"):
            lab.uniform(out)
    x.add_(1)
    tg.replay()
    torch.cuda.synchronize()
    want = 2 * (np.arange(4099, dtype=np.float32) + 1)
    np.testing.assert_array_equal(out.cpu().numpy(), want)
    np.testing.assert_array_equal(inner.cpu().numpy(), want)


# ---- lab.nn's dropout on the same generator ----

@pytest.mark.parametrize("compiled", [False, True])
def test_nn_dropout_add_keeps_the_elements_its_backward_scales(compiled):
    torch = pytest.importorskip("torch")
    import lab.nn
    p = 0.25
    residual = torch.randn(257, 1031, device="cuda", requires_grad=True)
    x = torch.ones(257, 1031, device="cuda", requires_grad=True)
    fn = torch.compile(lab.nn.dropout_add, fullgraph=True) if compiled else lab.nn.dropout_add
    out = fn(residual, x, p)
    kept = (out - residual).detach() != 0
    np.testing.assert_allclose((out - residual)[kept].detach().cpu().numpy(), 1 / (1 - p), rtol=1e-6)
    assert abs(kept.float().mean().item() - (1 - p)) < 0.01
    grad = torch.randn_like(out)
    grad_residual, grad_x = torch.autograd.grad(out, (residual, x), grad)
    assert torch.equal(grad_residual, grad)
    np.testing.assert_allclose(grad_x.cpu().numpy(), torch.where(kept, grad / (1 - p), 0).cpu().numpy(), rtol=1e-6)
    again = fn(residual, x, p)
    assert not torch.equal(again, out), "a second call draws new numbers"
    assert torch.equal(lab.nn.dropout(x, p, training=False), x)
