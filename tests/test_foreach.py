"""The list functions' binding on any machine: signatures, list validation (lengths, element types,
shapes, read-only outputs, devices, dtypes), scalar checks, and empty work needing no CUDA."""
import inspect

import pytest

import lab
from conftest import HAVE_GPU
from fakes import FakeExchangeTensor, fake_array

LIST_OPS = ["foreach_add", "foreach_mul", "foreach_axpby", "foreach_scale", "foreach_copy", "foreach_norm",
            "sgd_step", "adam_step"]


def arrays(*shapes, typestr="<f4"):
    return [fake_array(shape=s, typestr=typestr) for s in shapes]


@pytest.mark.parametrize("name", LIST_OPS)
def test_signatures_end_in_stream(name):
    params = inspect.signature(getattr(lab, name)).parameters
    assert list(params)[-1] == "stream" and params["stream"].kind is inspect.Parameter.KEYWORD_ONLY


def test_specific_signatures():
    assert str(inspect.signature(lab.foreach_add)) == "(xs, ys, outs, *, alpha=1, stream=None)"
    assert str(inspect.signature(lab.adam_step)) == ("(params, grads, exp_avgs, exp_avg_sqs, *, step, lr, beta1=0.9, "
                                                      "beta2=0.999, eps=1e-08, weight_decay=0, "
                                                      "decoupled_weight_decay=False, stream=None)")


def test_lists_of_different_lengths():
    xs = arrays((3,), (5,))
    with pytest.raises(ValueError, match=r"'ys' has 1 arrays but 'xs' has 2"):
        lab.foreach_add(xs, xs[:1], arrays((3,), (5,)))


def test_non_array_element_is_named():
    xs = arrays((3,), (5,))
    with pytest.raises(TypeError, match=r"argument 'ys\[1\]' must be a CUDA array"):
        lab.foreach_mul(xs, [xs[0], 3.0], arrays((3,), (5,)))


def test_not_a_list():
    with pytest.raises(TypeError, match=r"'xs' must be a list or tuple of CUDA arrays, got int"):
        lab.foreach_add(5, [], [])


def test_shape_mismatch_at_an_index():
    with pytest.raises(ValueError, match=r"'ys\[1\]' and 'xs\[1\]' differ in shape"):
        lab.foreach_add(arrays((3,), (5,)), arrays((3,), (4,)), arrays((3,), (5,)))


def test_read_only_output_in_a_list():
    outs = arrays((3,)) + [fake_array(shape=(5,), readonly=True)]
    with pytest.raises(ValueError, match=r"argument 'dsts\[1\]' is read-only"):
        lab.foreach_copy(arrays((3,), (5,)), outs)


def test_mixed_devices():
    xs = [FakeExchangeTensor(shape=(4,), device_id=0), FakeExchangeTensor(shape=(4,), device_id=1)]
    with pytest.raises(ValueError, match=r"'xs\[1\]' is on cuda:1 but 'xs\[0\]' is on cuda:0"):
        lab.foreach_scale(xs, 2.0, [FakeExchangeTensor(shape=(4,)) for _ in range(2)])


def test_partial_overlap_between_lists():
    from fakes import fake_pointer
    base = fake_pointer()
    xs = [fake_array(shape=(8,), ptr=base)]
    outs = [fake_array(shape=(8,), ptr=base + 8)]
    with pytest.raises(ValueError, match=r"argument 'srcs\[0\]' overlaps 'dsts\[0\]' in memory without being the same view"):
        lab.foreach_copy(xs, outs)


def test_in_place_lists_are_fine_until_cuda():
    xs = arrays((0,), (0, 3))
    assert lab.foreach_add(xs, xs, xs, alpha=2.0) is xs  # empty: nothing to launch, no CUDA needed


class CountedReads:
    """A zero-size fake array that counts how often its __cuda_array_interface__ is read."""

    def __init__(self):
        self.reads = 0
        self._interface = fake_array(shape=(0,)).__cuda_array_interface__

    @property
    def __cuda_array_interface__(self):
        self.reads += 1
        return self._interface


