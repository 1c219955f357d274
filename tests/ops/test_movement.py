"""Movement ops: transpose, pad, concat, slice, take/embedding vs numpy on odd shapes, random
configs of every template, and bad input."""

import numpy as np
import pytest

import autotune
from autotune.ops import movement as ops
from autotune.target import MAX_SHUFFLED_STRIDE, Target

RNG = np.random.default_rng(3)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (2, 0, 1), (0, 2, 1), (-1, 0, 1)])
def test_transpose_matches_numpy(axes):
    x = rand(5, 7, 19)
    np.testing.assert_array_equal(ops.transpose(x, axes), np.transpose(x, axes))


@pytest.mark.parametrize("shape,axes", [((33, 17), (1, 0)), ((3, 4, 5, 6), (3, 1, 2, 0)), ((5, 7, 19), (1, 0, 2))])
def test_every_transpose_config(shape, axes, check_configs):
    check_configs("transpose", n_random=100, exact=True, shape=shape, axes=axes)


@pytest.mark.parametrize("shape,axes", [((64, 48), (1, 0)), ((2, 32, 16, 16), (0, 2, 3, 1))])
def test_a_tiled_transpose_reads_shuffled_blocks_not_gathers(shape, axes):
    """The tile's rows unrolled around its vector of strided loads: one transposed block, which
    the codegen reads as rows and shuffles (tiles that fit the shape: no tail is gathered)."""
    task = autotune.create_task("transpose", shape=shape, axes=axes)
    f = autotune.build(*task.instantiate(0))
    source = f.get_source("ll-raw")
    assert "shufflevector" in source and "load float," not in source     # no lane loaded alone
    x = rand(*shape)
    out = np.empty(np.transpose(x, axes).shape, np.float32)
    f(x, out)
    np.testing.assert_array_equal(out, np.transpose(x, axes))


def test_permute_and_a_non_contiguous_input():
    x = rand(6, 11)
    np.testing.assert_array_equal(ops.permute(x, (1, 0)), x.T)
    np.testing.assert_array_equal(ops.transpose(x.T), x)


@pytest.mark.parametrize("pad_width,value", [(1, 0.0), ((2, 3), -1.5), (((0, 1), (2, 0), (3, 4)), 7.0)])
def test_pad_matches_numpy(pad_width, value):
    x = rand(3, 5, 9)
    np.testing.assert_array_equal(ops.pad(x, pad_width, value), np.pad(x, pad_width, constant_values=value))


@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap"])
@pytest.mark.parametrize("shape,pad_width", [((5, 7), ((2, 9), (3, 1))), ((1, 4, 3), ((2, 0), (3, 5), (0, 7)))])
def test_border_pad_matches_numpy(mode, shape, pad_width):
    """Widths past the axis (9 > 7, 7 > 3) repeat the mode's pattern, as numpy does."""
    x = rand(*shape)
    np.testing.assert_array_equal(ops.pad(x, pad_width, mode=mode), np.pad(x, pad_width, mode=mode))


@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap"])
def test_border_pad_rows_read_spans_not_gathers(mode):
    """The border selects put the interior in the branch where both hold, so loop partition
    splits the tiles that cross a border off a guard-free interior (contiguous loads), and the
    edge tiles' source columns are constants from one scalar: spans and shuffles, no lane
    loaded alone (rows of 61 padded by 3 and 2: a head tile, a masked tail). A wrap's head tile
    reads the row's last columns and its first: one span only while the row fits in the span a
    vector may load, (lanes - 1) * MAX_SHUFFLED_STRIDE + 1 elements (29 with AVX2's 8 lanes)."""
    lanes = Target("llvm").cpu.vector_bytes // 4
    width = 61 if mode != "wrap" else min(61, (lanes - 1) * MAX_SHUFFLED_STRIDE + 1)
    task = autotune.create_task("border_pad", shape=(64, width), pad_before=(0, 3), pad_after=(0, 2), mode=mode)
    f = autotune.build(*task.instantiate(task.config(task.default_index)))
    assert "extractelement" not in f.get_source("ll-raw")
    x = rand(64, width)
    out = np.empty((64, width + 5), np.float32)
    f(x, out)
    np.testing.assert_array_equal(out, np.pad(x, ((0, 0), (3, 2)), mode=mode))


def test_pad_integers_and_the_value_a_float_parameter():
    x = RNG.integers(-9, 9, size=(4, 7)).astype(np.int32)
    widths = ((1, 0), (0, 2))
    np.testing.assert_array_equal(ops.pad(x, widths, value=-3), np.pad(x, widths, constant_values=-3))
    for v, text in ((0, "0.0"), (-1.5, "-1.5"), (1e-30, "1e-30"), (2.0 ** 40, "1099511627776.0")):
        task = autotune.create_task("pad", shape=(3,), pad_before=(1,), pad_after=(0,), value=v)
        assert task.workload_key == f"pad(shape=3,pad_before=1,pad_after=0,value={text})float32"


