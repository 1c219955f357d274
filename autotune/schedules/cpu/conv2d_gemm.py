"""conv2d NCHW as a GEMM on the CPU (implicit im2col), one algorithm of the conv dispatcher.

Per image and group the conv is Out[f, p] = sum_k W[f, k] * Col[k, p] with k = (c, ky, kx) and
p = (oh, ow): the NCHW output is contiguous along p, so p is the vector axis, as the packed B
columns are in the matmul template (`matmul.py`, whose micro-kernel this follows):

- "col", the im2col panel, packs Col in panels of `bn` pixels (N, ceil(P/bn), C, KH, KW, bn),
  reading X through the conv index arithmetic, zero where the window hits the padding and past
  the last pixel: every panel is full, so the micro-kernel has no tail. Packed by scalar code
  (a vector copy for 1x1 stride 1):
  a vector of pixels that crosses image rows is a gather, which LLVM emulates at half the speed.
- "gemm" accumulates an r x bn tile (r filters, bn pixels) in a local buffer (registers after
  LLVM's promotion) over the whole reduction (c split and unrolled, ky, kx), W[f, c, ky, kx]
  read in place as the matmul's A is: its layout already is the row-major F x K matrix, and a
  packed copy would cost a pass over all of W per call (9 MB on a 512-channel 3x3 layer). No k
  blocking: the panel (K x bn) stays in L2, which easily feeds bn/lanes vector loads per r*bn/lanes
  FMAs.
- the output stage stores the tile, applying the epilogue to it while it is in registers.

Knob "gemm_order": "panels" packs one panel inside the parallel loop over (image, panel) and
runs every filter over it (W re-read once per panel); "filters" packs all of Col first and runs
every panel under a block of filters (Col re-read once per block). Knob "gemm_col", for a 1x1
stride-1 conv without padding only: "direct" reads X in place as Col (C x H*W), so that layer is
the GEMM alone; "packed" copies X's rows into panels (a contiguous vector copy, 1/F of the GEMM's
loads, the B packing of a BLAS). Groups: each output channel reads its group's channels of Col.
Depthwise-like convs (one input channel per group) are excluded: one filter row per group
leaves nothing to amortise the im2col copy, which is KH*KW times the input, over.

Defaults (first values), by rule on the shape and cfg.target (rules.py):
- gemm_tile_p: bn = two vector registers (2 * lanes) when the image has that many pixels, else
  one; only whole multiples of the lanes are offered (LLVM splits a 48-lane vector badly). One
  vector instead where the last panel's padding would be more than TAIL_WASTE of the panels'
  columns with two and less with one: every padded column costs a full column of multiply-adds
  (ResNet-50's 1x1 convs at 14x14, 196 pixels: 224 columns in panels of 32, 208 in panels of
  16; Zen 4, 2 threads, weights constant: 256->1024 160 -> 196 GFLOP/s, 576->96 149 -> 169).
- gemm_tile_f: r = the most filter rows whose r * bn/lanes accumulators leave bn/lanes + 2 vector
  registers free (32 registers with 64-byte vectors, 16 otherwise), and of which no more rows of
  W than the L1 has ways fall in one cache set: the r rows are r streams K elements apart, and
  an x86 L1 is indexed within a 4 KiB page (L1_SET_SPAN: its size over its ways), so rows a
  multiple of 4 KiB apart all land in the same set (ResNet-50's 1024->256 1x1 conv at 14x14,
  rows of 4 KiB, Zen 4's 8-way L1, panels of 16 pixels: 16 rows 90 GFLOP/s, 8 rows 186-191);
  m = the most register tiles per block whose rows of W (m * r * K elements) fit half of L2
  while leaving 4 blocks per core. With groups, r and m * r divide the filters of a group: a
  block past the group's end reads the next group's rows of W, and in the last group rows past
  W, each under a guard of its own (Zen 5, 2 threads, 1x1, x onnxruntime, 12 / divisor rows:
  256 -> 256 at 28x28 in 4 groups 0.66 / 1.28 (8 rows), 240 -> 240 in 3 0.85 / 1.17 (8), 136 ->
  136 in 2 0.57 / 0.91 (4), 200 -> 400 at 20x20 in 4 0.50 / 0.81 (4)).
- gemm_tile_k: the channel unroll kf giving at least 4 k steps per unrolled body: ceil(4 / (KH*KW)).
- gemm_order: "panels" when there are at least as many (image, panel) pairs as cores, else
  "filters". With panels outer, one packed panel (K x bn) stays in L2 while the filter rows
  stream past it in r sequential streams; with filters outer, all of Col (K x P, more than L2
  on deep layers) is re-read once per filter block.
- gemm_col: "packed": reading in place streams K rows of X that lie H*W elements apart, each
  panel's piece straddling cache lines, while the packed panel is read contiguously.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ... import te
from ...dtype import dtype_info
from ...schedules.schedule import Schedule
from ...topi.conv import ConvGeometry, Epilogue, Finish
from . import rules

ROWS = (1, 2, 4, 6, 8, 12, 16)
ORDERS = ("panels", "filters")
COLS = ("packed", "direct")
BLOCKS = (1, 2, 4, 8)
UNROLLS = (1, 2, 4, 8)
TAIL_WASTE = 0.1      # share of padded columns in the pixel panels above which narrower panels go first
L1_SET_SPAN = 4096    # bytes of address that index an x86 L1 data cache's sets (a page: size / ways)


def _applies(g: ConvGeometry) -> bool:
    """Every conv but the depthwise-like (one input channel per group)."""
    return g.groups < g.in_channels


APPLIES: Callable[[ConvGeometry], bool] = _applies


def _pointwise(g: ConvGeometry) -> bool:
    """Col is X itself (C x H*W): a 1x1 kernel, stride 1 and no padding."""
    return g.kernel == (1, 1) and g.stride == (1, 1) and not g.has_padding


def _default_tile_f(cfg: Any, Fg: int, row_bytes: int, vectors: int, images: int,
                    grouped: bool) -> tuple[int, int]:
    """(m, r): r filter rows whose accumulators leave a column's vectors and 2 registers free and
    of which no L1 set holds more than its ways; m register tiles per block whose rows of W
    (row_bytes each) fit half of L2 while the blocks of all `images` (image, group) pairs still
    give every core 4 (the "filters" order's threads). `grouped`: r and m * r divide the group's
    Fg rows (module docstring)."""
    facts = rules.cpu_facts(cfg)
    ways = max(1, facts.l1d_bytes // L1_SET_SPAN)
    offsets = L1_SET_SPAN // math.gcd(row_bytes, L1_SET_SPAN)      # distinct set offsets of the rows

    def fits_registers_and_sets(x: int) -> bool:
        return (x * vectors <= rules.vector_registers(cfg) - vectors - 2 and -(-x // offsets) <= ways
                and (not grouped or Fg % x == 0))

    r = min(max([x for x in ROWS if fits_registers_and_sets(x)] or [1]), Fg)

    def fits(b: int) -> bool:
        return b * r * row_bytes <= facts.l2_bytes // 2 and images * -(-Fg // (b * r)) >= 4 * facts.cores

    m = rules.largest_fitting([b for b in BLOCKS if b * r <= Fg and (not grouped or Fg % (b * r) == 0)] or [1], fits)
    return m, r


def define_knobs(cfg: Any, g: ConvGeometry, N: int, dtype: str, when: tuple[str, tuple[str, ...]]) -> None:
    """The GEMM's tiles, its loop order and where Col comes from; first values by the rules in the
    module docstring."""
    lanes, nbytes = rules.lanes(cfg, dtype), dtype_info(dtype).bytes
    P, Fg, Cg, taps = math.prod(g.out), g.out_channels // g.groups, g.in_channels // g.groups, math.prod(g.kernel)
    widths = [lanes * v for v in (1, 2, 4) if lanes * v <= P] or [P]   # whole vectors: LLVM splits others badly
    bn = _default_panel(P, widths)
    m, r = _default_tile_f(cfg, Fg, Cg * taps * nbytes, -(-bn // lanes), N * g.groups, g.groups > 1)
    cfg.define_split("gemm_tile_p", P, 2, policy="candidate", candidate=[[-1, w] for w in rules.first(bn, widths)],
                     when=when)
    cfg.define_split("gemm_tile_f", Fg, 3, policy="candidate", when=when,
                     candidate=[[-1, m, r], *([-1, b, x] for x in ROWS for b in BLOCKS)])
    kf = rules.closest(-(-4 // taps), UNROLLS)
    cfg.define_split("gemm_tile_k", Cg, 2, policy="candidate", candidate=rules.split_first(kf, Cg, UNROLLS),
                     when=when)
    cfg.define_knob("gemm_order", rules.first(_default_order(cfg, g, N, bn), ORDERS), when=when)
    cfg.define_knob("gemm_col", list(COLS) if _pointwise(g) else ["packed"], when=when)


def _waste(P: int, bn: int) -> float:
    """The share of padded columns when P pixels are cut into panels of bn."""
    return 1 - P / (-(-P // bn) * bn)


def _default_panel(P: int, widths: list[int]) -> int:
    """Two vectors of pixels, or one where that pads the last panel much less (module docstring)."""
    bn = widths[min(1, len(widths) - 1)]
    return widths[0] if _waste(P, bn) > TAIL_WASTE and _waste(P, widths[0]) < _waste(P, bn) else bn


def pads_panels(g: ConvGeometry, lanes: int) -> bool:
    """Whether even one-vector panels pad the pixels by more than TAIL_WASTE (49 pixels of a 7x7
    image: 64 columns, 23% of them padding), which the blocked kernel's rows never do."""
    pixels = math.prod(g.out)
    return pixels > lanes and _waste(pixels, lanes) > TAIL_WASTE


def _default_order(cfg: Any, g: ConvGeometry, N: int, bn: int) -> str:
    """Panels outer when the (image, panel) pairs give every core work."""
    return "panels" if N * -(-math.prod(g.out) // bn) >= rules.cpu_facts(cfg).cores else "filters"


def build(cfg: Any, X: te.Tensor, Wt: te.Tensor, g: ConvGeometry, epilogue: Epilogue | None,
          extra: Sequence[te.Tensor], finish: Finish | None = None) -> tuple[Schedule, te.Tensor]:
    """The NCHW output of conv2d(X, Wt) with geometry g through the packed GEMM, scheduled.
    `extra` are the tensors the epilogue reads (placeholders: nothing of theirs to schedule)."""
    bn = cfg["gemm_tile_p"].size[-1]
    col = None if cfg["gemm_col"].val == "direct" else _col_panels(X, Wt, g, bn)
    G = _gemm(X, Wt, g, bn, col)
    N, F, (OH, OW) = X.shape[0], Wt.shape[0], g.out

    def out_value(n: Any, f: Any, y: Any, x: Any) -> Any:
        v = G[n, f, y * OW + x]
        return v if epilogue is None else epilogue(v, (n, f, y, x))

    out = te.compute((N, F, OH, OW), out_value, name="Y")
    final = finish(out) if finish else out
    s = te.create_schedule(final.op)
    _schedule(cfg, s, out, G, col, g)
    return s, final


def _col_panels(X: te.Tensor, Wt: te.Tensor, g: ConvGeometry, bn: int) -> te.Tensor:
    """Col packed in panels of bn pixels: col[n, q, c, ky, kx, z] is the input under tap (ky, kx)
    of pixel q*bn + z, zero in the padding and past the last pixel."""
    N, C, H, W = X.shape
    _, _, KH, KW = Wt.shape
    (OH, OW), (sh, sw), (dh, dw), (pt, pl), (pb, pr) = g.out, g.stride, g.dilation, g.pad_before, g.pad_after
    P = OH * OW
    zero = te.const(0, X.dtype)

    def elem(n: Any, q: Any, c: Any, ky: Any, kx: Any, z: Any) -> Any:
        p = q * bn + z
        iy, ix = (p // OW) * sh + ky * dh - pt, (p % OW) * sw + kx * dw - pl
        checks = ((P % bn, p < P), (pt, iy >= 0), (pl, ix >= 0), (pb, iy < H), (pr, ix < W))
        inside = [cond for needed, cond in checks if needed]
        # reads under if_then_else are predicated: no clamping needed to stay inside X
        return te.if_then_else(te.all(*inside), X[n, c, iy, ix], zero) if inside else X[n, c, iy, ix]

    return te.compute((N, -(-P // bn), C, KH, KW, bn), elem, name="col")


def _gemm(X: te.Tensor, Wt: te.Tensor, g: ConvGeometry, bn: int, col: te.Tensor | None) -> te.Tensor:
    """G[n, f, p] = sum_{c, ky, kx} W[f, c, ky, kx] * Col[(group of f) c, ky, kx, p] over the
    padded pixels (whole panels) with col, over the image's pixels when Col is X itself."""
    N, _, _, W = X.shape
    F, Cg, KH, KW = Wt.shape
    Fg, P = F // g.groups, math.prod(g.out)
    rc = te.reduce_axis((0, Cg), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")

    def channel(f: Any) -> Any:
        return rc if g.groups == 1 else (f // Fg) * Cg + rc

    if col is None:
        return te.compute((N, F, P), lambda n, f, p: te.sum(
            Wt[f, rc, ry, rx] * X[n, channel(f), p // W, p % W], axis=[rc, ry, rx]), name="gemm")
    return te.compute((N, F, col.shape[1] * bn), lambda n, f, p: te.sum(
        Wt[f, rc, ry, rx] * col[n, p // bn, channel(f), ry, rx, p % bn], axis=[rc, ry, rx]), name="gemm")


def _schedule(cfg: Any, s: Schedule, out: te.Tensor, G: te.Tensor, col: te.Tensor | None,
              g: ConvGeometry) -> None:
    """Output tiles of r filters x bn pixels, each accumulated in the local gemm tile at its loop;
    the pixel axis is fused (the output is contiguous along it) and split into panels."""
    n, f, y, x = out.op.axis
    po, pi = cfg["gemm_tile_p"].apply(s, out, s[out].fuse(y, x))
    go, fg = s[out].split(f, g.out_channels // g.groups)
    fo, fm, fr = cfg["gemm_tile_f"].apply(s, out, fg)
    panel_outer = cfg["gemm_order"].val == "panels"
    if panel_outer:
        s[out].reorder(n, po, go, fo, fm, fr, pi)
        outer = s[out].fuse(n, po)
    else:
        s[out].reorder(n, go, fo, po, fm, fr, pi)
        outer = s[out].fuse(n, go, fo)
    s[out].parallel(outer)
    s[out].vectorize(pi)
    s[G].compute_at(s[out], fm)
    _schedule_tile(cfg, s, G)
    if col is not None:
        if _pointwise(g):      # a copy of X's rows; elsewhere a vector of col is a gather, slower than scalars
            s[col].vectorize(col.op.axis[-1])
        if panel_outer:
            s[col].compute_at(s[out], outer)
        else:
            s[col].parallel(s[col].fuse(*col.op.axis[:2]))


def _schedule_tile(cfg: Any, s: Schedule, G: te.Tensor) -> None:
    """The micro-kernel: reduction outside, the r x bn tile inside (rows unrolled, pixels vectorized)."""
    _, gf, gp = s[G].op.axis
    rc, ry, rx = s[G].op.reduce_axis
    rco, rci = cfg["gemm_tile_k"].apply(s, G, rc)
    s[G].reorder(rco, ry, rx, rci, gf, gp)
    s[G].unroll(rci)
    s[G].unroll(gf)
    s[G].vectorize(gp)
