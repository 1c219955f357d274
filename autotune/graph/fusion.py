"""The partitioner: groups a Graph's kernel nodes into fused kernels.

Every op has a pattern kind (`KINDS`, TVM's OpPatternKind), and the rules are written on kinds,
never on models or op sequences:
- ELEMWISE / BROADCAST (pointwise) nodes join the group of a producer: a pointwise chain, the
  epilogue of a reduction, or the epilogue of an anchor (bias, activation, residual add, scaling,
  a batch norm that `fused_task` folds into the conv's weights);
- a REDUCTION joins a pure pointwise producer group (its prologue), and a pointwise node whose
  only consumer is a reduction starts that prologue rather than extending another group's
  epilogue: the residual add before a layer norm fuses with the norm; a reduction over the same
  rows as a reduction group's joins it, with the pointwise nodes between (`_same_rows`: a layer
  norm or softmax exported op by op is one kernel, as the row templates are);
- OUT_EWISE (conv, matmul) anchors start a group: they take epilogues, nothing before them;
- a matmul whose left operand is a one-matmul group's output chains onto that group when the
  operand fits the chain budget (`chain_budget`: half of L2), as CUTLASS's back-to-back GEMM
  does: two layers of an MLP run in one kernel and the intermediate stays in cache. Two
  products at most: each brings its own knobs, and one task's space multiplies by them;
- INJECTIVE ops (layout changes: transpose, pad, concat...) and OPAQUE ops start a group and
  end it (injective ones take a pointwise epilogue).
A group's intermediate values are never materialized, so a value read outside its group (or a
graph output) must be the output of its group's last node: a group where that fails is cut
after the value's producer (a boundary) and the graph partitioned again. View nodes move no data:
the rules see through them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..dtype import dtype_info
from ..schedules.cpu.elementwise import BINARY, UNARY
from ..schedules.cpu.logic import COMPARISONS
from ..target import Target
from .ir import Graph, Node

ELEMWISE, BROADCAST, INJECTIVE, REDUCTION, OUT_EWISE, OPAQUE = (
    "elemwise", "broadcast", "injective", "reduction", "out_ewise_fusable", "opaque")

_UNARY = (*UNARY, "leaky_relu", "elu", "hard_sigmoid", "clip", "cast")
_BINARY = (*BINARY, "where", *COMPARISONS, "batch_norm")       # batch norm: x with per-channel constants broadcast
KINDS: dict[str, str] = {
    **dict.fromkeys(_UNARY, ELEMWISE), **dict.fromkeys(_BINARY, BROADCAST),
    **dict.fromkeys(("transpose", "expand", "pad", "concat", "slice", "take"), INJECTIVE),
    **dict.fromkeys(("sum", "mean", "max", "min", "softmax", "log_softmax", "layer_norm", "rms_norm"), REDUCTION),
    **dict.fromkeys(("conv2d", "conv2d_grouped", "matmul", "matmul_packed"), OUT_EWISE),
}
POINTWISE = (ELEMWISE, BROADCAST)
ROW_REDUCTIONS = ("sum", "mean", "max", "min")     # the generic reductions (params shape, axes, keepdims)
MATMULS = ("matmul", "matmul_packed")
CHAIN_PRODUCTS = 2            # matmuls in one GEMM chain

# group state -> the node kinds that may join it
_JOINS: dict[str, tuple[str, ...]] = {
    "pointwise": (*POINTWISE, REDUCTION), "injective": POINTWISE, REDUCTION: POINTWISE,
    OUT_EWISE: POINTWISE, OPAQUE: (),
}


def kind_of(node: Node) -> str:
    """The node's pattern kind: the table's, OPAQUE for ops not in it and multi-output nodes."""
    return KINDS.get(node.op, OPAQUE) if len(node.outputs) == 1 else OPAQUE


@dataclass
class Group:
    """Kernel node indices (topological order) fused into one kernel; `state` says what it may
    still take (`_JOINS`); `deps` the groups it reads from."""

    nodes: list[int]
    state: str
    deps: set[int] = field(default_factory=set)


class _Uses:
    """Who reads each value, seen through view nodes: `producer[v]` is the kernel node index
    writing v's storage, `readers[v]` the kernel node indices reading it (or a view of it)."""

    def __init__(self, graph: Graph) -> None:
        self.root: dict[str, str] = {}
        self.producer: dict[str, int] = {}
        self.readers: dict[str, list[int]] = {}
        for i, n in enumerate(graph.nodes):
            for v in n.inputs:
                r = self.root.get(v, v)
                if n.is_view:
                    self.root[n.outputs[0]] = r
                elif i not in self.readers.setdefault(r, []):
                    self.readers[r].append(i)
            if not n.is_view:
                self.producer.update((o, i) for o in n.outputs)
        self.outputs = {self.root.get(v.name, v.name) for v in graph.outputs}

    def of(self, value: str) -> str:
        return self.root.get(value, value)


