"""conv_transpose2d and conv_transpose3d on the CPU (ONNX ConvTranspose, PyTorch
ConvTranspose2d/3d): X (N, C, H, W), W (C, F/groups, KH, KW), with stride, padding (an int, a
pair or top, left, bottom, right), output_padding, dilation and groups; 3-d adds a depth axis
to each (X N x C x D x H x W, padding one int, a triple or the three begins then the three
ends). The compute is the gather of `autotune.topi.conv_transpose`.

Scheduled as the direct NCHW conv (`conv2d_nchw.schedule_nchw`): output tiles of filters x rows x
columns accumulate in a local buffer, vectorised along the output width, in parallel over
(n, filter tiles, row tiles). The knobs and their default rules are that algorithm's
(`conv2d_nchw` docstring), except tile_x: one vector of the lanes (the gather reads at most one
input column per output column, whatever the stride), capped by OW. With stride s, (s*s - 1) of
every s*s kernel taps an output visits are not aligned and add nothing (a guarded select): the
price of one dense loop nest; a per-phase split would skip them.

conv_transpose3d is scheduled the same way on its (depth, row) planes: output tiles of filters x
columns accumulate locally, vectorised along the width, in parallel over (n, filter tiles,
depth); its knobs are tile_f, tile_x and pad with the same rules.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import te
from ...topi import conv_transpose as topi
from ..task import template
from .conv2d_nchw import TILE_F, TILE_X, define_tile_knobs, place_pad, schedule_nchw, tile_rules
from .rules import first, lanes, split_first


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
    define_tile_knobs(cfg, F, Cg, g.out, tile_rules(cfg, dtype, g.out, g.kernel, Fg, Cg, 1), _pad(cfg, dtype, Fg))
    cfg.add_flop(2.0 * N * C * H * W * Fg * KH * KW)
    X = te.placeholder((N, C, H, W), dtype, name="X")
    Wt = te.placeholder((C, Fg, KH, KW), dtype, name="W")
    P, Y = topi.conv_transpose_nchw(X, Wt, g)
    s = te.create_schedule(Y.op)
    schedule_nchw(cfg, s, P, Y, Y, P.shape != X.shape, KW)
    return s, [X, Wt, Y]


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
