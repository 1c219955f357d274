"""ONNX ModelProto -> autotune Graph: load, check, bind shapes, infer, fold, convert.

The steps, in order, each refusing a model it cannot take with one ValueError:
1. the default-domain opset must be in SUPPORTED_OPSETS, or the model must mean the same at the
   nearest of them (`opsets.py`: it is then restamped);
2. every op type must have a converter (or be a shape computation that folds), and every
   attribute value must be supported: one error lists all of them, before any work;
3. `shapes` binds the inputs' unknown dimensions; onnx shape inference gives every value a
   static shape and dtype, and a dimension left unknown is an error naming the input;
4. constant sub-graphs fold (`fold.py`), shape inference runs again until nothing folds;
5. each remaining node goes through its converter (`onnx_ops*.py`) into kernel and view nodes.
`onnx` is imported here only, so `import autotune` does not need it.
"""
from __future__ import annotations

import os
from collections import Counter
from typing import Any

import numpy as np

from ..dtype import dtype_info
from ..graph.ir import Graph, Value
from . import (  # noqa: F401  (registers)
    onnx_ops,
    onnx_ops_activations,
    onnx_ops_linalg,
    onnx_ops_nn,
    onnx_ops_norm,
    onnx_ops_resize,
    onnx_ops_shape,
)
from .builder import CONVERTERS, Builder, attributes
from .fold import FOLD_ONLY, MAX_ITERATIONS, fold_once, static_shape
from .opsets import SUPPORTED_OPSETS, at_supported_opset  # noqa: F401  (SUPPORTED_OPSETS: part of this API)


def load(model: str | os.PathLike | Any | bytes, shapes: dict[str, tuple[int, ...]] | None = None) -> Graph:
    """The autotune Graph of an ONNX model (a path, a ModelProto or its serialized bytes);
    `shapes` binds the inputs' unknown dimensions, e.g. {"input": (1, 3, 224, 224)}."""
    import onnx

    proto = at_supported_opset(_as_model(model))
    check_supported(proto)
    work = onnx.ModelProto()
    work.CopyFrom(proto)
    _bind_shapes(work, shapes or {})
    infos = _infer(work)
    for _ in range(MAX_ITERATIONS):
        folded = fold_once(work, {n: s for n, s in ((n, static_shape(i)) for n, i in infos.items()) if s is not None})
        if not (_annotate_shape_preserving(work, infos) or folded):
            break
        infos = _infer(work)
    return _convert(work, infos)


# ops whose output has their first input's shape but whose onnx shape inference, through a
# function body, leaves it unknown (and with it every shape downstream)
SHAPE_PRESERVING = frozenset({"GroupNormalization", "MeanVarianceNormalization"})


def _annotate_shape_preserving(model: Any, infos: dict[str, Any]) -> bool:
    """Write the input's shape as the output's of each SHAPE_PRESERVING node inference left
    unshaped; whether any was written (inference then runs again)."""
    from onnx import helper

    changed = False
    for node in model.graph.node:
        src, out = infos.get(node.input[0]) if node.input else None, node.output[0] if node.output else ""
        if node.op_type not in SHAPE_PRESERVING or src is None or not out:
            continue
        shape = static_shape(src)
        if shape is None or (out in infos and static_shape(infos[out]) is not None):
            continue
        typed = helper.make_tensor_value_info(out, src.type.tensor_type.elem_type, list(shape))
        listed = [v for v in (*model.graph.output, *model.graph.value_info) if v.name == out]
        for v in listed:
            v.CopyFrom(typed)
        if not listed:
            model.graph.value_info.append(typed)
        changed = True
    return changed