def chain_budget(target: str) -> int:
    """The most bytes a GEMM chain's intermediate may take: half of a CPU target's L2, so that it
    is still in cache when the next product reads it (two products' working sets then share the
    cache); 0, no chains, on other targets."""
    tgt = Target.parse(target)
    return tgt.cpu.l2_bytes // 2 if tgt.kind == "llvm" else 0


def partition(graph: Graph, chain_bytes: int = 0) -> list[list[int]]:
    """The fusion groups of a validated graph: lists of kernel node indices, every kernel node in
    exactly one, in an order where each group comes after the groups it reads. Matmuls chain
    where the intermediate takes at most `chain_bytes` (`chain_budget`)."""
    uses = _Uses(graph)
    boundaries: set[int] = set()
    while True:
        groups, owner = _assign(graph, uses, boundaries, chain_bytes)
        cut = _escapes(graph, uses, groups, owner)
        if not cut:
            return [g.nodes for g in groups]
        assert not cut <= boundaries, "a boundary must end its group"
        boundaries |= cut


def _assign(graph: Graph, uses: _Uses, boundaries: set[int], chain_bytes: int) -> tuple[list[Group], dict[int, int]]:
    """One greedy pass in node order: each kernel node joins the first producer group whose state
    takes its kind (and that no other input's group depends on, and that no boundary ends), or
    starts its own."""
    groups: list[Group] = []
    owner: dict[int, int] = {}
    for i, n in enumerate(graph.nodes):
        if n.is_view:
            continue
        kind = kind_of(n)
        inputs = [uses.producer[uses.of(v)] for v in n.inputs if uses.of(v) in uses.producer]
        deps = {owner[p] for p in inputs}
        target = next((owner[p] for p in inputs if groups[owner[p]].nodes[-1] not in boundaries
                       and _can_join(graph, uses, groups, owner, p, i, kind, deps, chain_bytes)), None)
        if target is None:
            groups.append(Group([i], _start_state(kind), deps))
            owner[i] = len(groups) - 1
            continue
        g = groups[target]
        g.nodes.append(i)
        g.deps |= deps - {target}
        g.state = REDUCTION if kind == REDUCTION else g.state
        owner[i] = target
    return groups, owner


def _start_state(kind: str) -> str:
    return {ELEMWISE: "pointwise", BROADCAST: "pointwise", REDUCTION: REDUCTION, INJECTIVE: "injective",
            OUT_EWISE: OUT_EWISE}.get(kind, OPAQUE)


