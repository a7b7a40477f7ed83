"""lab.nn on a GPU: each function forward and backward against torch's own, gradcheck in
float64, torch.library.opcheck on every operator, torch.compile(fullgraph=True) and CUDA graph
capture, the modules' state_dict compatibility, and a small model trained 50 steps with lab.nn's
modules tracking the same model with torch's (eager and compiled)."""
import pytest

torch = pytest.importorskip("torch")
import lab  # noqa: E402
from cuda_graphs import capture_and_replay  # noqa: E402
from training import assert_tracks, losses_of_training  # noqa: E402

pytestmark = pytest.mark.gpu
F = torch.nn.functional

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=2e-3),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2)}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SHAPES = [(1, 1), (16384, 7), (3, 128), (8, 1000), (64, 4096), (2, 50257), (1, 131072)]


def functions(n):
    """name -> (lab.nn call, torch call) taking (x, weight, bias, residual)."""
    import lab.nn
    return {
        "softmax": (lambda x, w, b, r: lab.nn.softmax(x, -1), lambda x, w, b, r: F.softmax(x, -1)),
        "log_softmax": (lambda x, w, b, r: lab.nn.log_softmax(x, -1), lambda x, w, b, r: F.log_softmax(x, -1)),
        "layer_norm": (lambda x, w, b, r: lab.nn.layer_norm(x, (n,), w, b),
                       lambda x, w, b, r: F.layer_norm(x, (n,), w, b)),
        "rms_norm": (lambda x, w, b, r: lab.nn.rms_norm(x, (n,), w, 1e-6),
                     lambda x, w, b, r: F.rms_norm(x, (n,), w, 1e-6)),
        "add_rms_norm": (lambda x, w, b, r: torch.cat(lab.nn.add_rms_norm(x, r, (n,), w, 1e-6), -1),
                         lambda x, w, b, r: torch.cat((F.rms_norm(x + r, (n,), w, 1e-6), x + r), -1)),
    }


def leaves(shape, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    n = shape[-1]
    make = lambda *s: torch.randn(*s, device="cuda", generator=g).to(dtype).requires_grad_()  # noqa: E731
    return make(*shape), make(n), make(n), make(*shape)


def run(fn, tensors, grad):
    for t in tensors:
        t.grad = None
    out = fn(*tensors)
    out.backward(grad)
    return out.detach(), [t.grad for t in tensors]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "rms_norm", "add_rms_norm"])
def test_matches_torch_forward_and_backward(name, dtype, shape):
    ours, theirs = functions(shape[-1])[name]
    tensors = leaves(shape, dtype)
    ref_leaves = [t.detach().float().requires_grad_() for t in tensors]
    grad = torch.randn_like(theirs(*ref_leaves))
    got, grads = run(ours, tensors, grad.to(dtype))
    want, want_grads = run(theirs, ref_leaves, grad)
    tol = TOL[dtype]
    torch.testing.assert_close(got.float(), want, **tol)
    for i, (g, w) in enumerate(zip(grads, want_grads)):
        if w is None:
            assert g is None or not g.any(), f"gradient {i}"
            continue
        scale = w.abs().amax().clamp(min=1.0)  # errors relative to the gradient's size (sums over rows, sums of two)
        torch.testing.assert_close(g.float() / scale, w / scale, **tol, msg=f"{name}: gradient of input {i}")


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "rms_norm", "add_rms_norm"])
def test_gradcheck_float64(name):
    ours, _ = functions(13)[name]
    x, w, b, r = leaves((5, 13), torch.float64, seed=1)
    assert torch.autograd.gradcheck(ours, (x, w, b, r), eps=1e-6, atol=1e-5)