@pytest.mark.parametrize("axis,parts", [(0, [2, 3]), (1, [4, 1, 7]), (-1, [5, 5])])
def test_concat_matches_numpy(axis, parts):
    base = [3, 6, 5]
    arrays = []
    for n in parts:
        shape = list(base)
        shape[axis] = n
        arrays.append(rand(*shape))
    np.testing.assert_array_equal(ops.concat(arrays, axis), np.concatenate(arrays, axis))


def test_concat_of_one_array_with_itself():
    x = rand(3, 4)
    np.testing.assert_array_equal(ops.concat([x, x], 1), np.concatenate([x, x], 1))


@pytest.mark.parametrize("begin,end,step", [
    ((1, 0), (8, 37), (1, 1)), ((0, -3), (9, 2), (2, -3)), ((None, None), (None, None), (-1, -2)),
    ((-4, 5), (None, -1), None), ((2, 36), (3, 0), (1, -7)),
])
def test_slice_matches_python_slicing(begin, end, step):
    x = rand(9, 37)
    st = step or (1, 1)
    want = x[tuple(slice(b, e, s) for b, e, s in zip(begin, end, st))]
    np.testing.assert_array_equal(ops.slice(x, begin, end, step), want)


def test_take_and_embedding():
    w = rand(11, 37)
    idx = np.array([[0, -1, 3], [10, 2, -11]])
    np.testing.assert_array_equal(ops.take(w, idx), w[idx])
    np.testing.assert_array_equal(ops.embedding(idx.astype(np.int64), w), w[idx])
    v = rand(13)
    np.testing.assert_array_equal(ops.take(v, np.array(5)), v[5])


@pytest.mark.parametrize("op,params", [
    ("transpose", dict(shape=(5, 7, 19), axes=(2, 0, 1))),
    ("pad", dict(shape=(5, 19), pad_before=(1, 2), pad_after=(0, 3), value=-1.5)),
    ("border_pad", dict(shape=(5, 19), pad_before=(1, 20), pad_after=(4, 3), mode="reflect")),
    ("concat", dict(shape=(5, 37), axis=1, sizes=(10, 20, 7))),
    ("concat", dict(shape=(9, 5), axis=0, sizes=(4, 5))),
    ("slice", dict(shape=(9, 37), begin=(1, -3), end=(8, 2), step=(2, -3))),
    ("take", dict(weight_shape=(11, 37), indices_shape=(3, 5))),
])
def test_random_configs_of_movement_templates(op, params, check_configs):
    check_configs(op, n_random=3, exact=True, **params)


@pytest.mark.parametrize("call,error,words", [
    (lambda x: ops.transpose(x, (0, 0, 1)), ValueError, ["transpose", "axes", "permutation"]),
    (lambda x: ops.transpose(x, "01"), TypeError, ["transpose", "axes"]),
    (lambda x: ops.pad(x, ((1, 2),) * 4), ValueError, ["pad", "pad_width"]),
    (lambda x: ops.pad(x, -1), ValueError, ["pad", "pad_width", ">= 0"]),
    (lambda x: ops.pad(x.astype(np.int32), 1, value=0.5), TypeError, ["pad", "value", "int32"]),
    (lambda x: ops.pad(x, 1, mode="symmetric"), ValueError, ["pad", "mode", "reflect"]),
    (lambda x: ops.pad(x, 1, value=2.0, mode="edge"), ValueError, ["pad", "value", "constant"]),
    (lambda x: ops.concat([x]), ValueError, ["concat", "tensors", "2 or more"]),
    (lambda x: ops.concat([x, x[:, :2, :2]], 1), ValueError, ["concat", "tensors[1]", "(3, 2, 2)"]),
    (lambda x: ops.concat([x, x.astype(np.float64)], 0), TypeError, ["concat", "tensors[1]=float64"]),
    (lambda x: ops.concat([x, x], 3), ValueError, ["concat", "axis"]),
    (lambda x: ops.slice(x, (0, 0), (1, 1)), ValueError, ["slice", "begin", "one entry per dimension"]),
    (lambda x: ops.slice(x, (0, 0, 0), (1, 1, 1), (1, 0, 1)), ValueError, ["slice", "step"]),
    (lambda x: ops.slice(x, (2, 0, 0), (1, 5, 7), None), ValueError, ["slice", "empty"]),
    (lambda x: ops.take(x, np.array([3])), ValueError, ["take", "indices", "3"]),
    (lambda x: ops.take(x, np.array([0.5])), TypeError, ["take", "indices", "integer"]),
])
def test_bad_input_names_the_op_and_the_argument(call, error, words):
    with pytest.raises(error) as exc:
        call(rand(3, 5, 7))
    assert all(w in str(exc.value) for w in words), str(exc.value)


def test_bad_template_parameters():
    with pytest.raises(ValueError, match="concat: parameter sizes"):
        autotune.create_task("concat", shape=(5, 4), axis=0, sizes=(2, 2))
    with pytest.raises(ValueError, match="transpose: parameter axes"):
        autotune.create_task("transpose", shape=(5, 4), axes=(0, 1, 2))
