"""conv2d computed directly in NCHW on the CPU, vectorised along the output width: the conv
algorithm "nchw" (any geometry). Each output tile (filters x rows x columns) accumulates in a
local buffer at the tile loop over (channel block, kh, kw, channel); the epilogue, if any, is
applied on that tile.

The knob names and values are those of the templates before algorithms were a knob, so their
tuning records stay valid. Default rules (each knob's first value), with L the vector lanes of
the dtype and R the vector registers of the target (32 with AVX-512, else 16):
  tile_x        the candidate nearest to L / stride_w (one vector per tile row; a strided vector
                load gathers from stride_w x tile_x input columns; the stride is taken as 1 for a
                conv read through pad's phases, and for a depthwise conv here and for tile_y,
                below), capped by OW; of those that
                divide OW when any does: a tail of columns costs a whole vector; the whole row
                when none does and it fits one vector (12 columns at stride 2: one masked vector,
                not 8 and a tail of 4); over a vector, OW split evenly into the fewest tiles of
                at most L / stride_w columns when they divide it: the same vectors, no tail tile
                (Zen 4, 2 threads, x onnxruntime 16 and a tail / even tiles: depthwise 64
                channels at 18x18 5x5 0.39 / 0.69, 240 at 30x30 0.73 / 1.52, 96 at 20x20 0.47 /
                0.86, 96 at 36x36 stride 2 (8, 8, 2 / 6, 6, 6) 0.52 / 0.61; 16 -> 16 at 18x18
                0.42 / 0.57, 8 -> 8 at 30x30 0.77 / 0.94); else the nearest candidate (37
                columns: 16, 16, 5; even tiles of 13, 13, 11 ran 3.8x slower for 3 -> 32 at
                37x37)
  tile_y        the whole plane when OH is at most 8 rows (the largest candidate): a tile's index
                and mask work is then paid once per plane, where one 7-lane row per task spent
                about 60 instructions on it around 9 masked multiply-adds (depthwise, Zen 4, 2
                threads, x onnxruntime one row / the plane: 960 channels at 7x7 0.61 / 0.98, 1152
                at 7x7 with 5x5 taps 0.33 / 0.74, 256 at 8x8 0.67 / 0.74, 576 at 14x14 stride 2
                0.68 / 0.73, 160 at 13x13 stride 2 0.40 / 0.71; 14 rows of 14 ran 0.56 against
                two rows' 0.95); above, with stride_h 1, the most of 1, 2, 4 rows that divides OH
                (each input row vector serves up to KH output rows; a tail tile costs a whole
                one; 8 rows at 56x56 ran 0.65 against four rows' 1.01); with a stride, 1 where
                the row is at least two whole tiles: rows 2 apart share one input row of three,
                and each row of a tile is one more span load and shuffle per tap (MobileNet-V2's
                depthwise layers, Zen 4, 2 threads, x onnxruntime before / after the row and
                column rules: 96 channels at 112x112 stride 2 0.73 / 0.94, 144 at 56x56 stride 2
                0.66 / 0.95, 576 at 14x14 stride 2 0.37 / 0.81, 192 at 28x28 stride 1 0.76 /
                1.00, 384 at 14x14 stride 1 0.90 / 0.98); else 2: a row of one tile, or with a
                tail of columns, leaves a task too little work for its masks and index set-up
                (stride 2, one row / two: 192 channels at 28x28, 14 columns, 0.63 / 0.76; 96 at
                36x36, 18 columns, 0.21 / 0.48; 64 at 44x44 0.26 / 0.60; 100 at 58x58 0.39 /
                0.72; 256 at 24x24, 12 columns (8 and a tail of 4 before the column rule) 0.16 /
                0.73; 144 at 56x56, two tiles of 14, 0.95 / 0.87). With one filter per group
                (depthwise), whose tile_f is 1, the rows are the tile's only other accumulators:
                stride 1 takes the fewest rows from 4 to 8 that divide OH and keep the unrolled
                window within MAX_UNROLLED_WINDOW, where 1, 2, 4 give fewer (14 rows: 7, not 2;
                Zen 4, 2 threads, x onnxruntime 2 rows / 7: 384 channels at 14x14 7x7 0.66 /
                0.91, 672 at 14x14 5x5 0.94 / 1.23, 576 at 14x14 3x3 1.21 / 1.37; 18 rows: 6,
                64 at 18x18 5x5 0.21 / 0.39; 30 rows: 5, 240 at 30x30 3x3 0.40 / 0.74); and 4
                rows with a tail where only 1 divides OH (a prime): one row is one chain of KH x
                KW dependent multiply-adds, a tail tile one pass of fewer rows (1 row / 4: 32
                channels at 37x37 3x3 0.23 / 0.77, 96 at 37x37 5x5 0.12 / 0.40). But a window of
                TALL_WINDOW rows or more at stride 1, where no count from 4 to 8 divides OH, takes
                the fewest of them whose tail tile has MIN_TAIL_ROWS rows or more: a tail of one
                or two rows slowed these windows far beyond its share of rows (96 channels x
                onnxruntime, the old rule's 4 rows (2 where 2 divides OH) / the new: 37x37 5x5 0.76
                / 0.94 (8 rows), 29x29 7x7 (64 ch) 0.57 / 0.75 (5), 53x53 7x7 (64 ch) 0.63 / 0.77
                (5), 17x17 5x5 (160 ch) 0.57 / 0.86 (6), 73x73 5x5 (48 ch) 1.10 / 1.15 (5), 34x34 7x7
                (88 ch) 0.62 / 0.77 (5); 3x3 windows gained nothing; at stride 2 through the phases
                5 rows lost to 4, 57x57 7x7 0.65 / 0.49). The tuner's row candidates are 1, 2, 4
                and 8, and for a depthwise conv every count from 4 to 8 (_DEEP_ROWS): the
                rules above pick among them, and their neighbours stay reachable.
                A depthwise conv takes the stride-1 rows and columns whatever its stride (the
                strided rules above were measured on depthwise layers before their windows were
                unrolled and their tiles' masks dropped, and now hold for convs of several filters
                per group): its rows share input rows at every tap within KH / stride_h rows, and
                its unrolled window loads each once (Zen 4, 2 threads, x onnxruntime, the strided
                rules / the stride-1 ones, stride 2: 96 channels at 112x112 3x3 0.92 / 1.17, 144
                at 56x56 0.97 / 1.15, 240 at 28x28 1.04 / 1.16, 200 at 33x33 0.72 / 1.22, 576
                at 14x14 0.91 / 0.86; 96 at 57x57 5x5 0.38 / 0.76, 72 at 45x45 0.58 / 1.04, 64
                at 112x112 0.57 / 0.72; with pad's phases, 7x7: 128 at 28x28 0.50 / 0.74, 120
                at 29x29 0.64 / 0.80, 48 at 97x97 0.54 / 0.75, 96 at 56x56 0.70 / 0.66)
  tile_f        the most filters of one group (an input vector is reused only by filters of its
                group) whose tile_f x tile_y x ceil(tile_x / L) accumulators fit in R/2 registers
                (LLVM unrolls the tile loops it can keep in registers); a tile of more than 2R is
                invalid (`rules.check_register_tile`)
  tile_rc       the largest candidate dividing C/groups whose weight block tile_f x tile_rc x KH x
                KW fits in a quarter of the L1 data cache; the largest fitting one otherwise
  reduce_order  rc_outer (the kernel window walks the input rows of one channel block)
  unroll_kw     1 (a kernel row of at most 8 taps as straight-line code)
  unroll_window 1 for depthwise convs whose tile has two or more rows, while its KH x KW x tile_y
                multiply-adds stay within MAX_UNROLLED_WINDOW (offered for depthwise convs only;
                a config whose unrolled window, times tile_f and the vectors of a tile row, is
                larger is invalid: under 5x5 windows, rows of 2-4 vectors at 400-800 vector
                multiply-adds passed the build worker's 30 s timeout in 5 of 9 builds, the rest
                took 2-16 s and ran 0.31-0.69x the layer's best; Zen 4, 32-trial tunes): the kernel
                rows, columns and the tile's rows as straight-line code, where the rows of the tile read the same input
                rows at other taps and LLVM loads each such vector once (one load per
                multiply-add before). Zen 4, 2 threads, x onnxruntime, without / with: 64 channels
                at 56x56 5x5 0.63 / 0.87, 96 at 56x56 7x7 0.51 / 0.72, 384 at 14x14 7x7 0.56 /
                0.79, 144 at 56x56 3x3 1.15 / 1.48, 576 at 14x14 stride 2 (the whole plane, 7
                rows) 1.27 / 1.76. Not with one row per tile (96 at 112x112 stride 2: 1.00 / 0.80)
                nor with many filters per tile, which already share each load (MobileNet-V2's stem
                1.05 / 0.99, 4 -> 64 at 56x56 1.61 / 1.22)
  pad           inline when tile_x divides OW, or when fewer than L filters read each input channel
                (depthwise: a copy would cost what the conv does); else root (a padded copy, read
                without bounds checks). Inline, a row's bounds are one mask per input vector,
                shared by tile_f filters, and X is read once; the copy reads X and writes as much
                again, which a layer larger than L2 reads back from L3 (Zen 4, 2 threads, x
                onnxruntime root / inline: 3->32 at 224x224 stride 2 0.84 / 1.06, 3->64 at 112x112
                stride 2 0.85 / 0.95, 8->32 at 112x112 stride 1 1.11 / 1.21, 64->64 at 56x56
                0.68 / 0.76, 128->128 at 28x28 0.72 / 0.77); with a column tail the copy won:
                6->24 at 97x97 0.89 / 0.60, 3->32 at 225x225 stride 2 0.67 / 0.60. A depthwise
                conv with a stride also offers "phases" (`topi.conv.conv2d_nchw_phased`): each
                task first splits its channel's padded input by stride phase, one strided read
                per input element, and every tap then reads consecutive columns, where inline each
                tap's vector is a span load and a shuffle. First where each input element feeds
                PHASE_TAPS taps or more (KH x KW / (stride_h x stride_w): 7x7 at stride 2, 12; 5x5,
                6; 3x3, 2). Zen 4, 2 threads, x onnxruntime, inline / phases, stride 2: 7x7, 120
                channels at 29x29 0.67 / 0.80, 48 at 97x97 0.57 / 0.75, 32 at 128x128 0.66 / 0.88,
                64 at 64x64 0.84 / 0.96, 128 at 28x28 0.72 / 0.74; 5x5, 672 at 14x14 0.85 / 0.46,
                96 at 57x57 0.76 / 0.63, 72 at 45x45 1.05 / 0.81, 144 at 56x56 0.89 / 0.84 (won: 64
                at 112x112 0.72 / 0.77, 64 at 64x64 0.96 / 1.12); 3x3, 96 at 112x112 1.18 / 0.67.
                A strided conv of fewer than L input channels per group and several filters
                per group offers the phases too, first: its filters all read them, so the split
                is paid once per input row a task reads, and tile_x takes whole vectors (Zen 5, 2
                threads, x onnxruntime, inline or root with 8 columns / phases with the stride-1
                columns, 3x3 stride 2: 3->32 at 224x224 0.68 / 0.89, 1->19 at 223x223 0.77 /
                1.17, 3->64 at 112x112 0.65 / 0.89, 1->32 at 96x96 0.95 / 1.25, 3->16 at 160x160
                0.72 / 1.36, 3->32 at 225x225 0.47 / 0.59, 8->32 at 112x112 0.38 / 0.57, 5->48 at
                131x131 0.45 / 0.57, 7->25 at 163x163 0.46 / 0.53: better in each of 11 layers)
  parallel      fused (n, filter tiles, row tiles): the most parallel work; but outer (n, filter
                tiles; each task's row tiles a serial loop) for depthwise convs with a stride or
                with KH >= TALL_WINDOW whose filter tiles give every core CHUNKS_PER_CORE tasks: loop
                partition then peels the first and last row tiles, which read the padding rows,
                from a guard-free interior, where the fused loop keeps the row guards in every
                tile (Zen 4, 2 threads, x onnxruntime fused / outer: 96 channels at 56x56 7x7
                0.68-0.77 / 0.78-0.87, 128 at 56x56 7x7 0.68-0.74 / 0.87, 48 at 112x112 7x7
                1.01 / 1.11, 64 at 56x56 5x5 0.97 / 1.03, 384 at 14x14 7x7 0.89 / 0.97; lost: 192
                at 28x28 7x7 0.89-0.90 / 0.81-0.85; 3x3 windows level, 144 at 56x56 1.60 / 1.55-1.66;
                stride 2, inline: 200 at 33x33 3x3 0.55 / 1.49, 72 at 45x45 5x5 0.70 / 1.09, 96 at
                57x57 5x5 0.65 / 0.78, 128 at 28x28 7x7 0.49 / 0.72, lost: 96 at 56x56 7x7 0.70 /
                0.61, 64 at 112x112 5x5 0.77 / 0.72; with phases, 128 at 28x28 7x7 0.59 / 0.73).
                With phases, a task splits the input rows it reads: the outer loop's tasks each
                channel's plane once, the fused loop's each row tile's rows and their overlap
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import te
from ...dtype import dtype_info
from ...errors import InstantiationError
from ...topi import conv as topi_conv
from ...topi.conv import ConvGeometry, Epilogue, Finish
from ..schedule import Schedule
from .rules import CHUNKS_PER_CORE, check_register_tile, closest, cpu_facts, first, lanes, split_first, vector_registers

TILE_F = (1, 2, 4, 8, 16)
_TILE_Y = (1, 2, 4, 8)
_DEEP_ROWS = tuple(range(_TILE_Y[-2], _TILE_Y[-1] + 1))    # 4 to 8: the depthwise row rules pick among them
_DEPTHWISE_TILE_Y = (*_TILE_Y[:-2], *_DEEP_ROWS)            # so the tuner reaches each of them
TILE_X = (8, 14, 16, 28, 32, 56)
_TILE_RC = (1, 4, 8, 16, 32)
TALL_WINDOW = 5             # kernel rows from which a depthwise conv's row tiles run serially (parallel's rule)
MIN_TAIL_ROWS = 3           # the fewest rows of a tall depthwise window's tail tile (tile_y's rule)
PHASE_TAPS = 8              # taps per input element from which a strided depthwise conv reads phases (pad's rule)
PADS = ("inline", "root")   # the padding placements of every conv; a strided depthwise one adds "phases"
MAX_UNROLLED_WINDOW = 392   # vector multiply-adds of an unrolled window: 7x7 x 8 rows of a vector (unroll_window)


def applies(g: ConvGeometry) -> bool:
    return True


APPLIES = applies


def tile_vectors(tile_f: int, tile_y: int, tile_x: int, L: int) -> int:
    """Vector accumulators of a tile_f x tile_y x tile_x output tile: a row is ceil(tile_x / L)."""
    return tile_f * tile_y * -(-tile_x // L)


def _tile_rules(cfg: Any, g: ConvGeometry, dtype: str, phased: bool) -> tuple[int, int, int, int]:
    """(tile_f, tile_y, tile_x, tile_rc) by the rules in the module docstring (a depthwise conv,
    or one read through the stride phases (`phased`), takes the stride-1 columns)."""
    column_stride = 1 if g.depthwise or phased else g.stride[1]
    return tile_rules(cfg, dtype, g.out, g.kernel, g.out_channels // g.groups, g.in_channels // g.groups,
                      column_stride, g.stride[0])


def tile_rules(cfg: Any, dtype: str, out: tuple[int, ...], kernel: tuple[int, ...], Fg: int, Cg: int,
               column_stride: int, row_stride: int = 1) -> tuple[int, int, int, int]:
    """The rules of `_tile_rules` for an output tile read `column_stride` input columns and
    `row_stride` rows apart (a transposed conv's gather reads one input column per output
    column, or fewer: stride 1)."""
    L, facts = lanes(cfg, dtype), cpu_facts(cfg)
    (OH, OW), (KH, KW) = out, kernel
    per_vector, dividing = max(1, L // column_stride), [v for v in TILE_X if v <= OW and OW % v == 0]
    tiles = -(-OW // per_vector)        # the fewest tiles of at most a vector each
    if not dividing and OW > L and OW % tiles == 0:
        dividing = [OW // tiles]
    tile_x = closest(per_vector, dividing or [min(v, OW) for v in TILE_X]) if dividing or OW > L else OW
    if max(_TILE_Y) >= OH:
        tile_y = OH
    elif row_stride > 1 and Fg > 1:
        tile_y = 1 if OW % tile_x == 0 and OW // tile_x >= 2 else 2
    else:       # stride 1, or one filter per group (depthwise) at any stride
        tile_y = max(v for v in _TILE_Y[:-1] if OH % v == 0)
        deep = [v for v in _DEEP_ROWS if KH * KW * tile_vectors(1, v, tile_x, L) <= MAX_UNROLLED_WINDOW]
        exact_rows = [v for v in deep if OH % v == 0]
        long_tails = [v for v in deep if OH % v >= MIN_TAIL_ROWS] if KH >= TALL_WINDOW and row_stride == 1 else []
        if Fg == 1 and exact_rows:
            tile_y = exact_rows[0]
        elif Fg == 1 and long_tails:        # no candidate divides OH: the fewest rows whose tail is long
            tile_y = long_tails[0]
        elif Fg == 1 and tile_y == 1:       # only 1 divides OH: 4 rows and a tail
            tile_y = _TILE_Y[-2]
    accumulators = vector_registers(cfg) // 2 // tile_vectors(1, tile_y, tile_x, L)
    tile_f = max([v for v in TILE_F if v <= min(Fg, accumulators)] or [1])
    block = tile_f * KH * KW * dtype_info(dtype).bytes
    fitting = [v for v in _TILE_RC if v <= Cg and v * block <= facts.l1d_bytes // 4] or [1]
    exact = [v for v in fitting if Cg % v == 0]
    return tile_f, tile_y, tile_x, max(exact or fitting)


def define_knobs(cfg: Any, g: ConvGeometry, N: int, dtype: str, when: tuple[str, tuple[str, ...]]) -> None:
    """The output tile, channel split, reduction order, kw unroll, padding placement, parallel loop."""
    L = lanes(cfg, dtype)
    phased = phases_pay(g, L)
    rules = _tile_rules(cfg, g, dtype, phased)
    whole_columns = g.out[1] % rules[2] == 0
    pad = "inline" if g.out_channels // g.groups < L or whole_columns else "root"
    taps = g.kernel[0] * g.kernel[1] * tile_vectors(*rules[:3], L)
    window = taps <= MAX_UNROLLED_WINDOW and rules[1] > 1
    tasks = N * -(-g.out_channels // rules[0])
    enough_tasks = tasks >= CHUNKS_PER_CORE * cpu_facts(cfg).cores
    outer = g.depthwise and enough_tasks and (g.stride != (1, 1) or g.kernel[0] >= TALL_WINDOW)
    define_tile_knobs(cfg, g.out_channels, g.in_channels // g.groups, g.out, rules,
                      "phases" if phased else pad, when,
                      tuple(first(int(window), [0, 1])) if g.depthwise else (0,), "outer" if outer else "fused",
                      PADS + ("phases",) * phases_apply(g, L), _DEPTHWISE_TILE_Y if g.depthwise else _TILE_Y)


def phases_apply(g: ConvGeometry, L: int) -> bool:
    """A strided conv, depthwise or of fewer than L input channels per group, may read its input
    split by stride phase (pad "phases")."""
    return max(g.stride) > 1 and (g.depthwise or g.in_channels // g.groups < L)


def phases_pay(g: ConvGeometry, L: int) -> bool:
    """The stride phases by default for a conv of several filters per group (all of them read
    the same phases), and for a depthwise one where each input element feeds PHASE_TAPS taps or
    more."""
    taps = g.kernel[0] * g.kernel[1] >= PHASE_TAPS * g.stride[0] * g.stride[1]
    return phases_apply(g, L) and (not g.depthwise or taps)


def define_tile_knobs(cfg: Any, F: int, Cg: int, out: tuple[int, ...], rules: tuple[int, int, int, int], pad: str,
                      when: tuple[str, tuple[str, ...]] | None = None,
                      unroll_window: tuple[int, ...] = (0,), parallel: str = "fused",
                      pads: Sequence[str] = PADS, rows: Sequence[int] = _TILE_Y) -> None:
    """The knobs `schedule_nchw` reads, each default by `rules` (tile_f, tile_y, tile_x, tile_rc),
    `pad` (the default padding placement, one of `pads`), `unroll_window` (its values, the
    default first), `parallel` (the default parallel loop) and `rows` (tile_y's candidates)."""
    (OH, OW), (tile_f, tile_y, tile_x, tile_rc) = out, rules
    cfg.define_split("tile_f", F, 2, policy="candidate", candidate=split_first(tile_f, F, TILE_F), when=when)
    cfg.define_split("tile_y", OH, 2, policy="candidate", candidate=split_first(tile_y, OH, rows), when=when)
    cfg.define_split("tile_x", OW, 2, policy="candidate", candidate=split_first(tile_x, OW, TILE_X), when=when)
    cfg.define_split("tile_rc", Cg, 2, policy="candidate", candidate=split_first(tile_rc, Cg, _TILE_RC),
                     when=when)
    cfg.define_knob("reduce_order", ["rc_outer", "kernel_outer"], when=when)
    cfg.define_knob("unroll_kw", [1, 0], when=when)
    cfg.define_knob("pad", first(pad, pads), when=when)
    cfg.define_knob("parallel", first(parallel, ["fused", "outer"]), when=when, absent="fused")
    cfg.define_knob("unroll_window", list(unroll_window), when=when, absent=0)   # older records: not unrolled


def place_pad(cfg: Any, s: Schedule, P: te.Tensor, padded: bool) -> None:
    """Inline the padding into the conv's loads, or compute it first (the "pad" knob): a padded
    copy, its outer axes fused in parallel and its rows in vectors (masked where a vector meets
    the padding; left to LLVM, the copy's conditional loads became gathers: 3 x 226 x 226
    floats, 2 threads, 41 us against 12)."""
    if cfg["pad"].val == "inline" or not padded:
        s[P].compute_inline()
    else:
        *outer, row = P.op.axis
        s[P].parallel(s[P].fuse(*outer))
        s[P].vectorize(s[P].split(row, lanes(cfg, P.dtype))[1])


def schedule_nchw(cfg: Any, s: Schedule, P: te.Tensor, Y: te.Tensor, out: te.Tensor, padded: bool,
                  KW: int) -> None:
    """Each output tile accumulates in a local buffer at the tile loop; `out` is Y itself
    (Y then gets a local cache) or a pointwise epilogue of Y (Y is then the local tile). P is the
    padded input, or with pad "phases" its stride phases, computed per task."""
    phased = cfg["pad"].val == "phases"
    if not phased:
        place_pad(cfg, s, P, padded)
    CC = s.cache_write(Y, "local") if out is Y else Y
    n, f, y, x = out.op.axis
    fo, fi = cfg["tile_f"].apply(s, out, f)
    yo, yi = cfg["tile_y"].apply(s, out, y)
    xo, xi = cfg["tile_x"].apply(s, out, x)
    s[out].reorder(n, fo, yo, xo, fi, yi, xi)
    s[CC].compute_at(s[out], xo)
    _, cf, cy, cx = s[CC].op.axis
    rc, ry, rx = s[CC].op.reduce_axis
    rco, rci = cfg["tile_rc"].apply(s, CC, rc)
    if cfg["reduce_order"].val == "rc_outer":
        s[CC].reorder(rco, ry, rx, rci, cf, cy, cx)
    else:
        s[CC].reorder(ry, rx, rco, rci, cf, cy, cx)
    if (cfg["unroll_kw"].val and KW <= 8) or cfg["unroll_window"].val:
        s[CC].unroll(rx)
    tile_f, tile_y, tile_x = (cfg[k].size[-1] for k in ("tile_f", "tile_y", "tile_x"))
    vectors = tile_vectors(tile_f, tile_y, tile_x, lanes(cfg, out.dtype))
    check_register_tile(cfg, vectors, "conv2d nchw (tile_f x tile_y x tile_x / lanes)")
    if cfg["unroll_window"].val:
        taps = ry.extent * rx.extent * vectors
        if taps > MAX_UNROLLED_WINDOW:
            raise InstantiationError(f"conv2d nchw: an unrolled window of {taps} vector multiply-adds is over "
                                     f"{MAX_UNROLLED_WINDOW} (KH x KW x tile_f x tile_y x tile_x / lanes)")
        s[CC].unroll(ry)
        s[CC].unroll(cy)
    s[CC].vectorize(cx)
    s[out].vectorize(xi)
    tasks = s[out].fuse(n, fo, yo) if cfg["parallel"].val == "fused" else s[out].fuse(n, fo)
    s[out].parallel(tasks)
    if phased:
        s[P].compute_at(s[out], tasks)
        s[P].vectorize(s[P].split(P.op.axis[-1], lanes(cfg, P.dtype))[1])


def build(cfg: Any, X: te.Tensor, Wt: te.Tensor, g: ConvGeometry, epilogue: Epilogue | None,
          extra: Sequence[te.Tensor], finish: Finish | None = None) -> tuple[Schedule, te.Tensor]:
    """The direct NCHW conv (pad stage, local tile), the epilogue as a pointwise stage on the tile;
    `extra` (the epilogue's own inputs) are read in place."""
    padding = (*g.pad_before, *g.pad_after)
    conv = topi_conv.conv2d_nchw_phased if cfg["pad"].val == "phases" else topi_conv.conv2d_nchw
    P, Y = conv(X, Wt, g.stride, padding, g.dilation, g.groups, name="Y" if epilogue is None else "conv")
    out = Y if epilogue is None else topi_conv.apply_epilogue(Y, epilogue)
    final = finish(out) if finish else out
    s = te.create_schedule(final.op)
    schedule_nchw(cfg, s, P, Y, out, g.has_padding, g.kernel[1])
    return s, final
