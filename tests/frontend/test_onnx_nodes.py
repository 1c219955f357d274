"""The nodes each ONNX op becomes: which templates, parameters, constants and names. These hold
whether or not the templates exist on this branch (nothing is compiled or run here)."""
from __future__ import annotations

import os
import sys

import numpy as np
from onnx import helper

sys.path.insert(0, os.path.dirname(__file__))
from onnx_helpers import make_model

import autotune.frontend.onnx as frontend
from autotune.graph import Graph

F = np.float32
rng = np.random.default_rng(2)


def w(*shape: int) -> np.ndarray:
    return rng.uniform(-1, 1, size=shape).astype(F)


def ops(graph: Graph) -> list[tuple[str, dict]]:
    return [(n.op, n.params) for n in graph.nodes]


def load_one(op: str, shapes: list[tuple[int, ...]], inits: dict | None = None, opset: int = 17,
             outputs: tuple[str, ...] = ("y",), **attrs) -> Graph:
    names = [f"x{k}" for k in range(len(shapes))]
    node = helper.make_node(op, names + list(inits or {}), list(outputs), name="n0", **attrs)
    return frontend.load(make_model([node], {n: (s, F) for n, s in zip(names, shapes)}, list(outputs), inits, opset))


def test_conv_with_bias_is_a_conv_then_an_add_of_a_channel_constant() -> None:
    bias = w(5)
    graph = load_one("Conv", [(1, 3, 9, 9)], {"w": w(5, 3, 3, 3), "b": bias}, pads=[1, 1, 2, 2], strides=[2, 2])
    assert ops(graph) == [
        ("conv2d_grouped", {"N": 1, "C": 3, "H": 9, "W": 9, "F": 5, "KH": 3, "KW": 3, "stride": 2,
                            "padding": (1, 1, 2, 2), "dilation": 1, "groups": 1}),
        ("add", {"a_shape": (1, 5, 5, 5), "b_shape": (1, 5, 1, 1)})]
    conv, add = graph.nodes
    assert conv.inputs == ("x0", "w") and conv.outputs == add.inputs[:1] and add.outputs == ("y",)
    assert conv.name == add.name == "n0" and conv.outputs[0].startswith("n0/")
    np.testing.assert_array_equal(graph.constants[add.inputs[1]], bias.reshape(1, 5, 1, 1))


def test_gemm_with_transposed_constant_weights_is_one_matmul_and_an_add() -> None:
    weights, c = w(7, 5), w(7)
    graph = load_one("Gemm", [(3, 5)], {"B": weights, "C": c}, transB=1, alpha=2.0, beta=0.5)
    assert ops(graph) == [("matmul", {"M": 3, "N": 7, "K": 5}), ("add", {"a_shape": (3, 7), "b_shape": (7,)})]
    matmul, add = graph.nodes
    np.testing.assert_allclose(graph.constants[matmul.inputs[1]], 2.0 * weights.T)
    np.testing.assert_allclose(graph.constants[add.inputs[1]], 0.5 * c)


def test_gemm_of_two_runtime_matrices_scales_with_a_mul_and_transposes_with_a_kernel() -> None:
    graph = load_one("Gemm", [(5, 3), (5, 7)], transA=1, alpha=3.0)
    assert [op for op, _ in ops(graph)] == ["transpose", "matmul", "mul"]
    assert graph.nodes[0].params == {"shape": (5, 3), "axes": (1, 0)}
    assert graph.constants[graph.nodes[2].inputs[1]].tolist() == [3.0]


def test_gemm_without_c_is_a_matmul_writing_the_output() -> None:
    graph = load_one("Gemm", [(3, 5)], {"B": w(5, 7)})
    assert ops(graph) == [("matmul", {"M": 3, "N": 7, "K": 5})]
    assert graph.nodes[0].outputs == ("y",)


def test_softmax_over_axis_1_of_a_3d_tensor_transposes_around_a_row_softmax() -> None:
    graph = load_one("Softmax", [(3, 5, 4)], axis=1)
    assert ops(graph) == [("transpose", {"shape": (3, 5, 4), "axes": (0, 2, 1)}), ("view", {}),
                          ("softmax", {"M": 12, "N": 5}), ("view", {}),
                          ("transpose", {"shape": (3, 4, 5), "axes": (0, 2, 1)})]
    assert graph.nodes[-1].outputs == ("y",)


def test_softmax_over_the_last_axis_is_views_around_one_kernel() -> None:
    graph = load_one("LogSoftmax", [(3, 5, 4)])
    assert ops(graph) == [("view", {}), ("log_softmax", {"M": 15, "N": 4}), ("view", {})]