def _can_join(graph: Graph, uses: _Uses, groups: list[Group], owner: dict[int, int], producer: int, node: int,
              kind: str, deps: set[int], chain_bytes: int) -> bool:
    target = owner[producer]
    g = groups[target]
    takes = kind in _JOINS[g.state] or _chains(graph, uses, g, node, chain_bytes) or _same_rows(graph, g, node)
    if not takes or graph.nodes[producer].outputs[0] in uses.outputs:
        return False
    if not _reads(graph, uses, node, g.nodes[-1]):
        return False                       # a second branch: the group's last node would not be its only output
    if kind in POINTWISE and g.state in (OUT_EWISE, REDUCTION, "injective") and _feeds_reduction(graph, uses, node) \
            and not _same_rows(graph, g, uses.readers[graph.nodes[node].outputs[0]][0]):
        return False                       # it is the prologue of the reduction it feeds
    return not any(_depends(groups, d, target) for d in deps - {target})


def _chains(graph: Graph, uses: _Uses, g: Group, node: int, chain_bytes: int) -> bool:
    """Whether matmul `node` chains onto matmul group g: g has fewer than CHAIN_PRODUCTS matmuls,
    `node`'s left operand (not its right) is g's output, read by nothing else, and takes at most
    `chain_bytes`."""
    n, a = graph.nodes[node], graph.value(graph.nodes[node].inputs[0])
    products = sum(graph.nodes[i].op in MATMULS for i in g.nodes)
    return (g.state == OUT_EWISE and n.op in MATMULS and graph.nodes[g.nodes[0]].op in MATMULS
            and products < CHAIN_PRODUCTS
            and uses.producer.get(uses.of(a.name)) == g.nodes[-1] and uses.readers[uses.of(a.name)] == [node]
            and uses.producer.get(uses.of(n.inputs[1])) not in g.nodes
            and math.prod(a.shape) * dtype_info(a.dtype).bytes <= chain_bytes)


def _same_rows(graph: Graph, g: Group, node: int) -> bool:
    """Whether reduction `node` reduces the same trailing axes of the same shape as every
    reduction of reduction group g: a variance after its mean (a layer norm exported op by op),
    a sum of exponentials after its row maximum. Both are then statistics of one row, computed
    in the row loop of one kernel as the row templates do (`ROW_REDUCTIONS` only)."""
    n = graph.nodes[node]
    reds = [graph.nodes[i] for i in g.nodes if kind_of(graph.nodes[i]) == REDUCTION]
    if g.state != REDUCTION or n.op not in ROW_REDUCTIONS or not reds:
        return False
    rank = len(n.params["shape"])

    def rows(r: Node) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return tuple(r.params["shape"]), tuple(sorted(a % rank for a in r.params["axes"]))

    shape, axes = rows(n)
    return axes == tuple(range(rank - len(axes), rank)) and all(
        r.op in ROW_REDUCTIONS and rows(r) == (shape, axes) for r in reds)


def _reads(graph: Graph, uses: _Uses, node: int, producer: int) -> bool:
    """Whether `node` reads an output of kernel node `producer` (directly or through views)."""
    return any(uses.producer.get(uses.of(v)) == producer for v in graph.nodes[node].inputs)


def _feeds_reduction(graph: Graph, uses: _Uses, node: int) -> bool:
    readers = uses.readers.get(graph.nodes[node].outputs[0], [])
    return len(readers) == 1 and kind_of(graph.nodes[readers[0]]) == REDUCTION


def _depends(groups: list[Group], a: int, b: int) -> bool:
    """Whether group a reads (transitively) from group b: joining b then would make a cycle."""
    stack, seen = [a], set()
    while stack:
        g = stack.pop()
        if g == b:
            return True
        if g not in seen:
            seen.add(g)
            stack.extend(groups[g].deps)
    return False


def _escapes(graph: Graph, uses: _Uses, groups: list[Group], owner: dict[int, int]) -> set[int]:
    """Nodes whose output is read outside their group (or is a graph output) without being the
    group's last node: they must become boundaries."""
    cut: set[int] = set()
    for g in groups:
        for i in g.nodes[:-1]:
            out = graph.nodes[i].outputs[0]
            if out in uses.outputs or any(owner[r] != owner[i] for r in uses.readers.get(out, [])):
                cut.add(i)
    return cut

