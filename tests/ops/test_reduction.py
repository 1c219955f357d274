"""Reductions and pooling: every op vs numpy over many axis sets and keepdims on odd shapes,
argmax's and argmin's first-occurrence rule, random configs of every template, and bad input."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import autotune
from autotune.ir.functor import walk
from autotune.ir.nodes import Allocate, For, ForKind, Ramp, Store
from autotune.ops import pooling as pool_ops
from autotune.ops import reduction as ops

RNG = np.random.default_rng(9)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


AXES = [None, 0, 1, 2, -1, (0, 2), (1, 2), (0, 1), (0, 1, 2)]
NUMPY = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "var": np.var}


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("op", sorted(NUMPY))
def test_reduction_matches_numpy(op, axis, keepdims):
    x = rand(5, 7, 19)
    got = getattr(ops, op)(x, axis=axis, keepdims=keepdims)
    want = NUMPY[op](x.astype(np.float64), axis=axis, keepdims=keepdims)
    assert got.shape == np.shape(want) and got.dtype == x.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_arg_reductions_take_the_first_extreme(op, axis):
    x = RNG.integers(0, 3, size=(6, 23)).astype(np.int32)        # many ties
    got = getattr(ops, op)(x, axis=axis)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, getattr(np, op)(x, axis=axis))
    np.testing.assert_array_equal(getattr(ops, op)(x, axis=axis, keepdims=True),
                                  getattr(np, op)(x, axis=axis, keepdims=True))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions_over_several_axes_index_the_flattened_block(op):
    x = rand(4, 5, 6)
    got = getattr(ops, op)(x, axis=(0, 2))
    want = getattr(np, op)(np.transpose(x, (1, 0, 2)).reshape(5, -1), axis=1)
    np.testing.assert_array_equal(got, want)


def test_integer_sum_stays_in_its_dtype():
    x = RNG.integers(-100, 100, size=(9, 31)).astype(np.int32)
    got = ops.sum(x, axis=1)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, x.sum(axis=1))
    np.testing.assert_array_equal(ops.max(x, axis=0), x.max(axis=0))


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "argmax", "argmin", "var"])
@pytest.mark.parametrize("axes,keepdims", [((2,), 0), ((0,), 1), ((0, 2), 0)])
def test_random_configs_of_reduction_templates(op, axes, keepdims, check_configs):
    check_configs(op, shape=(3, 5, 37), axes=axes, keepdims=keepdims)


@pytest.mark.parametrize("op,lanes", [("sum", 16), ("max", 8), ("var", 32), ("argmax", 16)])
def test_lane_partials_are_vector_accumulators_at_the_row(op, lanes, check_configs):
    task = check_configs(op, n_random=0, shape=(6, 101), axes=(1,), keepdims=0)
    s, args = task.instantiate(task.config_space.from_json({"knobs": {"lanes": lanes, "parallel": 1}}))
    func = autotune.lower(s, args)
    loops, allocs, stores = [], [], []
    walk(func.body, lambda n: loops.append(n) if isinstance(n, For) else allocs.append(n) if isinstance(n, Allocate)
         else stores.append(n) if isinstance(n, Store) else None)
    assert loops[0].kind is ForKind.PARALLEL and loops[0].extent == 6
    lane_bufs = [a.buffer for a in allocs if a.buffer.name.endswith(".lanes")]
    assert lane_bufs and all(b.shape in ((lanes,), (1, lanes)) for b in lane_bufs)
    assert any(st.buffer in lane_bufs and isinstance(st.index, Ramp) and st.index.lanes == lanes for st in stores)
    x = rand(6, 101)
    inputs = [x]
    f = autotune.build(s, args)
    out = np.zeros(task.arg_specs[-1][0], task.arg_specs[-1][1])
    f(*inputs, out)
    want = task.reference(inputs)[0]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "argmax", "var"])
@pytest.mark.parametrize("shape,axes,keepdims", [((2, 6, 7, 7), (2, 3), 1), ((3, 5, 3, 11), (0, 2, 3), 0),
                                                 ((4, 3, 5, 2), (1, 2, 3), 0)])
def test_lane_partials_run_along_the_flattened_trailing_reduced_axes(op, shape, axes, keepdims, check_configs):
    """A global average pool's row is its H x W plane: the rule's lane partials run along the
    trailing reduced axes flattened (49 elements, not the 7 of the last axis), with a tail."""
    task = check_configs(op, n_random=4, shape=shape, axes=axes, keepdims=keepdims)
    assert task.config(0).to_json()["knobs"]["lanes"] > 1


def test_a_row_tails_loads_are_masked_not_read_past_the_row():
    """The last block of lane partials covers 5 elements past a 101-element row (past the
    buffer, on the last row): the reduction's condition must predicate its loads, not only
    select their values away."""
    from autotune.ir.nodes import Load
    from autotune.te.expr import Select
    task = autotune.create_task("sum", shape=(6, 101), axes=(1,), keepdims=0)
    s, args = task.instantiate(task.config_space.from_json({"knobs": {"lanes": 16, "parallel": 1}}))
    func = autotune.lower(s, args)
    x = func.params[0]
    selected = []
    walk(func.body, lambda n: selected.extend(m for m in (n.t, n.f) if isinstance(m, Load) and m.buffer is x)
         if isinstance(n, Select) else None)
    assert selected and all(load.predicate is not None for load in selected)


def np_pool(x, k, s, p, kind):
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])),
                constant_values=-np.inf if kind == "max" else 0.0)
    ones = np.pad(np.ones_like(x, dtype=np.float64), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    oh, ow = (xp.shape[2] - k[0]) // s[0] + 1, (xp.shape[3] - k[1]) // s[1] + 1
    out = np.empty(x.shape[:2] + (oh, ow))
    for y in range(oh):
        for z in range(ow):
            win = xp[:, :, y * s[0]:y * s[0] + k[0], z * s[1]:z * s[1] + k[1]]
            cnt = ones[:, :, y * s[0]:y * s[0] + k[0], z * s[1]:z * s[1] + k[1]].sum(axis=(2, 3))
            out[:, :, y, z] = win.max(axis=(2, 3)) if kind == "max" else win.sum(axis=(2, 3)) / cnt
    return out


@pytest.mark.parametrize("k,s,p", [((3, 3), (2, 2), (1, 1)), ((2, 2), (2, 2), (0, 0)), ((3, 2), (1, 2), (1, 0))])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling_matches_numpy(kind, k, s, p):
    x = rand(2, 3, 13, 17)
    fn = pool_ops.max_pool2d if kind == "max" else pool_ops.avg_pool2d
    np.testing.assert_allclose(fn(x, k, s, p), np_pool(x, k, s, p, kind), rtol=1e-5, atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 3), st.integers(0, 1), st.integers(0, 1), st.integers(0, 2**31 - 1))
def test_max_pool_indices_are_the_first_max_of_each_window(H, W, kh, kw, sh, sw, ph, pw, seed):
    """Small integers tie in most windows: the index is the first maximum in row-major window
    order, h * W + w within its plane, and it holds the window's value."""
    assume(2 * ph <= kh and 2 * pw <= kw and H + 2 * ph >= kh and W + 2 * pw >= kw)
    x = np.random.default_rng(seed).integers(-2, 3, (2, 3, H, W)).astype(np.float32)
    y, idx = pool_ops.max_pool2d(x, (kh, kw), (sh, sw), (ph, pw), return_indices=True)
    assert idx.dtype == np.int64 and idx.shape == y.shape
    for n, c, oy, ox in np.ndindex(*y.shape):
        window = [(h, w) for h in range(oy * sh - ph, oy * sh - ph + kh) for w in range(ox * sw - pw, ox * sw - pw + kw)
                  if 0 <= h < H and 0 <= w < W]
        values = [x[n, c, h, w] for h, w in window]
        h, w = window[int(np.argmax(values))]
        assert idx[n, c, oy, ox] == h * W + w and y[n, c, oy, ox] == max(values)