def test_opcheck_every_operator():
    import lab.nn  # noqa: F401  (registers the operators)
    x = torch.randn(6, 40, device="cuda", requires_grad=True)
    w, b = torch.randn(40, device="cuda", requires_grad=True), torch.randn(40, device="cuda", requires_grad=True)
    ops = torch.ops.lab
    cases = [
        (ops.softmax, (x, -1)), (ops.log_softmax, (x, -1)), (ops.layer_norm, (x, w, b, 1e-5)),
        (ops.layer_norm, (x, None, None, 1e-5)), (ops.rms_norm, (x, w, None)), (ops.rms_norm, (x, None, 1e-6)),
        (ops.add_rms_norm, (x, torch.randn_like(x), w, 1e-6)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)


def test_torch_compile_fullgraph():
    import lab.nn

    def block(x, w, b, r):
        h, res = lab.nn.add_rms_norm(x, r, (x.shape[-1],), w)
        return lab.nn.log_softmax(lab.nn.layer_norm(h * 2, (x.shape[-1],), w, b), -1).sum() + res.sum()

    compiled = torch.compile(block, fullgraph=True)
    tensors = leaves((32, 256), torch.float32, seed=2)
    want = block(*tensors)
    want.backward()
    want_grads = [t.grad.clone() for t in tensors]
    for t in tensors:
        t.grad = None
    got = compiled(*tensors)
    got.backward()
    torch.testing.assert_close(got, want)
    for g, w in zip([t.grad for t in tensors], want_grads):
        torch.testing.assert_close(g, w)


def test_cuda_graph_capture():
    import lab.nn
    norm = lab.nn.RMSNorm(512, device="cuda")
    x = torch.randn(64, 512, device="cuda")
    capture_and_replay(torch, lambda: lab.nn.softmax(norm(x), -1), lambda: x.copy_(torch.randn_like(x)),
                       lambda out: torch.testing.assert_close(out, F.softmax(F.rms_norm(x, (512,), norm.weight), -1)))


def test_modules_are_drop_ins():
    import lab.nn
    for theirs, ours, args in [(torch.nn.LayerNorm, lab.nn.LayerNorm, ((8, 16),)),
                               (torch.nn.RMSNorm, lab.nn.RMSNorm, (16,))]:
        reference = theirs(*args, device="cuda")
        with torch.no_grad():
            reference.weight.normal_()
        module = ours(*args, device="cuda")
        module.load_state_dict(reference.state_dict())
        assert list(module.state_dict()) == list(reference.state_dict())
        x = torch.randn(4, 8, 16, device="cuda")
        torch.testing.assert_close(module(x), reference(x))
        assert isinstance(module, theirs) and repr(module) == repr(reference)
    cpu = lab.nn.LayerNorm(16)  # CPU tensors take torch's own path
    torch.testing.assert_close(cpu(torch.ones(2, 16)), torch.zeros(2, 16))


class TinyModel(torch.nn.Module):
    """Embedding, two pre-norm MLP blocks with residuals, a final norm and a head."""

    def __init__(self, norm_classes, log_softmax, vocab=64, width=128):
        super().__init__()
        rms, layer = norm_classes
        self.log_softmax = log_softmax
        self.embed = torch.nn.Embedding(vocab, width)
        self.norms = torch.nn.ModuleList([rms(width) for _ in range(2)])
        self.mlps = torch.nn.ModuleList([torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.SiLU(),
                                                             torch.nn.Linear(4 * width, width)) for _ in range(2)])
        self.final = layer(width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens):
        h = self.embed(tokens)
        for norm, mlp in zip(self.norms, self.mlps):
            h = h + mlp(norm(h))
        return self.log_softmax(self.head(self.final(h)), -1)


def train(norm_classes, log_softmax, dtype, compiled, steps=50):
    torch.manual_seed(0)
    model = TinyModel(norm_classes, log_softmax).to("cuda", dtype)
    step_fn = torch.compile(model, fullgraph=True) if compiled else model
    g = torch.Generator(device="cuda").manual_seed(1)
    tokens = [torch.randint(0, 64, (16, 32), device="cuda", generator=g) for _ in range(steps)]

    def loss_of(tokens):
        targets = (tokens * 7 + 3) % 64  # learnable from the token alone (the model mixes no positions)
        return F.nll_loss(step_fn(tokens).float().flatten(0, 1), targets.flatten())

    return losses_of_training(loss_of, model.parameters(), [(t,) for t in tokens], lr=1e-3)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-4), (torch.bfloat16, 2e-2)], ids=["fp32", "bf16"])
def test_training_tracks_torch(dtype, tolerance, compiled):
    import lab.nn
    want = train((torch.nn.RMSNorm, torch.nn.LayerNorm), F.log_softmax, dtype, compiled)
    got = train((lab.nn.RMSNorm, lab.nn.LayerNorm), lab.nn.log_softmax, dtype, compiled)
    assert_tracks(got, want, tolerance)