def _as_model(model: Any) -> Any:
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    if not isinstance(model, (bytes, str, os.PathLike)):
        raise TypeError(f"onnx.load: expected a path, an onnx.ModelProto or bytes, got {type(model).__name__}")
    what = "the bytes given" if isinstance(model, bytes) else repr(os.fspath(model))
    try:
        return onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(os.fspath(model))
    except OSError as e:
        raise ValueError(f"onnx.load: cannot read {what}: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001  (protobuf's DecodeError and kin: not an ONNX model)
        raise ValueError(f"onnx.load: cannot parse {what} as an ONNX model ({type(e).__name__}: {e})") from None


def node_name(node: Any, index: int) -> str:
    return node.name or f"{node.op_type}_{index}"


def check_supported(model: Any) -> None:
    """One ValueError listing every unsupported op type (count, first node) and every unsupported
    attribute value of the model, or nothing."""
    unsupported: Counter[str] = Counter()
    first: dict[str, str] = {}
    problems: list[str] = []
    for index, node in enumerate(model.graph.node):
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        name = node_name(node, index)
        if op in FOLD_ONLY:
            continue
        if op not in CONVERTERS:
            unsupported[op] += 1
            first.setdefault(op, name)
            continue
        problems += [f"{op} {name!r}: {msg} is not supported" for msg in CONVERTERS[op].check(node, attributes(node))]
    lines = [f"{op} ({count} node{'s' if count > 1 else ''}, first {first[op]!r})" for op, count in unsupported.items()]
    if lines or problems:
        text = []
        if lines:
            text.append("unsupported ops: " + "; ".join(lines))
        if problems:
            text.append("unsupported attributes: " + "; ".join(problems))
        raise ValueError(f"onnx model {model.graph.name!r}: " + ". ".join(text))


def _bind_shapes(model: Any, shapes: dict[str, tuple[int, ...]]) -> None:
    """Write the `shapes` the caller gave into the graph inputs' types."""
    inputs = {i.name: i for i in model.graph.input}
    for name, shape in shapes.items():
        if name not in inputs:
            raise ValueError(f"onnx.load: shapes names {name!r}, which is not an input of the model "
                             f"(inputs: {', '.join(repr(n) for n in inputs)})")
        dims = inputs[name].type.tensor_type.shape.dim
        if len(dims) != len(shape):
            raise ValueError(f"onnx.load: shapes[{name!r}] has rank {len(shape)}, the input has rank {len(dims)}")
        for d, n in zip(dims, shape):
            if d.HasField("dim_value") and d.dim_value != n:
                raise ValueError(f"onnx.load: shapes[{name!r}] = {tuple(shape)}, but the model fixes that "
                                 f"dimension to {d.dim_value}")
            d.Clear()
            d.dim_value = int(n)


def _infer(model: Any) -> dict[str, Any]:
    """ValueInfo of every value (inputs, initializers, node outputs) after onnx shape inference."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except onnx.shape_inference.InferenceError as e:
        if not any(f"(op_type:{op})" in str(e) for op in SHAPE_PRESERVING):
            raise ValueError(f"onnx model {model.graph.name!r}: shape inference failed: {e}") from None
        # onnx's own function body of such an op can fail its checks (MeanVarianceNormalization
        # at opset 13: a Constant without a value): its output takes the input's shape
        # (`_annotate_shape_preserving`), so the rest is inferred without it
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=False, data_prop=True)
    g = inferred.graph
    infos = {v.name: v for v in [*g.input, *g.value_info, *g.output]}
    for t in g.initializer:
        infos[t.name] = onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
    return infos


def _value(name: str, info: Any, label: str) -> Value:
    """A Value with a static shape and an autotune dtype, or a ValueError naming it."""
    from onnx import helper

    shape = static_shape(info)
    if shape is None:
        dims = info.type.tensor_type.shape.dim
        unknown = [f"dim {k} ({d.dim_param or '?'})" for k, d in enumerate(dims) if not d.HasField("dim_value")]
        hint = f"; bind it with shapes={{{name!r}: (...)}}" if label.startswith("input") else ""
        raise ValueError(f"onnx.load: {label} has an unknown shape "
                         f"({', '.join(unknown) or 'no shape'}){hint}")
    elem = info.type.tensor_type.elem_type
    dtype = str(np.dtype(helper.tensor_dtype_to_np_dtype(elem))) if elem else "undefined"
    if dtype == "undefined" or not _known_dtype(dtype):
        raise ValueError(f"onnx.load: {label} has dtype {dtype}, which autotune does not support")
    return Value(name, shape, dtype)


def _convert(model: Any, infos: dict[str, Any]) -> Graph:
    from onnx import numpy_helper

    g = model.graph
    constants = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    inputs = [_value(i.name, infos[i.name], f"input {i.name!r}") for i in g.input if i.name not in constants]
    values = {v.name: v for v in inputs}
    for name, array in constants.items():
        values[name] = Value(name, tuple(array.shape), str(array.dtype))
    b = Builder(values, constants, reserved={o for n in g.node for o in n.output},
                model_inputs={v.name for v in inputs})
    for index, node in enumerate(g.node):
        b.node_name, b.op_type = node_name(node, index), node.op_type
        if node.op_type in FOLD_ONLY:
            raise ValueError(f"{node.op_type} {b.node_name!r}: its inputs must be constants or static shapes")
        b.outputs = tuple(node.output)
        for o in node.output:
            if o:
                values[o] = _value(o, infos.get(o, _missing(o)), f"output {o!r} of node {b.node_name!r}")
        CONVERTERS[node.op_type].convert(b, node, attributes(node))
    outputs = [b.values[o.name] for o in g.output]
    used = {i for n in b.nodes for i in n.inputs} | {o.name for o in outputs}
    graph = Graph(inputs, outputs, {n: v for n, v in b.values.items() if n in used or n not in b.constants},
                  {n: a for n, a in b.constants.items() if n in used}, b.nodes, name=g.name or "graph",
                  guards=tuple(b.guards))
    graph.validate()
    return graph


def _missing(name: str) -> Any:
    from onnx import helper

    return helper.make_empty_tensor_value_info(name)


def _known_dtype(dtype: str) -> bool:
    try:
        dtype_info(dtype)
    except TypeError:
        return False
    return True
