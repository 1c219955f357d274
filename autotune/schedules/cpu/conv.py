"""More convolutions and the conv/dense + pointwise epilogue templates on the CPU.

conv1d (NCW), conv2d_nhwc, conv2d_bias_relu and conv2d_bn (NCHW, batch norm folded into the
weights and bias by `autotune.topi.conv.fold_batch_norm`), dense_gelu (dense + bias + gelu).
The epilogue templates compute the conv or matmul tile into a local buffer at the output's tile
loop and apply bias and activation on that tile, so the pre-activation never reaches memory.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import te
from ...topi import conv as topi_conv, elementwise as topi_elementwise
from ..task import template
from .conv2d import conv2d_nchw_schedule, nchw_geometry
from .matmul import _matmul_body


def _annotate_reduction(cfg: Any, s: Any, CC: te.Tensor, spatial: list, rc: Any, kernel: list) -> None:
    """Split the channel reduction, order it against the kernel axes (spatial innermost), unroll
    the innermost kernel axis if asked, and vectorize the innermost spatial axis."""
    rco, rci = cfg["tile_rc"].apply(s, CC, rc)
    if cfg["reduce_order"].val == "rc_outer":
        s[CC].reorder(rco, *kernel, rci, *spatial)
    else:
        s[CC].reorder(*kernel, rco, rci, *spatial)
    if cfg["unroll_kernel"].val and kernel[-1].extent <= 8:
        s[CC].unroll(kernel[-1])
    s[CC].vectorize(spatial[-1])


def _reduction_knobs(cfg: Any, Cg: int) -> None:
    cfg.define_split("tile_rc", Cg, 2, policy="candidate", candidate=[[-1, v] for v in (8, 1, 4, 16, 32)])
    cfg.define_knob("reduce_order", ["rc_outer", "kernel_outer"])
    cfg.define_knob("unroll_kernel", [1, 0])
    cfg.define_knob("pad", ["inline", "root"])
    cfg.define_knob("parallel", ["fused", "outer"])


def _place_pad(cfg: Any, s: Any, P: te.Tensor, padded: bool) -> None:
    """Inline the padding into the conv's loads, or compute it first with its two outer axes in parallel."""
    if cfg["pad"].val == "inline" or not padded:
        s[P].compute_inline()
    else:
        s[P].parallel(s[P].fuse(*P.op.axis[:2]))


# ---- conv1d NCW --------------------------------------------------------------------------------

def _conv1d_reference(x, w, stride, padding, dilation, groups, **_):
    return topi_conv.conv1d_ncw_reference(x, w, stride, padding, dilation, groups)


@template("conv1d", reference=_conv1d_reference,
          description="NCW conv1d with stride, padding, dilation and groups: X N x C x L, W F x C/groups x K")
