"""The iterator (src/dispatch/iterator.c) and the elementwise plan (src/dispatch/elementwise_kind.c)
on any machine: broadcasting, dimension dropping / flipping / ordering / merging, reduced dimensions,
the path chosen, the compute dtype, and the overlap checks, read back through
lab.lab._plan(out, *inputs) and lab.lab._iterate(out, *inputs, reduced=...) on fake producers. No
GPU is needed: planning never calls CUDA."""
import pytest

import lab.lab as core
from fakes import fake_array, fake_pointer

ITEMSIZE = {"<f2": 2, "<f4": 4, "<f8": 8, "|i1": 1, "<i2": 2, "<i4": 4, "<i8": 8, "|u1": 1}


def view(shape, typestr="<f4", strides=None, ptr=None, offset=0):
    """A fake array; strides in elements (converted to bytes), offset in elements from ptr."""
    size = ITEMSIZE[typestr]
    ptr = fake_pointer() if ptr is None else ptr
    kw = {} if strides is None else {"strides": tuple(s * size for s in strides)}
    return fake_array(shape=shape, typestr=typestr, ptr=ptr + offset * size, **kw)


def test_contiguous_4d_merges_to_one_dimension():
    plan = core._plan(view((2, 3, 4, 5)), view((2, 3, 4, 5)), view((2, 3, 4, 5)))
    assert plan["path"] == "vectorized" and plan["shape"] == (120,) and plan["byte_strides"] == ((4,), (4,), (4,))


def test_misaligned_pointer_takes_the_scalar_contiguous_path():
    base = fake_pointer()
    plan = core._plan(view((100,)), view((100,), ptr=base, offset=1), view((100,)))
    assert plan["path"] == "contiguous" and plan["shape"] == (100,)


def test_aligned_offset_view_stays_vectorized():
    plan = core._plan(view((100,)), view((100,), offset=4), view((100,)))  # 16 bytes in
    assert plan["path"] == "vectorized"


def test_column_slice_becomes_two_dimensional():
    plan = core._plan(view((6, 9)), view((6, 9), strides=(10, 1), offset=1))  # x[:, 1:] of a (6, 10)
    assert plan["path"] == "strided" and plan["shape"] == (6, 9)
    assert plan["byte_strides"] == ((36, 4), (40, 4))


def test_transpose_is_ordered_by_the_output():
    plan = core._plan(view((4, 6)), view((4, 6), strides=(1, 4)))  # x.T of a contiguous (6, 4)
    assert plan["path"] == "strided" and plan["shape"] == (4, 6)
    assert plan["byte_strides"] == ((24, 4), (4, 16))


def test_transposed_output_reorders_dimensions():
    plan = core._plan(view((4, 6), strides=(1, 4)), view((4, 6)))
    assert plan["shape"] == (6, 4) and plan["byte_strides"][0] == (16, 4)


def test_transposed_everything_is_contiguous_again():
    plan = core._plan(view((4, 6), strides=(1, 4)), view((4, 6), strides=(1, 4)), view((4, 6), strides=(1, 4)))
    assert plan["path"] == "vectorized" and plan["shape"] == (24,)


def test_step_slice():
    plan = core._plan(view((50,)), view((50,), strides=(2,)))  # x[::2]
    assert plan["path"] == "strided" and plan["byte_strides"] == ((4,), (8,))


def test_negative_strides_are_flipped_with_the_output():
    base_out, base_in = fake_pointer(), fake_pointer()
    out = view((10,), strides=(-1,), ptr=base_out, offset=9)  # y[::-1]
    src = view((10,), strides=(-1,), ptr=base_in, offset=9)   # x[::-1]
    plan = core._plan(out, src)
    assert plan["path"] == "vectorized" and plan["data"] == (base_out, base_in)


def test_negative_input_stride_alone_stays_strided():
    base = fake_pointer()
    plan = core._plan(view((10,)), view((10,), strides=(-1,), ptr=base, offset=9))
    assert plan["path"] == "strided" and plan["byte_strides"][1] == (-4,) and plan["data"][1] == base + 36


def test_bias_row_broadcast_walks_packets():
    plan = core._plan(view((64, 32)), view((64, 32)), view((32,)))
    assert plan["path"] == "strided_vectorized" and plan["shape"] == (64, 32)
    assert plan["byte_strides"] == ((128, 4), (128, 4), (0, 4))


def test_outer_product_broadcast():
    plan = core._plan(view((5, 7)), view((5, 1)), view((1, 7)))
    assert plan["byte_strides"] == ((28, 4), (4, 0), (0, 4)) and plan["path"] == "strided"  # 7 % 4 != 0


def test_outer_product_broadcast_in_packets():
    plan = core._plan(view((5, 8)), view((5, 1)), view((1, 8)))
    assert plan["path"] == "strided_vectorized"


def test_misaligned_rows_do_not_pack():
    plan = core._plan(view((6, 9)), view((6, 9), strides=(9, 1)), view((9,)))  # rows 36 bytes apart
    assert plan["path"] == "strided"
    plan = core._plan(view((6, 8)), view((6, 8), strides=(10, 1), offset=1), view((8,)))  # x[:, 1:9] of (6, 10)
    assert plan["path"] == "strided"


