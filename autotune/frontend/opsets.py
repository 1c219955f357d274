"""Which ONNX opsets the frontend takes, and how a model stamped outside them can still load.

A model carries one default-domain opset, and each op means its newest version at or below it.
The converters are written against opsets 13 to 21 (SUPPORTED_OPSETS). Most later versions only
widened types (bfloat16, float8, int4, ...), and many earlier ones match 13 too, so a model
stamped outside the range loads at the nearest supported opset when every node's op has the
same signature there (inputs, outputs, attributes with their defaults), strict shape inference
with type checks still passes there, and no node uses a meaning that changed without
a signature change (CHANGED_MEANING), or the change can be written in the older ops (a pool
whose newer version drops a last window: the older pool, then a Slice). An attribute that later
became an input (ATTRIBUTE_INPUTS: Unsqueeze's axes, Split's split, Dropout's ratio, as PyTorch
exports them at opsets 11 and 12) moves up as that input, a constant. Otherwise one ValueError
names each op that stops it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .builder import attributes

SUPPORTED_OPSETS = range(13, 22)


def default_opset(model: Any) -> int | None:
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return versions[0] if versions else None


def at_supported_opset(model: Any) -> Any:
    """`model` if its opset is supported, else the model restamped (`restamp`); ValueError when
    it cannot be, naming what stops it."""
    moved, blockers = _restamped(model, SUPPORTED_OPSETS)
    if blockers:
        first, last = SUPPORTED_OPSETS.start, SUPPORTED_OPSETS.stop - 1
        raise ValueError(f"onnx model: opset {default_opset(model)} is not supported (supported: {first}..{last}) "
                         f"and the model cannot run at the nearest: {'; '.join(blockers)}; convert it with "
                         f"onnx.version_converter")
    return moved


def restamp(model: Any, opsets: range) -> Any:
    """`model` at the nearest opset in `opsets` where its nodes mean what they meant (module
    docstring); `model` itself where that cannot be or it is already in range."""
    moved, blockers = _restamped(model, opsets)
    return model if blockers else moved


def _restamped(model: Any, opsets: range) -> tuple[Any, list[str]]:
    """(the model at the nearest opset in `opsets`, []) or (model, what stops the move)."""
    import onnx

    opset = default_opset(model)
    if opset is None:
        return model, ["no default-domain opset is imported"]
    target = min(max(opset, opsets.start), opsets.stop - 1)
    if target == opset:
        return model, []
    blockers, drops, as_inputs = _changed_ops(model, opset, target)
    if blockers:
        return model, blockers
    moved = onnx.ModelProto()
    moved.CopyFrom(model)
    next(o for o in moved.opset_import if o.domain in ("", "ai.onnx")).version = target
    fresh = _fresh_names(moved.graph)
    _attributes_to_inputs(moved.graph, as_inputs, fresh)
    _drop_last_windows(moved.graph, drops, fresh)
    try:   # a type the older version lacks, or its shape inference disagreeing with the model's shapes
        onnx.shape_inference.infer_shapes(moved, check_type=True, strict_mode=True)
    except onnx.shape_inference.InferenceError as e:
        return model, [f"at opset {target} it fails {type(e).__name__}: {str(e).splitlines()[0][:200]}"]
    return moved, []


def _changed_ops(model: Any, opset: int, target: int
                 ) -> tuple[list[str], dict[int, list[int]], dict[int, tuple[str, int, Any]]]:
    """(one line per op whose signature or meaning differs between `opset` and `target`, the
    nodes that move down to `target` as their old op and a Slice: node index -> output axes
    whose last element the newer meaning drops, the nodes that move up with an attribute as an
    input: node index -> ATTRIBUTE_INPUTS' entry)."""
    out: dict[str, str] = {}
    drops: dict[int, list[int]] = {}
    as_inputs: dict[int, tuple[str, int, Any]] = {}
    shapes: dict[str, tuple[int, ...] | None] | None = None
    for index, node in enumerate(model.graph.node):
        if node.op_type in out:
            continue
        named = f"{node.op_type} ({node.name!r})" if node.name else node.op_type
        if not _same_signature(node, opset, target):
            move = _attribute_move(node, opset, target)
            if move is None:
                out[node.op_type] = f"{named} differs between opsets {opset} and {target}"
            else:
                as_inputs[index] = move
            continue
        for (op, since), dropped in CHANGED_MEANING.items():
            if op != node.op_type or not min(opset, target) < since <= max(opset, target):
                continue
            shapes = _static_shapes(model) if shapes is None else shapes
            axes = dropped(node, shapes.get(node.input[0]))
            if axes is None or (axes and target >= since):   # only the newer meaning drops, never adds
                out[op] = f"{named} means something else at opset {since} and later"
            elif axes:
                drops[index] = axes
    return list(out.values()), drops, as_inputs


def _attribute_move(node: Any, opset: int, target: int) -> tuple[str, int, Any] | None:
    """The ATTRIBUTE_INPUTS entry that takes `node` up from `opset` to `target`: its op is the
    same from `opset` until the attribute became an input, and the same from then to `target`."""
    for (op, since), move in ATTRIBUTE_INPUTS.items():
        if op != node.op_type or not opset < since <= target:
            continue
        if _signature(op, node.domain, opset) != _signature(op, node.domain, since - 1):
            return None
        import onnx

        bare = onnx.NodeProto()
        bare.CopyFrom(node)
        _pop_attribute(bare, move[0])
        return move if _same_signature(bare, since, target) else None
    return None


def _pop_attribute(node: Any, name: str) -> list[Any]:
    """Remove the attribute `name` from `node`; the removed AttributeProtos (none when unset)."""
    given = [a for a in node.attribute if a.name == name]
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept)
    return given


