"""Checks of each call's inputs, made where the user's data enters the model, before any kernel.

Index ranges: a `take` kernel (ONNX Gather) counts negative indices back from the end and clips
the rest into range, so a bad index never reads outside its table; but a clipped index is a wrong
row, and onnxruntime rejects it. Token ids and other indices usually come straight from a model
input (through a cast to int32 and views), so those inputs are checked in `run` and a bad index is
a ValueError naming the input, the node and the value. Indices computed inside the model are left
to the kernel's clipping.

Training guards (`TrainingGuard`): a Dropout runs as the identity, which is what it computes in
inference. Where the model takes its training mode as an input, a call that turns training on
with a nonzero ratio is a ValueError naming the node, never the identity in its place.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..topi.movement import first_out_of_range
from .ir import Graph, TrainingGuard

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


@dataclass(frozen=True)
class TrainingCheck:
    guard: TrainingGuard

    def __call__(self, feeds: Mapping[str, np.ndarray]) -> None:
        g = self.guard
        training = bool(feeds[g.training_mode]) if isinstance(g.training_mode, str) else g.training_mode
        ratio = float(feeds[g.ratio]) if isinstance(g.ratio, str) else g.ratio
        if training and ratio != 0:
            raise ValueError(f"node {g.node!r} (Dropout): training_mode is true with ratio {ratio}, which drops "
                             "at random; autotune runs models for inference: pass training_mode false")


def input_checks(graph: Graph) -> list[IndexCheck | TrainingCheck]:
    """The checks of the graph's inputs: its training guards, and the index range of each take
    node whose indices are a model input (reached through casts and views)."""
    return [*map(TrainingCheck, graph.guards), *_index_checks(graph)]


def _index_checks(graph: Graph) -> list[IndexCheck]:
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