def test_zero_dimensional_operands():
    plan = core._plan(view(()), view(()), view(()))
    assert plan["numel"] == 1 and plan["shape"] == (1,) and plan["path"] == "vectorized"


def test_scalar_array_broadcast_to_vector():
    plan = core._plan(view((9,)), view((9,)), view(()))
    assert plan["path"] == "strided" and plan["byte_strides"][2] == (0,)
    assert core._plan(view((12,)), view((12,)), view(()))["path"] == "strided_vectorized"


def test_size_one_dimensions_are_dropped():
    plan = core._plan(view((3, 1, 4, 1)), view((3, 1, 4, 1)))
    assert plan["shape"] == (12,) and plan["path"] == "vectorized"


def test_inputs_broadcast_up_to_the_output():
    plan = core._plan(view((3, 8)), view((8,)), view((8,)))
    assert plan["shape"] == (3, 8) and plan["byte_strides"][1] == (0, 4)


def test_already_broadcast_input_with_zero_stride():
    plan = core._plan(view((4, 5)), view((4, 5), strides=(0, 1)))
    assert plan["byte_strides"] == ((20, 4), (0, 4))


def test_eight_dimensions():
    shape = (2,) * 8
    strides = tuple(2 ** (8 - d) for d in range(8))  # every other element: no merging possible inside
    plan = core._plan(view(shape), view(shape, strides=strides))
    assert plan["path"] == "strided" and plan["numel"] == 256


def test_empty_plan():
    assert core._plan(view((0, 5)), view((0, 5)))["path"] == "empty"
    assert core._plan(view((0,)), view((0,)), view((1,)))["path"] == "empty"


def test_more_than_two_to_the_31_elements():
    n = 2**31 + 5  # int8, so the fake buffers (4 GiB apart) do not overlap
    plan = core._plan(view((n,), "|i1"), view((n,), "|i1"), view((n,), "|i1"))
    assert plan["numel"] == n and plan["path"] == "vectorized"


# ---- dtypes ----

@pytest.mark.parametrize("a, b, compute", [
    ("<f4", "<f4", "float32"), ("<f2", "<f2", "float32"), ("<f2", "<f4", "float32"), ("<f4", "<f8", "float64"),
    ("<i4", "<f4", "float64"), ("<i2", "<f4", "float32"), ("<i2", "<f2", "float32"), ("|i1", "<f2", "float32"),
    ("|i1", "|u1", "int16"), ("<i4", "|u1", "int32"), ("|u1", "|u1", "uint8"), ("<i8", "<i4", "int64"),
    ("<i8", "<f8", "float64"),
])
def test_compute_dtype_follows_numpy_promotion(a, b, compute):
    plan = core._plan(view((10,), "<f8"), view((10,), a), view((10,), b))
    assert plan["compute_dtype"] == compute
    assert plan["path"] == ("casting_contiguous" if not (a == b == "<f8") else "vectorized")


def test_output_dtype_alone_makes_a_cast():
    plan = core._plan(view((10,), "<f2"), view((10,), "<f4"))
    assert plan["path"] == "casting_contiguous" and plan["compute_dtype"] == "float32"
    assert plan["byte_strides"] == ((2,), (4,))


def test_mixed_dtypes_take_the_grouped_path_only_when_contiguous_and_group_aligned():
    f16, f32 = "<f2", "<f4"
    assert core._plan(view((8, 8), f32), view((8, 8), f16), view((8, 8), f32))["path"] == "casting_contiguous"
    # an f32 operand 4 elements in: 16-byte aligned, but not on a group of 8 (32 bytes)
    assert core._plan(view((100,), f32), view((100,), f16), view((100,), f32, offset=4))["path"] == "casting"
    assert core._plan(view((100,), f32), view((100,), f16, offset=8), view((100,), f32))["path"] == "casting_contiguous"
    assert core._plan(view((6, 9), f32), view((6, 9), f16, strides=(10, 1)), view((6, 9), f32))["path"] == "casting"
    assert core._plan(view((4, 8), f32), view((8,), f16), view((4, 8), f32))["path"] == "casting"  # broadcast


def test_float_only_ops_refuse_integer_inputs():
    with pytest.raises(TypeError, match=r"argument 'in0' has dtype int16"):
        core._plan(view((4,), "<f4"), view((4,), "<i2"), integers=False)
    assert core._plan(view((4,), "<f4"), view((4,), "<i2"), view((4,), "<f4"), integers=False)["path"] == \
        "casting_contiguous"


# ---- errors ----

def test_broadcast_error_names_inputs():
    with pytest.raises(ValueError, match=r"'in0' has shape \(3,\), 'in1' has shape \(4,\)"):
        core._plan(view((3,)), view((3,)), view((4,)))


def test_output_is_never_broadcast():
    with pytest.raises(ValueError, match=r"argument 'out' has shape \(1, 4\) but the inputs broadcast to \(3, 4\)"):
        core._plan(view((1, 4)), view((3, 4)))
    with pytest.raises(ValueError, match=r"argument 'out' has shape \(4,\) but the inputs broadcast to \(2, 4\)"):
        core._plan(view((4,)), view((2, 4)))


