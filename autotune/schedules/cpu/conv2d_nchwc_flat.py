"""conv2d on the CPU as the blocked kernel of `conv2d_nchwc` over the image as one row: the conv
algorithm "nchwc_flat", for 1x1 stride-1 convs without padding.

Such a conv reads input pixel p for output pixel p, so its image rows are only the way the
blocked kernel cuts pixels into register tiles, and a row narrower than two tiles pays a tail
per row (7 columns on a tile of 6 positions: a 6-column tile and a 1-column one on each of the
7 rows) or runs one-vector tiles that broadcast an input per multiply-add. Over the image as one
row of H x W pixels (`conv2d_nchwc_knobs.flat_geometry`) the tiles run across the row ends and
the image has one tail (49 pixels: 8 tiles of 6 and one of 1). X stays NCHW: the view is inlined
into its repack (the flat index's divide and remainder by W recombine); the output stage reads
the conv at y * OW + x, and the whole image is one output block.

The knobs are those of "nchwc" under the prefix PREFIX, defined, with their default rules, on
the flat geometry. When the dispatcher puts this first: `conv2d`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import te
from ...topi.conv import ConvGeometry, Epilogue, Finish
from ..schedule import Schedule
from ..space import KnobScope
from . import conv2d_nchwc as nchwc
from .conv2d_nchwc_knobs import flat_geometry

PREFIX = "flat."


def applies(g: ConvGeometry) -> bool:
    """A 1x1 stride-1 conv without padding over an image of more than one row (of one row it is
    "nchwc" itself), that "nchwc" runs."""
    return (g.kernel == (1, 1) and g.stride == (1, 1) and not g.has_padding and not g.depthwise
            and g.out[0] > 1 and nchwc.applies(g))


APPLIES = applies


def _scope(cfg: Any) -> KnobScope:
    """cfg with "nchwc"'s knobs renamed under PREFIX, read under cfg's own algorithm knob."""
    return KnobScope(cfg, PREFIX, outer_conditions=True)


def define_knobs(cfg: Any, g: ConvGeometry, N: int, dtype: str, when: tuple[str, tuple[str, ...]]) -> None:
    nchwc.define_knobs(_scope(cfg), flat_geometry(g), N, dtype, when)


def build(cfg: Any, X: te.Tensor, Wt: te.Tensor, g: ConvGeometry, epilogue: Epilogue | None,
          extra: Sequence[te.Tensor], finish: Finish | None = None) -> tuple[Schedule, te.Tensor]:
    return nchwc.build(_scope(cfg), X, Wt, g, epilogue, extra, finish=finish, flat=True)
