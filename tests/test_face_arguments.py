"""The faces' functions (lab.nn, lab.jax) refuse a wrong type by name, from their annotations
(lab/_arguments.py), and keep the faces' contract under the generated fuzz (tests/fuzz_faces.py).
The checks run before any array reaches lab or the framework; the fuzz slices run on the GPU where
there is one."""
import inspect
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import lab.nn  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fuzz_faces  # noqa: E402
from hostile import Action, HostileError, Hook  # noqa: E402


def public_functions(face):
    module = face.module
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    return [f"{module.__name__}.{name}" for name in names
            if inspect.isfunction(getattr(module, name)) and getattr(module, name).__module__.startswith("lab")]


def face_or_skip(name):
    if name == "jax":
        pytest.importorskip("jax")
    return fuzz_faces.FACES[name]()


# Parameters that keep no annotation, and why: each reads its value itself, by a rule no type says.
UNTYPED = {
    "nn": [("lab.nn.cross_entropy", "size_average"), ("lab.nn.cross_entropy", "reduce")],  # torch's, passed on
    "jax": [("lab.jax.axpby", "alpha"), ("lab.jax.axpby", "beta"),  # a Python number, never a bool
            ("lab.jax.add", "alpha"), ("lab.jax.fused_add_mul", "s"),  # (s: an array, or that number)
            ("lab.jax.norm", "ord")],  # 1, 2 or inf
}


@pytest.mark.parametrize("name", ["nn", "jax"])
def test_every_public_function_checks_its_arguments(name):
    face = face_or_skip(name)
    found = public_functions(face)
    unchecked = [f for f in found if not getattr(getattr(face.module, f.rsplit(".", 1)[1]), "__lab_checked__", False)]
    assert found and not unchecked, f"{unchecked}: public functions without @checked (lab/_arguments.py)"


@pytest.mark.parametrize("name", ["nn", "jax"])
def test_every_parameter_has_a_kind_the_fuzz_can_draw_for(name):
    face = face_or_skip(name)
    points = fuzz_faces.entry_points(face)
    assert sorted(points) == sorted(public_functions(face))
    untyped = [(fn, p[0]) for fn, (_, params) in points.items() for p in params if p[1] == "any"]
    assert sorted(untyped) == sorted(UNTYPED[name]), untyped


@pytest.mark.parametrize("call, message", [
    (lambda: lab.nn.rms_norm([1.0, 2.0], 2), "lab.nn.rms_norm(): argument 'x' must be a torch.Tensor, got list"),
    (lambda: lab.nn.swiglu(torch.ones(3), None), "lab.nn.swiglu(): argument 'up' must be a torch.Tensor, got NoneType"),
    (lambda: lab.nn.softmax(torch.ones(3), dim=1.5), "lab.nn.softmax(): argument 'dim' must be an int, got float"),
    (lambda: lab.nn.layer_norm(torch.ones(3, 4), "4"),
     "lab.nn.layer_norm(): argument 'normalized_shape' must be an int or a sequence of ints, got str"),
    (lambda: lab.nn.attention(torch.ones(1, 2, 3, 64), torch.ones(1, 2, 3, 64), torch.ones(1, 2, 3, 64), window=(1,)),
     "lab.nn.attention(): argument 'window' must be a tuple (an int or None, an int or None) or None, got tuple"),
    (lambda: lab.nn.cross_entropy(torch.ones(3, 4), torch.zeros(3, dtype=torch.long), reduction=None),
     "lab.nn.cross_entropy(): argument 'reduction' must be a str, got NoneType"),
    (lambda: lab.nn.patch(None), "lab.nn.patch(): argument 'model' must be a torch.nn.Module, got NoneType"),
])
def test_a_wrong_type_is_refused_by_name(call, message):
    with pytest.raises(TypeError) as caught:
        call()
    assert str(caught.value) == message


def test_numbers_are_read_once_before_the_body():
    import numpy as np
    x = torch.randn(3, 4)
    torch.testing.assert_close(lab.nn.softmax(x, dim=np.int64(0)), torch.softmax(x, 0))
    torch.testing.assert_close(lab.nn.softmax(x, True), torch.softmax(x, 1))  # a bool is the int it is
    torch.testing.assert_close(lab.nn.rms_norm(x, 4), torch.nn.functional.rms_norm(x, (4,)))  # an int shape
    torch.testing.assert_close(lab.nn.layer_norm(x, np.int64(4), eps=np.float32(1e-5)),
                               torch.nn.functional.layer_norm(x, (4,)))
    with pytest.raises(HostileError):  # a conversion that fails fails once, with its own error
        lab.nn.softmax(x, dim=Hook(Action("none", fail_at=1), 0))


def test_a_conversion_that_returns_nonsense_is_named():
    class Nonsense:
        def __index__(self):
            return "zero"
    with pytest.raises(TypeError, match=r"lab.nn.softmax\(\): argument 'dim' could not be read as an int"):
        lab.nn.softmax(torch.ones(3), dim=Nonsense())


def test_jax_faces_refuse_by_name():
    face_or_skip("jax")
    import jax.numpy as jnp
    import lab.jax
    for call, message in [
            (lambda: lab.jax.rms_norm(None), "lab.jax.rms_norm(): argument 'x' must be a JAX array (or a NumPy array "
                                             "or number), got NoneType"),
            (lambda: lab.jax.sum(jnp.ones(3), axis=1.5), "lab.jax.sum(): argument 'axis' must be an int or a "
                                                         "sequence of ints or None, got float"),
            (lambda: lab.jax.norm(jnp.ones(3), ord=[]), "norm(): ord must be 1, 2 or inf (the vector norms lab "
                                                        "computes), got []")]:
        with pytest.raises((TypeError, ValueError)) as caught:
            call()
        assert str(caught.value) == message


# Calls per slice: lab.jax's are traced and compiled one by one (about 20 ms each on the CPU).
SLICES = {"nn": 20000, "jax": 1000}


@pytest.mark.parametrize("name", ["nn", "jax"])
def test_generated_fuzz_slice_keeps_the_faces_contract(name):
    face = face_or_skip(name)
    calls = int(os.environ.get(f"LAB_FACES_CALLS_{name.upper()}", SLICES[name]))
    child = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_faces.py"), "--face", name, "--calls", str(calls),
                            "--seed", os.environ.get("LAB_CONTRACT_SEED", "1"), "--jobs",
                            str(min(os.cpu_count() or 1, 4)), "--chunk", str(max(calls // 4, 1))],
                           capture_output=True, text=True, timeout=1500)
    print(child.stdout[-6000:])
    assert child.returncode == 0, child.stdout[-6000:] + child.stderr[-2000:]
    assert f"generated fuzz: {calls} calls over {len(public_functions(face))} entry points" in child.stdout