def test_avg_pool_counts_only_valid_elements_and_global_pool():
    x = np.ones((1, 2, 5, 5), np.float32)
    np.testing.assert_array_equal(pool_ops.avg_pool2d(x, 3, 1, 1), np.ones((1, 2, 5, 5)))
    x = rand(2, 3, 11, 9)
    np.testing.assert_allclose(pool_ops.global_avg_pool(x), x.mean(axis=(2, 3), keepdims=True), rtol=1e-5, atol=1e-6)
    assert pool_ops.max_pool2d(x, 2).shape == (2, 3, 5, 4)          # stride defaults to the kernel


@pytest.mark.parametrize("op,params", [
    ("max_pool2d", dict(shape=(2, 3, 13, 17), kernel=(3, 3), stride=(2, 2), padding=(1, 1))),
    ("avg_pool2d", dict(shape=(1, 2, 9, 23), kernel=(2, 3), stride=(1, 2), padding=(1, 1))),
    # rows of 75 and 112 outputs, in plain pieces and a masked tail with AVX-512 (codegen's masked tails)
    ("max_pool2d", dict(shape=(1, 3, 7, 75), kernel=(3, 3), stride=(1, 1), padding=(1, 1))),
    ("avg_pool2d", dict(shape=(1, 2, 7, 223), kernel=(3, 3), stride=(2, 2), padding=(1, 1))),
    ("global_avg_pool", dict(shape=(2, 3, 7, 9))),
])
def test_random_configs_of_pooling_templates(op, params, check_configs):
    check_configs(op, n_random=3, **params)


@pytest.mark.parametrize("call,error,words", [
    (lambda x: ops.sum(x, axis=3), ValueError, ["sum", "axis", "3"]),
    (lambda x: ops.max(x, axis=(0, 0)), ValueError, ["max", "axis", "repeats"]),
    (lambda x: ops.mean(x.astype(np.int32)), TypeError, ["mean", "x", "int32"]),
    (lambda x: ops.var(x.tolist()), TypeError, ["var", "x", "list"]),
    (lambda x: ops.argmax(x, axis=1.5), TypeError, ["argmax", "axis"]),
    (lambda x: ops.min(np.array(1.0, np.float32)), ValueError, ["min", "x", "0-d"]),
    (lambda x: pool_ops.max_pool2d(x, 2), ValueError, ["max_pool2d", "4-d"]),
    (lambda x: pool_ops.avg_pool2d(x[None], 3, 1, 2), ValueError, ["avg_pool2d", "padding"]),
    (lambda x: pool_ops.max_pool2d(x[None], (2, 2, 2)), ValueError, ["max_pool2d", "kernel"]),
    (lambda x: pool_ops.global_avg_pool(x[None].astype(np.int32)), TypeError, ["global_avg_pool", "x", "int32"]),
])
def test_bad_input_names_the_op_and_the_argument(call, error, words):
    with pytest.raises(error) as exc:
        call(rand(3, 5, 7))
    assert all(w in str(exc.value) for w in words), str(exc.value)


def test_bad_template_parameters():
    with pytest.raises(ValueError, match="sum: parameter keepdims"):
        autotune.create_task("sum", shape=(3, 4), axes=(1,), keepdims=2)
    with pytest.raises(ValueError, match="mean: axis 5 is out of range"):
        autotune.create_task("mean", shape=(3, 4), axes=(5,), keepdims=0)
