"""conv2d NCHW on the CPU: templates "conv2d" (stride, padding) and "conv2d_grouped" (plus
dilation and groups; depthwise when groups == C), and the algorithm dispatcher that they and
the fused conv templates in `conv.py` share. The computes live in `autotune.topi.conv`.

The algorithm is a knob: ALGORITHMS maps each name to its module (`conv2d_<name>.py`: APPLIES,
define_knobs, build), and a template offers the algorithms whose APPLIES holds for its geometry,
each with its own knobs (read only under that algorithm). The rule for the default: the first
applicable algorithm in ALGORITHMS' order, i.e. "nchwc" (blocked channels, vectorised along
output channels: every output column is a full vector on any layer) wherever it applies, else
"nchw" (vectorised along the output width, which narrow deep layers leave short). The rules of
each algorithm's own knobs are in its module docstring.

"conv2d" keeps its parameters, so its workload keys stay valid; records made before the
algorithm knob existed load as algorithm "nchw" with their knobs (and "parallel", which "conv2d"
did not have, as the "fused" loop it used). Dilation and groups are parameters of
"conv2d_grouped" only.
"""
from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ... import te
from ...topi import conv as topi_conv
from ...topi.conv import ConvGeometry, Epilogue
from ..schedule import Schedule
from ..task import template
from . import conv2d_nchw as nchw, conv2d_nchwc as nchwc

# name -> module, in the order of preference of the default rule
ALGORITHMS: dict[str, ModuleType] = {"nchwc": nchwc, "nchw": nchw}


def conv2d_nchw(X: te.Tensor, Wt: te.Tensor, stride: Any, padding: Any, name: str = "Y") -> tuple[te.Tensor, te.Tensor]:
    """(pad, Y) of a dense NCHW conv2d (see `autotune.topi.conv.conv2d_nchw` for dilation and groups)."""
    return topi_conv.conv2d_nchw(X, Wt, stride, padding, name=name)


def conv2d_reference(x: np.ndarray, w: np.ndarray, stride: Any, padding: Any, dilation: Any = 1, groups: int = 1,
                     **_: int) -> np.ndarray:
    """numpy conv2d NCHW through one (grouped) einsum per kernel offset."""
    return topi_conv.conv2d_nchw_reference(x, w, stride, padding, dilation, groups)


def nchw_geometry(op: str, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any, padding: Any,
                  dilation: Any = 1, groups: int = 1) -> ConvGeometry:
    if N < 1:
        raise ValueError(f"{op}: batch N must be >= 1, got {N}")
    return topi_conv.conv_geometry(op, C, F, (H, W), (KH, KW), stride, padding, dilation, groups)


def define_algorithms(cfg: Any, g: ConvGeometry, N: int, dtype: str) -> None:
    """The "algorithm" knob over the algorithms that apply (the default rule's pick first), then
    each one's knobs, read only under it."""
    names = [name for name, module in ALGORITHMS.items() if module.APPLIES(g)]
    cfg.define_knob("algorithm", names, absent="nchw")
    for name in names:
        ALGORITHMS[name].define_knobs(cfg, g, N, dtype, when=("algorithm", (name,)))


def conv2d_nchw_schedule(cfg: Any, g: ConvGeometry, N: int, dtype: str, epilogue: Epilogue | None = None,
                         extra: Sequence[te.Tensor] = ()) -> tuple[Schedule, list[te.Tensor]]:
    """Declare the knobs, then build X (N x C x H x W) * W (F x C/groups x KH x KW) with the
    chosen algorithm: (schedule, [X, W, *extra, out])."""
    define_algorithms(cfg, g, N, dtype)
    (H, W), (KH, KW), C = g.spatial, g.kernel, g.in_channels
    X = te.placeholder((N, C, H, W), dtype, name="X")
    Wt = te.placeholder((g.out_channels, C // g.groups, KH, KW), dtype, name="W")
    s, out = ALGORITHMS[cfg["algorithm"].val].build(cfg, X, Wt, g, epilogue, extra)
    return s, [X, Wt, *extra, out]


@template("conv2d", reference=conv2d_reference,
          description="NCHW conv2d: X N x C x H x W, W F x C x KH x KW, with stride and padding")
def conv2d_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: int, padding: int,
                    dtype: str = "float32"):
    """The conv by the algorithm knob (blocked channels or direct NCHW)."""
    g = nchw_geometry("conv2d", N, C, H, W, F, KH, KW, stride, padding)
    return conv2d_nchw_schedule(cfg, g, N, dtype)


@template("conv2d_grouped", reference=conv2d_reference,
          description="NCHW conv2d with stride, padding, dilation and groups (depthwise: groups == C): "
                      "X N x C x H x W, W F x C/groups x KH x KW")
def conv2d_grouped_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any,
                            padding: Any, dilation: Any, groups: int, dtype: str = "float32"):
    """The conv by the algorithm knob, each group reading its own channels."""
    g = nchw_geometry("conv2d_grouped", N, C, H, W, F, KH, KW, stride, padding, dilation, groups)
    return conv2d_nchw_schedule(cfg, g, N, dtype)
