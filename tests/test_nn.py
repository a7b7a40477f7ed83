"""lab.nn without a GPU, where torch is installed: the operators' schemas, their fake
implementations (what torch.compile traces with: shapes and dtypes, no kernel), and the modules'
torch-compatible construction and CPU fallback."""
import pytest

torch = pytest.importorskip("torch")
import lab.nn  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402


def test_schemas():
    schemas = {name: str(getattr(torch.ops.lab, name).default._schema) for name in
               ("softmax", "log_softmax_backward", "layer_norm", "layer_norm_backward", "rms_norm", "add_rms_norm")}
    assert schemas["layer_norm"] == "lab::layer_norm(Tensor x, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)"
    assert schemas["add_rms_norm"].endswith("-> (Tensor, Tensor, Tensor)")
    assert "mutates" not in schemas["softmax"] and "Tensor(a!)" not in "".join(schemas.values())


@pytest.mark.parametrize("dtype, stats", [(torch.bfloat16, torch.float32), (torch.float64, torch.float64)])
def test_fake_implementations(dtype, stats):
    with FakeTensorMode():
        x = torch.empty(4, 6, 16, device="cuda", dtype=dtype)
        out, mean, rstd = torch.ops.lab.layer_norm(x, None, None, 1e-5)
        assert out.shape == x.shape and out.dtype == dtype and mean.shape == (4, 6) and rstd.dtype == stats
        grad_x, grad_w, grad_b = torch.ops.lab.layer_norm_backward(x, x, None, mean, rstd, True, False)
        assert grad_x.shape == x.shape and grad_w.shape == (16,) and grad_b.shape == (0,)
        out, h, rstd = torch.ops.lab.add_rms_norm(x, x, None, None)
        assert h.shape == x.shape and rstd.shape == (4, 6)
        assert torch.ops.lab.softmax_backward(x, x, -1).shape == x.shape


def test_modules_keep_torch_construction_and_run_on_the_cpu():
    module = lab.nn.RMSNorm((4, 8), eps=1e-6)
    assert isinstance(module, torch.nn.RMSNorm) and list(module.state_dict()) == ["weight"]
    x = torch.randn(3, 4, 8, requires_grad=True)
    torch.testing.assert_close(module(x), torch.nn.functional.rms_norm(x, (4, 8), module.weight, 1e-6))
    module(x).sum().backward()
    assert x.grad is not None
    layer = lab.nn.LayerNorm(8, bias=False)
    assert list(layer.state_dict()) == ["weight"]
    with pytest.raises(ValueError, match=r"layer_norm: normalized_shape \(9,\) does not match"):
        lab.nn.functional._rows(torch.empty(2, 8), 9, "layer_norm")


def test_loss_and_glu_schemas_and_fakes():
    schema = str(torch.ops.lab.cross_entropy.default._schema)
    assert schema == ("lab::cross_entropy(Tensor logits, Tensor target, SymInt ignore_index, float label_smoothing, "
                      "str reduction, bool with_grad, bool inplace_backward) -> (Tensor, Tensor)")
    with FakeTensorMode():
        logits = torch.empty(4, 6, 100, device="cuda", dtype=torch.bfloat16)
        target = torch.empty(4, 6, device="cuda", dtype=torch.int64)
        loss, grad = torch.ops.lab.cross_entropy(logits, target, -100, 0.0, "none", True, False)
        assert loss.shape == (4, 6) and loss.dtype == torch.bfloat16 and grad.shape == logits.shape
        loss, grad = torch.ops.lab.cross_entropy(logits, target, -100, 0.1, "mean", False, True)
        assert loss.shape == () and grad.shape == (0,)
        assert torch.ops.lab.cross_entropy_backward_(loss, logits) is None
        assert torch.ops.lab.cross_entropy_backward(loss, logits).shape == logits.shape
        grad_gate, grad_up = torch.ops.lab.swiglu_backward(logits, logits, logits)
        assert torch.ops.lab.geglu(logits, logits).shape == logits.shape and grad_up.shape == logits.shape


