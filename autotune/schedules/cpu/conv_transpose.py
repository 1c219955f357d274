"""conv_transpose2d on the CPU (ONNX ConvTranspose, PyTorch ConvTranspose2d): X (N, C, H, W),
W (C, F/groups, KH, KW), with stride, padding (an int, a pair or top, left, bottom, right),
output_padding, dilation and groups. The compute is the gather of `autotune.topi.conv_transpose`.

Scheduled as the direct NCHW conv (`conv2d_nchw.schedule_nchw`): output tiles of filters x rows x
columns accumulate in a local buffer, vectorised along the output width, in parallel over
(n, filter tiles, row tiles). The knobs and their default rules are that algorithm's
(`conv2d_nchw` docstring), except tile_x: one vector of the lanes (the gather reads at most one
input column per output column, whatever the stride), capped by OW. With stride s, (s*s - 1) of
every s*s kernel taps an output visits are not aligned and add nothing (a guarded select): the
price of one dense loop nest; a per-phase split would skip them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import te
from ...topi import conv_transpose as topi
from ..task import template
from .conv2d_nchw import define_tile_knobs, schedule_nchw, tile_rules
from .rules import lanes


def _geometry(N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any, padding: Any,
              output_padding: Any, dilation: Any, groups: int) -> topi.TransposeGeometry:
    if N < 1:
        raise ValueError(f"conv_transpose2d: batch N must be >= 1, got {N}")
    return topi.transpose_geometry("conv_transpose2d", C, F, (H, W), (KH, KW), stride, padding, output_padding,
                                   dilation, groups)


def conv_transpose2d_reference(x: np.ndarray, w: np.ndarray, N: int, C: int, H: int, W: int, F: int, KH: int,
                               KW: int, stride: Any, padding: Any, output_padding: Any, dilation: Any, groups: int,
                               **_: Any) -> np.ndarray:
    g = _geometry(N, C, H, W, F, KH, KW, stride, padding, output_padding, dilation, groups)
    return topi.conv_transpose2d_reference(x, w, g)


@template("conv_transpose2d", reference=conv_transpose2d_reference,
          description="NCHW transposed conv: X N x C x H x W, W C x F/groups x KH x KW, with stride, padding, "
                      "output_padding, dilation and groups")
def conv_transpose2d_template(cfg: Any, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any,
                              padding: Any, output_padding: Any, dilation: Any, groups: int, dtype: str = "float32"):
    """The gather in output tiles (module docstring); the task's work is the scatter's multiply-adds
    (every input times its group's F/groups x KH x KW weights), not the skipped taps."""
    g = _geometry(N, C, H, W, F, KH, KW, stride, padding, output_padding, dilation, groups)
    Fg, Cg = F // groups, C // groups
    pad = "root" if Fg >= lanes(cfg, dtype) else "inline"
    define_tile_knobs(cfg, F, Cg, g.out, tile_rules(cfg, dtype, g.out, g.kernel, Fg, Cg, 1), pad)
    cfg.add_flop(2.0 * N * C * H * W * Fg * KH * KW)
    X = te.placeholder((N, C, H, W), dtype, name="X")
    Wt = te.placeholder((C, Fg, KH, KW), dtype, name="W")
    P, Y = topi.conv_transpose2d_nchw(X, Wt, g)
    s = te.create_schedule(Y.op)
    schedule_nchw(cfg, s, P, Y, Y, P.shape != X.shape, KW)
    return s, [X, Wt, Y]
