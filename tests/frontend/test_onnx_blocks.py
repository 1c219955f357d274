"""Whole blocks as PyTorch exports them (symbolic batch and sequence bound at load, reshape
targets computed from Shape), imported and checked against onnxruntime with the numpy
interpreter."""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx
from onnx import helper

sys.path.insert(0, os.path.dirname(__file__))
from onnx_helpers import check_against_ort, make_model

F = np.float32
rng = np.random.default_rng(3)
HIDDEN, HEADS = 12, 3


def w(*shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.3).astype(F)


def _dim(x: str, k: int, out: str) -> list[onnx.NodeProto]:
    """out = [x.shape[k]] as torch.onnx spells it: Shape, Gather of a scalar, Unsqueeze."""
    return [helper.make_node("Shape", [x], [f"{out}_s"]),
            helper.make_node("Gather", [f"{out}_s", f"c{k}"], [f"{out}_g"], axis=0),
            helper.make_node("Unsqueeze", [f"{out}_g", "axis0"], [out])]


def _heads(x: str, out: str) -> list[onnx.NodeProto]:
    """(B, S, H) -> (B, heads, S, H / heads)."""
    return [*_dim(x, 0, f"{out}_b"), *_dim(x, 1, f"{out}_n"),
            helper.make_node("Concat", [f"{out}_b", f"{out}_n", "heads", "head_dim"], [f"{out}_shape"], axis=0),
            helper.make_node("Reshape", [x, f"{out}_shape"], [f"{out}_r"]),
            helper.make_node("Transpose", [f"{out}_r"], [out], perm=[0, 2, 1, 3])]


def attention_model() -> onnx.ModelProto:
    nodes = []
    for p in "qkv":
        nodes += [helper.make_node("MatMul", ["x", f"W{p}"], [f"{p}_mm"]),
                  helper.make_node("Add", [f"{p}_mm", f"b{p}"], [f"{p}_lin"]), *_heads(f"{p}_lin", p)]
    nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "kt"], ["scores"]),
              helper.make_node("Div", ["scores", "sqrt_d"], ["scaled"]),
              helper.make_node("Add", ["scaled", "mask"], ["masked"]),
              helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", "v"], ["ctx"]),
              helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
              *_dim("x", 0, "ob"), *_dim("x", 1, "on"),
              helper.make_node("Concat", ["ob", "on", "hidden"], ["merge_shape"], axis=0),
              helper.make_node("Reshape", ["ctx_t", "merge_shape"], ["merged"]),
              helper.make_node("Add", ["merged", "x"], ["residual"]),
              helper.make_node("LayerNormalization", ["residual", "gamma", "beta"], ["y"], axis=-1)]
    inits = {f"W{p}": w(HIDDEN, HIDDEN) for p in "qkv"} | {f"b{p}": w(HIDDEN) for p in "qkv"}
    inits |= {"c0": np.array(0), "c1": np.array(1), "axis0": np.array([0]), "heads": np.array([HEADS]),
              "head_dim": np.array([HIDDEN // HEADS]), "hidden": np.array([HIDDEN]),
              "sqrt_d": np.array(np.sqrt(HIDDEN // HEADS), F), "gamma": w(HIDDEN) + 1, "beta": w(HIDDEN)}
    return make_model(nodes, {"x": (("batch", "seq", HIDDEN), F), "mask": (("batch", 1, 1, "seq"), F)}, ["y"],
                      inits)


def test_attention_block_matches_onnxruntime() -> None:
    graph = check_against_ort(attention_model(), shapes={"x": (2, 5, HIDDEN), "mask": (2, 1, 1, 5)})
    kernels = graph.op_counts()
    assert kernels["matmul"] == 3 and kernels["batch_matmul"] == 2 and kernels["softmax"] == 1
    assert "Shape" not in str(graph) and all(n.op != "concat" for n in graph.nodes)


def resnet_block() -> onnx.ModelProto:
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1", "s", "o", "m", "v"], ["n1"]),
             helper.make_node("Relu", ["n1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=4),
             helper.make_node("Add", ["c2", "x"], ["sum"]),
             helper.make_node("Relu", ["sum"], ["r2"]),
             helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1)]
    inits = {"w1": w(4, 4, 3, 3), "b1": w(4), "s": w(4) + 1, "o": w(4), "m": w(4), "v": np.abs(w(4)) + 0.5,
             "w2": w(4, 1, 3, 3), "fc": w(3, 4), "fcb": w(3)}
    return make_model(nodes, {"x": (("N", 4, 7, 9), F)}, ["y"], inits, opset=13)


def test_resnet_block_matches_onnxruntime() -> None:
    graph = check_against_ort(resnet_block(), shapes={"x": (2, 4, 7, 9)})
    assert graph.op_counts()["conv2d_grouped"] == 2