def test_losses_and_glus_fall_back_to_torch_on_the_cpu():
    F = torch.nn.functional
    x = torch.randn(5, 3, 7, requires_grad=True)  # torch's layout: classes in dimension 1
    target = torch.randint(0, 3, (5, 7))
    torch.testing.assert_close(lab.nn.cross_entropy(x, target, label_smoothing=0.1),
                               F.cross_entropy(x, target, label_smoothing=0.1))
    gate, up = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(lab.nn.swiglu(gate, up), F.silu(gate) * up)
    torch.testing.assert_close(lab.nn.geglu(gate, up), F.gelu(gate, approximate="tanh") * up)


class TorchKernels:
    """lab's row-wise kernels written with torch ops on CPU tensors, same signatures: the eager
    autograd.Functions run through them on a machine without a GPU. `statistics_given`: whether each
    norm call was handed its statistics' outputs."""
    statistics_given = []

    @staticmethod
    def softmax(x, out, axis):
        out.copy_(torch.softmax(x, axis))

    @staticmethod
    def log_softmax(x, out, axis):
        out.copy_(torch.log_softmax(x, axis))

    @staticmethod
    def softmax_backward(g, y, gx, axis):
        gx.copy_(y * (g - (g * y).sum(axis, keepdim=True)))

    @staticmethod
    def log_softmax_backward(g, y, gx, axis):
        gx.copy_(g - y.exp() * g.sum(axis, keepdim=True))

    @staticmethod
    def layer_norm(x, w, b, out, eps, mean, rstd):
        TorchKernels.statistics_given.append(mean is not None and rstd is not None)
        if mean is not None:
            mean.copy_(x.mean(-1))
        if rstd is not None:
            rstd.copy_((x.var(-1, unbiased=False) + eps).rsqrt())
        out.copy_(torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, eps))

    @staticmethod
    def layer_norm_backward(g, x, w, mean, rstd, gx, gw=None, gb=None):
        xhat = (x - mean[..., None]) * rstd[..., None]
        gxhat = g * w if w is not None else g
        n = x.shape[-1]
        gx.copy_(rstd[..., None] * (gxhat - gxhat.mean(-1, keepdim=True) - xhat * (gxhat * xhat).sum(-1, keepdim=True) / n))
        if gw is not None:
            gw.copy_((g * xhat).reshape(-1, n).sum(0))
        if gb is not None:
            gb.copy_(g.reshape(-1, n).sum(0))

    @staticmethod
    def rms_norm(x, w, out, eps, rstd, residual=None, residual_out=None):
        h = x if residual is None else x + residual
        if residual_out is not None:
            residual_out.copy_(h)
        eps = torch.finfo(x.dtype).eps if eps is None else eps
        TorchKernels.statistics_given.append(rstd is not None)
        inverse_rms = (h.pow(2).mean(-1) + eps).rsqrt()
        out.copy_(h * inverse_rms[..., None] * (w if w is not None else 1))
        if rstd is not None:
            rstd.copy_(inverse_rms)

    @staticmethod
    def rms_norm_backward(g, h, w, rstd, gx, gw=None):
        n = h.shape[-1]
        hhat = h * rstd[..., None]
        ghat = g * w if w is not None else g
        gx.copy_(rstd[..., None] * (ghat - hhat * (ghat * hhat).sum(-1, keepdim=True) / n))
        if gw is not None:
            gw.copy_((g * hhat).reshape(-1, n).sum(0))


def use_stand_in_kernels(monkeypatch):
    from lab.nn import _eager
    for name in ("softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "layer_norm",
                 "layer_norm_backward", "rms_norm", "rms_norm_backward"):
        monkeypatch.setattr(_eager.lab, name, getattr(TorchKernels, name))
    return _eager


