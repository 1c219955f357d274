"""The blocked channel layout NCHW[b]c as te computes: `to_blocked` (N x C x H x W ->
N x C/b x H x W x b, channel c at block c // b, lane c % b) and `from_blocked` back. A model
keeps its activations blocked between convolutions (`autotune.graph.layout`); these are the
conversions at the edges and the views through which a computation written on NCHW indices
reads or writes a blocked tensor."""
from __future__ import annotations

from typing import Any

from .. import te

LAYOUTS = ("nchw", "nchwc")     # a model's activation layouts: plain, or blocked by channels between convs


def blocked_shape(shape: tuple[int, ...], block: int) -> tuple[int, ...]:
    """The blocked shape of an NCHW shape whose channels are a multiple of `block`."""
    N, C, H, W = shape
    if C % block:
        raise ValueError(f"blocked layout: {C} channels are not a multiple of the block {block}")
    return (N, C // block, H, W, block)


def to_blocked(x: te.Tensor, block: int, name: str = "blocked") -> te.Tensor:
    return te.compute(blocked_shape(tuple(x.shape), block),
                      lambda n, cb, h, w, ci: x[n, cb * block + ci, h, w], name=name)


def from_blocked(x: te.Tensor, name: str = "nchw") -> te.Tensor:
    N, CB, H, W, b = x.shape

    def elem(n: Any, c: Any, h: Any, w: Any) -> Any:
        return x[n, c // b, h, w, c % b]

    return te.compute((N, CB * b, H, W), elem, name=name)
