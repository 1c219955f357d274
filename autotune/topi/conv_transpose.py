"""Transposed convolution (ONNX ConvTranspose, PyTorch ConvTranspose2d) as a te compute, its
geometry and its numpy reference.

Layouts: X (N, C, H, W), W (C, F/groups, KH, KW), Y (N, F, OH, OW) with
    OH = (H - 1) * sh - pad_top - pad_bottom + dh * (KH - 1) + output_padding_h + 1   (W alike).
Input channel c belongs to group c // (C / groups) and feeds that group's F/groups outputs.

The compute is a gather: output (oy, ox) sums, over the kernel offsets (ky, kx) and its group's
input channels, the input at ((oy + pad_top - ky*dh) / sh, ...) where that division is exact. The
input is zero-padded so that every floor of it lands inside: the only guard left is exactness
(none when the stride is 1, where this is a conv with a flipped kernel).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import te
from .conv import _in_channel, _ints, pad


@dataclass(frozen=True)
class TransposeGeometry:
    """The checked hyper-parameters of a 2-d transposed conv and its output size."""

    in_channels: int
    out_channels: int
    spatial: tuple[int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    pad_before: tuple[int, int]
    pad_after: tuple[int, int]
    output_padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int
    out: tuple[int, int]


def transpose_geometry(op: str, C: int, F: int, spatial: tuple[int, int], kernel: tuple[int, int], stride: Any,
                       padding: Any, output_padding: Any, dilation: Any, groups: int) -> TransposeGeometry:
    """Check the hyper-parameters (errors name the op and the argument) and size the output."""
    st, dl = _ints(op, "stride", stride, (2,), 2), _ints(op, "dilation", dilation, (2,), 2)
    pd, op_ = _ints(op, "padding", padding, (2, 4), 2), _ints(op, "output_padding", output_padding, (2,), 2)
    before, after = (pd, pd) if len(pd) == 2 else (pd[:2], pd[2:])
    if min(C, F, *spatial, *kernel) < 1:
        raise ValueError(f"{op}: channels, spatial sizes and kernel sizes must be >= 1, got C={C}, F={F}, "
                         f"spatial={spatial}, kernel={kernel}")
    if min(st) < 1 or min(dl) < 1 or min(pd) < 0 or min(op_) < 0:
        raise ValueError(f"{op}: stride and dilation must be >= 1, padding and output_padding >= 0, got "
                         f"stride={stride}, dilation={dilation}, padding={padding}, output_padding={output_padding}")
    if any(o >= max(s, d) for o, s, d in zip(op_, st, dl)):
        raise ValueError(f"{op}: output_padding must be smaller than the stride or the dilation, got "
                         f"output_padding={output_padding}, stride={stride}, dilation={dilation}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1 or C % groups or F % groups:
        raise ValueError(f"{op}: groups must be a positive int dividing the in channels ({C}) and the out "
                         f"channels ({F}), got groups={groups!r}")
    out = tuple((n - 1) * s - lo - hi + d * (k - 1) + o + 1
                for n, s, lo, hi, d, k, o in zip(spatial, st, before, after, dl, kernel, op_))
    if min(out) < 1:
        raise ValueError(f"{op}: the padding {padding} leaves an empty output {out}")
    return TransposeGeometry(C, F, spatial, kernel, st, before, after, op_, dl, groups, out)  # type: ignore[arg-type]


def _input_pad(g: TransposeGeometry, axis: int) -> tuple[int, int]:
    """Zeros before/after the input along a spatial axis so that every floor((o + pad - k*d) / s)
    the gather reads, over all outputs o and offsets k, is inside the padded input."""
    s, d, k, lo = g.stride[axis], g.dilation[axis], g.kernel[axis], g.pad_before[axis]
    before = max(0, -((lo - (k - 1) * d) // s))
    after = max(0, (g.out[axis] - 1 + lo) // s - g.spatial[axis] + 1)
    return before, after


def conv_transpose2d_nchw(X: te.Tensor, Wt: te.Tensor, g: TransposeGeometry,
                          name: str = "Y") -> tuple[te.Tensor, te.Tensor]:
    """(pad, Y): Y[n, f, oy, ox] = sum over rc, ry, rx where (oy + pt - ry*dh) % sh == 0 and
    (ox + pl - rx*dw) % sw == 0 of X[n, c, (oy + pt - ry*dh) / sh, (ox + pl - rx*dw) / sw] *
    W[c, f % Fg, ry, rx], c = (f // Fg) * Cg + rc."""
    N, C = X.shape[:2]
    (KH, KW), (sh, sw), (dh, dw) = g.kernel, g.stride, g.dilation
    Cg, Fg = C // g.groups, g.out_channels // g.groups
    (bh, ah), (bw, aw) = _input_pad(g, 0), _input_pad(g, 1)
    P = pad(X, (2, 3), (bh, bw), (ah, aw))
    rc, ry, rx = te.reduce_axis((0, Cg), name="rc"), te.reduce_axis((0, KH), name="ry"), te.reduce_axis((0, KW), "rx")
    pt, pl = g.pad_before

    def tap(n: Any, f: Any, oy: Any, ox: Any) -> Any:
        ty, tx = oy + pt - ry * dh, ox + pl - rx * dw
        c = _in_channel(f, rc, g.groups, Fg, Cg)
        value = P[n, c, ty // sh + bh, tx // sw + bw] * Wt[c, f % Fg if g.groups > 1 else f, ry, rx]
        exact = [t % s == 0 for t, s in ((ty, sh), (tx, sw)) if s > 1]
        return te.if_then_else(te.all(*exact), value, te.const(0, X.dtype)) if exact else value

    Y = te.compute((N, g.out_channels, *g.out), lambda n, f, oy, ox: te.sum(tap(n, f, oy, ox), axis=[rc, ry, rx]),
                   name=name)
    return P, Y


def conv_transpose2d_reference(x: np.ndarray, w: np.ndarray, g: TransposeGeometry) -> np.ndarray:
    """numpy transposed conv as a scatter (independent of the gather above): each kernel offset
    adds a grouped einsum of the input into a strided view of the uncropped output."""
    n, c, h, wd = x.shape
    (kh, kw), (sh, sw), (dh, dw), groups = g.kernel, g.stride, g.dilation, g.groups
    fg, cg = g.out_channels // groups, c // groups
    (pt, pl), (oh, ow) = g.pad_before, g.out
    full = np.zeros((n, groups, fg, max((h - 1) * sh + dh * (kh - 1) + 1, pt + oh),
                     max((wd - 1) * sw + dw * (kw - 1) + 1, pl + ow)), np.float64)
    xg, wg = x.reshape(n, groups, cg, h, wd).astype(np.float64), w.reshape(groups, cg, fg, kh, kw)
    for ky in range(kh):
        for kx in range(kw):
            full[..., ky * dh:ky * dh + (h - 1) * sh + 1:sh, kx * dw:kx * dw + (wd - 1) * sw + 1:sw] += \
                np.einsum("ngchw,gcf->ngfhw", xg, wg[..., ky, kx])
    return full[..., pt:pt + oh, pl:pl + ow].reshape(n, g.out_channels, oh, ow).astype(x.dtype)
