"""lab.nn without a GPU (issue 15), where torch is installed: the operators' schemas, their fake
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