def test_split_is_one_slice_per_output() -> None:
    graph = load_one("Split", [(3, 9)], {"s": np.array([2, 3, 4])}, outputs=("a", "b", "c"), axis=1)
    assert ops(graph) == [("slice", {"shape": (3, 9), "begin": (0, 0), "end": (3, 2), "step": (1, 1)}),
                          ("slice", {"shape": (3, 9), "begin": (0, 2), "end": (3, 5), "step": (1, 1)}),
                          ("slice", {"shape": (3, 9), "begin": (0, 5), "end": (3, 9), "step": (1, 1)})]
    assert [n.outputs for n in graph.nodes] == [("a",), ("b",), ("c",)]


def test_unnamed_nodes_are_named_by_op_type_and_index() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
    graph = frontend.load(make_model(nodes, {"x": ((3,), F)}, ["y"]))
    assert [n.name for n in graph.nodes] == ["Relu_0", "Neg_1"]


def test_reshape_flatten_squeeze_unsqueeze_identity_dropout_are_views() -> None:
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["a"]), helper.make_node("Flatten", ["a"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b", "ax"], ["c"]), helper.make_node("Squeeze", ["c", "ax"], ["d"]),
             helper.make_node("Identity", ["d"], ["e"]), helper.make_node("Dropout", ["e"], ["y"])]
    inits = {"shape": np.array([0, -1, 5]), "ax": np.array([0])}
    graph = frontend.load(make_model(nodes, {"x": ((2, 3, 5), F)}, ["y"], inits))
    assert [n.op for n in graph.nodes] == ["view"] * 6
    assert [graph.value(v).shape for v in "abcde"] == [(2, 3, 5), (1, 30), (1, 1, 30), (1, 30), (1, 30)]


def test_new_template_ops_get_the_contract_names_and_parameters() -> None:
    assert ops(load_one("LeakyRelu", [(3, 5)], alpha=0.1)) == [("leaky_relu", {"shape": (3, 5), "alpha": 0.1})]
    assert ops(load_one("HardSigmoid", [(3,)])) == [("hard_sigmoid", {"shape": (3,), "alpha": 0.2, "beta": 0.5})]
    clip = helper.make_node("Clip", ["x", "", "hi"], ["y"])
    assert ops(frontend.load(make_model([clip], {"x": ((3,), F)}, ["y"], {"hi": np.array(6.0, F)}))) == [
        ("clip", {"shape": (3,), "lo": -np.inf, "hi": 6.0})]
    argmax = load_one("ArgMax", [(3, 5)], axis=1, keepdims=0)
    assert ops(argmax) == [("argmax", {"shape": (3, 5), "axes": (1,), "keepdims": 0}),
                           ("cast", {"shape": (3,), "to": "int64"})]
    assert [(n.dtype, argmax.value(n.outputs[0]).dtype) for n in argmax.nodes] == [("float32", "int32"),
                                                                                  ("int32", "int64")]
    resize = load_one("Resize", [(1, 2, 3, 4)], {"r": np.zeros(0, F), "s": np.array([1, 1, 2, 2], F)},
                      opset=19, mode="linear", coordinate_transformation_mode="asymmetric")
    assert ops(resize) == [("resize", {"shape": (1, 2, 3, 4), "out_shape": (1, 2, 6, 8), "mode": "linear",
                                       "coord": "asymmetric", "nearest": "round_prefer_floor"})]
    transposed = load_one("ConvTranspose", [(1, 4, 5, 6)], {"w": w(4, 3, 3, 3)}, strides=[2, 2], pads=[1, 1, 1, 1])
    assert ops(transposed) == [("conv_transpose2d", {"N": 1, "C": 4, "H": 5, "W": 6, "F": 3, "KH": 3, "KW": 3,
                                                     "stride": 2, "padding": 1, "output_padding": 0,
                                                     "dilation": 1, "groups": 1})]


def test_max_pool_with_asymmetric_pads_pads_explicitly_with_the_lowest_float() -> None:
    graph = load_one("MaxPool", [(1, 3, 8, 8)], kernel_shape=[2, 2], pads=[0, 0, 1, 1], strides=[2, 2])
    assert [op for op, _ in ops(graph)] == ["pad", "max_pool2d"]
    assert graph.nodes[0].params["value"] == -float(np.finfo(F).max)
    assert graph.nodes[1].params == {"shape": (1, 3, 9, 9), "kernel": 2, "stride": 2, "padding": 0}


def test_made_up_names_never_take_an_onnx_value_name() -> None:
    nodes = [helper.make_node("Softmax", ["x"], ["s"], name="n0"),
             helper.make_node("Neg", ["s"], ["n0/view"], name="n1")]
    graph = frontend.load(make_model(nodes, {"x": ((3, 5, 4), F)}, ["n0/view"]))
    assert [n.op for n in graph.nodes] == ["view", "softmax", "view", "neg"]
    assert graph.nodes[0].outputs != ("n0/view",) and graph.nodes[3].outputs == ("n0/view",)
