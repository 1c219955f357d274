"""ONNX nodes whose import is a decomposition, compiled for real (`compile_model`, fused kernels on
the CPU) and compared with onnxruntime: pools the templates cannot take in one kernel, max
pooling's indices, border
padding, composite reductions, arg reductions of the last index, rank-0 values inside a fused
chain, and tensors with no elements."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from autotune.graph import compile_model

sys.path.insert(0, os.path.dirname(__file__))
pytest.importorskip("onnxruntime")
from onnx import helper
from onnx_helpers import make_model, ort_run

F = np.float32
RNG = np.random.default_rng(17)


def _check(model, feeds, rtol=1e-5, atol=1e-5):
    got = compile_model(model)(*feeds.values())
    for g, want in zip(got, ort_run(model, feeds), strict=True):
        assert g.shape == want.shape and g.dtype == want.dtype
        np.testing.assert_allclose(g, want, rtol=rtol, atol=atol)


def _one(op, x, inits=None, opset=18, **attrs):
    node = helper.make_node(op, ["x", *(inits or {})], ["y"], name="n", **attrs)
    return make_model([node], {"x": (x.shape, x.dtype)}, ["y"], inits, opset), {"x": x}


@pytest.mark.parametrize("op,attrs", [
    ("AveragePool", dict(kernel_shape=[3, 2], strides=[2, 2], pads=[0, 1, 2, 0], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], pads=[2, 1, 1, 2], count_include_pad=1)),
    ("MaxPool", dict(kernel_shape=[3, 2], dilations=[2, 3], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[2, 3], dilations=[3, 1], strides=[1, 2])),
])
def test_pools_outside_the_templates(op, attrs):
    _check(*_one(op, RNG.standard_normal((2, 3, 13, 11)).astype(F), opset=19, **attrs))   # AveragePool dilations: 19


@pytest.mark.parametrize("op,shape,attrs", [
    ("AveragePool", (1, 37, 7, 7), dict(kernel_shape=[7, 7])),
    ("AveragePool", (2, 5, 7, 9), dict(kernel_shape=[7, 9], strides=[7, 9], ceil_mode=1)),
    ("MaxPool", (1, 19, 13, 13), dict(kernel_shape=[13, 13], strides=[2, 2])),
    ("AveragePool", (2, 3, 97), dict(kernel_shape=[97])),
])
def test_a_window_over_the_whole_input_is_the_global_pool(op, shape, attrs):
    """ResNet's 7x7 AveragePool at 7x7 imports as one global pool, with onnxruntime's values."""
    from autotune.frontend.onnx import load

    model, feeds = _one(op, RNG.standard_normal(shape).astype(F), **attrs)
    assert [n.op for n in load(model).nodes if not n.is_view] == ["global_avg_pool" if op == "AveragePool" else "max"]
    _check(model, feeds)


def test_a_3d_pool_runs_one_axis_at_a_time():
    x = RNG.standard_normal((1, 2, 5, 7, 6)).astype(F)
    _check(*_one("AveragePool", x, kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[1, 0, 1, 1, 1, 0]))
    _check(*_one("MaxPool", x, kernel_shape=[3, 2, 2], strides=[2, 1, 2]))


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),                      # one max_pool2d kernel
    dict(kernel_shape=[3, 2], strides=[2, 1], dilations=[2, 1], pads=[1, 0, 2, 1], ceil_mode=1, storage_order=1),
    dict(kernel_shape=[2, 3], storage_order=1),
    dict(kernel_shape=[4], strides=[3], pads=[1, 2]),                                   # 1-d
])
def test_max_pool_indices_point_at_the_first_max_as_onnxruntimes_do(attrs):
    """Small integers make ties in most windows: the first maximum in row-major window order
    wins, numbered in x flattened (column-major within a plane with storage_order=1)."""
    shape = (2, 3, 13) if len(attrs["kernel_shape"]) == 1 else (2, 3, 13, 11)
    x = RNG.integers(-3, 4, shape).astype(F)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], name="n", **attrs)
    _check(make_model([node], {"x": (x.shape, x.dtype)}, ["y", "i"], None, 18), {"x": x})


@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap"])
def test_border_padding(mode):
    x = RNG.standard_normal((2, 5, 7)).astype(F)
    _check(*_one("Pad", x, {"p": np.array([0, 2, 3, 0, 4, 6])}, mode=mode))


@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"])
def test_composite_reductions(op):
    x = RNG.uniform(0.5, 2.0, (3, 17, 5)).astype(F)
    _check(*_one(op, x, {"axes": np.array([1])}, keepdims=0), rtol=1e-4)


def test_log_sum_exp_does_not_overflow():
    x = (RNG.standard_normal((4, 9)) * 10 + 200).astype(F)          # exp(200) overflows float32
    model, _ = _one("ReduceLogSumExp", x, {"axes": np.array([-1])})
    got = compile_model(model)(x)[0]
    want = np.log(np.exp(x.astype(np.float64) - 200).sum(axis=-1, keepdims=True)) + 200
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_select_last_index_takes_the_last_of_ties(op):
    x = RNG.integers(0, 3, (4, 7, 5)).astype(F)                       # many ties
    _check(*_one(op, x, axis=1, keepdims=0, select_last_index=1))


def test_a_rank_0_value_inside_a_fused_chain():
    """Sqrt of a rank-0 input feeds a broadcast Mul: the scalar kernel's result is viewed back to
    rank 0 and read inside the fused kernel."""
    nodes = [helper.make_node("Sqrt", ["s"], ["r"]), helper.make_node("Mul", ["x", "r"], ["y"])]
    model = make_model(nodes, {"x": ((3, 5), F), "s": ((), F)}, ["y"])
    _check(model, {"x": RNG.standard_normal((3, 5)).astype(F), "s": np.array(2.5, F)})


def test_tensors_with_no_elements():
    """A slice that keeps nothing is an empty output with no kernel; reducing an empty axis gives
    ONNX's identity (0 for a sum, -inf for a max)."""
    nodes = [helper.make_node("Slice", ["x", "b", "e"], ["none"]),
             helper.make_node("ReduceSum", ["none", "ax"], ["total"], keepdims=1),
             helper.make_node("ReduceMax", ["none", "ax"], ["top"], keepdims=0),
             helper.make_node("Add", ["x", "x"], ["y"])]
    consts = {"b": np.array([4]), "e": np.array([4]), "ax": np.array([1])}
    model = make_model(nodes, {"x": ((3, 7), F)}, ["none", "total", "top", "y"], consts, opset=18)
    _check(model, {"x": RNG.standard_normal((3, 7)).astype(F)})


