"""Models built in the repository with onnx.helper (no downloads), random weights from a seeded
generator, every size a parameter so tests can build them small:
- `mlp`: Gemm + Relu layers;
- `resnet18`: torchvision's ResNet-18, batch norms kept as torch exports them in eval mode;
- `mobilenet_v2_stack`: MobileNet-V2's inverted-residual stack (depthwise convs, ReLU6 as Clip);
- `bert_layer`: a BERT-base encoder layer (attention, GELU via Erf, LayerNormalization).
Each returns an `onnx.ModelProto` that has passed the checker and strict shape inference.
"""
from collections.abc import Callable
from typing import Any

import onnx

from ._graph import parameter_count
from .bert import bert_layer
from .mlp import mlp
from .mobilenet import MOBILENET_V2_BLOCKS, mobilenet_v2_stack
from .resnet import resnet18

MODELS: dict[str, Callable[..., onnx.ModelProto]] = {
    "mlp": mlp, "resnet18": resnet18, "mobilenet_v2_stack": mobilenet_v2_stack, "bert_layer": bert_layer}

# Every model's structure at a size tests can run in a second: odd sizes, so no kernel gets a
# shape that divides evenly; every MobileNet block kind (t = 1, stride 2, residual) appears.
_REDUCED: dict[str, dict[str, Any]] = {
    "mlp": dict(batch=3, sizes=(13, 17, 11, 5)),
    "resnet18": dict(batch=2, image=33, width=4, num_classes=7),
    "mobilenet_v2_stack": dict(batch=2, image=17, blocks=((1, 8, 1, 1), (6, 12, 2, 2), (6, 12, 1, 1)), stem=8),
    "bert_layer": dict(batch=2, seq=7, hidden=24, heads=3, ffn=40),
}


def reduced(name: str, opset: int = 17) -> onnx.ModelProto:
    """Model `name` of MODELS at the reduced size tests use."""
    return MODELS[name](**_REDUCED[name], opset=opset)


__all__ = ["MOBILENET_V2_BLOCKS", "MODELS", "bert_layer", "mlp", "mobilenet_v2_stack", "parameter_count", "reduced",
           "resnet18"]
