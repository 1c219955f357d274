"""Models built in the repository with onnx.helper (no downloads), random weights from a seeded
generator, every size a parameter so tests can build them small:
- `mlp`: Gemm + Relu layers;
- `resnet18`: torchvision's ResNet-18, batch norms kept as torch exports them in eval mode;
- `mobilenet_v2_stack`: MobileNet-V2's inverted-residual stack (depthwise convs, ReLU6 as Clip);
- `bert_layer`: a BERT-base encoder layer (attention, GELU via Erf, LayerNormalization).
Each returns an `onnx.ModelProto` that has passed the checker and strict shape inference.
"""
from ._graph import parameter_count
from .bert import bert_layer
from .mlp import mlp
from .mobilenet import MOBILENET_V2_BLOCKS, mobilenet_v2_stack
from .resnet import resnet18

MODELS = {"mlp": mlp, "resnet18": resnet18, "mobilenet_v2_stack": mobilenet_v2_stack, "bert_layer": bert_layer}

__all__ = ["MOBILENET_V2_BLOCKS", "MODELS", "bert_layer", "mlp", "mobilenet_v2_stack", "parameter_count", "resnet18"]