@pytest.mark.parametrize("call", ["in_place", "out_is_ys", "some_indices_shared"])
def test_an_object_in_several_lists_is_read_once(call):
    xs, ys = [CountedReads() for _ in range(3)], [CountedReads() for _ in range(3)]
    outs = {"in_place": xs, "out_is_ys": ys, "some_indices_shared": [xs[0], CountedReads(), ys[2]]}[call]
    assert lab.foreach_add(xs, ys, outs) is outs  # empty: nothing to launch, no CUDA needed
    assert [a.reads for a in xs + ys + outs] == [1] * 9
    assert lab.foreach_add(xs, xs, xs) is xs
    assert [a.reads for a in xs] == [2] * 3


def test_empty_lists():
    assert lab.foreach_mul([], [], []) == []
    assert lab.adam_step([], [], [], [], step=1, lr=1e-3) is None


def test_scalar_errors():
    xs = arrays((3,))
    with pytest.raises(TypeError, match=r"'scalar' must be a real number, got str"):
        lab.foreach_scale(xs, "2", arrays((3,)))
    with pytest.raises(TypeError, match=r"'alpha' must be a real number"):
        lab.foreach_axpby(None, xs, 1.0, xs, arrays((3,)))
    with pytest.raises(TypeError, match="unexpected keyword argument 'alpha'"):
        lab.foreach_mul(xs, xs, arrays((3,)), alpha=2)


def test_optimizer_argument_errors():
    p, g, m, v = (arrays((4,)) for _ in range(4))
    with pytest.raises(TypeError, match="missing required keyword argument 'step'"):
        lab.adam_step(p, g, m, v, lr=1e-3)
    with pytest.raises(TypeError, match="missing required keyword argument 'lr'"):
        lab.sgd_step(p, g, None)
    with pytest.raises(ValueError, match="argument 'step' must be an int >= 1, got 0"):
        lab.adam_step(p, g, m, v, step=0, lr=1e-3)
    with pytest.raises(ValueError, match=r"argument 'beta1' must be a number in \[0, 1\), got 1.0"):
        lab.adam_step(p, g, m, v, step=1, lr=1e-3, beta1=1.0)
    with pytest.raises(TypeError, match="'step' must be an int"):
        lab.adam_step(p, g, m, v, step=1.0, lr=1e-3)
    with pytest.raises(TypeError, match=r"argument 'momentum_bufs' must be a list of arrays with momentum=0.9"):
        lab.sgd_step(p, g, None, lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match=r"argument 'nesterov' = True needs a momentum > 0 and dampening 0 \(got momentum 0.0, dampening 0.0\)$"):
        lab.sgd_step(p, g, m, lr=0.1, nesterov=True)


def test_optimizer_dtype_rules():
    p, g = arrays((4,), typestr="<f2"), arrays((4,), typestr="<f4")
    m, v = arrays((4,), typestr="<f4"), arrays((4,), typestr="<f4")
    with pytest.raises(TypeError, match=r"'grads\[0\]' has dtype float32"):
        lab.adam_step(p, g, m, v, step=1, lr=1e-3)
    with pytest.raises(TypeError, match=r"'params\[0\]' has dtype float64"):
        lab.sgd_step(arrays((4,), typestr="<f8"), arrays((4,), typestr="<f8"), None, lr=0.1)


def test_norm_output_checks():
    xs = arrays((3,), (5,))
    with pytest.raises(ValueError, match=r"'out' must be a contiguous 1-D float32 array of 2 elements"):
        lab.foreach_norm(xs, fake_array(shape=(3,)))
    with pytest.raises(ValueError, match=r"'out' must be a contiguous 1-D float32 array"):
        lab.foreach_norm(xs, fake_array(shape=(2,), typestr="<f8"))


@pytest.mark.skipif(HAVE_GPU, reason="checks the no-GPU error")
def test_work_without_a_gpu_raises_cuda_error():
    with pytest.raises(lab.CudaError, match="no CUDA driver/GPU"):
        lab.foreach_add(arrays((3,)), arrays((3,)), arrays((3,)))
    with pytest.raises(lab.CudaError, match="no CUDA driver/GPU"):
        lab.adam_step(*(arrays((4,)) for _ in range(4)), step=1, lr=1e-3)