def _dropout(training_init=None, ratio_init=None):
    """Dropout(x, ratio, training_mode) with each of ratio and training_mode a model input, or the
    constant given."""
    inits = {k: v for k, v in (("r", ratio_init), ("t", training_init)) if v is not None}
    inputs = {"x": ((3, 5), F), **{k: ((), dt) for k, dt in (("r", F), ("t", np.bool_)) if k not in inits}}
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop")
    return make_model([node], inputs, ["y"], inits, 18)


def test_dropout_whose_inputs_ask_for_training_is_an_error_never_the_identity():
    x = RNG.standard_normal((3, 5)).astype(F)
    m = compile_model(_dropout())
    for t, r in ((False, 0.5), (True, 0.0)):            # inference, or a drop ratio of 0: the identity
        np.testing.assert_array_equal(m.run({"x": x, "r": np.array(r, F), "t": np.array(t)})[0], x)
    with pytest.raises(ValueError, match=r"node 'drop' \(Dropout\): training_mode is true with ratio 0.5"):
        m.run({"x": x, "r": np.array(0.5, F), "t": np.array(True)})
    fixed_ratio = compile_model(_dropout(ratio_init=np.array(0.25, F)))
    with pytest.raises(ValueError, match=r"training_mode is true with ratio 0\.25"):
        fixed_ratio.run({"x": x, "t": np.array(True)})
    np.testing.assert_array_equal(fixed_ratio.run({"x": x, "t": np.array(False)})[0], x)


def test_dropout_with_constant_training_is_unsupported_at_load_unless_its_ratio_is_zero():
    with pytest.raises(ValueError, match=r"Dropout 'drop': training_mode is true with ratio 0.5: training-mode"):
        compile_model(_dropout(training_init=np.array(True), ratio_init=np.array(0.5, F)))
    m = compile_model(_dropout(training_init=np.array(True), ratio_init=np.array(0.0, F)))
    x = RNG.standard_normal((3, 5)).astype(F)
    np.testing.assert_array_equal(m.run({"x": x})[0], x)
