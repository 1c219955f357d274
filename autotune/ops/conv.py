"""Convolution ops and the fused conv/dense epilogues: conv1d, conv2d_grouped, depthwise_conv2d,
conv2d_nhwc, conv2d_bias_relu, conv2d_bn (batch norm folded), dense_gelu, conv_transpose2d/3d.

Layouts as in `autotune.topi.conv` (weights OIHW / OIW, HWIO for NHWC). stride and dilation are
an int or a pair, padding an int, a pair or (top, left, bottom, right). They are canonicalised
(an int when every entry is equal) so one shape has one workload key however it is written.
Plain dense NCHW conv2d (stride, padding) is `autotune.ops.conv2d`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime import load
from ..topi.conv import conv_geometry, fold_batch_norm
from ..topi.conv_transpose import transpose_geometry
from .checks import arrays as _arrays, contiguous as _contiguous, float_dtype

__all__ = ["conv1d", "conv2d_bias_relu", "conv2d_bn", "conv2d_grouped", "conv2d_nhwc", "conv_transpose2d",
           "conv_transpose3d", "dense_gelu", "depthwise_conv2d", "fold_batch_norm"]

def _canon(value: Any, dims: int) -> int | tuple[int, ...]:
    """An int if every entry is the same, else the tuple (padding (t, l, b, r) -> (t, l) if symmetric)."""
    if isinstance(value, int):
        return value
    vals = tuple(value)
    if len(vals) == 2 * dims and vals[:dims] == vals[dims:]:
        vals = vals[:dims]
    return vals[0] if len(set(vals)) == 1 else vals


def _hyper(op: str, C: int, F: int, spatial: tuple[int, ...], kernel: tuple[int, ...], stride: Any, padding: Any,
           dilation: Any, groups: int) -> dict[str, Any]:
    """Check the hyper-parameters against the shapes (errors name the op), then canonicalise them."""
    conv_geometry(op, C, F, spatial, kernel, stride, padding, dilation, groups)
    d = len(spatial)
    return {"stride": _canon(stride, d), "padding": _canon(padding, d), "dilation": _canon(dilation, d),
            "groups": groups}


def _groups(op: str, groups: Any) -> int:
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: argument groups must be a positive int, got {groups!r}")
    return groups


def _check_channels(op: str, C: int, Cg: int, F: int, groups: int, w_shape: tuple[int, ...]) -> None:
    if Cg * groups != C:
        raise ValueError(f"{op}: argument w has {Cg} input channels per group (w {w_shape}); with groups={groups} "
                         f"x needs {Cg * groups} channels, got {C}")
    if F % groups:
        raise ValueError(f"{op}: argument w has {F} output channels, not divisible by groups={groups}")


def _check_bias(op: str, bias: np.ndarray, F: int, name: str = "bias") -> None:
    if bias.shape != (F,):
        raise ValueError(f"{op}: argument {name} must have shape ({F},) (one per output channel), got {bias.shape}")


def conv1d(x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
           db: Any = None) -> np.ndarray:
    """NCW conv1d of x (N x C x L) with w (F x C/groups x K)."""
    op = "conv1d"
    dtype = float_dtype(op, _arrays(op, ("x", "w"), (x, w), (3, 3)))
    (N, C, L), (F, Cg, K), groups = x.shape, w.shape, _groups(op, groups)
    _check_channels(op, C, Cg, F, groups, w.shape)
    hyper = _hyper(op, C, F, (L,), (K,), stride, padding, dilation, groups)
    kernel = load(op, db=db, dtype=dtype, N=N, C=C, L=L, F=F, K=K, **hyper)
    return kernel(*_contiguous(x, w))


def _nchw(op: str, x: np.ndarray, w: np.ndarray, extra: tuple[tuple[str, np.ndarray], ...], stride: Any,
          padding: Any, dilation: Any, groups: int, db: Any, template: str | None = None) -> np.ndarray:
    """Check and run an NCHW conv template whose inputs are x, w, then `extra` per-channel vectors."""
    names, values = ("x", "w", *(n for n, _ in extra)), (x, w, *(v for _, v in extra))
    dtype = float_dtype(op, _arrays(op, names, values, (4, 4, *(1 for _ in extra))))
    (N, C, H, W), (F, Cg, KH, KW), groups = x.shape, w.shape, _groups(op, groups)
    _check_channels(op, C, Cg, F, groups, w.shape)
    for name, v in extra:
        _check_bias(op, v, F, name)
    hyper = _hyper(op, C, F, (H, W), (KH, KW), stride, padding, dilation, groups)
    kernel = load(template or op, db=db, dtype=dtype, N=N, C=C, H=H, W=W, F=F, KH=KH, KW=KW, **hyper)
    return kernel(*_contiguous(*values))


def conv2d_grouped(x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                   groups: int = 1, db: Any = None) -> np.ndarray:
    """NCHW conv2d of x (N x C x H x W) with w (F x C/groups x KH x KW), with dilation and groups."""
    return _nchw("conv2d_grouped", x, w, (), stride, padding, dilation, groups, db)


def depthwise_conv2d(x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                     db: Any = None) -> np.ndarray:
    """Depthwise NCHW conv2d: w (C * multiplier x 1 x KH x KW), each channel convolved on its own
    (the "conv2d_grouped" kernel with groups == C)."""
    if isinstance(x, np.ndarray) and isinstance(w, np.ndarray) and x.ndim == 4 and w.ndim == 4 and w.shape[1] != 1:
        raise ValueError(f"depthwise_conv2d: argument w must have shape (C * multiplier, 1, KH, KW), got {w.shape}")
    groups = x.shape[1] if isinstance(x, np.ndarray) and x.ndim == 4 else 1
    return _nchw("depthwise_conv2d", x, w, (), stride, padding, dilation, groups, db, template="conv2d_grouped")


def conv2d_bias_relu(x: np.ndarray, w: np.ndarray, bias: np.ndarray, stride: Any = 1, padding: Any = 0,
                     dilation: Any = 1, groups: int = 1, db: Any = None) -> np.ndarray:
    """relu(conv2d NCHW(x, w) + bias[f]) in one fused kernel; bias (F,)."""
    return _nchw("conv2d_bias_relu", x, w, (("bias", bias),), stride, padding, dilation, groups, db)


def conv2d_bn(x: np.ndarray, w_folded: np.ndarray, b_folded: np.ndarray, stride: Any = 1, padding: Any = 0,
              dilation: Any = 1, groups: int = 1, db: Any = None) -> np.ndarray:
    """conv2d NCHW followed by inference batch norm, in one kernel, with the batch norm already
    folded: `w_folded, b_folded = fold_batch_norm(w, b, mean, var, gamma, beta, eps)` (fold once,
    call many times). For conv + bn + relu, pass the folded pair to `conv2d_bias_relu`."""
    return _nchw("conv2d_bn", x, w_folded, (("b_folded", b_folded),), stride, padding, dilation, groups, db)


def conv2d_nhwc(x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
                groups: int = 1, db: Any = None) -> np.ndarray:
    """NHWC conv2d of x (N x H x W x C) with w (KH x KW x C/groups x F, HWIO)."""
    op = "conv2d_nhwc"
    dtype = float_dtype(op, _arrays(op, ("x", "w"), (x, w), (4, 4)))
    (N, H, W, C), (KH, KW, Cg, F), groups = x.shape, w.shape, _groups(op, groups)
    _check_channels(op, C, Cg, F, groups, w.shape)
    hyper = _hyper(op, C, F, (H, W), (KH, KW), stride, padding, dilation, groups)
    kernel = load(op, db=db, dtype=dtype, N=N, H=H, W=W, C=C, F=F, KH=KH, KW=KW, **hyper)
    return kernel(*_contiguous(x, w))


def dense_gelu(x: np.ndarray, w: np.ndarray, bias: np.ndarray, db: Any = None) -> np.ndarray:
    """gelu(x @ w.T + bias) (tanh approximation) in one fused kernel; x (M x K), w (N x K), bias (N,)."""
    op = "dense_gelu"
    dtype = float_dtype(op, _arrays(op, ("x", "w", "bias"), (x, w, bias), (2, 2, 1)))
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"{op}: argument w is {w.shape} but x is {x.shape}; need x.shape[1] == w.shape[1]")
    _check_bias(op, bias, w.shape[0])
    kernel = load(op, db=db, dtype=dtype, M=x.shape[0], N=w.shape[0], K=x.shape[1])
    return kernel(*_contiguous(x, w, bias))


def conv_transpose2d(x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     dilation: Any = 1, groups: int = 1, db: Any = None) -> np.ndarray:
    """NCHW transposed conv of x (N x C x H x W) with w (C x F/groups x KH x KW), as ONNX
    ConvTranspose and PyTorch's conv_transpose2d: output (H - 1) * stride - pad_top - pad_bottom
    + dilation * (KH - 1) + output_padding + 1 rows (columns alike)."""
    return _conv_transpose("conv_transpose2d", ("H", "W"), x, w, stride, padding, output_padding, dilation, groups, db)


def conv_transpose3d(x: np.ndarray, w: np.ndarray, stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     dilation: Any = 1, groups: int = 1, db: Any = None) -> np.ndarray:
    """NCDHW transposed conv of x (N x C x D x H x W) with w (C x F/groups x KD x KH x KW), as
    ONNX ConvTranspose and PyTorch's conv_transpose3d (each spatial axis sized as in 2-d)."""
    return _conv_transpose("conv_transpose3d", ("D", "H", "W"), x, w, stride, padding, output_padding, dilation,
                           groups, db)


