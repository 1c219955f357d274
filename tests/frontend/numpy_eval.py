"""A pure-numpy interpreter of autotune Graphs: each kernel node runs its template's numpy
`reference`, each view node reshapes. It checks the importer's decomposition (which templates,
which parameters, which input order) against onnxruntime without compiling a kernel; every
value it computes must have the shape and dtype the graph declares. (Imported via sys.path.)"""
from __future__ import annotations

from typing import Any

import numpy as np

from autotune.graph import Graph
from autotune.schedules import cpu
from autotune.schedules.task import TEMPLATES, Template


def template_of(op: str) -> Template | None:
    """The CPU template of `op`, or None when this branch does not have it."""
    cpu.load(op)
    return TEMPLATES.get((op, "llvm"))


def has_templates(*ops: str) -> bool:
    return all(template_of(op) is not None for op in ops)


def run(graph: Graph, feeds: dict[str, Any]) -> dict[str, np.ndarray]:
    """The graph's outputs for `feeds` (input name -> array)."""
    env: dict[str, np.ndarray] = dict(graph.constants)
    for v in graph.inputs:
        env[v.name] = np.asarray(feeds[v.name], dtype=v.dtype)
    for node in graph.nodes:
        args = [env[i] for i in node.inputs]
        if node.is_view:
            results = [args[0].reshape(graph.value(node.outputs[0]).shape)]
        else:
            tpl = template_of(node.op)
            assert tpl is not None, f"node {node.name!r}: no template {node.op!r}"
            assert np.dtype(node.dtype) in [a.dtype for a in args], f"node {node.name!r}: loaded for " \
                                                                    f"{node.dtype}, no input has that dtype"
            out = tpl.reference(*args, **node.params)
            results = list(out) if isinstance(out, (list, tuple)) else [out]
        for name, array in zip(node.outputs, results, strict=True):
            v = graph.value(name)
            array = np.asarray(array)
            assert array.shape == v.shape, f"node {node.name!r} ({node.op}): {name!r} is {array.shape}, " \
                                           f"the graph says {v.shape}"
            assert array.dtype == np.dtype(v.dtype), f"node {node.name!r} ({node.op}): {name!r} is " \
                                                     f"{array.dtype}, the graph says {v.dtype}"
            env[name] = array
    return {v.name: env[v.name] for v in graph.outputs}


def check_params(graph: Graph) -> None:
    """Every kernel node's template accepts its parameters and dtype (a task is created for it;
    nothing is compiled). Nodes whose template this branch lacks are left out."""
    from autotune.schedules.task import create_task

    for node in graph.nodes:
        if not node.is_view and template_of(node.op) is not None:
            create_task(node.op, dtype=node.dtype, **node.params)
