"""lab's random numbers, on the CPU: the Philox4x32-10 generator of src/kernels/philox.cuh against
Random123's known-answer vectors (tests/philox_vectors.cu, built with nvcc for the host)."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_philox_matches_the_known_answer_vectors(tmp_path):
    nvcc = shutil.which("nvcc") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    if not os.path.exists(nvcc):
        pytest.skip("nvcc is not installed")
    program = str(tmp_path / "philox_vectors")
    subprocess.run([nvcc, "-std=c++17", "-O1", "-I" + os.path.join(ROOT, "src", "kernels"), "-o", program,
                    os.path.join(ROOT, "tests", "philox_vectors.cu")], check=True, capture_output=True, timeout=300)
    done = subprocess.run([program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip().endswith("0 failures"), done.stdout


def test_the_numpy_reference_matches_the_known_answer_vectors():
    """tests/philox_reference.py (the GPU tests' host reference) on the same vectors as the C++ one:
    each is ten numbers, counter, key and the four words wanted, read from philox_vectors.cu."""
    import re

    import philox_reference
    source = open(os.path.join(ROOT, "tests", "philox_vectors.cu")).read()
    start = source.index("vectors[] = {")
    table = source[start:source.index("};", start)]
    numbers = [int(literal.rstrip("u"), 0) for literal in re.findall(r"\b(?:0x[0-9a-f]+|0)u?\b", table)]
    assert len(numbers) == 30, "three vectors of ten numbers"
    for vector in (numbers[i:i + 10] for i in range(0, 30, 10)):
        words = philox_reference.philox4x32_10(vector[:4], vector[4:6])
        assert [int(word) for word in words] == vector[6:]


# ---- the binding, on fake producers (plain objects exposing only __cuda_array_interface__) ----

import lab  # noqa: E402
from fakes import fake_array  # noqa: E402

FILLS = [(lab.uniform, {}), (lab.normal, {}), (lab.bernoulli, {})]


def reaches_cuda(thunk):
    """Everything was checked: without a GPU, the first CUDA call is what fails."""
    if lab.is_available():
        pytest.skip("a GPU is here: tests/test_random_gpu.py fills for real")
    with pytest.raises(lab.CudaError):
        thunk()


@pytest.mark.parametrize("typestr", ["<f2", "<f4", "<f8", "<V2"])
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 5), (1031,)])
@pytest.mark.parametrize("fill", [f for f, _ in FILLS], ids=["uniform", "normal", "bernoulli"])
def test_a_valid_fill_gets_as_far_as_cuda(fill, shape, typestr):
    out = fake_array(shape, typestr) if typestr != "<V2" else fake_array(shape, "<V2", descr=[("bf16", "<V2")])
    if typestr == "<V2":
        pytest.skip("bfloat16 spelled through __cuda_array_interface__ is ambiguous; the GPU tests cover it")
    reaches_cuda(lambda: fill(out))


@pytest.mark.parametrize("typestr, low, high", [
    ("<i1", -128, 128), ("<u1", 0, 256), ("<i2", -5, 5), ("<i4", -(1 << 31), 1 << 31), ("<i8", -(1 << 63), (1 << 63) - 1),
    ("<i8", 0, 1), ("<f4", -(1 << 40), 1 << 40), ("<f2", 0, 10), ("<f8", 3, 4)])
def test_a_valid_randint_gets_as_far_as_cuda(typestr, low, high):
    reaches_cuda(lambda: lab.randint(fake_array((7,), typestr), low, high))


@pytest.mark.parametrize("typestr, low, high, error, fragment", [
    ("<i1", -129, 0, ValueError, "'low' and 'high' ([-129, 0)) must lie within what 'out' (int8) holds"),
    ("<u1", -1, 3, ValueError, "within what 'out' (uint8) holds: [0, 255]"),
    ("<u1", 0, 257, ValueError, "within what 'out' (uint8) holds"),
    ("<i4", 0, (1 << 31) + 1, ValueError, "(int32) holds"),
    ("<f4", 5, 5, ValueError, "'low' must be below 'high'"),
    ("<i8", 1.5, 5, TypeError, "'low'"),
    ("<i8", 0, "9", TypeError, "'high'"),
    ("<i8", 0, 1 << 63, OverflowError, "'high'"),
])
def test_bad_randints_are_refused_by_name(typestr, low, high, error, fragment):
    with pytest.raises(error, match=fragment.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        lab.randint(fake_array((4,), typestr), low, high)


def test_an_empty_randint_is_no_work():
    out = fake_array((0,), "<i8")
    assert lab.randint(out, 0, 10) is out


@pytest.mark.parametrize("fill", [f for f, _ in FILLS], ids=["uniform", "normal", "bernoulli"])
def test_an_empty_output_is_no_work(fill):
    out = fake_array((0,), "<f4")
    assert fill(out) is out


@pytest.mark.parametrize("call, error, fragment", [
    (lambda o: lab.uniform(fake_array((4,), "<i4")), TypeError, "'out'"),
    (lambda o: lab.normal(fake_array((4,), "<f4", readonly=True)), ValueError, "'out' is read-only"),
    (lambda o: lab.bernoulli(fake_array((4, 4), "<f4", strides=(4, 16))), ValueError, "C-contiguous"),
    (lambda o: lab.uniform(o, 2.0, 1.0), ValueError, "'low' must be at most 'high'"),
    (lambda o: lab.uniform(o, float("nan")), ValueError, "'low'"),
    (lambda o: lab.normal(o, 0.0, -1.0), ValueError, "'std'"),
    (lambda o: lab.bernoulli(o, 1.5), ValueError, "'p'"),
    (lambda o: lab.bernoulli(o, "half"), TypeError, "'p'"),
    (lambda o: lab.uniform(None), TypeError, "'out'"),
    (lambda o: lab.uniform([1.0, 2.0]), TypeError, "'out'"),
    (lambda o: lab.normal(o, stream="fast"), TypeError, "'stream'"),
    (lambda o: lab.manual_seed(-1), ValueError, "'seed'"),
    (lambda o: lab.manual_seed(1.5), TypeError, "'seed'"),
    (lambda o: lab.set_rng_state(1, -2), ValueError, "'offset'"),
    (lambda o: lab.get_rng_state(1 << 40), (ValueError, OverflowError), "'device'"),
])
def test_bad_arguments_are_refused_by_name(call, error, fragment):
    with pytest.raises(error, match=fragment.replace("(", r"\(")):
        call(fake_array((4,), "<f4"))


def test_the_generator_state_is_per_device_and_seeded():
    before = [lab.get_rng_state(d) for d in (0, 1)]
    try:
        lab.manual_seed(1234)
        assert lab.get_rng_state(0) == lab.get_rng_state(1) == (1234, 0)
        lab.set_rng_state(99, 4096, 1)
        assert lab.get_rng_state(1) == (99, 4096) and lab.get_rng_state(0) == (1234, 0)
    finally:
        for d, (seed, offset) in enumerate(before):
            lab.set_rng_state(seed, offset, d)


@pytest.mark.parametrize("call", [
    lambda x, o, m: lab.dropout(x, 0.1, o),
    lambda x, o, m: lab.dropout(x, 0.0, x),                          # in place
    lambda x, o, m: lab.dropout(x, 0.5, o, mask_out=m, rng_state=(3, 40)),
    lambda x, o, m: lab.dropout_add(x, x, 0.2, o),                   # residual and x may be one array
    lambda x, o, m: lab.dropout_add(o, x, 0.2, o, mask_out=m),       # out in place of the residual
], ids=["plain", "in_place", "mask_and_state", "shared_inputs", "residual_in_place"])
def test_a_valid_dropout_gets_as_far_as_cuda(call):
    x, o, m = fake_array((3, 7), "<f2"), fake_array((3, 7), "<f2"), fake_array((3, 7), "|u1")
    reaches_cuda(lambda: call(x, o, m))


@pytest.mark.parametrize("call, error, fragment", [
    (lambda x, o: lab.dropout(x, 1.0, o), ValueError, "'p' must be a number in [0, 1)"),
    (lambda x, o: lab.dropout(x, -0.1, o), ValueError, "'p'"),
    (lambda x, o: lab.dropout(x, 0.1, fake_array((5,), "<f4")), ValueError, "'x' has shape"),
    (lambda x, o: lab.dropout(x, 0.1, fake_array((8,), "<f2")), TypeError, "'x' has dtype float32"),
    (lambda x, o: lab.dropout(x, 0.1, o, mask_out=fake_array((8,), "<f4")), TypeError, "'mask_out'"),
    (lambda x, o: lab.dropout(x, 0.1, o, mask_out=fake_array((4,), "|u1")), ValueError, "'mask_out'"),
    (lambda x, o: lab.dropout(x, 0.1, o, mask_out=fake_array((8,), "|u1", readonly=True)), ValueError,
     "'mask_out' is read-only"),
    (lambda x, o: lab.dropout(x, 0.1, o, rng_state=5), TypeError, "'rng_state' must be a pair"),
    (lambda x, o: lab.dropout(x, 0.1, o, rng_state=(1, -1)), ValueError, "'rng_state[1]'"),
    (lambda x, o: lab.dropout(x, 0.1, o, rng_state=(1, 2, 3)), TypeError, "'rng_state'"),
    (lambda x, o: lab.dropout(None, 0.1, o), TypeError, "'x'"),
    (lambda x, o: lab.dropout_add(fake_array((8,), "<f8"), x, 0.1, o), TypeError, "'residual'"),
    (lambda x, o: lab.dropout(x, 0.1, fake_array((8,), "<f4", ptr=x.__cuda_array_interface__["data"][0] + 4)),
     ValueError, "share memory"),
])
def test_bad_dropouts_are_refused_by_name(call, error, fragment):
    with pytest.raises(error, match=fragment.replace("(", r"\(").replace("[", r"\[").replace(")", r"\)")):
        call(fake_array((8,), "<f4"), fake_array((8,), "<f4"))
