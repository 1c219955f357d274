"""conv_transpose2d and conv_transpose3d on the CPU (ONNX ConvTranspose, PyTorch
ConvTranspose2d/3d): X (N, C, H, W), W (C, F/groups, KH, KW), with stride, padding (an int, a
pair or top, left, bottom, right), output_padding, dilation and groups; 3-d adds a depth axis
to each (X N x C x D x H x W, padding one int, a triple or the three begins then the three
ends). The computes are `autotune.topi.conv_transpose`'s.

conv_transpose2d with dilation 1 is the sub-pixel conv: a stride-1 conv of X with F*sh*sw output
channels and ceil(K/s) taps per axis, through the conv2d algorithms (`conv2d.ALGORITHMS`, their
knobs under the prefix "subpixel.", the default by `conv2d.algorithm_order` on that conv), then
the interleave of its phases (depth-to-space), rows in parallel and vectorised along the width.
Its multiply-adds are those of the taps that exist (with K not a multiple of s, zero taps pad
the shorter phases: 9 of 16 are real for 3x3 stride 2). The knob "subpixel.algorithm" also
offers "gather", last, the only method with a dilation, and, where zero taps would be
COL2IM_ZERO_TAPS or more of the sub-pixel conv's multiply-adds (3x3 stride 2: 7/16; 5x5: 11/36,
so not), "col2im": the 1x1 conv of every input pixel by every tap through the packed GEMM
(`conv2d_gemm`, reading the sub-pixel conv's gemm knobs, their defaults by that conv's rule: a
set of its own would multiply the mixed-radix space by about a thousand; the union of the
sub-pixel conv's algorithms and the gather passes 2**63 configs that way on many shapes, 2x2
stride 2 among them, so it counts only its canonical configs, `canonical_index`), then
the interleave, output rows in parallel and vectorised along the width, each summing the two
phase rows it interleaves from those products. The rule makes it the default with one group,
else offers it before "gather": it runs only the real multiply-adds, and its extra pass over
the F*KH*KW products costs less than the zero taps (Zen 4, 2 threads, untuned defaults, col2im
/ the sub-pixel rule's pick, 3x3 stride 2: 37 -> 19 at 33x33 137 / 264 us, 96 -> 48 at 21x21
243-370 / 416, 256 -> 128 at 13x13 675 / 1086; x onnxruntime 0.57-0.63 -> 1.02-1.17 and 0.90
-> 0.94-1.03 in `benchmarks/ops_ort.py`), while a grouped layer's short GEMMs gain nothing
(40 -> 80 at 15x15 in 4 groups: 60-87 / 60-67). Its time moved between processes by up to 2x
on that VM (112-140 or 246-285 us for 37 -> 19, stable within one), the sub-pixel gemm's by 5%.

The gather is scheduled as the direct NCHW conv (`conv2d_nchw.schedule_nchw`): output tiles of
filters x rows x columns accumulate in a local buffer, vectorised along the output width, in
parallel over (n, filter tiles, row tiles). The knobs and their default rules are that
algorithm's (`conv2d_nchw` docstring), except tile_x: one vector of the lanes (the gather reads
at most one input column per output column, whatever the stride), capped by OW. With stride s,
(s*s - 1) of every s*s kernel taps an output visits are not aligned and add nothing (a guarded
select): on a Zen 5, 2 threads, 64 -> 32 channels at 28x28, 4x4 stride 2, it ran 18.5 ms
against onnxruntime's 0.25 (0.01x), 37 -> 19 at 33x33, 3x3 stride 2, 5.0 ms against 0.10.
Records made before the sub-pixel conv load as "gather" with their knobs.

conv_transpose3d is the gather, scheduled the same way on its (depth, row) planes: output tiles
of filters x columns accumulate locally, vectorised along the width, in parallel over (n,
filter tiles, depth); its knobs are tile_f, tile_x and pad with the same rules.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import te
from ...topi import conv_transpose as topi
from ...topi.conv import ConvGeometry
from ..schedule import Schedule
from ..space import KnobScope
from ..task import template
from .conv2d import ALGORITHMS, algorithm_order, define_algorithm_knobs
from .conv2d_nchw import TILE_F, TILE_X, define_tile_knobs, place_pad, schedule_nchw, tile_rules
from .rules import constant_input, first, lanes, split_first, vector_target

SUBPIXEL = "subpixel."       # the prefix of the sub-pixel conv's knobs
COL2IM = "col2im"            # the method choice of knob subpixel.algorithm that runs col2im
COL2IM_ZERO_TAPS = 0.4       # zero-tap share of the sub-pixel conv from which col2im is offered


def _pad(cfg: Any, dtype: str, Fg: int) -> str:
    """The default padding placement: a padded copy once a group has a vector of filters to
    share each padded input, else inline."""
    return "root" if Fg >= lanes(cfg, dtype) else "inline"


def _geometry(op: str, N: int, C: int, F: int, spatial: tuple[int, ...], kernel: tuple[int, ...], stride: Any,
              padding: Any, output_padding: Any, dilation: Any, groups: int) -> topi.TransposeGeometry:
    if N < 1:
        raise ValueError(f"{op}: batch N must be >= 1, got {N}")
    return topi.transpose_geometry(op, C, F, spatial, kernel, stride, padding, output_padding, dilation, groups)


def conv_transpose2d_reference(x: np.ndarray, w: np.ndarray, N: int, C: int, H: int, W: int, F: int, KH: int,
                               KW: int, stride: Any, padding: Any, output_padding: Any, dilation: Any, groups: int,
                               **_: Any) -> np.ndarray:
    g = _geometry("conv_transpose2d", N, C, F, (H, W), (KH, KW), stride, padding, output_padding, dilation,
                  groups)
    return topi.conv_transpose_reference(x, w, g)


@template("conv_transpose2d", reference=conv_transpose2d_reference,
          description="NCHW transposed conv: X N x C x H x W, W C x F/groups x KH x KW, with stride, padding, "
                      "output_padding, dilation and groups")
def conv_transpose2d_template(cfg: Any, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any,
                              padding: Any, output_padding: Any, dilation: Any, groups: int, dtype: str = "float32"):
    """The gather in output tiles (module docstring); the task's work is the scatter's multiply-adds
    (every input times its group's F/groups x KH x KW weights), not the skipped taps."""
    g = _geometry("conv_transpose2d", N, C, F, (H, W), (KH, KW), stride, padding, output_padding, dilation,
                  groups)
    Fg, Cg = F // groups, C // groups
    sub = KnobScope(cfg, SUBPIXEL)
    conv = topi.subpixel_geometry(g) if g.dilation == (1, 1) else None
    methods = [] if conv is None else algorithm_order(conv, N, vector_target(cfg, dtype), constant_input(cfg, 1))
    col2im = "gemm" in methods and _zero_tap_share(g) >= COL2IM_ZERO_TAPS
    if col2im:
        methods.insert(0 if groups == 1 else len(methods), COL2IM)
    define_algorithm_knobs(sub, conv, N, dtype, [*methods, "gather"], absent="gather", sharing={COL2IM: "gemm"})
    define_tile_knobs(cfg, F, Cg, g.out, tile_rules(cfg, dtype, g.out, g.kernel, Fg, Cg, 1), _pad(cfg, dtype, Fg),
                      when=(SUBPIXEL + "algorithm", ("gather",)))
    cfg.add_flop(2.0 * N * C * H * W * Fg * KH * KW)
    X = te.placeholder((N, C, H, W), dtype, name="X")
    Wt = te.placeholder((C, Fg, KH, KW), dtype, name="W")
    if sub["algorithm"].val == COL2IM:
        s, Y = _col2im(sub, X, Wt, g)
        return s, [X, Wt, Y]
    if conv is not None and sub["algorithm"].val != "gather":
        s, Y = _subpixel(sub, X, Wt, g, conv)
        return s, [X, Wt, Y]
    P, Y = topi.conv_transpose_nchw(X, Wt, g)
    s = te.create_schedule(Y.op)
    schedule_nchw(cfg, s, P, Y, Y, P.shape != X.shape, KW)
    return s, [X, Wt, Y]


def _subpixel(cfg: Any, X: te.Tensor, Wt: te.Tensor, g: topi.TransposeGeometry,
              conv: ConvGeometry) -> tuple[Schedule, te.Tensor]:
    """The sub-pixel conv (geometry `conv`) by its algorithm knob, then the depth-to-space:
    output rows in parallel, vectorised along the width (reads of the conv's output in phase order)."""
    build = ALGORITHMS[cfg["algorithm"].val].build
    weights = topi.subpixel_weights(Wt, g)
    s, Y = build(cfg, X, weights, conv, None, (), finish=lambda Z: topi.depth_to_space(Z, g))
    _place_weights(s, weights)
    _rows_vectorised(cfg, s, Y)
    return s, Y


def _col2im(cfg: Any, X: te.Tensor, Wt: te.Tensor, g: topi.TransposeGeometry) -> tuple[Schedule, te.Tensor]:
    """col2im: the 1x1 conv of every pixel by every tap through the packed GEMM (with the
    sub-pixel conv's gemm knobs), then the interleave, output rows in parallel and vectorised
    along the width, each row's two phase rows summed from those products at that row (a
    local buffer, not a pass over all phases)."""
    build = ALGORITHMS["gemm"].build
    weights = topi.col2im_weights(Wt, g)
    s, Y = build(cfg, X, weights, topi.col2im_geometry(g), None, (),
                 finish=lambda Z: topi.depth_to_space(topi.col2im_phases(Z, g), g))
    _place_weights(s, weights)
    rows = _rows_vectorised(cfg, s, Y)
    phases = Y.op.input_tensors[0]              # the two phase rows an output row interleaves, made there
    s[phases].compute_at(s[Y], rows)
    s[phases].vectorize(s[phases].split(phases.op.axis[3], lanes(cfg, phases.dtype))[1])
    return s, Y


def _zero_tap_share(g: topi.TransposeGeometry) -> float:
    """The share of the sub-pixel conv's multiply-adds that are zero taps (7/16 for 3x3 stride 2)."""
    (sh, sw), (JH, JW), (KH, KW) = g.stride, topi.subpixel_taps(g), g.kernel
    return 1 - KH * KW / (sh * sw * JH * JW)


def _place_weights(s: Schedule, weights: te.Tensor) -> None:
    """A weight transform read by the conv's loops is computed once per call, in parallel; one
    the algorithm repacks anyway is inlined into that repack."""
    if any(st.op.reduce_axis for st in s.readers(s[weights])):
        s[weights].parallel(s[weights].op.axis[0])
    else:
        s[weights].compute_inline()


def _rows_vectorised(cfg: Any, s: Schedule, T: te.Tensor) -> Any:
    """An NCHW elementwise stage: its rows in parallel, each vectorised along the width; returns
    the parallel row loop."""
    n, f, y, x = T.op.axis
    rows = s[T].fuse(n, f, y)
    s[T].parallel(rows)
    s[T].vectorize(s[T].split(x, lanes(cfg, T.dtype))[1])
    return rows


def conv_transpose3d_reference(x: np.ndarray, w: np.ndarray, N: int, C: int, D: int, H: int, W: int, F: int,
                               KD: int, KH: int, KW: int, stride: Any, padding: Any, output_padding: Any,
                               dilation: Any, groups: int, **_: Any) -> np.ndarray:
    g = _geometry("conv_transpose3d", N, C, F, (D, H, W), (KD, KH, KW), stride, padding, output_padding,
                  dilation, groups)
    return topi.conv_transpose_reference(x, w, g)


@template("conv_transpose3d", reference=conv_transpose3d_reference,
          description="NCDHW transposed conv: X N x C x D x H x W, W C x F/groups x KD x KH x KW, with stride, "
                      "padding, output_padding, dilation and groups")
def conv_transpose3d_template(cfg: Any, N: int, C: int, D: int, H: int, W: int, F: int, KD: int, KH: int, KW: int,
                              stride: Any, padding: Any, output_padding: Any, dilation: Any, groups: int,
                              dtype: str = "float32"):
    """The gather in output tiles of filters x columns on each (depth, row) plane (module
    docstring); the rules for tile_f, tile_x and pad are conv_transpose2d's (one output row per
    tile)."""
    g = _geometry("conv_transpose3d", N, C, F, (D, H, W), (KD, KH, KW), stride, padding, output_padding,
                  dilation, groups)
    Fg, Cg = F // groups, C // groups
    tile_f, _, tile_x, _ = tile_rules(cfg, dtype, g.out[1:], g.kernel[1:], Fg, Cg, 1)
    cfg.define_split("tile_f", F, 2, policy="candidate", candidate=split_first(tile_f, F, TILE_F))
    cfg.define_split("tile_x", g.out[2], 2, policy="candidate", candidate=split_first(tile_x, g.out[2], TILE_X))
    cfg.define_knob("pad", first(_pad(cfg, dtype, Fg), ["inline", "root"]))
    cfg.add_flop(2.0 * N * C * D * H * W * Fg * KD * KH * KW)
    X = te.placeholder((N, C, D, H, W), dtype, name="X")
    Wt = te.placeholder((C, Fg, KD, KH, KW), dtype, name="W")
    P, Y = topi.conv_transpose_nchw(X, Wt, g)
    s = te.create_schedule(Y.op)
    place_pad(cfg, s, P, P.shape != X.shape)
    CC = s.cache_write(Y, "local")
    n, f, z, y, x = Y.op.axis
    fo, fi = cfg["tile_f"].apply(s, Y, f)
    xo, xi = cfg["tile_x"].apply(s, Y, x)
    s[Y].reorder(n, fo, z, y, xo, fi, xi)
    s[CC].compute_at(s[Y], xo)
    _, cf, _, _, cx = s[CC].op.axis
    s[CC].reorder(*s[CC].op.reduce_axis, cf, cx)
    s[CC].vectorize(cx)
    s[Y].vectorize(xi)
    s[Y].parallel(s[Y].fuse(n, fo, z))
    return s, [X, Wt, Y]
