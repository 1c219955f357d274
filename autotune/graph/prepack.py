"""Weights packed at compile time: a matmul or dense node whose weight is a graph constant
becomes its `*_packed` node, reading a constant already in the kernels' panel layout.

The plain kernels pack the weight into column panels on every call; ONNX Runtime's MLAS and
TVM's alter-op-layout pack a constant weight once. The panel width is the layout: the fastest
tuned `*_packed` kernel's panel when the database has one for the shape, else the tuned plain
kernel's tile width (what its search found), else the rule (`default_panel`: two vectors, or one
where that pads the last panel less).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..runtime import readable_db
from ..schedules.cpu.panels import PANEL_WIDTHS, default_panel, pack_panels
from ..schedules.task import create_task
from ..target import Target
from .ir import Graph, Node

PACKED = {"matmul": ("matmul_packed", False), "dense": ("dense_packed", True)}   # op -> (packed op, W is N x K)
FLOATS = ("float32", "float64")


def prepack_weights(graph: Graph, target: str = "llvm", db: Any = None) -> Graph:
    """The graph with every packable node's weight packed (a new Graph; `graph` is unchanged).
    A weight shared by several nodes is packed once per panel width."""
    if not any(_packable(graph, n) for n in graph.nodes) or Target.parse(target).kind != "llvm":
        return graph
    with readable_db(db) as tdb:
        panels = {i: choose_panel(n, target, tdb) for i, n in enumerate(graph.nodes) if _packable(graph, n)}
    constants = dict(graph.constants)
    values = dict(graph.values)
    nodes: list[Node] = []
    for i, n in enumerate(graph.nodes):
        if i not in panels:
            nodes.append(n)
            continue
        op, transposed = PACKED[n.op]
        panel = panels[i]
        name = f"{n.inputs[1]}.panels{panel}"
        if name not in constants:
            constants[name] = pack_panels(graph.constants[n.inputs[1]], panel, transposed)
            values[name] = replace(graph.value(n.inputs[1]), name=name, shape=constants[name].shape)
        nodes.append(replace(n, op=op, inputs=(n.inputs[0], name, *n.inputs[2:]), params={**n.params, "panel": panel}))
    used = {v for n in nodes for v in n.inputs} | {v.name for v in graph.outputs}
    constants = {k: a for k, a in constants.items() if k in used}
    values = {k: v for k, v in values.items() if k not in graph.constants or k in used}
    return Graph(graph.inputs, graph.outputs, values, constants, nodes, graph.name, graph.guards)


def _packable(graph: Graph, node: Node) -> bool:
    return node.op in PACKED and node.dtype in FLOATS and node.inputs[1] in graph.constants


def choose_panel(node: Node, target: str, tdb: Any) -> int:
    """The panel width for `node` (see the module docstring for the order)."""
    tgt = Target.parse(target)
    if tdb is not None:
        op = PACKED[node.op][0]
        keys = {p: create_task(op, target=tgt, dtype=node.dtype, **node.params, panel=p).workload_key
                for p in PANEL_WIDTHS}
        timed = [(r.cost, p) for p, key in keys.items() if (r := tdb.best(key, tgt.key)) is not None]
        if timed:
            return min(timed)[1]
        task = create_task(node.op, target=tgt, dtype=node.dtype, **node.params)
        plain = tdb.best(task.workload_key, tgt.key)
        if plain is not None:
            width = int(task.config(plain.config)["tile_x"].size[-1])
            if width in PANEL_WIDTHS:
                return width
    return default_panel(tgt, node.dtype, node.params["N"])
