"""A small ONNX graph builder shared by the model builders: seeded random weights, unique names,
and one `finish` that checks the model as ONNX itself would (checker + strict shape inference).

Weights are float32 draws from a seeded numpy Generator, scaled so activations stay of order one
through a deep stack (He-normal convolutions, batch-norm statistics near the identity): a model
built twice with the same arguments is the same model, bit for bit.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSETS = range(13, 22)      # the opsets issue 14 asks the importer to cover


class GraphBuilder:
    """Nodes and initializers of one graph, named the way PyTorch's exporter names them
    (`/scope/Op` for nodes, `scope.weight` for parameters)."""

    def __init__(self, seed: int, opset: int) -> None:
        if opset not in OPSETS:
            raise ValueError(f"opset must be in {OPSETS.start}..{OPSETS.stop - 1}, got {opset}")
        self.rng = np.random.default_rng(seed)
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self._used: set[str] = set()

    def _unique(self, name: str) -> str:
        base, k = name, 1
        while name in self._used:
            name, k = f"{base}_{k}", k + 1
        self._used.add(name)
        return name

    def const(self, name: str, array: np.ndarray) -> str:
        """An initializer holding `array` as given (its dtype kept)."""
        name = self._unique(name)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def normal(self, name: str, shape: Sequence[int], std: float) -> str:
        return self.const(name, (self.rng.standard_normal(tuple(shape)) * std).astype(np.float32))

    def uniform(self, name: str, shape: Sequence[int], lo: float, hi: float) -> str:
        return self.const(name, self.rng.uniform(lo, hi, tuple(shape)).astype(np.float32))

    def node(self, op: str, inputs: Sequence[str], name: str, out: str | None = None, **attrs: Any) -> str:
        """Append one single-output node; returns its output's name (`out`, for a graph output)."""
        name = self._unique(name)
        output = self._unique(out or f"{name}_output_0")
        self.nodes.append(helper.make_node(op, list(inputs), [output], name=name, **attrs))
        return output

    def rename_last(self, value: str, public: str) -> None:
        """Name the last node's output `public` (a graph output), as exporters do."""
        assert self.nodes[-1].output[0] == value, "only the last node's output can be renamed"
        self.nodes[-1].output[0] = public

    def finish(self, graph_name: str, inputs: Sequence[tuple[str, Sequence[int]]],
               outputs: Sequence[str]) -> onnx.ModelProto:
        """The checked model (every input and output float32). Output shapes are left to shape
        inference, run in strict mode so a topology error fails here, and then written in."""
        graph = helper.make_graph(
            self.nodes, graph_name,
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs],
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
            initializer=self.initializers)
        model = helper.make_model_gen_version(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                              producer_name="autotune-benchmarks")
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        for declared, found in zip(model.graph.output, inferred.graph.output):
            declared.CopyFrom(found)
        onnx.checker.check_model(model, full_check=True)
        return model


def he_std(fan_in: int) -> float:
    """He-normal standard deviation: keeps a ReLU network's activations of order one."""
    return math.sqrt(2.0 / fan_in)


def conv(b: GraphBuilder, x: str, scope: str, cin: int, cout: int, kernel: int, stride: int = 1,
         groups: int = 1) -> str:
    """A bias-free Conv with 'same'-style padding kernel // 2, as torch exports nn.Conv2d(bias=False)."""
    w = b.normal(f"{scope}.weight", (cout, cin // groups, kernel, kernel), he_std(cin // groups * kernel * kernel))
    pad = kernel // 2
    return b.node("Conv", [x, w], f"/{scope}/Conv", dilations=[1, 1], group=groups,
                  kernel_shape=[kernel, kernel], pads=[pad] * 4, strides=[stride, stride])


def batch_norm(b: GraphBuilder, x: str, scope: str, channels: int) -> str:
    """BatchNormalization as torch exports nn.BatchNorm2d in eval mode (kept, not folded into the
    conv): scale, bias, running mean and variance, epsilon 1e-5, momentum 0.9 (= 1 - 0.1)."""
    c = (channels,)
    params = [b.uniform(f"{scope}.weight", c, 0.5, 1.5), b.normal(f"{scope}.bias", c, 0.1),
              b.normal(f"{scope}.running_mean", c, 0.1), b.uniform(f"{scope}.running_var", c, 0.5, 1.5)]
    return b.node("BatchNormalization", [x, *params], f"/{scope}/BatchNormalization", epsilon=1e-5, momentum=0.9)


def linear(b: GraphBuilder, x: str, scope: str, fan_in: int, fan_out: int, out: str | None = None) -> str:
    """nn.Linear on a 2-D input as torch exports it: Gemm with the weight stored (out, in), transB=1."""
    w = b.normal(f"{scope}.weight", (fan_out, fan_in), he_std(fan_in))
    bias = b.normal(f"{scope}.bias", (fan_out,), 0.1)
    return b.node("Gemm", [x, w, bias], f"/{scope}/Gemm", out=out, alpha=1.0, beta=1.0, transB=1)


def parameter_count(model: onnx.ModelProto) -> int:
    """Trainable parameters, counted as torch counts them: float tensors of rank >= 1 (scalars are the
    exporter's constants), batch-norm running statistics excluded."""
    return sum(math.prod(t.dims) for t in model.graph.initializer
               if t.data_type == TensorProto.FLOAT and t.dims
               and not t.name.endswith(("running_mean", "running_var")))