def _fresh_names(graph: Any) -> Callable[[str], str]:
    """A function giving names no value of `graph` has yet, each once."""
    taken = {n for node in graph.node for n in (*node.input, *node.output)} | {i.name for i in graph.initializer}

    def fresh(name: str) -> str:
        k = 0
        while f"{name}.{k}" in taken:
            k += 1
        taken.add(f"{name}.{k}")
        return f"{name}.{k}"

    return fresh


def _attributes_to_inputs(graph: Any, as_inputs: dict[int, tuple[str, int, Any]], fresh: Callable[[str], str]) -> None:
    """Each node of `as_inputs` without its attribute; the attribute's value, when it was set,
    is a constant at the input position it became (an unset one meant the input's absence)."""
    from onnx import helper, numpy_helper

    for index, (name, position, dtype) in as_inputs.items():
        node = graph.node[index]
        given = _pop_attribute(node, name)
        if not given:
            continue
        constant = fresh(f"{node.output[0]}.{name}")
        graph.initializer.append(numpy_helper.from_array(np.asarray(helper.get_attribute_value(given[0]), dtype),
                                                         constant))
        while len(node.input) <= position:
            node.input.append("")
        node.input[position] = constant


def _drop_last_windows(graph: Any, drops: dict[int, list[int]], fresh: Callable[[str], str]) -> None:
    """Each node of `drops` writes fresh names, and a Slice per output drops the last element of
    the given axes into the node's own outputs: the older op computes every window, the newer
    meaning all but those."""
    from onnx import helper, numpy_helper

    nodes = list(graph.node)
    for index in sorted(drops, reverse=True):
        node, axes = nodes[index], drops[index]
        constants = {"starts": [0] * len(axes), "ends": [-1] * len(axes), "axes": axes}
        names = {k: fresh(f"{node.output[0]}.drop_last_{k}") for k in constants}
        graph.initializer.extend(numpy_helper.from_array(np.array(v, np.int64), names[k]) for k, v in constants.items())
        slices = []
        for position, out in enumerate(node.output):
            if out:
                node.output[position] = fresh(f"{out}.every_window")
                slices.append(helper.make_node("Slice", [node.output[position], names["starts"], names["ends"],
                                                         names["axes"]], [out]))
        nodes[index + 1:index + 1] = slices
    del graph.node[:]
    graph.node.extend(nodes)