def test_eager_functions_wire_autograd(monkeypatch):
    """lab.nn's eager path (autograd.Functions calling lab directly): gradcheck in float64 of each
    Function over stand-in kernels - what it saves, which gradients it returns, and for
    rms_norm with a residual the gradient of h added to the norm's."""
    _eager = use_stand_in_kernels(monkeypatch)
    g = torch.Generator().manual_seed(0)
    x, r = (torch.randn(3, 5, 7, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(2))
    w, b = (torch.randn(7, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(2))
    torch.autograd.gradcheck(lambda x: _eager.Softmax.apply(x, -1, False), (x,))
    torch.autograd.gradcheck(lambda x: _eager.Softmax.apply(x, 1, True), (x,))
    torch.autograd.gradcheck(lambda x, w, b: _eager.LayerNorm.apply(x, w, b, 1e-5), (x, w, b))
    torch.autograd.gradcheck(lambda x, w: _eager.LayerNorm.apply(x, w, None, 1e-5), (x, w))
    torch.autograd.gradcheck(lambda x, w: _eager.RmsNorm.apply(x, None, w, None), (x, w))
    torch.autograd.gradcheck(lambda x, r, w: _eager.RmsNorm.apply(x, r, w, 1e-6), (x, r, w))
    out, h = _eager.RmsNorm.apply(x, r, w, 1e-6)  # only h used: its gradient flows to x and residual
    (gx, gr) = torch.autograd.grad(h.sum(), (x, r))
    assert torch.equal(gx, torch.ones_like(x)) and torch.equal(gr, torch.ones_like(r))
    torch.testing.assert_close(out, torch.nn.functional.rms_norm(x + r, (7,), w, 1e-6))
    # the backwards call kernels autograd cannot see through: a gradient of a gradient is an error
    # (create_graph=True), never a silent zero - while a plain backward skips that guard's cost
    y = _eager.LayerNorm.apply(x, w, b, 1e-5)
    (gx,) = torch.autograd.grad((y * y).sum(), (x,), create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice"):
        gx.sum().backward()


def test_functional_eager_path_shapes_and_gradients(monkeypatch):
    """lab.nn.functional's eager path end to end (CPU tensors routed to it, stand-in kernels):
    trailing normalized shapes of one or two dimensions, weights of those shapes, the residual
    form - against torch's functions, values and gradients."""
    use_stand_in_kernels(monkeypatch)
    F = torch.nn.functional
    monkeypatch.setattr(lab.nn.functional, "_on_lab", lambda x: True)
    g = torch.Generator().manual_seed(1)
    for shape in ((7,), (5, 7)):
        x, r = (torch.randn(3, 5, 7, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(2))
        w, b = (torch.randn(shape, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(2))
        pairs = [(lambda: lab.nn.functional.layer_norm(x, shape, w, b), lambda: F.layer_norm(x, shape, w, b)),
                 (lambda: lab.nn.functional.rms_norm(x, shape, w, 1e-6), lambda: F.rms_norm(x, shape, w, 1e-6)),
                 (lambda: lab.nn.functional.add_rms_norm(x, r, shape, w, 1e-6)[0],
                  lambda: F.rms_norm(x + r, shape, w, 1e-6)),
                 (lambda: lab.nn.functional.softmax(x, 1), lambda: F.softmax(x, 1))]
        for ours, theirs in pairs:
            got, want = ours(), theirs()
            assert got.shape == want.shape
            torch.testing.assert_close(got, want)
            leaves = (x, r, w, b)
            got_grads = torch.autograd.grad(got.sum(), leaves, allow_unused=True)
            want_grads = torch.autograd.grad(want.sum(), leaves, allow_unused=True)
            for mine, reference in zip(got_grads, want_grads):
                if reference is None:
                    assert mine is None or not mine.any()
                else:
                    torch.testing.assert_close(mine, reference)


def test_eager_path_records_only_what_autograd_needs(monkeypatch):
    """Without grad mode, or with no input that requires grad, the eager path runs the Function's
    forward alone (no autograd node, no apply); with one, apply - same values either way."""
    _eager = use_stand_in_kernels(monkeypatch)
    monkeypatch.setattr(lab.nn.functional, "_on_lab", lambda x: True)
    applied = []
    for function in (_eager.Softmax, _eager.LayerNorm, _eager.RmsNorm):
        real = function.apply
        monkeypatch.setattr(function, "apply", lambda *a, real=real: applied.append(1) or real(*a))
    x, w = torch.randn(3, 7, dtype=torch.float64), torch.randn(7, dtype=torch.float64)
    calls = [lambda: lab.nn.functional.softmax(x, -1), lambda: lab.nn.functional.layer_norm(x, (7,), w),
             lambda: lab.nn.functional.rms_norm(x, (7,), w, 1e-6)]
    TorchKernels.statistics_given = []
    plain = [call() for call in calls]  # nothing requires grad
    with torch.no_grad():
        x.requires_grad_()
        unrecorded = [call() for call in calls]
    assert applied == [] and all(out.grad_fn is None for out in plain + unrecorded)
    assert TorchKernels.statistics_given == [False] * 4  # the norms made no statistics for a backward
    recorded = [call() for call in calls]
    assert len(applied) == 3 and all(out.grad_fn is not None for out in recorded)
    assert TorchKernels.statistics_given[4:] == [True] * 2
    for a, b, c in zip(plain, unrecorded, recorded):
        torch.testing.assert_close(a, b)
        torch.testing.assert_close(a, c.detach())


# ---- the rotary embedding: lab::rope's schema and fake, the CPU formula, the autograd wiring ----

def hf_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """transformers' Llama formula, written out here as the reference."""
    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def rope_tables(batch, positions, rotary_dim, dtype=torch.float64, interleaved=False):
    """cos and sin as a rotary embedding makes them: (batch, positions, rotary_dim), each angle twice."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    angles = torch.arange(positions, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angles = angles.repeat_interleave(2, dim=-1) if interleaved else torch.cat((angles, angles), dim=-1)
    angles = angles.expand(batch, positions, rotary_dim)
    return angles.cos().to(dtype), angles.sin().to(dtype)


class TorchRope:
    """Stand-ins for lab.rope / lab.rope_backward with launch.h's formulas, element by element:
    forward out[j] = x[j] cos[j] + sign(j) x[p] sin[j]; backward out[j] = x[j] cos[j] - sign(j) x[p] sin[p]."""

    @staticmethod
    def _turn(x, cos, sin, interleaved, backward):
        rotary_dim = cos.shape[-1]
        j = torch.arange(rotary_dim)
        if interleaved:
            partner, sign = j ^ 1, torch.where(j % 2 == 0, -1.0, 1.0)
        else:
            half = rotary_dim // 2
            partner, sign = torch.where(j < half, j + half, j - half), torch.where(j < half, -1.0, 1.0)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        head = x[..., :rotary_dim]
        turned = head * cos - sign * head[..., partner] * sin[..., partner] if backward \
            else head * cos + sign * head[..., partner] * sin
        return torch.cat((turned, x[..., rotary_dim:]), dim=-1)

    @classmethod
    def rope(cls, q, k, cos, sin, q_out, k_out, *, interleaved=False, backward=False):
        for x, out in ((q, q_out), (k, k_out)):
            out.copy_(cls._turn(x, cos, sin, interleaved, backward))
        return q_out, k_out

    @classmethod
    def rope_backward(cls, *args, interleaved=False):
        return cls.rope(*args, interleaved=interleaved, backward=True)


def test_rope_schema_and_fake_keep_the_layout():
    assert str(torch.ops.lab.rope.default._schema) == \
        "lab::rope(Tensor q, Tensor k, Tensor cos, Tensor sin, bool interleaved) -> (Tensor, Tensor)"
    with FakeTensorMode():
        q = torch.empty(2, 6, 4, 16, device="cuda", dtype=torch.bfloat16).transpose(1, 2)  # (B, H, S, D) view
        k = torch.empty(2, 6, 2, 16, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        cos = torch.empty(1, 6, 16, device="cuda", dtype=torch.bfloat16)
        q_out, k_out = torch.ops.lab.rope(q, k, cos, cos, False)
        assert q_out.shape == q.shape and q_out.stride() == q.stride() and k_out.stride() == k.stride()
        grad_q, grad_k = torch.ops.lab.rope_backward(q_out, k_out, cos, cos, False)
        assert grad_q.shape == q.shape and grad_k.dtype == torch.bfloat16


@pytest.mark.parametrize("unsqueeze_dim", [1, 2])
def test_apply_rotary_pos_emb_falls_back_to_the_formula_on_the_cpu(unsqueeze_dim):
    g = torch.Generator().manual_seed(2)
    shape_q, shape_k = ((3, 4, 5, 8), (3, 2, 5, 8)) if unsqueeze_dim == 1 else ((3, 5, 4, 8), (3, 5, 2, 8))
    q, k = torch.randn(shape_q, generator=g), torch.randn(shape_k, generator=g)
    cos, sin = rope_tables(3, 5, 8, torch.float32)
    got = lab.nn.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)
    for ours, theirs in zip(got, hf_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim)):
        torch.testing.assert_close(ours, theirs)


class TorchGlus:
    """lab's GLU calls (forward(gate, up, out), backward(grad, gate, up, grad_gate, grad_up, product=None))
    done in torch: stand-in kernels for CPU tensors, the backward by torch's autograd of the forward's
    formula (every read before any write, as the kernel's)."""

    @staticmethod
    def _pair(formula):
        def forward(gate, up, out):
            out.copy_(formula(gate, up))

        def backward(grad, gate, up, grad_gate, grad_up, product=None):
            with torch.enable_grad():
                g, u = gate.detach().requires_grad_(), up.detach().requires_grad_()
                made = formula(g, u)
                dg, du = torch.autograd.grad(made, (g, u), grad)
            grad_gate.copy_(dg), grad_up.copy_(du)
            if product is not None:
                product.copy_(made.detach())
        return forward, backward

    reference = {"swiglu": lambda g, u: torch.nn.functional.silu(g) * u,
                 "geglu": lambda g, u: torch.nn.functional.gelu(g, approximate="tanh") * u}
    swiglu, swiglu_backward = _pair.__func__(reference["swiglu"])
    geglu, geglu_backward = _pair.__func__(reference["geglu"])


@pytest.mark.parametrize("name", ["swiglu", "geglu"])
def test_the_glus_eager_function_hands_each_gradient_to_its_input(monkeypatch, name):
    """lab.nn.swiglu/geglu in eager mode (the autograd.Function) with torch stand-ins for the kernels:
    the values, and gradcheck - gate's gradient to gate, up's to up, also for the halves of one tensor."""
    monkeypatch.setattr(lab.nn.functional, "_raw", TorchGlus)
    monkeypatch.setattr(lab.nn.functional, "_on_lab", lambda x: True)
    g = torch.Generator().manual_seed(5)
    gate, up = (torch.randn(3, 7, dtype=torch.float64, generator=g, requires_grad=True) for _ in range(2))
    glu = getattr(lab.nn.functional, name)
    torch.testing.assert_close(glu(gate, up), TorchGlus.reference[name](gate, up))
    torch.autograd.gradcheck(glu, (gate, up))
    both = torch.randn(3, 14, dtype=torch.float64, generator=g, requires_grad=True)
    torch.autograd.gradcheck(lambda t: glu(*t.chunk(2, dim=-1)), (both,))


@pytest.mark.parametrize("needs", ["all", "inputs", "weight"])
def test_swiglu_linears_eager_function_hands_each_gradient_to_its_input(monkeypatch, needs):
    """lab.nn.swiglu_linear's autograd.Function with torch stand-ins for the GLU kernels: the values, and
    gradcheck with and without bias - including when only the inputs' or only weight's and bias's
    gradients are wanted (the backward skips the other part)."""
    from lab.nn import _eager
    monkeypatch.setattr(lab.nn.functional, "_raw", TorchGlus)
    monkeypatch.setattr(lab.nn.functional, "_on_lab", lambda x: True)
    applied = []
    real_apply = _eager.GluLinear.apply
    monkeypatch.setattr(_eager.GluLinear, "apply", lambda *a: applied.append(1) or real_apply(*a))
    g = torch.Generator().manual_seed(6)
    gate, up = (torch.randn(2, 3, 7, dtype=torch.float64, generator=g, requires_grad=needs != "weight")
                for _ in range(2))
    weight = torch.randn(4, 7, dtype=torch.float64, generator=g, requires_grad=needs != "inputs")
    bias = torch.randn(4, dtype=torch.float64, generator=g, requires_grad=needs != "inputs")
    want = torch.nn.functional.linear(TorchGlus.reference["swiglu"](gate, up), weight, bias)
    torch.testing.assert_close(lab.nn.functional.swiglu_linear(gate, up, weight, bias), want)
    assert applied, "swiglu_linear did not take the autograd.Function"
    for args in ((gate, up, weight, bias), (gate, up, weight)):
        torch.autograd.gradcheck(lab.nn.functional.swiglu_linear, args)


@pytest.mark.parametrize("path", ["eager", "operator"])
@pytest.mark.parametrize("tables", ["angles", "random"])
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rotary_dim", [8, 4])
@pytest.mark.parametrize("unsqueeze_dim", [1, 2])
def test_apply_rotary_pos_emb_wires_lab_rope_and_its_backward(monkeypatch, interleaved, rotary_dim, unsqueeze_dim,
                                                              tables, path):
    """The lab path with launch.h's formulas as stand-in kernels: values against transformers' formula
    (computed on the rotated part), and gradcheck - so the backward formula is the forward's exact
    transpose (random tables: a pair's two sines differ, as no rotary embedding makes them, which
    tells sin[j] from sin[partner]) and the autograd.Function (eager) or the operator (what
    torch.compile traces) hands each gradient to the right input."""
    from lab.nn import _eager, _rope_ops
    monkeypatch.setattr(_rope_ops, "lab", TorchRope)
    monkeypatch.setattr(_eager, "lab", TorchRope)
    monkeypatch.setattr(lab.nn.functional, "_on_lab", lambda x: True)
    monkeypatch.setattr(lab.nn.functional, "_compiling", lambda: path == "operator")
    g = torch.Generator().manual_seed(3)
    if unsqueeze_dim == 1:
        q = torch.randn(2, 3, 5, 8, dtype=torch.float64, generator=g).transpose(1, 2)  # the projections' view
        k = torch.randn(2, 2, 3, 8, dtype=torch.float64, generator=g)
    else:
        q = torch.randn(2, 3, 5, 8, dtype=torch.float64, generator=g)
        k = torch.randn(2, 3, 2, 8, dtype=torch.float64, generator=g)
    q.requires_grad_(), k.requires_grad_()
    cos, sin = rope_tables(2, 3, rotary_dim, interleaved=interleaved)
    if tables == "random":
        cos, sin = (torch.randn(1, 3, rotary_dim, dtype=torch.float64, generator=g) for _ in range(2))
    q_out, k_out = lab.nn.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim, interleaved=interleaved)
    if not interleaved:
        want_q, want_k = hf_apply_rotary_pos_emb(q[..., :rotary_dim], k[..., :rotary_dim], cos, sin, unsqueeze_dim)
        torch.testing.assert_close(q_out[..., :rotary_dim], want_q)
        torch.testing.assert_close(k_out[..., :rotary_dim], want_k)
    torch.testing.assert_close(q_out[..., rotary_dim:], q[..., rotary_dim:])
    torch.autograd.gradcheck(
        lambda q, k: lab.nn.apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim, interleaved=interleaved),
        (q, k))
