"""Transposed convolution (ONNX ConvTranspose, PyTorch ConvTranspose2d/3d) as a te compute, its
geometry and its numpy reference, over 2 or 3 spatial axes.

Layouts: X (N, C, H, W), W (C, F/groups, KH, KW), Y (N, F, OH, OW) with
    OH = (H - 1) * sh - pad_top - pad_bottom + dh * (KH - 1) + output_padding_h + 1   (W alike);
3-d: X (N, C, D, H, W), W (C, F/groups, KD, KH, KW), Y (N, F, OD, OH, OW), each axis alike.
Input channel c belongs to group c // (C / groups) and feeds that group's F/groups outputs.

Two computes:
- the gather: output (oy, ox) sums, over the kernel offsets (ky, kx) and its group's input
  channels, the input at ((oy + pad_top - ky*dh) / sh, ...) where that division is exact. The
  input is zero-padded so that every floor of it lands inside: the only guard left is exactness
  (none when the stride is 1, where this is a conv with a flipped kernel). With a stride, all
  but one in sh*sw of the offsets an output visits fail it: work computed and thrown away.
- the sub-pixel conv (2-d, dilation 1): output row oy takes its taps from the kernel rows
  ky = r + sh*j, r = (oy + pad_top) % sh, at input rows u - j, u = (oy + pad_top) // sh. Each
  phase (r, r') of the output is thus a stride-1 conv of the input with a kernel of
  ceil(KH/sh) x ceil(KW/sw) taps (flipped; zero where a phase has fewer), so all phases are one
  conv with F*sh*sw output channels (`subpixel_geometry`, `subpixel_weights`), whose output the
  phases interleave (`depth_to_space`, ONNX DepthToSpace in CRD order, cropped): only the
  multiply-adds of the taps that exist, through any conv algorithm. Where K is not a multiple
  of s, the shorter phases pad to the longest with zero taps: 16 multiply-adds per 9 for 3x3
  stride 2.
- col2im (2-d, dilation 1, as Caffe and onnxruntime do it): first every input pixel times every
  tap, a 1x1 conv to F*KH*KW channels (`col2im_geometry`, `col2im_weights`): exactly the
  scatter's multiply-adds; then each phase of the sub-pixel conv's output sums, over its taps,
  those products at the input pixels it reads (`col2im_phases`), and the phases interleave as
  above.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import te
from .conv import ConvGeometry, _in_channel, _ints, conv_geometry, pad


@dataclass(frozen=True)
class TransposeGeometry:
    """The checked hyper-parameters of a transposed conv over len(spatial) axes and its output size."""

    in_channels: int
    out_channels: int
    spatial: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    pad_before: tuple[int, ...]
    pad_after: tuple[int, ...]
    output_padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    out: tuple[int, ...]


def transpose_geometry(op: str, C: int, F: int, spatial: tuple[int, ...], kernel: tuple[int, ...], stride: Any,
                       padding: Any, output_padding: Any, dilation: Any, groups: int) -> TransposeGeometry:
    """Check the hyper-parameters (errors name the op and the argument) and size the output.
    Padding is one int, one per axis, or the begins of every axis then the ends."""
    n = len(spatial)
    st, dl = _ints(op, "stride", stride, (n,), n), _ints(op, "dilation", dilation, (n,), n)
    pd, op_ = _ints(op, "padding", padding, (n, 2 * n), n), _ints(op, "output_padding", output_padding, (n,), n)
    before, after = (pd, pd) if len(pd) == n else (pd[:n], pd[n:])
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
    return TransposeGeometry(C, F, spatial, kernel, st, before, after, op_, dl, groups, out)


def _input_pad(g: TransposeGeometry, axis: int) -> tuple[int, int]:
    """Zeros before/after the input along a spatial axis so that every floor((o + pad - k*d) / s)
    the gather reads, over all outputs o and offsets k, is inside the padded input."""
    s, d, k, lo = g.stride[axis], g.dilation[axis], g.kernel[axis], g.pad_before[axis]
    before = max(0, -((lo - (k - 1) * d) // s))
    after = max(0, (g.out[axis] - 1 + lo) // s - g.spatial[axis] + 1)
    return before, after


def conv_transpose_nchw(X: te.Tensor, Wt: te.Tensor, g: TransposeGeometry,
                        name: str = "Y") -> tuple[te.Tensor, te.Tensor]:
    """(pad, Y) over 2 or 3 spatial axes; 2-d: Y[n, f, oy, ox] = sum over rc, ry, rx where
    (oy + pt - ry*dh) % sh == 0 and (ox + pl - rx*dw) % sw == 0 of
    X[n, c, (oy + pt - ry*dh) / sh, (ox + pl - rx*dw) / sw] * W[c, f % Fg, ry, rx],
    c = (f // Fg) * Cg + rc; 3-d adds the depth axis alike."""
    N, C = X.shape[:2]
    dims = len(g.spatial)
    Cg, Fg = C // g.groups, g.out_channels // g.groups
    pads = [_input_pad(g, a) for a in range(dims)]
    P = pad(X, range(2, 2 + dims), [lo for lo, _ in pads], [hi for _, hi in pads])
    rc = te.reduce_axis((0, Cg), name="rc")
    taps = [te.reduce_axis((0, k), name=r) for k, r in zip(g.kernel, ("rz", "ry", "rx")[3 - dims:])]

    def tap(n: Any, f: Any, *o: Any) -> Any:
        t = [oa + lo - r * d for oa, lo, r, d in zip(o, g.pad_before, taps, g.dilation)]
        c = _in_channel(f, rc, g.groups, Fg, Cg)
        at = [ta // s + lo for ta, s, (lo, _) in zip(t, g.stride, pads)]
        value = P[(n, c, *at)] * Wt[(c, f % Fg if g.groups > 1 else f, *taps)]
        exact = [ta % s == 0 for ta, s in zip(t, g.stride) if s > 1]
        return te.if_then_else(te.all(*exact), value, te.const(0, X.dtype)) if exact else value

    def body(n: Any, f: Any, *o: Any) -> Any:
        return te.sum(tap(n, f, *o), axis=[rc, *taps])

    if dims == 2:       # te.compute names its axes after the function's own parameters
        Y = te.compute((N, g.out_channels, *g.out), lambda n, f, y, x: body(n, f, y, x), name=name)
    else:
        Y = te.compute((N, g.out_channels, *g.out), lambda n, f, z, y, x: body(n, f, z, y, x), name=name)
    return P, Y


def subpixel_taps(g: TransposeGeometry) -> tuple[int, ...]:
    """The sub-pixel conv's taps per axis: ceil(K/s), the most any phase has."""
    return tuple(-(-k // s) for k, s in zip(g.kernel, g.stride))


def subpixel_geometry(g: TransposeGeometry) -> ConvGeometry:
    """The stride-1 conv (module docstring) of a 2-d transposed conv with dilation 1: F*sh*sw
    output channels, ceil(K/s) taps per axis, padded by taps - 1 before and after by what the
    last output row's u reads past the input; its output covers u from 0, the rows before
    pad_top // sh computed and cropped."""
    taps = subpixel_taps(g)
    last = [(o - 1 + lo) // s for o, lo, s in zip(g.out, g.pad_before, g.stride)]
    after = [max(0, u - n + 1) for u, n in zip(last, g.spatial)]
    return conv_geometry("conv_transpose2d", g.in_channels, g.out_channels * g.stride[0] * g.stride[1], g.spatial,
                         taps, 1, (*(t - 1 for t in taps), *after), 1, g.groups)


def _filter_tap(Wt: te.Tensor, groups: int, f: Any, c: Any, ky: Any, kx: Any) -> Any:
    """W's weight from group-local input channel c to output channel f at tap (ky, kx): W is
    laid out C x F/groups x KH x KW, so f reads its group's channels and its index in the group."""
    C, Fg = Wt.shape[:2]
    return Wt[_in_channel(f, c, groups, Fg, C // groups), f % Fg if groups > 1 else f, ky, kx]


def subpixel_weights(Wt: te.Tensor, g: TransposeGeometry) -> te.Tensor:
    """The sub-pixel conv's weights (F*sh*sw x C/groups x JH x JW) from W (C x F/groups x KH x
    KW): output channel f*sh*sw + r*sw + r' is phase (r, r') of f; its tap (jy, jx) is kernel
    offset (r + sh*(JH-1-jy), r' + sw*(JW-1-jx)), zero past the kernel."""
    C, _, KH, KW = Wt.shape
    (sh, sw), (JH, JW), zero = g.stride, subpixel_taps(g), te.const(0, Wt.dtype)

    def elem(fp: Any, c: Any, jy: Any, jx: Any) -> Any:
        f, phase = fp // (sh * sw), fp % (sh * sw)
        ky, kx = phase // sw + sh * (JH - 1 - jy), phase % sw + sw * (JW - 1 - jx)
        value = _filter_tap(Wt, g.groups, f, c, ky, kx)
        inside = ([ky < KH] if KH % sh else []) + ([kx < KW] if KW % sw else [])
        return te.if_then_else(te.all(*inside), value, zero) if inside else value

    return te.compute((g.out_channels * sh * sw, C // g.groups, JH, JW), elem, name="subpixel_w")


def col2im_geometry(g: TransposeGeometry) -> ConvGeometry:
    """The products of col2im: a 1x1 conv of X to F*KH*KW output channels, channel
    (f*KH + ky)*KW + kx holding every input pixel times tap (ky, kx) of filter f."""
    taps = g.kernel[0] * g.kernel[1]
    return conv_geometry("conv_transpose2d", g.in_channels, g.out_channels * taps, g.spatial, (1, 1), 1, 0, 1,
                         g.groups)


def col2im_weights(Wt: te.Tensor, g: TransposeGeometry) -> te.Tensor:
    """That 1x1 conv's weights (F*KH*KW x C/groups x 1 x 1) from W (C x F/groups x KH x KW)."""
    C, _, KH, KW = Wt.shape

    def elem(o: Any, c: Any, _y: Any, _x: Any) -> Any:
        f, tap = o // (KH * KW), o % (KH * KW)
        return _filter_tap(Wt, g.groups, f, c, tap // KW, tap % KW)

    return te.compute((g.out_channels * KH * KW, C // g.groups, 1, 1), elem, name="col2im_w")


def col2im_phases(Z: te.Tensor, g: TransposeGeometry) -> te.Tensor:
    """The sub-pixel conv's output (layout of `subpixel_geometry`) from col2im's products Z:
    phase (r, r') of f at (u, u') sums, over jy < JH and jx < JW, Z's channel of tap
    (r + sh*jy, r' + sw*jx) at input pixel (u - jy, u' - jx), where that tap is in the kernel and
    that pixel in the image (the reads outside are predicated off)."""
    N, _, H, W = Z.shape
    (sh, sw), (JH, JW), (KH, KW) = g.stride, subpixel_taps(g), g.kernel
    rows, cols = subpixel_geometry(g).out
    zero = te.const(0, Z.dtype)

    def elem(n: Any, fp: Any, u: Any, v: Any) -> Any:
        f, phase = fp // (sh * sw), fp % (sh * sw)
        r, rr = phase // sw, phase % sw
        total = None
        for jy in range(JH):
            for jx in range(JW):
                ky, kx, y, x = r + sh * jy, rr + sw * jx, u - jy, v - jx
                checks = ((jy == JH - 1 and KH % sh, ky < KH), (jx == JW - 1 and KW % sw, kx < KW),
                          (jy, y >= 0), (jx, x >= 0), (rows - jy > H, y < H), (cols - jx > W, x < W))
                inside = [cond for needed, cond in checks if needed]
                value = Z[n, (f * KH + ky) * KW + kx, y, x]
                term = te.if_then_else(te.all(*inside), value, zero) if inside else value
                total = term if total is None else total + term
        return total

    return te.compute((N, g.out_channels * sh * sw, rows, cols), elem, name="phases")


def depth_to_space(Z: te.Tensor, g: TransposeGeometry, name: str = "Y") -> te.Tensor:
    """The transposed conv's output from the sub-pixel conv's: Y[n, f, oy, ox] is phase
    ((oy + pt) % sh, (ox + pl) % sw) of f at ((oy + pt) // sh, (ox + pl) // sw)."""
    (sh, sw), (pt, pl) = g.stride, g.pad_before

    def elem(n: Any, f: Any, oy: Any, ox: Any) -> Any:
        y, x = oy + pt, ox + pl
        return Z[n, f * (sh * sw) + (y % sh) * sw + x % sw, y // sh, x // sw]

    return te.compute((Z.shape[0], g.out_channels, *g.out), elem, name=name)


def conv_transpose_reference(x: np.ndarray, w: np.ndarray, g: TransposeGeometry) -> np.ndarray:
    """numpy transposed conv as a scatter (independent of the gather above): each kernel offset
    adds a grouped einsum of the input into a strided view of the uncropped output."""
    n, c, *size = x.shape
    groups = g.groups
    fg, cg = g.out_channels // groups, c // groups
    full_size = [max((i - 1) * s + d * (k - 1) + 1, lo + o)
                 for i, s, d, k, lo, o in zip(size, g.stride, g.dilation, g.kernel, g.pad_before, g.out)]
    full = np.zeros((n, groups, fg, *full_size), np.float64)
    xg, wg = x.reshape(n, groups, cg, *size).astype(np.float64), w.reshape(groups, cg, fg, *g.kernel)
    lead: tuple[Any, ...] = (slice(None),) * 3           # (n, group, f) or (group, c, f)
    for offset in np.ndindex(*g.kernel):
        window = tuple(slice(k * d, k * d + (i - 1) * s + 1, s)
                       for k, d, i, s in zip(offset, g.dilation, size, g.stride))
        full[lead + window] += np.einsum("ngc...,gcf->ngf...", xg, wg[lead + offset])
    crop = tuple(slice(lo, lo + o) for lo, o in zip(g.pad_before, g.out))
    return full[lead + crop].reshape(n, g.out_channels, *g.out).astype(x.dtype)
