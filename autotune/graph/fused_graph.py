"""The fused graph: a Graph whose kernel nodes are the fusion groups' kernels, run by the same
executor and buffer planner as any graph.

`fuse(graph)` partitions (`fusion.partition`), lowers every group of two or more nodes to one
kernel (`fused_task.lower_group`) and rebuilds the graph: a group's intermediate values are gone
(never materialized, so never planned), view nodes of values that still exist are kept, folded
weights replace the constants only their conv read. A group that cannot be one computation runs
its nodes one by one, and `Fusion.groups` says why. With a channel block, the convs and max pools
that `layout.plan_layout` picks are lowered again to read and write their activations blocked,
and a conversion kernel follows each blocked value that something still reads as NCHW.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from . import layout
from .fused_task import GroupKernel, NotPointwise, lower_group
from .fusion import chain_budget, partition
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


Lowered = list[tuple[FusedGroup, GroupKernel]]


def fuse(graph: Graph, block: int = 0, target: str = "llvm") -> Fusion:
    """The fused graph of a validated graph and its groups, in the order they run, for `target`
    (its caches bound GEMM chains). Nodes no output depends on are dropped first: a group must
    not compute what nothing reads. With a `block`, convs and max pools keep their activations
    blocked between them (`layout`)."""
    graph = _live(graph)
    parts = [(members, [graph.nodes[i] for i in members]) for members in partition(graph, chain_budget(target))]
    lowered = [_lower(graph, members, nodes) for members, nodes in parts]
    added: dict[str, Any] = {}
    if block:
        lowered = _blocked(graph, parts, lowered, block, added)
    groups: list[FusedGroup] = []
    kernels: list[Node] = []
    for part in lowered:
        for g, extra in part:
            groups.append(g)
            kernels.append(g.kernel)
            kernels.extend(extra.views)
            added.update({v.name: (v, a) for v, a in extra.constants})
            added.update({v.name: (v, None) for v in extra.values})
    return Fusion(_rebuild(graph, kernels, added), groups)


def _blocked(graph: Graph, parts: list[tuple[list[int], list[Node]]], lowered: list[Lowered], block: int,
             added: dict[str, Any]) -> list[Lowered]:
    """The groups again with the values `layout.plan_layout` picks kept blocked: their convs and
    pools lowered for the blocked layout, a conversion after each blocked value that something
    still reads as NCHW; the blocked values' Values go into `added`."""
    whole = [(nodes, part[0][1]) for (_, nodes), part in zip(parts, lowered) if len(part) == 1]
    plan = layout.plan_layout(whole, block)
    if not plan.blocked:
        return lowered
    out: list[Lowered] = []
    for (members, nodes), part in zip(parts, lowered):
        node = part[0][1].node
        if len(part) == 1 and node.op == "max_pool2d" and node.outputs[0] in plan.blocked:
            k = layout.blocked_pool(node, plan)
            part = [(replace(part[0][0], kernel=k.node, how="layout: blocked"), k)]
        elif len(part) == 1 and node.op != "max_pool2d" and {node.inputs[0], node.outputs[0]} & plan.blocked:
            part = _lower(graph, members, nodes, plan)
        out.append(part)
    nchw_readers = {v for part in out for _, k in part for v in k.node.inputs}
    nchw_readers |= {v for n in graph.nodes if n.is_view for v in n.inputs} | {v.name for v in graph.outputs}
    source = {plan.name(v): v for v in plan.blocked}
    for part in out:
        for _, k in list(part):
            if k.node.outputs[0] not in source:
                continue
            value = graph.value(source[k.node.outputs[0]])
            added[plan.name(value.name)] = (layout.blocked_value(value, plan), None)
            if value.name in nchw_readers:
                back = layout.unblock(value, plan)
                part.append((FusedGroup((), ("unblock",), back.node, back.how), back))
    return out


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


def _lower(graph: Graph, members: list[int], nodes: list[Node], plan: layout.Layout | None = None) -> Lowered:
    if len(nodes) == 1:
        return [(FusedGroup((nodes[0].name,), (nodes[0].op,), nodes[0], "single"), GroupKernel(nodes[0], "single"))]
    try:
        kernel = lower_group(graph, nodes, plan)
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
                  {k: a for k, a in constants.items() if k in read}, nodes, graph.name, graph.guards)
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
