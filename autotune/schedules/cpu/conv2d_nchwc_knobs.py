"""Default knobs of the blocked NCHW[x]c conv (`conv2d_nchwc`): block sizes and the register
tile, each knob's first value by a rule on the shape and the target.

Default rules (each knob's first value), with L the vector lanes of the dtype and R the vector
registers of the target (32 with AVX-512, else 16):
  oc_bn      2L when F/G >= 4L (two weight vectors per broadcast input halve the loads per
             multiply-add) and 2L blocks pad F/G no further than L blocks do: at an odd multiple
             of L the extra zero filters and the 2L tile's half as many positions lost on every
             layer (Zen 4, 2 threads, x onnxruntime, L / 2L, 3x3: 64 -> 80 at 28x28 stride 2 1.16
             / 0.97, 128 -> 112 at 14x14 stride 2 1.13 / 0.78, 48 -> 272 at 17x17 1.03 / 0.84,
             256 -> 336 at 7x7 1.08 / 0.94, 160 -> 176 at 14x14 0.96 / 0.94, 200 -> 208 at 9x9
             1.03 / 0.97, 120 -> 240 stride 2 1.10 / 1.08; 5x5 64 -> 144 at 28x28 1.00 / 0.84;
             multiples of 2L within 5% either way: 128 -> 256 at 14x14 0.96 / 0.94, 512 at 7x7
             0.95 / 0.93, 64 -> 96 stride 2 1.03 / 0.98, 64 -> 64 5x5 at 29x29 0.96 / 1.01;
             the catalogue's defaults that moved, GFLOP/s 2L / L: 461 -> 419 at 7x7 184 / 207-215,
             41 -> 69 5x5 at 13x13 140 / 156, 373 -> 167 at 11x11 178 / 174-175);
             under 4L too where the input has fewer than L channels per group and
             2L blocks pad F/G no further than L blocks do (51 or 57 filters: 64 either way), as
             such stems broadcast an input tap per multiply-add (Zen 5, 2 threads, x onnxruntime,
             L / 2L: 11 -> 51 at 81x81 7x7 stride 2 0.82-0.89 / 0.91-0.94, 9 -> 31 at 213x213
             0.94-0.96 / 1.00-1.01, 11 -> 57 at 183x183 5x5 0.87-0.92 / 0.85-0.94, 5 -> 24 at
             99x99 3x3 0.73 / 1.01; lost: 6 -> 60 at 120x120 5x5 0.92 / 0.83-0.89; 7 -> 37,
             which 2L pads to 64, stays at L: 0.99 / 0.66-0.78; 24 -> 56 at 28x28 with 24 input
             channels 1.30 / 1.24). Else L; L for depthwise convs, which broadcast nothing (Zen 5, 2
             threads, x onnxruntime, 2L / L: 96 channels at 56x56 7x7 0.82 / 1.07, 160 at 20x20
             0.73 / 1.05, 144 at 56x56 3x3 stride 2 0.64 / 1.13, 48 at 97x97 7x7 stride 2 0.48 /
             1.09; level at 7x7: 768 channels with 7x7 taps 1.02 / 1.01, and 960 with 3x3 1.54 / 1.17,
             where NCHW's default ran 4.02); capped by F/G rounded up to a power of two, its
             zero tail computed: 12 filters in a 12-lane vector put the accumulators of a row
             wider than the register file in masked loads and stores (32 -> 12 at 56x56 5x5, x
             onnxruntime: 12 lanes 0.04, 16 lanes 1.42; 12 -> 12 at 45x45 0.04 / 1.42). A
             grouped conv's blocks are at most L lanes or whole vectors, the only values its
             knob offers: a vector and part of one ran 10x slower than either neighbour (Zen 5,
             2 threads, 3x3, x onnxruntime: 40 -> 320 at 16x16 in 4 groups, 20 / 16 lanes 0.13 /
             1.19; 30 -> 300 at 17x17 in 3, 25 / 20 / 10 0.08 / 0.07 / 0.90; 48 -> 96 at 28x28 in
             4, 24 / 12 0.09 / 1.48). Where L does not
             divide F/G, the block of the fewest vector operations (`_vector_operations`: a block of
             under L lanes is a vector of the next power of two, and costs one operation per
             execution unit it spans, half a register on a half-pumped AVX-512) of the divisors
             and, where a group holds a vector, the image more than a row and the group's weights
             fit half the L2, of whole vectors zero-padding each group (`padded_groups`: the
             group is then one output block); on a tie no padding, then the wider. Zen 4
             (half-pumped), 2 threads, in turns, us, the old rule's largest divisor / the pick:
             30 -> 300 at 17x17 in 3, 10 / 16 padded 131-134 / 119-120; 360 at 28x28 in 9, 10 /
             8 1628-1794 / 1201-1244 (16 padded 1212-1240); 48 -> 96 at 28x28 in 4, 12 / 8 120 /
             100; 336 at 28x28 stride 2 in 14, 12 / 8 883-1035 / 728-820; 168 a group at 14x14
             and 7x7, 14 / 8 5137 / 4445, 2441 / 1645; padded blocks whose group's weights pass
             the L2 ran 2-3x slower (168 and 232 a group at 14x14)
  reg_n      columns per register tile: the largest divisor (>= 4) of OW such that the tile's
             accumulators, oc_bn/L per position, leave a register per weight vector and one for
             the broadcast input: reg_n <= (R - oc_bn/L - 1) / (oc_bn/L); else the largest fitting.
             Where a row is one such tile and a tail (no divisor fits, and OW < 2 x budget: 17,
             19, 23 columns), the tile takes half the budget's columns, so that oh_bn's rule gives
             it two rows: the tail is a large share of the row, and in one row a tail of 3 columns
             is 6 accumulators, waiting on the multiply-add latency. Zen 5, 2 threads, x
             onnxruntime, 14 x 1 / 7 x 2: 3x3 at 17x17, 192 channels 0.57-0.60 / 0.93-0.94, 256
             0.54-0.64 / 0.93-0.94, 512 0.58 / 0.93; 5x5 192 at 17x17 0.90 / 1.17, 160 at 19x19
             0.84 / 1.19, 96 at 23x23 0.55 / 1.16; 3x3 stride 2 to 17 columns, 256 channels 0.56
             / 0.93. Wider rows keep the rule's tile: 128 at 34x34 5x5 0.99 / 0.78, stride 2 to
             37 columns 0.96 / 0.93, 29x29 0.99 / 1.03, 43 columns 1.00 / 1.07, 31x31 0.82 /
             1.12. Not for depthwise convs, whose wide tile with a tail of one column ran best
             (below). Where half the budget is under MIN_TILE_COLUMNS (16 registers and 2L
             blocks: 6 positions, so a 7-column row got 2 x 2 tiles, 8 accumulators and a tail
             column per row), oc_bn drops to L when a whole row then fits, and the tile is the
             row: Zen 3 (AVX2), 2 threads, x onnxruntime, two runs each, 2 x 2 at 2L / 7 x 2 at
             L: 512 -> 2048 1x1 at 7x7 0.61-0.68 / 0.87-0.90, 512 3x3 at 7x7 0.72-0.76 /
             0.83-0.89, stride 2 to 7x7 0.70-0.75 / 0.80, 1024 -> 2048 stride 2 0.94-0.97 /
             1.08-1.16, 960 -> 160 0.76-0.78 / 0.85-0.86; lost: 320 -> 1280 0.80-0.82 / 0.75,
             576 -> 160 0.83-0.85 / 0.75-0.80; level within the runs' spread: 2048 -> 512, 160
             -> 960, 960 -> 320. AVX-512's budget (14) never halves below 4 columns.
             Unless the input one output block reads (C/G x the rows and columns the conv
             reads) overflows half a core's L2: every oc block then re-reads it from L3, and 2L
             blocks of MIN_TILE_COLUMNS columns (7 columns: a tail of 3) halve the re-reads (Zen
             3, x onnxruntime, in turns, L x 7 x 2 rows / 2L x 4, both with the whole-image
             block: 2048 -> 512 1x1 at 7x7 0.81-0.84 / 0.89-0.91, 1536 -> 384 0.85-0.87 / 0.90;
             3x3 stride 2 to 7x7, 512 -> 512 0.82-0.85 / 0.87-0.88, 1024 -> 256 0.82-0.84 /
             0.87-0.90; inputs that fit: 3x3 at 7x7, 512 -> 512 0.82 / 0.80, 461 -> 419 1.09 /
             1.08).
             A depthwise conv whose taps share input columns (stride_w < KW <= 8) keeps an input
             vector live per position as well, so that its kernel row unrolls (unroll_kw):
             positions <= (R - oc_bn/L) / (oc_bn/L + 1), 15 with AVX-512 (Zen 5, 2 threads, x
             onnxruntime, 7x7, 28 columns rolled / the rule's tile unrolled: 96 channels at 56x56
             0.95-0.97 / 1.08-1.12, 192 at 28x28 1.04 / 1.08-1.13, 48 at 97x97 1.04 / 1.18-1.20,
             64 at 99x99 stride 2 1.01-1.03 / 1.15-1.19), and a divisor of OW below 8 columns
             gives way to the largest fitting (a tile of 5 accumulators waits on the multiply-add
             latency: 71 channels at 85x85, 17 rolled 7.0-7.5x, 5 unrolled 3.5-4.7x, 14 unrolled
             with a tail of one 7.7-7.8x)
  oh_bn      rows per tile: the most (1, 2, 4) that keep rows x reg_n within that budget; with
             fewer than L input channels per group, of those that divide OH: a row tail keeps
             its guard in every tile of the fused parallel loop, and LLVM then ran the tile's
             rows as separate loops, each reloading the weights (Zen 5, 2 threads, x onnxruntime,
             11 columns x 2 rows / 11 x 1, 7x7 stride 2: 7->37 at 109x109 0.68 / 0.85, 9->24 at
             153x153 0.62 / 0.87, 5->40 at 129x129 0.78 / 0.81; 5x5: 11->40 at 89x89 0.79 /
             0.87, 7->48 at 129x129 0.86 / 0.86). Deep layers keep their row tails: ResNeXt-50's
             1024 channels at 7x7 in 32 groups ran 4 rows (a tail of 3) at 1.30, 1 row at 1.12
  ic_bn      of the blocks (powers of two to 64, or C/G) whose weight block ic_bn x KH x KW x oc_bn
             fits in half the L1 data cache: the largest divisor of C/G (no zero tail), unless a
             block over twice as large fits (then the largest whose zero tail pads C/G by at
             most MAX_CHANNEL_PAD: on a 1x1 kernel or a row of 3 taps 64 channels fit, and 80
             in blocks of 64 computed 128, 33 computed 64; Zen 5, 2 threads, x onnxruntime,
             64 / the rule's block: 1x1, 80 -> 256 at 28x28 0.67 / 0.99 (16), 80 -> 160 at 14x14
             0.80 / 1.15, 75 -> 357 stride 2 0.69 / 1.04, 144 -> 24 0.17 / 0.34 (32); conv1d as
             a row, 80 -> 256 k3 over 1500 0.65 / 1.04); none for depthwise. With fewer
             than L channels per group, 1: the multiply-adds are the same (a broadcast per
             input channel), but a block shorter than a vector is a transpose of scalars
             (about 3 cycles an element for MobileNet's RGB stem), where blocks of 1 are a
             padded copy of each plane, vectorised (Zen 4, 2 threads, x onnxruntime with C's
             block / with 1: 3 channels 3x3 stride 2 at 224x224 0.57 / 0.71, 7x7 0.87 / 0.89,
             8 channels 0.61 / 0.78, 12 0.59 / 0.71, 5 with 5x5 taps 0.69 / 0.76; 16 channels,
             blocks of 8, 0.75 against 0.68)
  unroll_kw  1 when KW <= 8 (a short kernel row as straight-line code) and the unrolled row,
             KW x ic_bn x the tile's vector multiply-adds, stays within MAX_UNROLLED_FMAS: LLVM
             flattens a short ic_bn loop too, and a body of many hundred multiply-adds no longer
             fits the decoded-instruction cache (ResNet's 7x7 stride-2 stem, ic_bn 3: 588
             multiply-adds unrolled ran 1.61 ms, 0.97-1.04 as a loop over kw, 2 threads; a 5x5
             3-channel conv 0.30-0.33 vs 0.24 ms; 3x3 layers with ic_bn 16, where LLVM keeps the
             ic_bn loop, ran alike either way); and where the taps share input columns
             (stride_w < KW), only while the tile's accumulators, its weight vectors and one
             broadcast input per output position fit the registers: unrolled, LLVM loads each shared
             input once and keeps it live from one tap to the next (ResNet's 7x7 stride-2 stem
             with ic_bn 1, as on a 32 KiB L1: 116 spills and reloads among the 196
             multiply-adds of the unrolled row)
  prefetch   bytes of the packed weights fetched ahead of the tile's reads (`Stage.prefetch` on
             the ic_bn loop): PREFETCH_AHEAD when the packed weights outweigh a core's L2, else
             0. Such weights come from memory on every call (in a model, always: the other
             layers' data passed through since), as one stream per output-channel block, and
             the hardware's stream prefetcher stops at each 4 KiB page, so every page starts
             with misses that a fetch one page ahead hides (ResNet-18's 512-channel 7x7 layer,
             2 threads, weights cold: 1.07-1.11 ms against 1.34; hot, from L3: 1.04 against
             0.99). Not for depthwise convs, whose weights are a few KiB
  block_rows rows of the local conv block, the parallel loop's unit, with the reduction over the
             ic blocks outside its register tiles (0: oh_bn rows, the ic blocks inside each
             column tile). When one output-channel block's weights (C/G x KH x KW x oc_bn)
             overflow half the L1, every tile of an oh_bn-row block streams them from L2; with
             the ic blocks outside the tiles, each ic block's weights (sized by ic_bn's rule to
             half the L1) are read from L1 by every tile of the block. The most rows, a divisor
             of OH and two or more whole row tiles, whose accumulators (rows x OW x oc_bn) fit
             the other half of the L1 while the blocks still give every core CHUNKS_PER_CORE; 0
             when none does (ResNet-18's 256-channel 14x14 layer, 2 threads, weights cold: 0.82
             / 1.48 ms at the 5th percentile / median with 7 rows against 0.92 / 1.57 without).
             A block ending in a tail tile adds a tail per block, unless the block is the whole
             image: its tail is the image's own, there with or without the block (7x7 images of
             2-row tiles, Zen 3 (AVX2), 2 threads, weights hot, x onnxruntime, 0 / 7 rows, runs
             in turns: 2048 -> 512 1x1 0.75-0.77 / 0.82-0.84, 2048 -> 1000 1x1 0.76 / 0.85, 1536
             -> 384 1x1 0.81 / 0.87, 576 -> 160 1x1 0.87-0.96 / 0.96-0.98, 960 -> 320 1x1
             0.66-0.89 / 0.86-0.88, 3x3 461 -> 419 0.86-1.07 / 1.11-1.33, 300 -> 300 0.63 / 0.75;
             3x3 512 -> 512 0.80-0.93 / 0.82-0.93, as ResNet-18's at 7x7 on AVX-512, 0.98 / 1.01
             ms: level). An image of one row (a conv1d's, or a 1x1 conv's image as one row,
             `flat_geometry`) is one block of that row under the same rule (1: a block of many
             tiles; at 7x7 with 64-channel ic blocks, x onnxruntime, 0 / 1: 2048 -> 512 0.91 /
             0.98, 576 -> 160 1.00 / 1.18, 960 -> 160 1.01 / 1.08, 960 -> 320 0.97 / 1.02).
             Not for depthwise convs
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...dtype import dtype_info
from ...topi.conv import ConvGeometry, conv_geometry
from .rules import CHUNKS_PER_CORE, VectorTarget, cpu_facts, first, lanes, vector_registers, vector_target

MAX_UNROLLED_FMAS = 256     # vector multiply-adds of an unrolled kernel row (unroll_kw's rule)
MAX_UNROLLED_KW = 8         # the longest kernel row unroll_kw's rule unrolls
MAX_CHANNEL_PAD = 0.125    # the share of zero input channels that ic_bn's rule lets a block's tail add
PREFETCH_AHEAD = 4096       # bytes of the weight stream fetched ahead (prefetch's rule): a page
_PREFETCH = (0, 1024, PREFETCH_AHEAD)
_BLOCKS = (1, 2, 4, 8, 16, 32, 64)
_COLUMNS = (1, 2, 4, 6, 7, 8, 12, 14, 16, 24, 28, 32)
MIN_TILE_COLUMNS = 4      # the narrowest divisor of OW a register tile takes as its columns
_ROWS = (1, 2, 4)
BLOCK_ROWS = (2, 4, 8, 16, 32)


def per_group(g: ConvGeometry) -> tuple[int, int]:
    """(input, output) channels of one group."""
    return g.in_channels // g.groups, g.out_channels // g.groups


def read_extent(g: ConvGeometry, axis: int) -> int:
    """Rows (axis 0) or columns (axis 1) of the padded input the conv reads."""
    return (g.out[axis] - 1) * g.stride[axis] + (g.kernel[axis] - 1) * g.dilation[axis] + 1


def subsampled(g: ConvGeometry, axis: int) -> bool:
    """A kernel one pixel wide along `axis` with a stride reads every stride-th pixel only: the
    repack keeps just those (a 1x1 stride-2 conv's repack of every pixel cost 4x its reads)."""
    return g.kernel[axis] == 1 and g.stride[axis] > 1


def packed_extent(g: ConvGeometry, axis: int) -> int:
    """Rows or columns of the repacked input (data_vec): what the conv reads, or every stride-th."""
    return g.out[axis] if subsampled(g, axis) else read_extent(g, axis)


def padded_groups(groups: int, Fg: int, oc_bn: int) -> bool:
    """Whether each of `groups` groups of Fg output channels ends in a zero-padded block of oc_bn
    (so that no block straddles two groups)."""
    return groups > 1 and Fg % oc_bn != 0


def _blocked_channels(g: ConvGeometry) -> int:
    """The output channels that oc_bn blocks: one group's, or every channel of a depthwise conv."""
    return g.out_channels if g.depthwise else per_group(g)[1]


# ---- default rules ------------------------------------------------------------------------------

def _capped(values: Sequence[int], cap: int) -> list[int]:
    return sorted({min(v, cap) for v in values})


def _oc_options(g: ConvGeometry, L: int, out_block: int) -> list[int]:
    """Output channel blocks; with groups the divisors of F/groups of at most L lanes or whole
    vectors, and where a group holds a vector and the image more than one row, whole vectors
    that pad each group (module docstring); with a blocked output, multiples of its block (each
    tile writes whole blocks)."""
    Fg = _blocked_channels(g)
    if out_block:
        return [v for v in (out_block, 2 * out_block, 4 * out_block) if v == out_block or v <= Fg]
    if g.groups > 1 and not g.depthwise:
        divisors = {v for v in range(1, min(Fg, _BLOCKS[-1]) + 1) if Fg % v == 0 and (v <= L or v % L == 0)}
        pads = Fg >= L and g.out[0] > 1
        padding = {v for v in (L, 2 * L, 4 * L) if pads and v <= min(_BLOCKS[-1], -(-Fg // L) * L)}
        return sorted(divisors | padding)
    return _capped(_BLOCKS[2:], 1 << (Fg - 1).bit_length())


def _pick_oc(g: ConvGeometry, target: VectorTarget, options: list[int]) -> int:
    F, L = _blocked_channels(g), target.lanes
    as_wide = -(-F // (2 * L)) * 2 == -(-F // L)          # 2L blocks pad F no further than L blocks
    want = 2 * L if as_wide and (F >= 4 * L or per_group(g)[0] < L) and not g.depthwise else L
    if g.groups == 1 or g.depthwise or F % L == 0:
        return max([v for v in options if v <= want] or [min(options)])
    fitting = [v for v in options if v <= want and (not padded_groups(g.groups, F, v)
                                                     or _group_weights_fit(g, v, target))]
    return min(fitting or [min(options)],
               key=lambda v: (_vector_operations(F, v, target), padded_groups(g.groups, F, v), -v))


def _vector_operations(F: int, oc_bn: int, target: VectorTarget) -> int:
    """Vector operations per output position and input channel for F channels in blocks of
    oc_bn, in the target's execution units: a block of fewer than L lanes is a vector of the
    next power of two (LLVM widens it), which costs one unit-wide operation per unit it spans."""
    width = oc_bn if oc_bn % target.lanes == 0 else 1 << (oc_bn - 1).bit_length()
    return -(-F // oc_bn) * -(-width // target.unit_lanes)


def _group_weights_fit(g: ConvGeometry, oc_bn: int, target: VectorTarget) -> bool:
    """Whether one group's weights, padded to blocks of oc_bn, fit half a core's L2: a padded
    group is one output block (`conv2d_nchwc`), whose consecutive row blocks then reuse them."""
    Cg, Fg = per_group(g)
    return Cg * g.kernel[0] * g.kernel[1] * -(-Fg // oc_bn) * oc_bn <= target.l2_elements // 2


def _tile_positions(registers: int, g: ConvGeometry, oc_bn: int, L: int) -> int:
    """Output positions (rows x columns) per register tile: their oc_bn/L accumulator vectors each
    leave registers for the oc_bn/L weight vectors and one broadcast input; for a depthwise conv
    whose taps share input columns, also an input vector live per position (the unrolled kernel
    row: `_unroll_kw`)."""
    vectors = -(-oc_bn // L)
    if _unrolled_depthwise(g):
        return max(1, (registers - vectors) // (vectors + 1))
    return register_tile_positions(registers, vectors)


def register_tile_positions(registers: int, vectors: int) -> int:
    """Output positions of a tile `vectors` wide: accumulators that leave a register per weight
    vector and one for the broadcast input."""
    return max(1, (registers - vectors - 1) // vectors)


def _unrolled_depthwise(g: ConvGeometry) -> bool:
    """A depthwise conv whose kernel row unrolls with its taps sharing input columns."""
    return g.depthwise and g.stride[1] < g.kernel[1] <= MAX_UNROLLED_KW


def _pick_columns(OW: int, budget: int, options: list[int], least: int = MIN_TILE_COLUMNS) -> int:
    divisors = [v for v in range(least, min(OW, budget) + 1) if OW % v == 0]
    return max(divisors or [v for v in options if v <= budget] or [1])


def _pick_ic(cfg: Any, g: ConvGeometry, oc_bn: int, dtype: str, options: list[int]) -> int:
    Cg = per_group(g)[0]
    block = g.kernel[0] * g.kernel[1] * oc_bn * dtype_info(dtype).bytes
    fitting = [v for v in options if v * block <= cpu_facts(cfg).l1d_bytes // 2] or [min(options)]
    exact = [v for v in fitting if Cg % v == 0]
    if exact and 2 * max(exact) >= max(fitting):
        return max(exact)
    return max(v for v in fitting if -(-Cg // v) * v <= (1 + MAX_CHANNEL_PAD) * Cg or Cg % v == 0)


def define_knobs(cfg: Any, g: ConvGeometry, N: int, dtype: str, when: tuple[str, tuple[str, ...]],
                 x_block: int = 0, out_block: int = 0) -> None:
    """The block sizes and tile shape, first values by the rules in the module docstring. With X
    blocked (`x_block`), ic_bn divides its block; with the output blocked, oc_bn is a multiple
    of that block."""
    L, (OH, OW) = lanes(cfg, dtype), g.out
    oc_options = _oc_options(g, L, out_block)
    oc_bn, budget, reg_n = default_tile(g, vector_target(cfg, dtype), out_block)
    columns, rows = _capped(_COLUMNS, OW), _capped(_ROWS, OH)
    few_channels = per_group(g)[0] < L          # ic_bn 1, and whole row tiles only (oh_bn's rule)
    oh_bn = max(v for v in rows if (v * reg_n <= budget and (OH % v == 0 or not few_channels)) or v == 1)
    cfg.define_knob("nchwc_oc_bn", first(oc_bn, oc_options), when=when)
    ic_bn = 1
    if not g.depthwise:
        ic_options = _capped(_BLOCKS, per_group(g)[0])
        if x_block:
            ic_options = [v for v in ic_options if x_block % v == 0]
        ic_bn = 1 if few_channels else _pick_ic(cfg, g, oc_bn, dtype, ic_options)
        cfg.define_knob("nchwc_ic_bn", first(ic_bn, ic_options), when=when)
    cfg.define_knob("nchwc_reg_n", first(reg_n, columns), when=when)
    cfg.define_knob("nchwc_oh_bn", first(oh_bn, rows), when=when)
    cfg.define_knob("nchwc_unroll_kw", first(int(_unroll_kw(cfg, g, ic_bn, oc_bn, oh_bn, reg_n, L)), [1, 0]),
                    when=when)
    if not g.depthwise:
        weights = g.out_channels * per_group(g)[0] * g.kernel[0] * g.kernel[1] * dtype_info(dtype).bytes
        ahead = PREFETCH_AHEAD if weights > cpu_facts(cfg).l2_bytes else 0
        cfg.define_knob("nchwc_prefetch", first(ahead, _PREFETCH), when=when, absent=0)   # older records: none
        options = _block_rows_options(OH)
        rows_default = _pick_block_rows(cfg, g, N, oc_bn, oh_bn, dtype, options)
        cfg.define_knob("nchwc_block_rows", first(rows_default, [0, *options]), when=when, absent=0)


def default_tile(g: ConvGeometry, target: VectorTarget, out_block: int = 0) -> tuple[int, int, int]:
    """(oc_bn, positions, reg_n) of the default register tile on `target`: oc_bn's and reg_n's
    rules (module docstring)."""
    L, registers = target.lanes, target.registers
    (OH, OW), oc_options = g.out, _oc_options(g, L, out_block)
    oc_bn = _pick_oc(g, target, oc_options)
    budget = _tile_positions(registers, g, oc_bn, L)
    columns = _capped(_COLUMNS, OW)
    reg_n = _pick_columns(OW, budget, columns, 8 if _unrolled_depthwise(g) else 4)
    two_rows = OH % 2 == 0 if per_group(g)[0] < L else OH > 1
    if not g.depthwise and OW % reg_n and budget < OW < 2 * budget and two_rows:  # one tile and a tail
        one_vector = _tile_positions(registers, g, L, L)
        if budget // 2 < MIN_TILE_COLUMNS and oc_bn > L and L in oc_options and one_vector >= OW:
            if input_elements(g) > target.l2_elements // 2:       # re-read per output block: fewer, wider blocks
                return oc_bn, budget, MIN_TILE_COLUMNS
            return L, one_vector, _pick_columns(OW, one_vector, columns)   # 16 registers: a row a tile
        reg_n = _pick_columns(OW, budget // 2, columns)
    return oc_bn, budget, reg_n


def flat_geometry(g: ConvGeometry) -> ConvGeometry:
    """A 1x1 stride-1 conv without padding as the same conv over its image as one row of
    H x W pixels: the pixels are the same, in the same order."""
    C, F, (H, W) = g.in_channels, g.out_channels, g.spatial
    return conv_geometry("conv2d", C, F, (1, H * W), (1, 1), 1, 0, 1, g.groups)


def input_elements(g: ConvGeometry) -> int:
    """The input elements one output-channel block reads: its group's channels x the repacked
    plane (`packed_extent`)."""
    return per_group(g)[0] * packed_extent(g, 0) * packed_extent(g, 1)


def _unroll_kw(cfg: Any, g: ConvGeometry, ic_bn: int, oc_bn: int, oh_bn: int, reg_n: int, L: int) -> bool:
    """unroll_kw's rule (module docstring)."""
    vectors = max(1, oc_bn // L)
    if g.kernel[1] > MAX_UNROLLED_KW or g.kernel[1] * ic_bn * oh_bn * reg_n * vectors > MAX_UNROLLED_FMAS:
        return False
    live = oh_bn * reg_n * vectors + vectors + oh_bn * reg_n
    return g.stride[1] >= g.kernel[1] or live <= vector_registers(cfg)


def _block_rows_options(OH: int) -> list[int]:
    """Block heights: the divisors of OH from 2 to BLOCK_ROWS' largest, and BLOCK_ROWS' values
    below OH (a tail block where they do not divide it); of an image of one row, that row."""
    if OH == 1:
        return [1]
    return sorted({d for d in range(2, min(OH, BLOCK_ROWS[-1]) + 1) if OH % d == 0}
                  | {r for r in BLOCK_ROWS if r < OH})


def _pick_block_rows(cfg: Any, g: ConvGeometry, N: int, oc_bn: int, oh_bn: int, dtype: str,
                     options: list[int]) -> int:
    """block_rows' rule (module docstring)."""
    facts, (OH, OW), nbytes = cpu_facts(cfg), g.out, dtype_info(dtype).bytes
    if per_group(g)[0] * g.kernel[0] * g.kernel[1] * oc_bn * nbytes <= facts.l1d_bytes // 2:
        return 0
    blocks = N * g.groups * -(-per_group(g)[1] // oc_bn)

    def fits(rows: int) -> bool:
        return (rows * OW * oc_bn * nbytes <= facts.l1d_bytes // 2
                and blocks * -(-OH // rows) >= CHUNKS_PER_CORE * facts.cores)

    return max([r for r in options if OH % r == 0 and (r % oh_bn == 0 or r == OH) and (r >= 2 * oh_bn or OH == 1)
                and fits(r)] or [0])
