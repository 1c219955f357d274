"""Which way a vector index reads memory, for the LLVM codegen's loads and stores: one contiguous
vector, a short stride's span and shuffle, a span of constant offsets from one scalar and shuffle,
a window of rising indices and a permute (AVX-512), or else a gather of one load per lane."""
from __future__ import annotations

from typing import TypeGuard

from ..dtype import dtype_info
from ..ir.lane_offsets import lane_offsets, rising_spread
from ..ir.nodes import Load, Ramp
from ..target import MAX_SHUFFLED_STRIDE
from ..te.expr import Binary, BinOp, Const, Expr
from .jit import permutes_vectors
from .llvm_vectors import WINDOW_LANES


def is_contiguous(index: Expr) -> TypeGuard[Ramp]:
    return (isinstance(index, Ramp) and isinstance(index.stride, Const)
            and index.stride.value == 1)


def is_short_stride(index: Expr) -> TypeGuard[Ramp]:
    """A constant stride of 2 to MAX_SHUFFLED_STRIDE: loaded as one span and shuffled, not gathered."""
    return (isinstance(index, Ramp) and isinstance(index.stride, Const)
            and 2 <= index.stride.value <= MAX_SHUFFLED_STRIDE)


def short_spread(index: Expr) -> tuple[Expr, list[int]] | None:
    """(first element, each lane's element after it) of a vector index whose lanes are one scalar
    plus constants spanning at most the elements a short stride's span loads (a resize's source
    columns: a span load and a shuffle, not a gather); else None."""
    if index.lanes == 1 or (split := lane_offsets(index)) is None:
        return None
    base, offsets = split
    lo = min(offsets)
    if max(offsets) - lo > (index.lanes - 1) * MAX_SHUFFLED_STRIDE:
        return None
    start: Expr = Const(lo, index.dtype) if base is None else Binary(BinOp.ADD, base, Const(lo, index.dtype))
    return start, [o - lo for o in offsets]


def rising_window(e: Load) -> bool:
    """Whether an unmasked 16-lane load of 32-bit elements has indices that rise from lane to
    lane within one vector's width (`lane_offsets.rising_spread`), on a CPU that permutes a
    vector by indices: one load of the window from lane 0's element and a permute, not 16 loads."""
    spread = rising_spread(e.index) if e.lanes == WINDOW_LANES else None
    return (spread is not None and spread < WINDOW_LANES and dtype_info(e.dtype).bytes == 4
            and permutes_vectors())
