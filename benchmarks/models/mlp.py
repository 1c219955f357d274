"""A multi-layer perceptron as torch exports nn.Sequential(Linear, ReLU, ..., Linear)."""
from __future__ import annotations

import itertools
from collections.abc import Sequence

import onnx

from ._graph import GraphBuilder, linear


def mlp(batch: int = 1, sizes: Sequence[int] = (784, 512, 256, 10), opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """Input `input` (batch, sizes[0]) -> Gemm + Relu per hidden layer -> Gemm -> `output` (batch, sizes[-1])."""
    if len(sizes) < 2:
        raise ValueError(f"mlp: sizes needs an input and an output width, got {list(sizes)}")
    b = GraphBuilder(seed, opset)
    x = "input"
    layers = list(itertools.pairwise(sizes))
    for i, (fan_in, fan_out) in enumerate(layers):
        last = i == len(layers) - 1
        x = linear(b, x, f"layers.{2 * i}", fan_in, fan_out, out="output" if last else None)
        if not last:
            x = b.node("Relu", [x], f"/layers.{2 * i + 1}/Relu")
    return b.finish("mlp", [("input", (batch, sizes[0]))], ["output"])
