"""The ONNX mapping, checked numerically without the runtime: each small model is imported, run by
the numpy interpreter (every node through its template's numpy reference) and compared with
onnxruntime. Shapes are odd so transposes and views cannot hide a wrong axis."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import autotune.frontend.onnx as frontend

sys.path.insert(0, os.path.dirname(__file__))
from numpy_eval import run
from onnx_helpers import check_against_ort, make_model, random_feeds, requires_templates

F = np.float32
rng = np.random.default_rng(1)


def w(*shape: int) -> np.ndarray:
    return rng.uniform(-1, 1, size=shape).astype(F)


def one(op: str, shapes: list[tuple[int, ...]], opset: int = 17, inits: dict | None = None, **attrs):
    """A model of one node whose inputs are x0, x1, ... (float32) and then the initializers."""
    names = [f"x{k}" for k in range(len(shapes))]
    node = helper.make_node(op, names + list(inits or {}), ["y"], name="n0", **attrs)
    return make_model([node], {n: (s, F) for n, s in zip(names, shapes)}, ["y"], inits, opset)


CASES = {
    # convolutions
    "conv_bias_pads": lambda: one("Conv", [(2, 3, 9, 7)], inits={"w": w(5, 3, 3, 3), "b": w(5)}, pads=[1, 2, 0, 1]),
    "conv_stride_dilation": lambda: one("Conv", [(1, 4, 11, 9)], inits={"w": w(6, 2, 3, 3)}, strides=[2, 1],
                                        dilations=[1, 2], group=2),
    "conv_depthwise_same": lambda: one("Conv", [(1, 6, 7, 7)], inits={"w": w(6, 1, 3, 3), "b": w(6)}, group=6,
                                       auto_pad="SAME_UPPER", strides=[2, 2]),
    "conv1d": lambda: one("Conv", [(2, 3, 13)], inits={"w": w(4, 3, 3), "b": w(4)}, pads=[2, 1], strides=[2]),
    # products
    "gemm_transB_bias": lambda: one("Gemm", [(3, 5)], inits={"B": w(7, 5), "C": w(7)}, transB=1),
    "gemm_alpha_beta": lambda: one("Gemm", [(5, 3), (5, 7)], inits={"C": w(3, 7)}, transA=1, alpha=0.5, beta=2.0),
    "gemm_runtime_alpha": lambda: one("Gemm", [(3, 5), (5, 7)], alpha=3.0),
    "matmul_2d": lambda: one("MatMul", [(3, 5)], inits={"B": w(5, 7)}),
    "matmul_nd_by_2d": lambda: one("MatMul", [(2, 3, 5)], inits={"B": w(5, 7)}),
    "matmul_batched": lambda: one("MatMul", [(2, 3, 5, 4), (2, 3, 4, 7)]),
    "matmul_vector": lambda: one("MatMul", [(2, 3, 5), (5,)]),
    # elementwise
    "add_broadcast": lambda: one("Add", [(2, 3, 5), (3, 1)]),
    "sub_scalar_const": lambda: one("Sub", [(3, 5)], inits={"s": np.asarray(1.5, F)}),
    "mul_scalars": lambda: one("Mul", [(), ()]),
    "div": lambda: one("Div", [(3, 5), (5,)]),
    "max_variadic": lambda: one("Max", [(3, 5), (5,), (3, 1)]),
    "mean_variadic": lambda: one("Mean", [(3, 5), (5,)]),
    "relu": lambda: one("Relu", [(3, 5)]),
    "sigmoid": lambda: one("Sigmoid", [(3, 5)]),
    "tanh": lambda: one("Tanh", [(3, 5)]),
    "exp": lambda: one("Exp", [(3, 5)]),
    "neg_abs_reciprocal": lambda: one("Reciprocal", [(3, 5)]),
    "gelu_tanh": lambda: one("Gelu", [(3, 5)], opset=20, approximate="tanh"),
    "gelu": lambda: one("Gelu", [(3, 5)], opset=20),
    # reductions and rows
    "reduce_sum_input_axes": lambda: one("ReduceSum", [(3, 5, 4)], inits={"axes": np.array([0, -1])}, keepdims=0),
    "reduce_mean_attr_axes": lambda: one("ReduceMean", [(3, 5, 4)], opset=17, axes=[1]),
    "reduce_max_all": lambda: one("ReduceMax", [(3, 5)], opset=18, keepdims=0),
    "reduce_noop_empty_axes": lambda: one("ReduceSum", [(3, 5)], opset=18, noop_with_empty_axes=1),
    "reduce_min_empty_axes": lambda: one("ReduceMin", [(3, 5)], opset=18, inits={"a": np.zeros(0, np.int64)}),
    "softmax_axis1": lambda: one("Softmax", [(3, 5, 4)], axis=1),
    "softmax_axis1_4d": lambda: one("Softmax", [(2, 3, 5, 4)], axis=1),
    "log_softmax_last": lambda: one("LogSoftmax", [(3, 5, 4)]),
    "layer_norm": lambda: one("LayerNormalization", [(2, 3, 5)], inits={"g": w(3, 5), "b": w(5)}, axis=1,
                              epsilon=1e-3),
    "batch_norm": lambda: one("BatchNormalization", [(2, 3, 5, 7)],
                              inits={"s": w(3), "b": w(3), "m": w(3), "v": np.abs(w(3)) + 0.5}),
    "batch_norm_3d": lambda: one("BatchNormalization", [(2, 3, 5)],
                                 inits={"s": w(3), "b": w(3), "m": w(3), "v": np.abs(w(3)) + 0.5}),
    # pooling
    "maxpool_pads": lambda: one("MaxPool", [(1, 3, 9, 7)], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
    "maxpool_asym_ceil": lambda: one("MaxPool", [(1, 3, 8, 7)], kernel_shape=[3, 2], pads=[0, 1, 1, 0],
                                     strides=[2, 2], ceil_mode=1),
    "maxpool_1d": lambda: one("MaxPool", [(2, 3, 9)], kernel_shape=[3], strides=[2]),
    "avgpool": lambda: one("AveragePool", [(1, 3, 9, 7)], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    "avgpool_count_pad": lambda: one("AveragePool", [(1, 3, 9, 7)], kernel_shape=[3, 2], pads=[1, 0, 1, 1],
                                     count_include_pad=1),
    "global_avgpool": lambda: one("GlobalAveragePool", [(2, 3, 5, 7)]),
    # movement
    "transpose": lambda: one("Transpose", [(2, 3, 5)], perm=[2, 0, 1]),
    "concat": lambda: one("Concat", [(2, 3), (2, 5), (2, 1)], axis=1),
    "slice_negative_step": lambda: one("Slice", [(7, 5)], inits={"s": np.array([-1, 1]), "e": np.array([-100, 4]),
                                                                 "a": np.array([0, 1]), "st": np.array([-2, 1])}),
    "gather_axis1": lambda: one("Gather", [(3, 5, 4)], inits={"i": np.array([[4, -1], [0, 2]])}, axis=1),
    "gather_scalar": lambda: one("Gather", [(3, 5, 4)], inits={"i": np.array(-2)}, axis=1),
    "pad": lambda: one("Pad", [(3, 5)], inits={"p": np.array([1, 0, 2, 3]), "v": np.array(0.5, F)}),
    "flatten": lambda: one("Flatten", [(2, 3, 5)], axis=2),
}


@pytest.mark.parametrize("case", CASES)
def test_matches_onnxruntime(case: str) -> None:
    check_against_ort(CASES[case]())


def test_split_outputs() -> None:
    node = helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=1)
    check_against_ort(make_model([node], {"x": ((3, 9), F)}, ["a", "b", "c"], {"s": np.array([2, 3, 4])}, 13))


def test_split_num_outputs_opset18() -> None:
    node = helper.make_node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)
    check_against_ort(make_model([node], {"x": ((7, 2), F)}, ["a", "b", "c"], opset=18))


@requires_templates("greater")
def test_where_and_compare() -> None:
    nodes = [helper.make_node("Greater", ["x", "z"], ["c"]), helper.make_node("Where", ["c", "x", "z"], ["y"])]
    check_against_ort(make_model(nodes, {"x": ((3, 5), F), "z": ((5,), F)}, ["y"]))


def test_where_of_a_bool_input() -> None:
    node = helper.make_node("Where", ["c", "x", "z"], ["y"])
    check_against_ort(make_model([node], {"c": ((3, 1), np.bool_), "x": ((3, 5), F), "z": ((), F)}, ["y"]))


def test_pow_by_an_integer_constant() -> None:
    node = helper.make_node("Pow", ["x", "e"], ["y"])
    check_against_ort(make_model([node], {"x": ((3, 5), F)}, ["y"], {"e": np.array(3)}))


@pytest.mark.parametrize("exponent, ops", [(1.0, []), (2.0, ["mul"]), (3.0, ["mul", "mul"]), (0.5, ["power"]),
                                           (-2.0, ["power"])])
def test_pow_by_a_small_constant_is_products(exponent, ops) -> None:
    """x ** 1, 2, 3 as x, x*x, x*x*x (as onnxruntime does); other exponents by "power"."""
    node = helper.make_node("Pow", ["x", "e"], ["y"])
    model = make_model([node], {"x": ((3, 5), F)}, ["y"], {"e": np.array([exponent], F)})
    assert [n.op for n in frontend.load(model).nodes if not n.is_view] == ops
    check_against_ort(model)


NEW = {
    "erf": (lambda: one("Erf", [(3, 5)]), ("erf",)),
    "leaky_relu": (lambda: one("LeakyRelu", [(3, 5)], alpha=0.1), ("leaky_relu",)),
    "elu": (lambda: one("Elu", [(3, 5)]), ("elu",)),
    "hard_sigmoid": (lambda: one("HardSigmoid", [(3, 5)], alpha=0.3), ("hard_sigmoid",)),
    "hard_swish": (lambda: one("HardSwish", [(3, 5)]), ("hard_swish",)),
    "clip": (lambda: one("Clip", [(3, 5)], inits={"lo": np.array(-0.5, F)}), ("clip",)),
    "matmul_broadcast": (lambda: one("MatMul", [(3, 5), (2, 1, 5, 7)]), ("expand",)),
    "expand": (lambda: one("Expand", [(3, 1)], inits={"s": np.array([2, 3, 5])}), ("expand",)),
    "gather_runtime_indices": (lambda: make_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)],
                                                  {"x": ((3, 5, 4), F), "i": ((2, 3), np.int64)}, ["y"]), ("cast",)),
    "argmax": (lambda: one("ArgMax", [(3, 5, 4)], axis=1, keepdims=0), ("argmax", "cast")),
    "argmin_last": (lambda: one("ArgMin", [(3, 5, 4)], axis=-1, select_last_index=1), ("slice", "argmin", "sub")),
    "instance_norm": (lambda: one("InstanceNormalization", [(2, 3, 5, 4)], inits={"s": w(3), "b": w(3)}),
                      ("instance_norm",)),
    "conv_transpose": (lambda: one("ConvTranspose", [(1, 4, 5, 6)], inits={"w": w(4, 3, 3, 3), "b": w(3)},
                                   strides=[2, 2], pads=[1, 0, 1, 0], output_padding=[1, 1]), ("conv_transpose2d",)),
    "avg_pool_asymmetric_ceil": (lambda: one("AveragePool", [(1, 3, 11, 9)], kernel_shape=[3, 2], strides=[2, 2],
                                             pads=[0, 1, 2, 0], ceil_mode=1), ("pad", "avg_pool2d", "mul")),
    "avg_pool_count_pads": (lambda: one("AveragePool", [(1, 3, 7, 9)], kernel_shape=[3, 3], pads=[2, 1, 1, 2],
                                        count_include_pad=1), ("pad", "avg_pool2d", "mul")),
    "max_pool_dilated": (lambda: one("MaxPool", [(1, 2, 11, 10)], kernel_shape=[3, 2], dilations=[2, 3],
                                     pads=[1, 1, 1, 1]), ("pad", "slice", "maximum")),
    "avg_pool_3d": (lambda: one("AveragePool", [(1, 2, 5, 7, 6)], kernel_shape=[2, 3, 2], strides=[1, 2, 2],
                                pads=[1, 0, 1, 1, 1, 0]), ("pad", "avg_pool2d", "mul")),
    "max_pool_1d_dilated_ceil": (lambda: one("MaxPool", [(2, 3, 13)], kernel_shape=[3], strides=[2], dilations=[2],
                                             ceil_mode=1), ("pad", "slice", "maximum")),
    "pad_reflect": (lambda: one("Pad", [(2, 5, 7)], inits={"p": np.array([0, 2, 3, 0, 4, 1])}, mode="reflect"),
                    ("border_pad",)),
    "pad_edge_axes": (lambda: one("Pad", [(2, 5, 7)], opset=18, mode="edge",
                                  inits={"p": np.array([3, 2, 1, 5]), "v": np.array(0, F), "a": np.array([-1, 0])}),
                      ("border_pad",)),
    # U-Net's 2x2 stride-2 upsampling: a config space past 2**63 mixed-radix points (it raised before)
    "conv_transpose_upsampling": (lambda: one("ConvTranspose", [(1, 32, 7, 9)], strides=[2, 2],
                                              inits={"w": w(32, 16, 2, 2), "b": w(16)}), ("conv_transpose2d",)),
    "conv_transpose_output_shape": (lambda: one("ConvTranspose", [(1, 4, 5, 6)], inits={"w": w(4, 3, 3, 2)},
                                                strides=[2, 3], output_shape=[10, 17]), ("conv_transpose2d",)),
    "conv_transpose_same_lower": (lambda: one("ConvTranspose", [(1, 4, 5, 6)], inits={"w": w(4, 3, 4, 3)},
                                              strides=[2, 2], auto_pad="SAME_LOWER"), ("conv_transpose2d",)),
    "conv_transpose_1d_same_upper": (lambda: one("ConvTranspose", [(2, 4, 7)], inits={"w": w(4, 3, 4), "b": w(3)},
                                                 strides=[3], auto_pad="SAME_UPPER"), ("conv_transpose2d",)),
    "resize_nearest": (lambda: one("Resize", [(1, 2, 3, 4)], opset=19,
                                   inits={"r": np.zeros(0, F), "sc": np.array([1, 1, 2, 2], F)}), ("resize",)),
    "resize_linear": (lambda: one("Resize", [(1, 2, 3, 4)], opset=19, mode="linear",
                                  coordinate_transformation_mode="align_corners",
                                  inits={"r": np.zeros(0, F), "sc": np.zeros(0, F), "sz": np.array([1, 2, 5, 7])}),
                      ("resize",)),
    "prelu_channel_slope": (lambda: one("PRelu", [(2, 3, 5, 7)], inits={"s": w(3, 1, 1)}), ("less", "mul", "where")),
    "shrink": (lambda: one("Shrink", [(3, 37)], lambd=0.7, bias=0.2), ("greater", "less", "sub", "add", "where")),
    "mish": (lambda: one("Mish", [(3, 37)], opset=18), ("softplus", "tanh", "mul")),
    "celu": (lambda: one("Celu", [(3, 37)], alpha=0.6), ("div", "elu", "mul")),
    "selu_softsign": (lambda: make_model([helper.make_node("Selu", ["x"], ["s"], alpha=1.5),
                                          helper.make_node("Softsign", ["s"], ["y"])], {"x": ((3, 37), F)}, ["y"]),
                      ("elu", "mul", "abs", "add", "div")),
    "thresholded_relu_round": (lambda: make_model([helper.make_node("ThresholdedRelu", ["x"], ["t"], alpha=0.3),
                                                   helper.make_node("Round", ["t"], ["y"])], {"x": ((3, 37), F)},
                                                  ["y"]), ("greater", "where", "round")),
    "global_max_pool_3d": (lambda: one("GlobalMaxPool", [(2, 3, 5, 4, 7)]), ("max",)),
    "tile": (lambda: one("Tile", [(2, 3, 5)], inits={"r": np.array([3, 1, 2])}), ("expand",)),
    "depth_to_space_crd": (lambda: one("DepthToSpace", [(2, 12, 3, 5)], blocksize=2, mode="CRD"), ("transpose",)),
    "depth_to_space_dcr": (lambda: one("DepthToSpace", [(1, 18, 2, 3)], blocksize=3), ("transpose",)),
    "space_to_depth": (lambda: one("SpaceToDepth", [(2, 3, 6, 4)], blocksize=2), ("transpose",)),
    "mean_variance_norm_axes": (lambda: one("MeanVarianceNormalization", [(3, 5, 7)], axes=[1, 2]),
                                ("mean", "var", "sqrt", "add", "sub", "div")),
    "group_norm_per_channel": (lambda: one("GroupNormalization", [(2, 6, 5, 3)], opset=21, num_groups=3,
                                           inits={"s": w(6), "b": w(6)}), ("instance_norm", "mul", "add")),
    "resize_cubic_antialias_scales": (lambda: one("Resize", [(1, 2, 11, 13)], opset=19, mode="cubic", antialias=1,
                                                  inits={"r": np.zeros(0, F), "sc": np.array([1, 1, 0.37, 1.6], F)}),
                                      ("resample",)),
    "resize_tf_crop_and_resize": (lambda: one("Resize", [(1, 2, 7, 9)], opset=19, mode="linear",
                                              coordinate_transformation_mode="tf_crop_and_resize",
                                              extrapolation_value=2.5, inits={
                                                  "r": np.array([0, 0, -0.2, 0.3, 1, 1, 0.9, 1.3], F),
                                                  "sc": np.zeros(0, F), "sz": np.array([1, 2, 5, 6])}),
                                  ("resample",)),
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=requires_templates(*ops)) for c, (_, ops) in NEW.items()])
def test_new_templates_match_onnxruntime(case: str) -> None:
    check_against_ort(NEW[case][0]())


@requires_templates("cast", "logical_not", "equal")
def test_cast_not_equal() -> None:
    nodes = [helper.make_node("Equal", ["x", "z"], ["e"]), helper.make_node("Not", ["e"], ["n"]),
             helper.make_node("Cast", ["n"], ["y"], to=1)]
    x = rng.integers(0, 3, size=(3, 5)).astype(F)
    check_against_ort(make_model(nodes, {"x": ((3, 5), F), "z": ((5,), F)}, ["y"]),
                      feeds={"x": x, "z": x[0]})


@requires_templates("batch_norm", "mean", "var")
def test_batch_norm_training_mode_normalises_by_the_batch() -> None:
    """A 3-d input: batch statistics over (N, L) per channel, and both running statistics."""
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1,
                            momentum=0.8, epsilon=1e-3)
    inits = {"s": w(5), "b": w(5), "m": w(5), "v": np.abs(w(5)) + 0.5}
    check_against_ort(make_model([node], {"x": ((3, 5, 7), F)}, ["y", "rm", "rv"], inits, 15))


@requires_templates("power", "cast")
def test_pow_of_integers_is_exact_and_truncates() -> None:
    """int32 ** int32 (results up to 2**30) and int64 ** float32 (truncated toward zero), broadcast."""
    nodes = [helper.make_node("Pow", ["a", "n"], ["p"]), helper.make_node("Pow", ["b", "e"], ["q"])]
    feeds = {"a": rng.integers(-30, 31, size=(3, 5)).astype(np.int32), "n": np.array([0, 1, 2, 3, 6], np.int32),
             "b": rng.integers(0, 1000, size=(7,)).astype(np.int64), "e": np.array([0.5], F)}
    model = make_model(nodes, {"a": ((3, 5), np.int32), "n": ((5,), np.int32), "b": ((7,), np.int64),
                               "e": ((1,), F)}, ["p", "q"], opset=15)
    check_against_ort(model, feeds=feeds, rtol=0, atol=0)


@requires_templates("instance_norm", "mul", "add", "relu")
def test_group_norm_per_group_feeds_the_ops_after_it() -> None:
    """Opset 18's scale and bias of one value per group; onnx's inference gives GroupNormalization
    no output shape (nor the Relu after it): the frontend takes the input's."""
    nodes = [helper.make_node("GroupNormalization", ["x", "s", "b"], ["g"], num_groups=2, epsilon=1e-3),
             helper.make_node("Relu", ["g"], ["y"])]
    model = make_model(nodes, {"x": ((2, 6, 5, 3), F)}, ["y"], {"s": w(2), "b": w(2)}, 18)
    graph = frontend.load(model)
    assert graph.value("g").shape == graph.value("y").shape == (2, 6, 5, 3)
    feeds = random_feeds(model)
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    np.testing.assert_allclose(run(graph, feeds)["y"], want, rtol=1e-4, atol=1e-5)