def conv1d_template(cfg, N: int, C: int, L: int, F: int, K: int, stride: Any, padding: Any, dilation: Any,
                    groups: int, dtype: str = "float32"):
    """Output tiles (filters x vectorized positions) accumulated locally; channels split."""
    if N < 1:
        raise ValueError(f"conv1d: batch N must be >= 1, got {N}")
    g = topi_conv.conv_geometry("conv1d", C, F, (L,), (K,), stride, padding, dilation, groups)
    cfg.define_split("tile_f", F, 2, policy="candidate", candidate=[[-1, v] for v in (4, 8, 2, 1, 16)])
    cfg.define_split("tile_x", g.out[0], 2, policy="candidate", candidate=[[-1, v] for v in (16, 32, 8, 64, 4)])
    _reduction_knobs(cfg, C // groups)
    X = te.placeholder((N, C, L), dtype, name="X")
    Wt = te.placeholder((F, C // groups, K), dtype, name="W")
    P, Y = topi_conv.conv1d_ncw(X, Wt, stride, padding, dilation, groups)
    s = te.create_schedule(Y.op)
    _place_pad(cfg, s, P, g.has_padding)
    CC = s.cache_write(Y, "local")
    n, f, x = Y.op.axis
    fo, fi = cfg["tile_f"].apply(s, Y, f)
    xo, xi = cfg["tile_x"].apply(s, Y, x)
    s[Y].reorder(n, fo, xo, fi, xi)
    if cfg["parallel"].val == "fused":      # fuse before compute_at: the tile loop is the fused one
        xo = s[Y].fuse(n, fo, xo)
        s[Y].parallel(xo)
    else:
        s[Y].parallel(s[Y].fuse(n, fo))
    s[CC].compute_at(s[Y], xo)
    _, cf, cx = s[CC].op.axis
    rc, rk = s[CC].op.reduce_axis
    _annotate_reduction(cfg, s, CC, [cf, cx], rc, [rk])
    s[Y].vectorize(xi)
    return s, [X, Wt, Y]


# ---- conv2d NHWC -------------------------------------------------------------------------------

def _nhwc_reference(x, w, stride, padding, dilation, groups, **_):
    return topi_conv.conv2d_nhwc_reference(x, w, stride, padding, dilation, groups)


@template("conv2d_nhwc", reference=_nhwc_reference,
          description="NHWC conv2d with stride, padding, dilation and groups: X N x H x W x C, "
                      "W KH x KW x C/groups x F (HWIO)")
def conv2d_nhwc_template(cfg, N: int, H: int, W: int, C: int, F: int, KH: int, KW: int, stride: Any,
                         padding: Any, dilation: Any, groups: int, dtype: str = "float32"):
    """Output tiles of rows x columns x vectorized filters (contiguous in W and Y) accumulated
    locally: per input channel one broadcast input value times a vector of filters."""
    g = nchw_geometry("conv2d_nhwc", N, C, H, W, F, KH, KW, stride, padding, dilation, groups)
    OH, OW = g.out
    cfg.define_split("tile_f", F, 2, policy="candidate", candidate=[[-1, v] for v in (16, 32, 8, 64, 4, 1)])
    cfg.define_split("tile_y", OH, 2, policy="candidate", candidate=[[-1, v] for v in (1, 2, 4)])
    cfg.define_split("tile_x", OW, 2, policy="candidate", candidate=[[-1, v] for v in (4, 8, 2, 6, 14, 1)])
    _reduction_knobs(cfg, C // groups)
    X = te.placeholder((N, H, W, C), dtype, name="X")
    Wt = te.placeholder((KH, KW, C // groups, F), dtype, name="W")
    P, Y = topi_conv.conv2d_nhwc(X, Wt, stride, padding, dilation, groups)
    s = te.create_schedule(Y.op)
    _place_pad(cfg, s, P, g.has_padding)
    CC = s.cache_write(Y, "local")
    n, y, x, f = Y.op.axis
    yo, yi = cfg["tile_y"].apply(s, Y, y)
    xo, xi = cfg["tile_x"].apply(s, Y, x)
    fo, fi = cfg["tile_f"].apply(s, Y, f)
    s[Y].reorder(n, yo, xo, fo, yi, xi, fi)
    s[CC].compute_at(s[Y], fo)
    _, cy, cx, cf = s[CC].op.axis
    ry, rx, rc = s[CC].op.reduce_axis
    _annotate_reduction(cfg, s, CC, [cy, cx, cf], rc, [ry, rx])
    s[Y].vectorize(fi)
    s[Y].parallel(s[Y].fuse(n, yo, xo) if cfg["parallel"].val == "fused" else s[Y].fuse(n, yo))
    return s, [X, Wt, Y]


# ---- conv2d NCHW + epilogue --------------------------------------------------------------------

def _bias_relu_reference(x, w, bias, stride, padding, dilation, groups, **_):
    y = topi_conv.conv2d_nchw_reference(x, w, stride, padding, dilation, groups) + bias[None, :, None, None]
    return np.maximum(y, 0).astype(x.dtype)


def _bn_reference(x, w_folded, b_folded, stride, padding, dilation, groups, **_):
    y = topi_conv.conv2d_nchw_reference(x, w_folded, stride, padding, dilation, groups)
    return (y + b_folded[None, :, None, None]).astype(x.dtype)


def _nchw_epilogue(cfg, op: str, relu: bool, N, C, H, W, F, KH, KW, stride, padding, dilation, groups, dtype):
    """The conv by the algorithm knob with + bias (and relu) applied to its local output tile."""
    g = nchw_geometry(op, N, C, H, W, F, KH, KW, stride, padding, dilation, groups)
    bias = te.placeholder((F,), dtype, name="bias")
    return conv2d_nchw_schedule(cfg, g, N, dtype, topi_conv.bias_epilogue(bias, relu), (bias,))


@template("conv2d_bias_relu", reference=_bias_relu_reference,
          description="relu(conv2d NCHW + bias) in one kernel, with stride, padding, dilation and groups")
def conv2d_bias_relu_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any,
                              padding: Any, dilation: Any, groups: int, dtype: str = "float32"):
    """The conv by the algorithm knob; bias and relu applied to the local output tile."""
    return _nchw_epilogue(cfg, "conv2d_bias_relu", True, N, C, H, W, F, KH, KW, stride,
                          padding, dilation, groups, dtype)


@template("conv2d_bn", reference=_bn_reference,
          description="conv2d NCHW with inference batch norm folded into its weights and bias "
                      "(inputs X, W', b' from fold_batch_norm), one kernel")
def conv2d_bn_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any,
                       padding: Any, dilation: Any, groups: int, dtype: str = "float32"):
    """The conv by the algorithm knob; the folded batch-norm shift added to the local output tile."""
    return _nchw_epilogue(cfg, "conv2d_bn", False, N, C, H, W, F, KH, KW, stride, padding,
                          dilation, groups, dtype)


# ---- dense + bias + gelu -----------------------------------------------------------------------

def _dense_gelu_reference(x, w, bias, **_):
    return topi_elementwise.gelu_tanh_reference(x @ w.T + bias).astype(x.dtype)


@template("dense_gelu", reference=_dense_gelu_reference,
          description="gelu_tanh(X @ W.T + bias), X: M x K, W: N x K, bias (N,) (fused epilogue)")
def dense_gelu_template(cfg, M: int, N: int, K: int, dtype: str = "float32"):
    """The matmul schedule (packed W, register tile, k unroll, threads); bias and gelu on the tile."""
    if min(M, N, K) < 1:
        raise ValueError(f"dense_gelu: M, N and K must be >= 1, got M={M}, N={N}, K={K}")
    bias = te.placeholder((N,), dtype, name="bias")
    return _matmul_body(cfg, M, N, K, dtype, transposed=True, extra_inputs=(bias,),
                        epilogue=lambda C: topi_conv.bias_gelu(C, bias))