def _conv_transpose(op: str, axes: tuple[str, ...], x: np.ndarray, w: np.ndarray, stride: Any, padding: Any,
                    output_padding: Any, dilation: Any, groups: int, db: Any) -> np.ndarray:
    dims = len(axes)
    dtype = float_dtype(op, _arrays(op, ("x", "w"), (x, w), (dims + 2, dims + 2)))
    (N, C, *size), (Cw, Fg, *kernel), groups = x.shape, w.shape, _groups(op, groups)
    if Cw != C:
        raise ValueError(f"{op}: argument w must have {C} input channels first (C x F/groups x "
                         f"{' x '.join('K' + a for a in axes)}), got w {w.shape} for x {x.shape}")
    transpose_geometry(op, C, Fg * groups, tuple(size), tuple(kernel), stride, padding, output_padding, dilation,
                       groups)
    hyper: dict[str, Any] = {"stride": _canon(stride, dims), "padding": _canon(padding, dims),
                             "output_padding": _canon(output_padding, dims), "dilation": _canon(dilation, dims),
                             "groups": groups}
    shape = dict(zip(axes, size)) | {f"K{a}": k for a, k in zip(axes, kernel)}
    kernel_fn = load(op, db=db, dtype=dtype, N=N, C=C, F=Fg * groups, **shape, **hyper)
    return kernel_fn(*_contiguous(x, w))
