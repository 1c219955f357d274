"""Generic CPU schedules: a search space for a te computation without a hand-written template.

Three shapes of computation are covered, each with its own schedule function taking
`(cfg, s, out, prefix="")` (knob names get `prefix`, so one template may schedule several
outputs):

- `schedule_injective`: every stage is injective (elementwise, broadcast, movement). All
  producers are inlined, so a chain is ONE loop nest with no intermediate buffer. The innermost
  output axis is split into (outer, unroll, vector); the outer axes (fused with the axis's
  outer part or not) are split into parallel chunks. The vector loop keeps every contiguous
  input read a vector load: the innermost axis is never fused with others.
- `schedule_row_reduction`: reductions over the innermost axes (sum, mean, softmax-like rows)
  and their pointwise consumers: every reduction is computed at the output's row loop (the
  fused leading axes), which runs in parallel; the output's innermost axis is vectorized.
- `schedule_column_reduction`: reductions whose loads run contiguously along the output's
  innermost axis (sum over axis 0, pooling windows): the reduce loops run outside a vectorized
  data loop, so each reduce step is one vector operation.

`schedule_auto` picks one of them (`classify`); `autotune.schedules.from_te` builds tasks on it.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..te.expr import IterVar, TensorLoad
from ..te.tensor import ComputeOp, Tensor
from ..te.traversal import substitute, transform, walk
from .cpu.rules import (
    closest,
    enough_chunks,
    first,
    lanes,
    largest_fitting,
    vector_registers,
    vector_tile,
    worth_threads,
)
from .schedule import Schedule, Stage, create_schedule

VECTOR_WIDTHS = (4, 8, 16, 32, 64)
UNROLL = (1, 2, 4)
CHUNKS = (1, 16, 256)                   # iterations of the fused outer loop per parallel task
COLUMN_VECTORS = (1, 4, 16)             # vectors per block of a column reduction
COLUMN_IN_FLIGHT = 4                    # column rule: independent vector adds that cover an add's latency


def compute_stages(s: Schedule) -> list[Stage]:
    return [st for st in s.stages if isinstance(st.op, ComputeOp)]


def is_reduction(st: Stage) -> bool:
    return isinstance(st.op, ComputeOp) and bool(st.op.reduce_axis)


def inline_injective(s: Schedule) -> None:
    """Inline every injective stage that is not an output: its expression moves into its readers."""
    for st in compute_stages(s):
        if not st.is_output and not is_reduction(st):
            st.compute_inline()


def _vector_split(cfg: Any, s: Schedule, out: Tensor, axis: IterVar, knob: str, unroll: bool) -> list[IterVar]:
    """Split `axis` into (outer, [unroll,] vector) by the knob; annotate unroll and vector.

    Rule: the vector tile of `rules.vector_tile` (4x, 2x or 1x the lanes, as the extent allows),
    as one vector of the lanes unrolled that many times when the knob has an unroll factor."""
    tile = vector_tile(cfg, out.dtype, axis.extent)
    width = closest(lanes(cfg, out.dtype), VECTOR_WIDTHS)
    if unroll:
        pairs = [[u, v] for v in VECTOR_WIDTHS for u in UNROLL]
        chosen = [closest(tile / width, UNROLL), width]
        cfg.define_split(knob, axis.extent, 3, policy="candidate", candidate=[[-1, *p] for p in first(chosen, pairs)])
    else:
        cfg.define_split(knob, axis.extent, 2, policy="candidate",
                         candidate=[[-1, v] for v in first(closest(tile, VECTOR_WIDTHS), VECTOR_WIDTHS)])
    parts = cfg[knob].apply(s, out, axis)
    st = s[out]
    st.vectorize(parts[-1])
    if unroll and parts[1].extent > 1:
        st.unroll(parts[1])
    return parts


def work(s: Schedule) -> int:
    """Element operations of the schedule's largest stage (its points times its reduce extents):
    what the parallel rule (`rules.worth_threads`) weighs."""
    return max(math.prod(st.op.shape) * math.prod(iv.extent for iv in st.op.reduce_axis) for st in compute_stages(s))


def vectorize_by(stage: Stage, axis: IterVar, extent: int, width: int) -> None:
    """Vectorize `axis` (of `extent` iterations where the stage runs: a tile's, for a stage at a
    tile loop) as unrolled vectors of `width` lanes when it is a multiple of them: LLVM
    scalarizes a vector of a length that is not a power of two (a 48-wide tile ran 10x slower)."""
    if extent > width and extent % width == 0:
        axis, inner = stage.split(axis, width)
        stage.unroll(axis)
        axis = inner
    stage.vectorize(axis)


def schedule_injective(cfg: Any, s: Schedule, out: Tensor, prefix: str = "",
                       axes: Sequence[IterVar] | None = None) -> None:
    """One fused loop nest for an injective output: vector inner loop, parallel outer chunks.
    `axes`: the output's leaf axes to schedule, outermost first (default: its axes as computed).

    Knobs: `tile_inner` (outer, unroll, vector width of the innermost axis), `fuse_inner`
    (whether the outer part of the innermost axis joins the parallel fused loop), `chunk`
    (iterations of the fused loop per parallel step) and `parallel` (threads or not).
    Default: the vector tile of `_vector_split`; the inner axis fused only when the outer axes
    give fewer than 4 chunks per core; chunk the largest leaving >= 4 chunks per core; threads
    when `rules.worth_threads` says so for the output's size.
    """
    inline_injective(s)
    st = s[out]
    *outer, inner = st.op.axis if axes is None else axes
    rows = math.prod(a.extent for a in outer)
    fuse = not enough_chunks(cfg, rows)
    if outer:
        cfg.define_knob(f"{prefix}fuse_inner", first(int(fuse), [0, 1]))
    fused = rows * (-(-inner.extent // vector_tile(cfg, out.dtype, inner.extent)) if fuse or not outer else 1)
    cfg.define_knob(f"{prefix}chunk", first(largest_fitting(CHUNKS, lambda c: enough_chunks(cfg, -(-fused // c))),
                                            CHUNKS))
    cfg.define_knob(f"{prefix}parallel", first(int(worth_threads(cfg, work(s))), [0, 1]))
    jo, _, _ = _vector_split(cfg, s, out, inner, f"{prefix}tile_inner", unroll=True)
    fused_axes = [*outer, jo] if not outer or cfg[f"{prefix}fuse_inner"].val else outer
    g = st.fuse(*fused_axes)
    p, _ = st.split(g, cfg[f"{prefix}chunk"].val)
    if cfg[f"{prefix}parallel"].val:
        st.parallel(p)


def injective_schedule(cfg: Any, out: Tensor) -> Schedule:
    """A new schedule of `out` alone, scheduled by `schedule_injective`."""
    s = create_schedule(out)
    schedule_injective(cfg, s, out)
    return s


def _row_depth(s: Schedule, out: Tensor) -> int:
    """How many leading output axes index rows: the narrowest reduction's data rank, trailing 1s
    dropped (lane partials, one rank wider than their row statistic, do not count)."""
    depths = []
    for st in compute_stages(s):
        if is_reduction(st):
            shape = list(st.op.shape)
            while shape and shape[-1] == 1:
                shape.pop()
            depths.append(len(shape))
    return min(min(depths, default=0), len(out.shape))


MAX_LANES = 64


def vectorize_lanes(red: Stage) -> None:
    """A reduction whose loads run along its innermost data axis (lane partials): that axis
    becomes the innermost loop, vectorized (in pieces of 16 when longer than MAX_LANES), under
    the reduce loops."""
    *outer, inner = red.op.axis
    if inner.extent > MAX_LANES:
        io, inner = red.split(inner, 16)
        outer.append(io)
    red.reorder(*outer, *red.op.reduce_axis, inner)
    red.vectorize(inner)


def schedule_row_reduction(cfg: Any, s: Schedule, out: Tensor, prefix: str = "") -> None:
    """Reductions over the innermost axes, fused with their pointwise producers and consumers.

    The leading `row` axes of the output are fused into one parallel loop; every reduction
    stage is computed inside it for that row only (its buffer is one element per row, or one
    vector for lane partials, which run as vector operations). The output's innermost axis,
    if it is not a row axis, is vectorized (`tile_inner`).
    Knobs: `tile_inner` (when the output has non-row axes) and `parallel`. Default: the vector
    tile of `_vector_split`; threads when `rules.worth_threads` says so for the largest stage.
    """
    inline_injective(s)
    st = s[out]
    depth = _row_depth(s, out)
    axes = list(st.op.axis)
    rows, rest = axes[:depth], axes[depth:]
    cfg.define_knob(f"{prefix}parallel", first(int(worth_threads(cfg, work(s))), [0, 1]))
    if rest and rest[-1].extent > 1:
        _vector_split(cfg, s, out, rest[-1], f"{prefix}tile_inner", unroll=False)
    row = st.fuse(*rows) if rows else None
    if row is not None and cfg[f"{prefix}parallel"].val:
        st.parallel(row)
    reds = [r for r in compute_stages(s) if is_reduction(r) and r is not st]
    for red in reds:
        if row is not None and id(red) not in _rooted(s, reds, out, depth):
            red.compute_at(st, row)
        if reduction_kind(red) == "column":
            vectorize_lanes(red)


def _rooted(s: Schedule, reds: list[Stage], out: Tensor, depth: int) -> set[int]:
    """Reductions that are not per-row statistics of the output (their shape does not start
    with the output's row dimensions, 1s ignored) and everything they read: computed once, at root."""
    rows = [n for n in out.shape[:depth] if n != 1]
    rooted = {id(r) for r in reds if [n for n in r.op.shape if n != 1][:len(rows)] != rows}
    for r in reversed(reds):                              # consumers before producers
        if id(r) in rooted:
            rooted.update(id(p) for p in reds if s.reads_transitively(r, p))
    return rooted


def column_block(cfg: Any, extent: int, dtype: str, windows: bool) -> list[int]:
    """The default (vectors, vector width) block of a column reduction's rows of `extent`.

    Long reductions (sum over axis 0): blocks of COLUMN_IN_FLIGHT vectors of the lanes,
    independent adds that cover an add's latency; a row no longer than that is one block of the
    whole row, a vector of its extent that LLVM splits into registers. `windows` (pooling: a
    few taps, padded, often strided): a block of one vector, the whole row where its registers
    are at most half the target's, else two registers' worth. A block of several vectors there
    ran its padding guards inside the block (AVX2, 2 threads, 3x3 max pool, x the old 4 x 8
    blocks: stride 2 rows of 56 2.0x as the row, 50 2.7x as the row, stride 1 rows of 112 2.9x
    as 1 x 16), while column sums lost with one vector (1000 x 1001 over axis 0: 0.70x as 1 x 8).
    """
    width = lanes(cfg, dtype)
    if windows:
        if -(-extent // width) <= vector_registers(cfg) // 2:
            return [1, extent]
        return [1, max(v for v in VECTOR_WIDTHS if v <= 2 * width)]
    if extent <= COLUMN_IN_FLIGHT * width:
        return [1, extent]         # the whole row: whole registers and one narrower, no tail block
    return [COLUMN_IN_FLIGHT, max(v for v in VECTOR_WIDTHS if v <= width)]


def schedule_column_reduction(cfg: Any, s: Schedule, out: Tensor, prefix: str = "", windows: bool = False) -> None:
    """Reductions along axes other than the innermost: reduce loops outside vector data loops.

    The output's innermost axis is split into (outer, vectors, vector width) by `tile_inner`;
    the other axes and its outer part are fused into one loop (parallel by the `parallel`
    knob). Every reduction stage of the output's shape is computed inside that loop for that
    block of `vectors` x width outputs, with its reduce loops outside the block's vector loops
    (each reduce step reads a contiguous block); a reduction of another shape (a statistic the
    output broadcasts) is computed once, at root, in the same loop order.
    Default: `column_block` (`windows`: the reduction is a pooling window); threads when
    `rules.worth_threads` says so for the largest stage.
    """
    inline_injective(s)
    st = s[out]
    *outer, last = st.op.axis
    cfg.define_knob(f"{prefix}parallel", first(int(worth_threads(cfg, work(s))), [0, 1]))
    chosen = column_block(cfg, last.extent, out.dtype, windows)
    blocks = first(chosen, [[c, v] for c in COLUMN_VECTORS for v in VECTOR_WIDTHS])
    cfg.define_split(f"{prefix}tile_inner", last.extent, 3, policy="candidate", candidate=[[-1, *b] for b in blocks])
    lo, lc, li = cfg[f"{prefix}tile_inner"].apply(s, out, last)
    st.vectorize(li)
    g = st.fuse(*outer, lo)
    if st.op.reduce_axis:
        st.reorder(g, *st.op.reduce_axis, lc, li)
    parallel = cfg[f"{prefix}parallel"].val
    if parallel:
        st.parallel(g)
    for red in compute_stages(s):
        if is_reduction(red) and red is not st:
            _column_stage(red, st, g, lc.extent, li.extent, tuple(red.op.shape) == tuple(out.shape), parallel)


def _column_stage(red: Stage, st: Stage, g: IterVar, vectors: int, width: int, at_output: bool,
                  parallel: bool) -> None:
    *r_outer, r_last = red.op.axis
    if at_output:
        red.compute_at(st, g)
        r_c, r_li = red.split(r_last, width)          # the attach region is vectors x width long
        red.reorder(*r_outer, *red.op.reduce_axis, r_c, r_li)
    else:
        r_o, r_rest = red.split(r_last, vectors * width)
        r_c, r_li = red.split(r_rest, width)
        red.reorder(*r_outer, r_o, *red.op.reduce_axis, r_c, r_li)
        if parallel:
            red.parallel(red.fuse(*r_outer, r_o))
    red.vectorize(r_li)


# -- classification ------------------------------------------------------------------------------
def inlined_body(op: ComputeOp) -> Any:
    """`op`'s body with every injective producer substituted in: what it reads once inlined."""
    def pre(n: Any) -> Any:
        if isinstance(n, TensorLoad) and isinstance(n.tensor.op, ComputeOp) and not n.tensor.op.reduce_axis:
            p: ComputeOp = n.tensor.op
            idx = [inline(i) for i in n.indices]
            return inline(substitute(p.body, {iv.var: i for iv, i in zip(p.axis, idx)}))
        return None

    def inline(e: Any) -> Any:
        return transform(e, lambda n: None, pre)

    return inline(op.body)


def reduction_kind(st: Stage) -> str:
    """"row" when every load that moves with a reduce axis has a reduce variable and no data
    variable in its innermost index; "column" when the innermost index of those loads follows
    the stage's innermost data axis (it may also use a reduce variable, as pooling windows do).
    Loads are those of the body with injective producers inlined, as the schedules do."""
    op: ComputeOp = st.op  # type: ignore[assignment]
    rvars = {iv.var for iv in op.reduce_axis}
    dvars = {iv.var for iv in op.axis}
    last = op.axis[-1].var
    kinds: set[str] = set()

    def visit(n: Any) -> None:
        if not isinstance(n, TensorLoad):
            return
        used: set = set()
        for idx in n.indices:
            walk(idx, lambda v: used.add(v) if v in rvars else None)
        if not used:
            return                                # a loop-invariant statistic
        inner: set = set()
        walk(n.indices[-1], lambda v: inner.add(v) if v in rvars or v in dvars else None)
        if last in inner:
            kinds.add("column")
        elif inner and inner <= rvars:
            kinds.add("row")
        else:
            kinds.add("other")

    walk(inlined_body(op), visit)
    return kinds.pop() if len(kinds) == 1 else "other"


def classify(s: Schedule) -> str:
    """"injective", "row" or "column": which generic schedule fits every stage of `s` ("row"
    also when some reductions are column-like lane partials of a row; "other" otherwise)."""
    reds = [st for st in compute_stages(s) if is_reduction(st)]
    if not reds:
        return "injective"
    kinds = {reduction_kind(st) for st in reds}
    if kinds == {"column"}:
        return "column"
    return "row" if "row" in kinds and kinds <= {"row", "column"} else "other"


SCHEDULES = {"injective": schedule_injective, "row": schedule_row_reduction, "column": schedule_column_reduction}


def schedule_auto(cfg: Any, s: Schedule, outs: Sequence[Tensor]) -> str:
    """Apply the generic schedule that fits `s` (see `classify`) to every output; returns the kind.

    Several outputs are supported for injective computations (each gets knobs prefixed
    `out<k>.`); a computation with reductions must have one output.
    """
    kind = classify(s)
    if kind == "other":
        raise ValueError("generic schedule: the reductions are neither all over the innermost axes (row) nor "
                         "all along the output's innermost axis (column); write a template for this computation")
    if kind != "injective" and len(outs) != 1:
        raise ValueError(f"generic schedule: a computation with reductions must have one output, got {len(outs)}")
    for k, o in enumerate(outs):
        SCHEDULES[kind](cfg, s, o, prefix=f"out{k}." if len(outs) > 1 else "")
    return kind
