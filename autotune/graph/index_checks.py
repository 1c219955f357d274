"""Range checks of runtime indices, made where the user's data enters the model.

A `take` kernel (ONNX Gather) counts negative indices back from the end and clips the rest into
range, so a bad index never reads outside its table; but a clipped index is a wrong row, and
onnxruntime rejects it. Token ids and other indices usually come straight from a model input
(through a cast to int32 and views), so those inputs are checked in `run` before any kernel and
a bad index is a ValueError naming the input, the node and the value. Indices computed inside
the model are left to the kernel's clipping.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..topi.movement import first_out_of_range
from .ir import Graph

PASS_THROUGH = ("cast",)      # kernels that carry an index value unchanged (views do too)


@dataclass(frozen=True)
class IndexCheck:
    node: str       # the take node
    source: str     # the model input its indices come from
    rows: int       # valid indices: [-rows, rows)

    def __call__(self, feeds: Mapping[str, np.ndarray]) -> None:
        bad = first_out_of_range(feeds[self.source], self.rows)
        if bad is not None:
            raise ValueError(f"input {self.source!r}: index {bad} is out of range for node {self.node!r}, "
                             f"which gathers from {self.rows} entries (valid: {-self.rows}..{self.rows - 1})")


def index_checks(graph: Graph) -> list[IndexCheck]:
    """A check per take node whose indices are a model input, reached through casts and views."""
    inputs = {v.name for v in graph.inputs}
    producer = {out: n for n in graph.nodes for out in n.outputs}
    checks = []
    for n in graph.nodes:
        if n.op != "take":
            continue
        source = n.inputs[1]
        while source in producer and (producer[source].is_view or producer[source].op in PASS_THROUGH):
            source = producer[source].inputs[0]
        if source in inputs:
            checks.append(IndexCheck(n.name, source, int(n.params["weight_shape"][0])))
    return checks
