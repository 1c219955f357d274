"""The hot nest of a lowered function: its levels (real loops, then virtual unrolled and vector
levels) and, per buffer it touches, strides, reuse, footprint and bytes per level (features.py
documents what each becomes)."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from ..dtype import dtype_info
from ..ir.nodes import ForKind
from .ir_walk import ANALYZE, Template

KIND_OF = {ForKind.SERIAL: "serial", ForKind.PARALLEL: "parallel", ForKind.UNROLLED: "unrolled",
           ForKind.VECTORIZED: "vectorized", ForKind.THREAD_BOUND: "thread"}


@dataclass(slots=True)
class Level:
    extent: int
    kind: str
    depth: int | None   # position among the real loops; None for the virtual levels


def hot_levels(tpl: Template) -> list[Level]:
    levels = [Level(lp.extent, KIND_OF[lp.kind], d) for d, lp in enumerate(tpl.loops)]
    if tpl.copies > 1:
        levels.append(Level(tpl.copies, "unrolled", None))
    lanes = max([tpl.lanes] + [a.lanes for acc in tpl.accesses for a in acc])
    if lanes > 1:
        levels.append(Level(lanes, "vectorized", None))
    return levels


@dataclass(slots=True)
class BufStats:
    name: str
    moved: float          # bytes over the whole run
    stride: float
    lanes: int
    is_store: bool
    is_local: bool
    gather: bool
    reuse: list           # per level, outermost first
    touch: list           # bytes per level, outermost first


def _distinct_offsets(accs: list, analysed: int, copies: int) -> tuple[float, float, list]:
    """Distinct index offsets among the analysed copies, extrapolated to all copies."""
    offsets = sorted({(a.aff.const, a.aff.lane_stride) for a, _ in accs})
    half = {(a.aff.const, a.aff.lane_stride) for a, k in accs if 2 * k < analysed}
    grow = 1.0 if copies <= analysed or len(half) == len(offsets) else copies / analysed
    consts = sorted({o[0] for o in offsets})
    return len(offsets) * grow, (consts[-1] - consts[0]) * grow, consts


def _coef_by_depth(accs: list) -> dict[int, float]:
    """|stride| per loop depth (copies in sibling loops have their own vars, same depths)."""
    coef: dict[int, float] = {}
    for a, _ in accs:
        depth_of = {v: d for d, v in enumerate(a.levels)}
        for v, c in a.aff.coef.items():
            d = depth_of.get(v)
            if d is not None:
                coef[d] = max(coef.get(d, 0.0), abs(c))
    return coef


def _buffer_stats(buf, accs: list, tpl: Template, levels: list[Level]) -> BufStats:
    """Strides, reuse and footprint of one buffer's accesses in the hot template."""
    analysed = min(tpl.copies, ANALYZE)
    elem = dtype_info(buf.dtype).bytes
    coef = _coef_by_depth(accs)
    lanes = max(a.lanes for a, _ in accs)
    lane_stride = max((abs(a.aff.lane_stride) for a, _ in accs if a.lanes > 1), default=0.0)
    d, span_u, consts = _distinct_offsets(accs, analysed, tpl.copies)
    factors: list[float] = []
    spans: list[float] = []
    reuse: list[float] = []
    for lv in levels:
        if lv.depth is not None:
            c = coef.get(lv.depth, 0.0)
            factors.append(lv.extent if c else 1)
            spans.append(c * (lv.extent - 1))
            reuse.append(1 if c else lv.extent)
        elif lv.kind == "unrolled":
            factors.append(d)
            spans.append(span_u)
            reuse.append(max(tpl.copies / d, 1.0))
        else:
            factors.append(lanes if lane_stride else 1)
            spans.append(lane_stride * (lanes - 1))
            reuse.append(1 if lane_stride else lv.extent)
    touch, prod, span = [0.0] * len(levels), 1.0, 0.0
    for j in range(len(levels) - 1, -1, -1):
        prod, span = prod * factors[j], span + spans[j]
        touch[j] = min(prod, span + 1, buf.size) * elem
    if levels and levels[-1].kind == "vectorized":
        stride = lane_stride
    elif levels and levels[-1].kind == "unrolled":
        stride = min((b - a for a, b in pairwise(consts)), default=0.0)
    elif levels:
        depth = levels[-1].depth
        stride = 0.0 if depth is None else coef.get(depth, 0.0)   # coef has no None key
    else:
        stride = 0.0
    moved = sum(a.lanes for a, _ in accs) * elem * tpl.runs / analysed
    return BufStats(buf.name, moved, stride, lanes, any(a.is_store for a, _ in accs),
                     buf.scope == "local", any(a.gather for a, _ in accs), reuse, touch)


def hot_buffers(tpl: Template, levels: list[Level]) -> list[BufStats]:
    by_buf: dict = {}
    for k, acc in enumerate(tpl.accesses):
        for a in acc:
            by_buf.setdefault(id(a.buffer), (a.buffer, []))[1].append((a, k))
    stats = [_buffer_stats(b, accs, tpl, levels) for b, accs in by_buf.values()]
    stats.sort(key=lambda s: (-(s.touch[0] if s.touch else 0.0), -s.moved, s.name, s.is_store))
    return stats
