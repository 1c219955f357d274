"""The buffer plan: where every value of a Graph lives while the model runs.

Every value is stored in the storage of its *root*: itself, or for a view node's output the root
of the view's input (a view moves no data). A root is one of
- an input (the caller's array), a constant (the graph's array), an output (its own buffer, which
  the caller keeps: never shared with anything else),
- or an intermediate, placed at a byte offset in one arena.

Why one arena with offsets rather than a pool of arrays by size class: values of a model differ in
size by orders of magnitude, and a size-class pool wastes the gap between a value and its class,
while offsets let a large dead value hold several small live ones. The placement is the greedy
"by size" heuristic of TFLite's arena planner: largest first, each at the lowest offset free
during its lifetime. Intermediates whose lifetimes (the steps from their producer to their last
reader, both included) overlap never overlap in memory, so a kernel's inputs and outputs are
always distinct memory, as the kernels require (their parameters are `noalias`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .ir import Graph

ALIGN = 64          # bytes: a cache line, and enough for any vector load the kernels emit

INPUT, CONSTANT, OUTPUT, ARENA = "input", "constant", "output", "arena"


@dataclass(frozen=True)
class Plan:
    """roots: every value -> the value whose storage holds it; kinds: root -> INPUT, CONSTANT,
    OUTPUT or ARENA; lifetimes: arena root -> (first step, last step), node indices, inclusive;
    offsets: arena root -> byte offset; arena_bytes: the arena's size (the planned peak);
    live_peak_bytes: the most intermediate bytes live at one step (no plan can use less);
    unshared_bytes: the intermediates' total, what a runtime without sharing allocates."""

    roots: dict[str, str]
    kinds: dict[str, str]
    lifetimes: dict[str, tuple[int, int]]
    offsets: dict[str, int]
    sizes: dict[str, int]
    arena_bytes: int
    live_peak_bytes: int
    unshared_bytes: int


def plan_buffers(graph: Graph, align: int = ALIGN) -> Plan:
    """The buffer plan of a validated graph."""
    roots = alias_roots(graph)
    kinds = root_kinds(graph, roots)
    arena = [r for r, k in kinds.items() if k == ARENA]
    lifetimes = live_ranges(graph, roots, arena)
    sizes = {r: _round_up(graph.value(r).nbytes, align) for r in arena}
    offsets = assign_offsets(sizes, lifetimes)
    end = max((offsets[r] + sizes[r] for r in arena), default=0)
    return Plan(roots, kinds, lifetimes, offsets, sizes, end, live_peak(sizes, lifetimes), sum(sizes.values()))


def alias_roots(graph: Graph) -> dict[str, str]:
    """Each value's root: a view's output shares the storage of its input's root. Only values the
    graph defines (inputs, constants, node outputs) have one."""
    roots = {name: name for name in [v.name for v in graph.inputs] + list(graph.constants)}
    for n in graph.nodes:
        for name in n.outputs:
            roots[name] = roots[n.inputs[0]] if n.is_view else name
    return roots


def root_kinds(graph: Graph, roots: dict[str, str]) -> dict[str, str]:
    """What holds each root's storage. Inputs and constants stay where they are (an output that is
    one of them, or a view of one, is copied out); a root any output is stored in is an output."""
    kinds = {r: ARENA for r in set(roots.values())}
    for v in graph.outputs:
        kinds[roots[v.name]] = OUTPUT
    for name in graph.constants:
        kinds[name] = CONSTANT
    for v in graph.inputs:
        kinds[v.name] = INPUT
    return kinds


def live_ranges(graph: Graph, roots: dict[str, str], arena: list[str]) -> dict[str, tuple[int, int]]:
    """(producer step, last reading step) of each arena root, over the node order; a value read by
    no one lives through its producer's step only. Reading a view reads its root."""
    wanted = set(arena)
    ranges: dict[str, tuple[int, int]] = {}
    for step, n in enumerate(graph.nodes):
        for name in n.inputs:
            r = roots[name]
            if r in wanted:
                ranges[r] = (ranges[r][0], step)
        if not n.is_view:
            for name in n.outputs:
                if name in wanted:
                    ranges[name] = (step, step)
    return ranges


def assign_offsets(sizes: dict[str, int], lifetimes: dict[str, tuple[int, int]]) -> dict[str, int]:
    """Greedy by size: largest first (then earliest, then by name: deterministic), each at the
    lowest offset where it overlaps no placed value whose lifetime overlaps its own."""
    order = sorted(sizes, key=lambda r: (-sizes[r], lifetimes[r][0], r))
    offsets: dict[str, int] = {}
    for r in order:
        busy = sorted((offsets[p], offsets[p] + sizes[p]) for p in offsets
                      if _overlap(lifetimes[p], lifetimes[r]) and sizes[p] > 0)
        offsets[r] = _lowest_gap(busy, sizes[r])
    return offsets


def _lowest_gap(busy: list[tuple[int, int]], size: int) -> int:
    """The lowest offset where `size` bytes fit between the sorted busy intervals."""
    at = 0
    for start, end in busy:
        if at + size <= start:
            return at
        at = max(at, end)
    return at


def live_peak(sizes: dict[str, int], lifetimes: dict[str, tuple[int, int]]) -> int:
    """The most bytes live at one step: a lower bound for any plan's arena."""
    last = max((b for _, b in lifetimes.values()), default=-1)
    return max((sum(s for r, s in sizes.items() if lifetimes[r][0] <= t <= lifetimes[r][1])
                for t in range(last + 1)), default=0)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _round_up(n: int, align: int) -> int:
    return -(-n // align) * align