def _static_shapes(model: Any) -> dict[str, tuple[int, ...] | None]:
    """Each value's shape by onnx shape inference at the model's own opset (None: not static)."""
    import onnx

    try:
        graph = onnx.shape_inference.infer_shapes(model).graph
    except onnx.shape_inference.InferenceError:
        return {}
    out: dict[str, tuple[int, ...] | None] = {}
    for info in (*graph.input, *graph.value_info, *graph.output):
        dims = info.type.tensor_type.shape.dim
        out[info.name] = tuple(d.dim_value for d in dims) if all(d.HasField("dim_value") for d in dims) else None
    return out


def _last_windows_in_padding(node: Any, shape: tuple[int, ...] | None) -> list[int] | None:
    """The output axes along which a ceil-mode pool's last window starts in the right padding
    (where the two meanings differ); None when the input's shape is not known, or auto_pad sets
    the pads."""
    attrs = attributes(node)
    if attrs.get("ceil_mode", 0) != 1:
        return []
    if shape is None or attrs.get("auto_pad", "NOTSET") != "NOTSET":
        return None
    spatial = shape[2:]
    kernel = attrs.get("kernel_shape", [1] * len(spatial))
    strides = attrs.get("strides", [1] * len(spatial))
    dilations = attrs.get("dilations", [1] * len(spatial))
    pads = attrs.get("pads", [0] * 2 * len(spatial))
    axes = []
    for i, size in enumerate(spatial):
        begin, end = pads[i], pads[i + len(spatial)]
        span = size + begin + end - dilations[i] * (kernel[i] - 1) - 1
        count = -(-span // strides[i]) + 1
        if (count - 1) * strides[i] >= size + begin:
            axes.append(2 + i)
    return axes


# (op, first opset of the new meaning) -> given a node and its input's shape (None: unknown), the
# output axes whose last element the new meaning drops ([]: the meanings agree for this node), or
# None when that cannot be told. MaxPool-22 and AveragePool-22 drop a ceil-mode output window that
# would start in the right padding, which the earlier versions keep: such a node moves down as the
# earlier pool and a Slice (`_drop_last_windows`).
CHANGED_MEANING: dict[tuple[str, int], Callable[[Any, tuple[int, ...] | None], list[int] | None]] = {
    ("MaxPool", 22): _last_windows_in_padding,
    ("AveragePool", 22): _last_windows_in_padding,
}

# (op, the first opset where the attribute is an input) -> (the attribute, the input position it
# took, the dtype of that input's constant). The input is optional or the attribute was required
# before, so an unset attribute moves up as an absent input, meaning what it meant.
ATTRIBUTE_INPUTS: dict[tuple[str, int], tuple[str, int, Any]] = {
    ("Dropout", 12): ("ratio", 1, np.float32),
    ("Split", 13): ("split", 1, np.int64),
    ("Squeeze", 13): ("axes", 1, np.int64),
    ("Unsqueeze", 13): ("axes", 1, np.int64),
    ("ReduceSum", 13): ("axes", 1, np.int64),
}


def _same_signature(node: Any, opset: int, target: int) -> bool:
    """Same inputs and outputs, and the same attributes but for optional ones only one version
    has and the node leaves unset (ONNX gives an added attribute's default the old meaning)."""
    before, after = (_signature(node.op_type, node.domain, v) for v in (opset, target))
    if before is None or after is None or before[:2] != after[:2]:
        return False
    (*_, old), (*_, new) = before, after
    given = {a.name for a in node.attribute}
    for name in old.keys() | new.keys():
        if name in old and name in new:
            if old[name] != new[name]:
                return False
        elif name in given or (old.get(name) or new[name])[1]:
            return False
    return True


def _signature(op: str, domain: str, opset: int) -> tuple | None:
    """What a node depends on in its op's schema at `opset`: None where the op does not exist."""
    import onnx

    try:
        s = onnx.defs.get_schema(op, opset, domain)
    except onnx.defs.SchemaError:
        return None
    if s.deprecated:
        return None
    attrs = {n: (a.type, a.required, a.default_value.SerializeToString()) for n, a in s.attributes.items()}
    return _formal(s.inputs), _formal(s.outputs), attrs


def _formal(params: Sequence[Any]) -> list[tuple[str, Any, str]]:
    return [(p.name, p.option, p.type_str) for p in params]
