"""ResNet-18 (torchvision's topology) as torch exports it in eval mode, batch norms kept."""
from __future__ import annotations

import onnx

from ._graph import GraphBuilder, batch_norm, conv, linear


def _basic_block(b: GraphBuilder, x: str, scope: str, cin: int, cout: int, stride: int) -> str:
    """conv3x3(stride) + bn + relu, conv3x3 + bn, plus the identity, or a 1x1 conv + bn where the
    block changes stride or width; relu after the add."""
    y = b.node("Relu", [batch_norm(b, conv(b, x, f"{scope}.conv1", cin, cout, 3, stride), f"{scope}.bn1", cout)],
               f"/{scope}/relu/Relu")
    y = batch_norm(b, conv(b, y, f"{scope}.conv2", cout, cout, 3), f"{scope}.bn2", cout)
    if stride != 1 or cin != cout:
        x = batch_norm(b, conv(b, x, f"{scope}.downsample.0", cin, cout, 1, stride), f"{scope}.downsample.1", cout)
    return b.node("Relu", [b.node("Add", [y, x], f"/{scope}/Add")], f"/{scope}/relu_1/Relu")


def resnet18(batch: int = 1, image: int = 224, width: int = 64, num_classes: int = 1000,
             opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """Input `input` (batch, 3, image, image) -> `output` (batch, num_classes) logits.

    conv1 7x7/2 + bn + relu + maxpool 3x3/2; four stages of two BasicBlocks at width, 2, 4 and 8
    times width (stages 2-4 start with stride 2); global average pool, flatten, fully connected.
    `image` must be at least 32 so the last stage has a pixel."""
    if image < 32:
        raise ValueError(f"resnet18: image must be >= 32 (five stride-2 steps), got {image}")
    b = GraphBuilder(seed, opset)
    x = b.node("Relu", [batch_norm(b, conv(b, "input", "conv1", 3, width, 7, 2), "bn1", width)], "/relu/Relu")
    x = b.node("MaxPool", [x], "/maxpool/MaxPool", ceil_mode=0, dilations=[1, 1], kernel_shape=[3, 3],
               pads=[1, 1, 1, 1], strides=[2, 2])
    cin = width
    for stage in range(4):
        cout = width * 2 ** stage
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            x = _basic_block(b, x, f"layer{stage + 1}.{block}", cin, cout, stride)
            cin = cout
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x], "/avgpool/GlobalAveragePool")], "/Flatten", axis=1)
    linear(b, x, "fc", cin, num_classes, out="output")
    return b.finish("resnet18", [("input", (batch, 3, image, image))], ["output"])
