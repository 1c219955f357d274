"""Convolutions as te computes (TVM topi's conv ops), their numpy references and BN folding.

conv1d NCW, conv2d NCHW and conv2d NHWC, each with stride, padding, dilation and groups
(depthwise: groups == in channels), plus the epilogue-fused variants: conv2d + bias + relu,
conv2d with batch norm folded into its weights and bias, and dense + bias + gelu (tanh form).

Layouts (PyTorch's for NCHW/NCW, TVM's HWIO for NHWC):
    conv1d       X (N, C, L)      W (F, C/groups, K)         Y (N, F, OL)
    conv2d NCHW  X (N, C, H, W)   W (F, C/groups, KH, KW)    Y (N, F, OH, OW)
    conv2d NHWC  X (N, H, W, C)   W (KH, KW, C/groups, F)    Y (N, OH, OW, F)
Output channel f belongs to group f // (F / groups) and reads that group's C/groups channels.

stride and dilation are an int or a pair (h, w); padding an int, a pair (h, w) or four ints
(top, left, bottom, right), as in TVM. Every computed conv has a zero-padding stage "pad"
(identity when the padding is 0) that schedules inline or compute at root.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import te
from .elementwise import gelu_tanh_expr
from .movement import pad as pad_constant


def _ints(op: str, what: str, value: Any, lengths: tuple[int, ...], dims: int) -> tuple[int, ...]:
    vals = (value,) * dims if isinstance(value, int) and not isinstance(value, bool) else value
    if not (isinstance(vals, (tuple, list)) and len(vals) in lengths
            and all(isinstance(v, int) and not isinstance(v, bool) for v in vals)):
        raise TypeError(f"{op}: {what} must be an int or a tuple of {' or '.join(map(str, lengths))} ints, "
                        f"got {value!r}")
    return tuple(vals)


@dataclass(frozen=True)
class ConvGeometry:
    """The checked hyper-parameters of a conv over `dims` spatial axes and its output size.

    pad_before / pad_after per spatial axis; groups divides both channel counts. The channel
    counts, input size and kernel size are here too: a conv algorithm decides from this alone
    whether it applies and what its default knobs are.
    """

    in_channels: int
    out_channels: int
    spatial: tuple[int, ...]
    kernel: tuple[int, ...]
    stride: tuple[int, ...]
    pad_before: tuple[int, ...]
    pad_after: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int
    out: tuple[int, ...]

    @property
    def has_padding(self) -> bool:
        return any(self.pad_before) or any(self.pad_after)

    @property
    def depthwise(self) -> bool:
        """One input and one output channel per group (groups == C == F)."""
        return self.groups == self.in_channels == self.out_channels


# The elementwise tail of a fused conv: (conv value, its NCHW output indices (n, f, y, x)) -> the
# output value, e.g. bias + relu `lambda v, i: te.maximum(v + bias[i[1]], 0)`. Algorithms apply it
# to the output tile while it is local, so the pre-activation never reaches memory.
Epilogue = Callable[[te.Expr, tuple[te.Expr, te.Expr, te.Expr, te.Expr]], te.Expr]
# a stage after a conv algorithm's NCHW output, given that output, which becomes an inner
# stage at root: the sub-pixel conv's depth-to-space (`autotune.topi.conv_transpose`)
Finish = Callable[[te.Tensor], te.Tensor]


def conv_geometry(op: str, C: int, F: int, spatial: Sequence[int], kernel: Sequence[int], stride: Any,
                  padding: Any, dilation: Any, groups: int) -> ConvGeometry:
    """Check a conv's hyper-parameters (errors name the op and the argument) and size its output."""
    d = len(spatial)
    st = _ints(op, "stride", stride, (d,), d)
    dl = _ints(op, "dilation", dilation, (d,), d)
    pd = _ints(op, "padding", padding, (d, 2 * d), d)
    before, after = (pd, pd) if len(pd) == d else (pd[:d], pd[d:])
    if min(C, F, *spatial, *kernel) < 1:
        raise ValueError(f"{op}: channels, spatial sizes and kernel sizes must be >= 1, got C={C}, F={F}, "
                         f"spatial={tuple(spatial)}, kernel={tuple(kernel)}")
    if min(st) < 1 or min(dl) < 1 or min(pd) < 0:
        raise ValueError(f"{op}: stride and dilation must be >= 1 and padding >= 0, got stride={stride}, "
                         f"dilation={dilation}, padding={padding}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1 or C % groups or F % groups:
        raise ValueError(f"{op}: groups must be a positive int dividing the in channels ({C}) and the out "
                         f"channels ({F}), got groups={groups!r}")
    out = []
    for size, k, s, lo, hi, dil in zip(spatial, kernel, st, before, after, dl):
        span = dil * (k - 1) + 1
        if size + lo + hi < span:
            raise ValueError(f"{op}: kernel {'x'.join(map(str, kernel))} (dilated extent {span}) is larger than "
                             f"the padded input {size + lo + hi}")
        out.append((size + lo + hi - span) // s + 1)
    return ConvGeometry(C, F, tuple(spatial), tuple(kernel), st, before, after, dl, groups, tuple(out))


# ---- te computes -------------------------------------------------------------------------------

def pad(X: te.Tensor, axes: Sequence[int], before: Sequence[int], after: Sequence[int],
        name: str = "pad") -> te.Tensor:
    """X zero-padded on `axes` (a copy when nothing is padded, for a uniform schedule)."""
    full_before, full_after = [0] * X.ndim, [0] * X.ndim
    for a, lo, hi in zip(axes, before, after):
        full_before[a], full_after[a] = lo, hi
    return pad_constant(X, full_before, full_after, name=name)


def _in_channel(f: Any, rc: Any, groups: int, Fg: int, Cg: int) -> Any:
    """The input channel that output channel f reads at group-local channel rc."""
    return rc if groups == 1 else (f // Fg) * Cg + rc


def conv2d_nchw(X: te.Tensor, Wt: te.Tensor, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                groups: int = 1, name: str = "Y") -> tuple[te.Tensor, te.Tensor]:
    """(pad, Y):
    Y[n, f, y, x] = sum_{rc, ry, rx} pad(X)[n, g*Cg + rc, y*sh + ry*dh, x*sw + rx*dw] * W[f, rc, ry, rx]."""
    N, C, H, W = X.shape
    F, Cg, KH, KW = Wt.shape
    g = conv_geometry("conv2d", C, F, (H, W), (KH, KW), stride, padding, dilation, groups)
    _check_group_channels("conv2d", C, Cg, groups, Wt)
    (sh, sw), (dh, dw) = g.stride, g.dilation
    P = pad(X, (2, 3), g.pad_before, g.pad_after)
    Y = _nchw_taps(lambda n, c, ry, rx, y, x: P[n, c, y * sh + ry * dh, x * sw + rx * dw], Wt, (N, F, *g.out),
                   groups, name)
    return P, Y


def _nchw_taps(tap: Any, Wt: te.Tensor, shape: tuple[int, ...], groups: int, name: str) -> te.Tensor:
    """Y[n, f, y, x] = sum_{rc, ry, rx} tap(n, g*Cg + rc, ry, rx, y, x) * W[f, rc, ry, rx]: the
    direct conv, whose input element at each tap `tap` reads."""
    F, Cg, KH, KW = Wt.shape
    rc = te.reduce_axis((0, Cg), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    return te.compute(shape, lambda n, f, y, x: te.sum(
        tap(n, _in_channel(f, rc, groups, F // groups, Cg), ry, rx, y, x) * Wt[f, rc, ry, rx],
        axis=[rc, ry, rx]), name=name)


def conv2d_nchw_phased(X: te.Tensor, Wt: te.Tensor, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                       groups: int = 1, name: str = "Y") -> tuple[te.Tensor, te.Tensor]:
    """(phases, Y): `conv2d_nchw` over the padded input split by stride phase,
    phases[n, c, ph, pw, i, j] = pad(X)[n, c, i*sh + ph, j*sw + pw], so that every tap reads
    consecutive columns (x + rx*dw // sw of phase rx*dw % sw) where a strided conv reads every
    sw-th one: Y[n, f, y, x] = sum_{rc, ry, rx} phases[n, g*Cg + rc, ry*dh % sh, rx*dw % sw,
    y + ry*dh // sh, x + rx*dw // sw] * W[f, rc, ry, rx]."""
    N, C, H, W = X.shape
    F, Cg, KH, KW = Wt.shape
    g = conv_geometry("conv2d", C, F, (H, W), (KH, KW), stride, padding, dilation, groups)
    _check_group_channels("conv2d", C, Cg, groups, Wt)
    (sh, sw), (dh, dw), (pt, pl) = g.stride, g.dilation, g.pad_before
    rows, cols = g.out[0] + (KH - 1) * dh // sh, g.out[1] + (KW - 1) * dw // sw

    def phase(n: Any, c: Any, ph: Any, pw: Any, i: Any, j: Any) -> Any:
        r, q = i * sh + ph - pt, j * sw + pw - pl
        inside = te.all(r >= 0, r < H, q >= 0, q < W)
        return te.if_then_else(inside, X[n, c, r, q], te.const(0, X.dtype))

    P = te.compute((N, C, sh, sw, rows, cols), phase, name="phases")
    Y = _nchw_taps(lambda n, c, ry, rx, y, x: P[n, c, ry * dh % sh, rx * dw % sw, y + ry * dh // sh, x + rx * dw // sw],
                   Wt, (N, F, *g.out), groups, name)
    return P, Y


def conv2d_nhwc(X: te.Tensor, Wt: te.Tensor, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                groups: int = 1, name: str = "Y") -> tuple[te.Tensor, te.Tensor]:
    """(pad, Y):
    Y[n, y, x, f] = sum_{ry, rx, rc} pad(X)[n, y*sh + ry*dh, x*sw + rx*dw, g*Cg + rc] * W[ry, rx, rc, f]."""
    N, H, W, C = X.shape
    KH, KW, Cg, F = Wt.shape
    g = conv_geometry("conv2d_nhwc", C, F, (H, W), (KH, KW), stride, padding, dilation, groups)
    _check_group_channels("conv2d_nhwc", C, Cg, groups, Wt)
    (sh, sw), (dh, dw), Fg = g.stride, g.dilation, F // groups
    P = pad(X, (1, 2), g.pad_before, g.pad_after)
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    rc = te.reduce_axis((0, Cg), name="rc")
    Y = te.compute((N, *g.out, F), lambda n, y, x, f: te.sum(
        P[n, y * sh + ry * dh, x * sw + rx * dw, _in_channel(f, rc, groups, Fg, Cg)] * Wt[ry, rx, rc, f],
        axis=[ry, rx, rc]), name=name)
    return P, Y


def conv1d_ncw(X: te.Tensor, Wt: te.Tensor, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
               groups: int = 1, name: str = "Y") -> tuple[te.Tensor, te.Tensor]:
    """(pad, Y): Y[n, f, x] = sum_{rc, rk} pad(X)[n, g*Cg + rc, x*s + rk*d] * W[f, rc, rk]."""
    N, C, L = X.shape
    F, Cg, K = Wt.shape
    g = conv_geometry("conv1d", C, F, (L,), (K,), stride, padding, dilation, groups)
    _check_group_channels("conv1d", C, Cg, groups, Wt)
    (s,), (d,), Fg = g.stride, g.dilation, F // groups
    P = pad(X, (2,), g.pad_before, g.pad_after)
    rc = te.reduce_axis((0, Cg), name="rc")
    rk = te.reduce_axis((0, K), name="rk")
    Y = te.compute((N, F, *g.out), lambda n, f, x: te.sum(
        P[n, _in_channel(f, rc, groups, Fg, Cg), x * s + rk * d] * Wt[f, rc, rk], axis=[rc, rk]), name=name)
    return P, Y


def _check_group_channels(op: str, C: int, Cg: int, groups: int, Wt: te.Tensor) -> None:
    if Cg * groups != C:
        raise ValueError(f"{op}: weight {Wt.name} has {Cg} channels per group; with groups={groups} the input "
                         f"needs {Cg * groups} channels, got {C}")


def bias_epilogue(bias: te.Tensor, relu: bool = False) -> Epilogue:
    """+ bias[f], then relu if asked: the epilogue of conv2d_bias_relu and of conv2d_bn."""
    zero = te.const(0, bias.dtype)

    def epilogue(v: te.Expr, i: tuple[te.Expr, te.Expr, te.Expr, te.Expr]) -> te.Expr:
        v = v + bias[i[1]]
        return te.maximum(v, zero) if relu else v

    return epilogue


def apply_epilogue(Y: te.Tensor, epilogue: Epilogue, name: str = "out") -> te.Tensor:
    """The epilogue as its own pointwise stage over the NCHW conv Y."""
    return te.compute(Y.shape, lambda *i: epilogue(Y[i], i), name=name)


def conv2d_bias_relu(X: te.Tensor, Wt: te.Tensor, bias: te.Tensor, stride: Any = 1, padding: Any = 0,
                     dilation: Any = 1, groups: int = 1) -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """(pad, conv, out): out = relu(conv2d_nchw(X, W) + bias[f])."""
    P, Y = conv2d_nchw(X, Wt, stride, padding, dilation, groups, name="conv")
    return P, Y, apply_epilogue(Y, bias_epilogue(bias, relu=True))


def conv2d_bn(X: te.Tensor, Wf: te.Tensor, bf: te.Tensor, stride: Any = 1, padding: Any = 0,
              dilation: Any = 1, groups: int = 1) -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """(pad, conv, out): conv2d with batch norm folded in, out = conv2d_nchw(X, W') + b'[f]
    where (W', b') = fold_batch_norm(W, b, mean, var, gamma, beta, eps)."""
    P, Y = conv2d_nchw(X, Wf, stride, padding, dilation, groups, name="conv")
    return P, Y, apply_epilogue(Y, bias_epilogue(bf))


def bias_gelu(C: te.Tensor, bias: te.Tensor, name: str = "Y") -> te.Tensor:
    """gelu_tanh(C[i, j] + bias[j]): the dense epilogue."""
    return te.compute(C.shape, lambda i, j: gelu_tanh_expr(C[i, j] + bias[j]), name=name)


def dense_gelu(X: te.Tensor, Wt: te.Tensor, bias: te.Tensor) -> tuple[te.Tensor, te.Tensor]:
    """(C, Y): C = X @ W.T (X: M x K, W: N x K), Y = gelu_tanh(C + bias)."""
    (M, K), (N, K2) = X.shape, Wt.shape
    if K != K2 or bias.shape != (N,):
        raise ValueError(f"dense_gelu: X is {X.shape}, W is {Wt.shape}, bias is {bias.shape}; need "
                         "X.shape[1] == W.shape[1] and bias of shape (W.shape[0],)")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(X[i, k] * Wt[j, k], axis=k), name="C")
    return C, bias_gelu(C, bias)


# ---- numpy: references and batch-norm folding ---------------------------------------------------

def fold_batch_norm(w: np.ndarray, b: np.ndarray | None, mean: np.ndarray, var: np.ndarray, gamma: np.ndarray,
                    beta: np.ndarray, eps: float = 1e-5) -> tuple[np.ndarray, np.ndarray]:
    """(W', b') with conv(x, W') + b' == batch_norm(conv(x, W) + b) at inference.

    w's first axis is the output channel (OIHW, OIW); for NHWC's HWIO pass w.transpose(3, 2, 0, 1)
    and transpose back. b may be None (a conv without bias).
    """
    scale = gamma / np.sqrt(var + eps)
    bias = np.zeros_like(mean) if b is None else b
    w2 = w * scale.reshape((-1,) + (1,) * (w.ndim - 1))
    return w2.astype(w.dtype), ((bias - mean) * scale + beta).astype(w.dtype)


def conv2d_nchw_reference(x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                          groups: int = 1) -> np.ndarray:
    """numpy conv2d NCHW: one grouped einsum per kernel offset over strided views of the padded input."""
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    g = conv_geometry("conv2d", c, f, (h, wd), (kh, kw), stride, padding, dilation, groups)
    xp = np.pad(x, ((0, 0), (0, 0), (g.pad_before[0], g.pad_after[0]), (g.pad_before[1], g.pad_after[1])))
    (oh, ow), (sh, sw), (dh, dw) = g.out, g.stride, g.dilation
    xg = xp.reshape(n, groups, cg, *xp.shape[2:])
    wg = w.reshape(groups, f // groups, cg, kh, kw)
    out = np.zeros((n, groups, f // groups, oh, ow), dtype=np.result_type(x.dtype, np.float32))
    for ky in range(kh):
        for kx in range(kw):
            patch = xg[..., ky * dh:ky * dh + sh * (oh - 1) + 1:sh, kx * dw:kx * dw + sw * (ow - 1) + 1:sw]
            out += np.einsum("ngchw,gfc->ngfhw", patch, wg[..., ky, kx], optimize=True)
    return out.reshape(n, f, oh, ow).astype(x.dtype)


def conv2d_nhwc_reference(x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                          groups: int = 1) -> np.ndarray:
    """numpy conv2d NHWC with HWIO weights (through the NCHW reference)."""
    y = conv2d_nchw_reference(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), stride, padding, dilation, groups)
    return np.ascontiguousarray(y.transpose(0, 2, 3, 1))


def conv1d_ncw_reference(x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                         groups: int = 1) -> np.ndarray:
    """numpy conv1d NCW (a conv2d of height 1)."""
    (s,), (d,) = _ints("conv1d", "stride", stride, (1,), 1), _ints("conv1d", "dilation", dilation, (1,), 1)
    pd = _ints("conv1d", "padding", padding, (1, 2), 1)
    pads = (0, pd[0], 0, pd[-1])
    return conv2d_nchw_reference(x[:, :, None, :], w[:, :, None, :], (1, s), pads, (1, d), groups)[:, :, 0, :]
