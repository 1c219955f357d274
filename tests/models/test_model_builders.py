"""The models of benchmarks/models: at full size each has its reference's topology (parameter
counts of torchvision's ResNet-18 and MobileNet-V2 features, BERT-base's layer); at reduced size
each passes the checker and strict shape inference, and onnxruntime and ONNX's reference
evaluator agree on its outputs."""
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root: benchmarks.models

from benchmarks.models import MODELS, bert_layer, mlp, mobilenet_v2_stack, parameter_count, reduced, resnet18

ort = pytest.importorskip("onnxruntime")

class BatchNormalization(OpRun):
    """Inference batch norm for every opset. onnx 1.23's reference BatchNormalization-9 (opsets
    9-13) mixes the batch's own statistics in whenever momentum is set, which is always (it has a
    default), so it computes training mode; the spec and onnxruntime compute inference."""

    op_domain = ""

    def _run(self, x, scale, bias, mean, var, epsilon=1e-5, momentum=None, training_mode=0):
        assert not training_mode
        shape = (-1,) + (1,) * (x.ndim - 2)
        y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + epsilon) * scale.reshape(shape)
        return ((y + bias.reshape(shape)).astype(x.dtype),)


def _feeds(model: onnx.ModelProto, rng: np.random.Generator) -> dict[str, np.ndarray]:
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    if "attention_mask" in feeds:              # additive: attend to most positions, mask one per row
        mask = np.zeros(feeds["attention_mask"].shape, np.float32)
        mask[..., -1] = -10000.0
        feeds["attention_mask"] = mask
    return feeds


def _shapes(model: onnx.ModelProto) -> list[list[int]]:
    return [[d.dim_value for d in o.type.tensor_type.shape.dim] for o in model.graph.output]


@pytest.mark.parametrize("opset", [13, 17, 21])
@pytest.mark.parametrize("name", list(MODELS))
def test_reduced_model_runs_alike_in_onnxruntime_and_reference(name, opset):
    model = reduced(name, opset)
    onnx.checker.check_model(model, full_check=True)
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    feeds = _feeds(model, np.random.default_rng(1))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, feeds)
    want = ReferenceEvaluator(model, new_ops=[BatchNormalization]).run(None, feeds)
    assert [list(g.shape) for g in got] == _shapes(model)
    for g, w in zip(got, want, strict=True):
        assert np.isfinite(w).all() and np.abs(w).max() > 1e-3          # weights that keep a signal alive
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(w).max())))


@pytest.mark.parametrize("build, params, shape", [
    (resnet18, 11_689_512, [1, 1000]),                 # torchvision.models.resnet18()
    (mobilenet_v2_stack, 1_811_712, [1, 320, 7, 7]),   # torchvision mobilenet_v2().features[:18]
    (bert_layer, 7_087_872, [1, 128, 768]),            # one BertLayer of bert-base-uncased
])
def test_full_size_models_have_their_references_topology(build, params, shape):
    model = build()
    assert parameter_count(model) == params
    assert _shapes(model) == [shape]


def test_full_size_op_mix():
    resnet = [n.op_type for n in resnet18(image=64).graph.node]
    assert (resnet.count("Conv"), resnet.count("BatchNormalization"), resnet.count("Add")) == (20, 20, 8)
    mobilenet = [n.op_type for n in mobilenet_v2_stack(image=32).graph.node]
    assert (mobilenet.count("Conv"), mobilenet.count("Clip"), mobilenet.count("Add")) == (51, 34, 10)
    depthwise = [n for n in mobilenet_v2_stack(image=32).graph.node
                 if n.op_type == "Conv" and onnx.helper.get_node_attr_value(n, "group") > 1]
    assert len(depthwise) == 17


def test_builds_are_seeded():
    assert mlp(sizes=(5, 3), seed=3).SerializeToString() == mlp(sizes=(5, 3), seed=3).SerializeToString()
    assert mlp(sizes=(5, 3), seed=3).SerializeToString() != mlp(sizes=(5, 3), seed=4).SerializeToString()


@pytest.mark.parametrize("call, message", [
    (lambda: resnet18(image=31), "image must be >= 32"),
    (lambda: bert_layer(hidden=10, heads=3), "multiple of heads"),
    (lambda: mlp(sizes=(4,)), "needs an input and an output"),
    (lambda: mlp(opset=12), "opset must be in 13..21"),
])
def test_bad_arguments_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()
