"""Constant folding of an ONNX graph at import, so the autotune graph holds only kernels and views.

A node folds when every input it reads is a constant (initializers, Constant nodes, earlier
folds), or when it is Shape/Size of a value whose static shape is known. Folded values become
initializers and shape inference runs again: a Reshape whose target shape PyTorch computed through
Shape -> Gather -> Unsqueeze -> Concat then has a static output shape. Nodes are evaluated by
onnx's numpy reference implementation at the model's opset, so folding covers every op.
"""
from __future__ import annotations

from typing import Any

import numpy as np

# ops that exist only to compute shapes and constants: accepted when they fold, refused otherwise
FOLD_ONLY = frozenset({"Constant", "Shape", "Size", "ConstantOfShape", "Range"})
NEVER_FOLD = frozenset({"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                        "Bernoulli"})
MAX_ITERATIONS = 16


def static_shape(info: Any) -> tuple[int, ...] | None:
    """The shape of a ValueInfoProto when every dimension is a known number, else None."""
    t = info.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
    return None if min(dims, default=0) < 0 else tuple(dims)


def fold_once(model: Any, shapes: dict[str, tuple[int, ...]]) -> bool:
    """Fold every foldable node of `model` in place (in topological order, so chains fold in
    one pass); True when something folded. `shapes`: the static shapes shape inference found."""
    from onnx import numpy_helper

    graph = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    opsets = {o.domain: o.version for o in model.opset_import}
    kept, folded = [], False
    for node in graph.node:
        values = _evaluate(node, consts, shapes, opsets)
        if values is None:
            kept.append(node)
            continue
        folded = True
        for name, value in zip(node.output, values):
            if name:
                consts[name] = np.asarray(value)
                graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
    if folded:
        del graph.node[:]
        graph.node.extend(kept)
    return folded


def _evaluate(node: Any, consts: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]],
              opsets: dict[str, int]) -> list[np.ndarray] | None:
    """The node's output values when it folds, else None."""
    if node.op_type in NEVER_FOLD or node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type in ("Shape", "Size") and node.input[0] not in consts:
        shape = shapes.get(node.input[0])
        return None if shape is None else [_shape_value(node, shape)]
    if not all(i in consts for i in node.input if i):
        return None
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(node, opsets=opsets)
    feeds = {i: consts[i] for i in node.input if i}
    return list(evaluator.run(None, feeds))


def _shape_value(node: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Shape (with its opset-15 start/end) or Size of a tensor of static `shape`."""
    if node.op_type == "Size":
        return np.asarray(int(np.prod(shape)), dtype=np.int64)
    attrs = {a.name: a.i for a in node.attribute}
    rank = len(shape)
    start = attrs.get("start", 0)
    end = attrs.get("end", rank)
    return np.asarray(shape[slice(start, end)], dtype=np.int64)
