"""A MobileNet-V2 inverted-residual stack (torchvision's `features` up to the last block) as torch
exports it in eval mode: batch norms kept, ReLU6 as Clip with min/max inputs (opset >= 11)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx

from ._graph import GraphBuilder, batch_norm, conv

# torchvision's inverted-residual settings: (expansion t, output channels c, repeats n, first stride s)
MOBILENET_V2_BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


def _relu6(b: GraphBuilder, x: str, scope: str) -> str:
    lo, hi = _clip_bounds(b)
    return b.node("Clip", [x, lo, hi], f"/{scope}/Clip")


def _clip_bounds(b: GraphBuilder) -> tuple[str, str]:
    """The exporter's shared scalar min/max initializers, made once per graph."""
    if "clip_min" not in {t.name for t in b.initializers}:
        b.const("clip_min", np.array(0.0, np.float32))
        b.const("clip_max", np.array(6.0, np.float32))
    return "clip_min", "clip_max"


def _conv_bn(b: GraphBuilder, x: str, scope: str, cin: int, cout: int, kernel: int, stride: int = 1,
             groups: int = 1, relu6: bool = True) -> str:
    """torchvision's Conv2dNormActivation: conv (no bias) + bn (+ ReLU6); children .0 .1 .2."""
    y = batch_norm(b, conv(b, x, f"{scope}.0", cin, cout, kernel, stride, groups), f"{scope}.1", cout)
    return _relu6(b, y, f"{scope}.2") if relu6 else y


def _inverted_residual(b: GraphBuilder, x: str, scope: str, cin: int, cout: int, stride: int, t: int) -> str:
    """1x1 expand (skipped when t == 1) + bn + relu6, 3x3 depthwise(stride) + bn + relu6, 1x1 project
    + bn; the input is added back where stride is 1 and the width is kept."""
    hidden, y, k = cin * t, x, 0
    if t != 1:
        y, k = _conv_bn(b, y, f"{scope}.conv.0", cin, hidden, 1), 1
    y = _conv_bn(b, y, f"{scope}.conv.{k}", hidden, hidden, 3, stride, groups=hidden)
    y = batch_norm(b, conv(b, y, f"{scope}.conv.{k + 1}", hidden, cout, 1), f"{scope}.conv.{k + 2}", cout)
    return b.node("Add", [x, y], f"/{scope}/Add") if stride == 1 and cin == cout else y


def mobilenet_v2_stack(batch: int = 1, image: int = 224,
                       blocks: Sequence[tuple[int, int, int, int]] = MOBILENET_V2_BLOCKS, stem: int = 32,
                       opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """Input `input` (batch, 3, image, image) -> stem conv 3x3/2 (`stem` channels) + bn + relu6 ->
    the inverted-residual blocks, one (t, c, n, s) group at a time -> `output`, the last feature map."""
    b = GraphBuilder(seed, opset)
    x = _conv_bn(b, "input", "features.0", 3, stem, 3, 2)
    cin, index = stem, 1
    for t, c, n, s in blocks:
        for i in range(n):
            x = _inverted_residual(b, x, f"features.{index}", cin, c, s if i == 0 else 1, t)
            cin, index = c, index + 1
    b.rename_last(x, "output")
    return b.finish("mobilenet_v2_stack", [("input", (batch, 3, image, image))], ["output"])
