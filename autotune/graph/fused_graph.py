"""The fused graph: a Graph whose kernel nodes are the fusion groups' kernels, run by the same
executor and buffer planner as any graph.

`fuse(graph)` partitions (`fusion.partition`), lowers every group of two or more nodes to one
kernel (`fused_task.lower_group`) and rebuilds the graph: a group's intermediate values are gone
(never materialized, so never planned), view nodes of values that still exist are kept, folded
weights replace the constants only their conv read. A group that cannot be one computation runs
its nodes one by one, and `Fusion.groups` says why.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from .fused_task import GroupKernel, NotPointwise, lower_group
from .fusion import partition
from .ir import Graph, Node


@dataclass(frozen=True)
class FusedGroup:
    """One kernel of the fused graph: the source nodes it runs (kernel and view nodes), their ops,
    the fused node, and how it was made ("single", "template", "anchor", "te", or
    "unfused: <why>" for a node of a group that could not be one computation)."""

    nodes: tuple[str, ...]
    ops: tuple[str, ...]
    kernel: Node
    how: str


@dataclass(frozen=True)
class Fusion:
    graph: Graph
    groups: list[FusedGroup]

    def tasks(self) -> Counter[tuple[str, str, str]]:
        """Each distinct kernel (`Node.kernel_key`) with its weight: how many groups run it."""
        return Counter(g.kernel.kernel_key for g in self.groups)


def fuse(graph: Graph) -> Fusion:
    """The fused graph of a validated graph and its groups, in the order they run. Nodes no
    output depends on are dropped first: a group must not compute what nothing reads."""
    graph = _live(graph)
    groups: list[FusedGroup] = []
    kernels: list[Node] = []
    added: dict[str, Any] = {}
    for members in partition(graph):
        nodes = [graph.nodes[i] for i in members]
        for g, extra in _lower(graph, members, nodes):
            groups.append(g)
            kernels.append(g.kernel)
            kernels.extend(extra.views)
            added.update({v.name: (v, a) for v, a in extra.constants})
            added.update({v.name: (v, None) for v in extra.values})
    return Fusion(_rebuild(graph, kernels, added), groups)


def _live(graph: Graph) -> Graph:
    """The graph without the nodes whose outputs no graph output depends on."""
    needed = {v.name for v in graph.outputs}
    keep = []
    for n in reversed(graph.nodes):
        if needed.intersection(n.outputs):
            keep.append(n)
            needed.update(n.inputs)
    if len(keep) == len(graph.nodes):
        return graph
    return replace(graph, nodes=keep[::-1])


def _lower(graph: Graph, members: list[int], nodes: list[Node]) -> list[tuple[FusedGroup, GroupKernel]]:
    if len(nodes) == 1:
        return [(FusedGroup((nodes[0].name,), (nodes[0].op,), nodes[0], "single"), GroupKernel(nodes[0], "single"))]
    try:
        kernel = lower_group(graph, nodes)
    except (NotPointwise, ValueError) as e:
        why = f"unfused: {e}".splitlines()[0]
        return [(FusedGroup((n.name,), (n.op,), n, why), GroupKernel(n, why)) for n in nodes]
    names = [graph.nodes[i].name for i in sorted({*members, *_inner_views(graph, nodes)})]
    return [(FusedGroup(tuple(dict.fromkeys(names)), tuple(n.op for n in nodes), kernel.node, kernel.how), kernel)]


def _inner_views(graph: Graph, nodes: list[Node]) -> list[int]:
    """View nodes between members: their input is a member's output (or such a view) and only
    members read them."""
    produced = {n.outputs[0] for n in nodes}
    read = {v for n in nodes for v in n.inputs}
    inner = []
    for i, n in enumerate(graph.nodes):
        if n.is_view and n.inputs[0] in produced and n.outputs[0] in read:
            produced.add(n.outputs[0])
            inner.append(i)
    return inner


def _rebuild(graph: Graph, kernels: list[Node], added: dict[str, Any]) -> Graph:
    """Kernels in dependency order, the views whose input still exists, and only the constants
    something reads."""
    constants = dict(graph.constants) | {name: a for name, (_, a) in added.items() if a is not None}
    values = dict(graph.values) | {name: v for name, (v, _) in added.items()}
    available = {v.name for v in graph.inputs} | set(constants) | {o for k in kernels for o in k.outputs}
    views = [n for n in graph.nodes if n.is_view]
    nodes = _order(list(kernels), views, available)
    read = {v for n in nodes for v in n.inputs} | {v.name for v in graph.outputs}
    fused = Graph(list(graph.inputs), list(graph.outputs), values,
                  {k: a for k, a in constants.items() if k in read}, nodes, graph.name)
    fused.validate()
    return fused


def _order(kernels: list[Node], views: list[Node], available: set[str]) -> list[Node]:
    """Every kernel, and every view of an existing value, each after the nodes it reads."""
    pending = kernels + [v for v in views if v.outputs[0] not in {o for k in kernels for o in k.outputs}]
    ready = set(available) - {o for n in pending for o in n.outputs}
    out: list[Node] = []
    while True:
        step = [n for n in pending if all(v in ready for v in n.inputs)]
        if not step:
            return out
        n = step[0]
        out.append(n)
        ready.update(n.outputs)
        pending.remove(n)
