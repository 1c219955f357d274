"""conv2d NCHW on the CPU: templates "conv2d" (stride, padding) and "conv2d_grouped" (plus
dilation and groups; depthwise when groups == C), and the NCHW schedule that the fused conv
templates in `conv.py` share. The computes live in `autotune.topi.conv`.

"conv2d" keeps its parameters and knobs, so its workload keys and tuning records (knob values,
not indices) stay valid; dilation and groups are parameters of the op "conv2d_grouped" only.
Each knob's first value is the measured best on the 3x3, 64-channel, 56x56 layer (the default).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import te
from ...topi import conv as topi_conv
from ..task import template


def conv2d_nchw(X: te.Tensor, Wt: te.Tensor, stride: Any, padding: Any, name: str = "Y") -> tuple[te.Tensor, te.Tensor]:
    """(pad, Y) of a dense NCHW conv2d (see `autotune.topi.conv.conv2d_nchw` for dilation and groups)."""
    return topi_conv.conv2d_nchw(X, Wt, stride, padding, name=name)


def conv2d_reference(x: np.ndarray, w: np.ndarray, stride: Any, padding: Any, dilation: Any = 1, groups: int = 1,
                     **_: int) -> np.ndarray:
    """numpy conv2d NCHW through one (grouped) einsum per kernel offset."""
    return topi_conv.conv2d_nchw_reference(x, w, stride, padding, dilation, groups)


def define_nchw_knobs(cfg: Any, F: int, OH: int, OW: int, Cg: int, extra: bool = True) -> None:
    """Output tile (filters x rows x vector columns), channel split, reduction order, kernel-row
    unroll, where the padding is computed; `extra` adds the parallel-loop choice (new ops only)."""
    cfg.define_split("tile_f", F, 2, policy="candidate", candidate=[[-1, v] for v in (4, 8, 2, 1, 16)])
    cfg.define_split("tile_y", OH, 2, policy="candidate", candidate=[[-1, v] for v in (4, 2, 1)])
    cfg.define_split("tile_x", OW, 2, policy="candidate", candidate=[[-1, v] for v in (8, 16, 32, 28, 14, 56)])
    cfg.define_split("tile_rc", Cg, 2, policy="candidate", candidate=[[-1, v] for v in (4, 8, 1, 16, 32)])
    cfg.define_knob("reduce_order", ["rc_outer", "kernel_outer"])
    cfg.define_knob("unroll_kw", [1, 0])
    cfg.define_knob("pad", ["root", "inline"])
    if extra:
        cfg.define_knob("parallel", ["fused", "outer"])


def schedule_nchw(cfg: Any, s: Any, P: te.Tensor, Y: te.Tensor, out: te.Tensor, padded: bool, KW: int,
                  parallel: str = "fused") -> None:
    """Each output tile accumulates in a local buffer at the tile loop; `out` is Y itself
    (Y then gets a local cache) or a pointwise epilogue of Y (Y is then the local tile)."""
    if cfg["pad"].val == "inline" or not padded:
        s[P].compute_inline()
    else:
        pn, pc, _, _ = P.op.axis
        s[P].parallel(s[P].fuse(pn, pc))
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
    if cfg["unroll_kw"].val and KW <= 8:
        s[CC].unroll(rx)
    s[CC].vectorize(cx)
    s[out].vectorize(xi)
    s[out].parallel(s[out].fuse(n, fo, yo) if parallel == "fused" else s[out].fuse(n, fo))


def nchw_geometry(op: str, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any, padding: Any,
                  dilation: Any = 1, groups: int = 1) -> topi_conv.ConvGeometry:
    if N < 1:
        raise ValueError(f"{op}: batch N must be >= 1, got {N}")
    return topi_conv.conv_geometry(op, C, F, (H, W), (KH, KW), stride, padding, dilation, groups)


@template("conv2d", reference=conv2d_reference,
          description="NCHW conv2d: X N x C x H x W, W F x C x KH x KW, with stride and padding")
def conv2d_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: int, padding: int,
                    dtype: str = "float32"):
    """Output tiles accumulated locally (filters x rows x vectorized columns), channels split."""
    g = nchw_geometry("conv2d", N, C, H, W, F, KH, KW, stride, padding)
    OH, OW = g.out
    define_nchw_knobs(cfg, F, OH, OW, C, extra=False)
    X = te.placeholder((N, C, H, W), dtype, name="X")
    Wt = te.placeholder((F, C, KH, KW), dtype, name="W")
    P, Y = conv2d_nchw(X, Wt, stride, padding)
    s = te.create_schedule(Y.op)
    schedule_nchw(cfg, s, P, Y, Y, g.has_padding, KW)
    return s, [X, Wt, Y]


@template("conv2d_grouped", reference=conv2d_reference,
          description="NCHW conv2d with stride, padding, dilation and groups (depthwise: groups == C): "
                      "X N x C x H x W, W F x C/groups x KH x KW")
def conv2d_grouped_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any,
                            padding: Any, dilation: Any, groups: int, dtype: str = "float32"):
    """The conv2d schedule over each group's channels; output channels of all groups tiled together."""
    g = nchw_geometry("conv2d_grouped", N, C, H, W, F, KH, KW, stride, padding, dilation, groups)
    OH, OW = g.out
    define_nchw_knobs(cfg, F, OH, OW, C // groups)
    X = te.placeholder((N, C, H, W), dtype, name="X")
    Wt = te.placeholder((F, C // groups, KH, KW), dtype, name="W")
    P, Y = topi_conv.conv2d_nchw(X, Wt, stride, padding, dilation, groups)
    s = te.create_schedule(Y.op)
    schedule_nchw(cfg, s, P, Y, Y, g.has_padding, KW, cfg["parallel"].val)
    return s, [X, Wt, Y]