def test_output_with_zero_stride_is_refused():
    with pytest.raises(ValueError, match=r"argument 'out' has stride 0 in dimension 0"):
        core._plan(view((4, 5), strides=(0, 1)), view((4, 5)))


def test_self_overlapping_output_is_refused():
    with pytest.raises(ValueError, match=r"argument 'out' overlaps itself"):
        core._plan(view((4, 5), strides=(2, 1)), view((4, 5)))


def test_identical_view_in_place_is_fine():
    base = fake_pointer()
    out = view((6, 9), strides=(10, 1), ptr=base, offset=1)
    same = view((6, 9), strides=(10, 1), ptr=base, offset=1)
    assert core._plan(out, same, view((6, 9)))["path"] == "strided"


def test_broadcast_input_in_place_is_refused():
    base = fake_pointer()
    with pytest.raises(ValueError, match=r"argument 'in0' overlaps 'out' in memory"):
        core._plan(view((3, 4), ptr=base), view((4,), ptr=base))


def test_shifted_input_is_refused():
    base = fake_pointer()
    with pytest.raises(ValueError, match=r"argument 'in0' overlaps 'out' in memory without being the same view"):
        core._plan(view((10,), ptr=base), view((10,), ptr=base, offset=1))


def test_same_memory_other_dtype_is_refused():
    base = fake_pointer()
    with pytest.raises(ValueError, match=r"argument 'in0' overlaps 'out'"):
        core._plan(view((10,), "<f4", ptr=base), view((10,), "<f2", ptr=base))


def test_disjoint_halves_of_one_buffer_are_fine():
    base = fake_pointer()
    assert core._plan(view((10,), ptr=base), view((10,), ptr=base, offset=12))["path"] == "vectorized"


# ---- the iterator with reduced dimensions (what reductions plan on) ----

def test_row_sums_keep_rows_and_reduce_columns():
    it = core._iterate(view((4, 1)), view((4, 6)), reduced=(1,))
    assert it["shape"] == (4, 6) and it["reduced"] == (False, True)
    assert it["byte_strides"] == ((4, 0), (24, 4)) and it["numel"] == 24


def test_column_sums_keep_the_contiguous_dimension_inside():
    it = core._iterate(view((1, 6)), view((4, 6)), reduced=(0,))
    assert it["shape"] == (4, 6) and it["reduced"] == (True, False)
    assert it["byte_strides"] == ((0, 4), (24, 4))


def test_reduced_dimensions_merge_with_each_other():
    it = core._iterate(view((2, 1, 1)), view((2, 3, 4)), reduced=(1, 2))
    assert it["shape"] == (2, 12) and it["reduced"] == (False, True)
    assert it["byte_strides"] == ((4, 0), (48, 4))


def test_kept_dimensions_merge_around_a_reduced_one():
    it = core._iterate(view((2, 1, 3, 4)), view((2, 5, 3, 4)), reduced=(1,))
    assert it["shape"] == (2, 5, 12) and it["reduced"] == (False, True, False)


def test_a_reduced_dimension_never_merges_with_a_kept_one():
    it = core._iterate(view((1, 4)), view((3, 4)), reduced=(0,))
    assert it["shape"] == (3, 4) and it["reduced"] == (True, False)


def test_reducing_everything_is_one_reduced_dimension():
    it = core._iterate(view((1, 1, 1)), view((2, 3, 4)), reduced=(0, 1, 2))
    assert it["shape"] == (24,) and it["reduced"] == (True,) and it["byte_strides"] == ((0,), (4,))


def test_transposed_input_puts_its_contiguous_dimension_inside():
    # x = y.T for a contiguous (6, 4) y: x is (4, 6) with element strides (1, 4); summing x over
    # dimension 1 walks y's rows, so the reduced dimension goes outside and y's contiguous one in.
    it = core._iterate(view((4, 1)), view((4, 6), strides=(1, 4)), reduced=(1,))
    assert it["shape"] == (6, 4) and it["reduced"] == (True, False)
    assert it["byte_strides"] == ((0, 4), (16, 4))


def test_reduced_dimension_of_the_output_must_have_size_one():
    with pytest.raises(ValueError, match=r"argument 'out' has shape \(4, 6\).*size 1 in the reduced dimensions"):
        core._iterate(view((4, 6)), view((4, 6)), reduced=(1,))


def test_kept_dimension_must_match():
    with pytest.raises(ValueError, match=r"argument 'out' has shape \(5, 1\)"):
        core._iterate(view((5, 1)), view((4, 6)), reduced=(1,))


def test_reduction_of_an_empty_input_has_no_space():
    it = core._iterate(view((4, 1)), view((4, 0)), reduced=(1,))
    assert it["numel"] == 0 and it["shape"] == ()


def test_reduction_output_may_not_overlap_its_input():
    base = fake_pointer()
    with pytest.raises(ValueError, match=r"argument 'in0' overlaps 'out'"):
        core._iterate(view((4, 1), ptr=base), view((4, 6), ptr=base), reduced=(1,))
