"""conv2d NCHW on the CPU: the compute (padding stage + 3 reduction axes) and its template."""
from __future__ import annotations

import numpy as np

from ... import te
from ..task import template


def conv2d_nchw(X: te.Tensor, Wt: te.Tensor, stride: int, padding: int, name: str = "Y") -> tuple[te.Tensor, te.Tensor]:
    """Y[n, f, y, x] = sum_{c, ky, kx} pad(X)[n, c, y*stride + ky, x*stride + kx] * W[f, c, ky, kx]."""
    N, C, H, W = X.shape
    F, _, KH, KW = Wt.shape
    Hp, Wp = H + 2 * padding, W + 2 * padding
    P = te.compute((N, C, Hp, Wp), lambda n, c, h, w: te.if_then_else(
        te.all(h >= padding, h < H + padding, w >= padding, w < W + padding),
        X[n, c, h - padding, w - padding], te.const(0, X.dtype)), name="pad")
    OH, OW = (Hp - KH) // stride + 1, (Wp - KW) // stride + 1
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    Y = te.compute((N, F, OH, OW), lambda n, f, y, x: te.sum(
        P[n, rc, y * stride + ry, x * stride + rx] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]), name=name)
    return P, Y


def conv2d_reference(x: np.ndarray, w: np.ndarray, stride: int, padding: int, **_: int) -> np.ndarray:
    """numpy conv2d NCHW through one im2col matmul per kernel offset."""
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, c, hp, wp = xp.shape
    f, _, kh, kw = w.shape
    oh, ow = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    out = np.zeros((n, f, oh, ow), dtype=np.float64 if x.dtype == np.float64 else np.float32)
    for y in range(kh):
        for x_ in range(kw):
            patch = xp[:, :, y:y + stride * oh:stride, x_:x_ + stride * ow:stride]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, y, x_], optimize=True)
    return out.astype(x.dtype)


def _check_shape(N, C, H, W, F, KH, KW, stride, padding) -> None:
    if stride < 1 or padding < 0:
        raise ValueError(f"conv2d: stride must be >= 1 and padding >= 0, got stride={stride}, padding={padding}")
    if H + 2 * padding < KH or W + 2 * padding < KW:
        raise ValueError(f"conv2d: kernel {KH}x{KW} is larger than the padded input {H + 2 * padding}x{W + 2 * padding}")


@template("conv2d", reference=conv2d_reference,
          description="NCHW conv2d: X N x C x H x W, W F x C x KH x KW, with stride and padding")
def conv2d_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: int, padding: int,
                    dtype: str = "float32"):
    """Output tiles accumulated locally (filters x rows x vectorized columns), channels split."""
    _check_shape(N, C, H, W, F, KH, KW, stride, padding)
    OH, OW = (H + 2 * padding - KH) // stride + 1, (W + 2 * padding - KW) // stride + 1
    cfg.define_split("tile_f", F, 2, policy="candidate", candidate=[[-1, v] for v in (4, 8, 2, 1, 16)])
    cfg.define_split("tile_y", OH, 2, policy="candidate", candidate=[[-1, v] for v in (1, 2, 4)])
    cfg.define_split("tile_x", OW, 2, policy="candidate", candidate=[[-1, v] for v in (16, 8, 32, 28, 14, 56)])
    cfg.define_split("tile_rc", C, 2, policy="candidate", candidate=[[-1, v] for v in (8, 1, 4, 16, 32)])
    cfg.define_knob("reduce_order", ["rc_outer", "kernel_outer"])
    cfg.define_knob("unroll_kw", [1, 0])
    cfg.define_knob("pad", ["inline", "root"])
    X = te.placeholder((N, C, H, W), dtype, name="X")
    Wt = te.placeholder((F, C, KH, KW), dtype, name="W")
    P, Y = conv2d_nchw(X, Wt, stride, padding)
    s = te.create_schedule(Y.op)
    if cfg["pad"].val == "inline" or padding == 0:
        s[P].compute_inline()
    CC = s.cache_write(Y, "local")
    n, f, y, x = Y.op.axis
    fo, fi = cfg["tile_f"].apply(s, Y, f)
    yo, yi = cfg["tile_y"].apply(s, Y, y)
    xo, xi = cfg["tile_x"].apply(s, Y, x)
    s[Y].reorder(n, fo, yo, xo, fi, yi, xi)
    s[CC].compute_at(s[Y], xo)
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
    s[Y].vectorize(xi)
    s[Y].parallel(s[Y].fuse(n, fo, yo))
    return s, [X, Wt, Y]
