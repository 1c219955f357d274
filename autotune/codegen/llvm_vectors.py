"""Vector loads and stores of LLVM IR: contiguous (masked tails on AVX-512), strided spans,
spreads and windows read at once and shuffled into lanes, gathers and scatters lane by lane.
`codegen.llvm` picks which of these an access is (`codegen.llvm_access` classifies it)."""
from __future__ import annotations

import contextlib
from collections.abc import Sequence

import llvmlite.ir as ir

from ..target import MASKED_REGISTER_BYTES
from .llvm_helpers import (
    I32,
    I64,
    PTR,
    VOID,
    call_intrinsic,
    const_like,
    declare,
    element_bytes,
    element_ptr,
    lanes_of,
    shuffle_indices,
    splat,
    vector_of,
)


def _power_of_two_head(count: int, elem: ir.Type, masked_tails: bool) -> int:
    """With masked tails, the largest power of two below `count` where `count` spans more than a
    register and is not itself a power of two (0 otherwise): the access is made in such pieces,
    plain, and only its last, under a register, masked. LLVM forwards a plain store to the next
    load of the same lanes, not a masked one: a row of accumulators stored and reloaded at every
    step of a reduction (a 3x3 stride-1 max pool's 75 columns, one masked access of 128) stays
    in registers so (Zen 4, 2 threads: 291 -> 91 us for 96 x 75 x 75)."""
    if not masked_tails or count <= MASKED_REGISTER_BYTES // element_bytes(elem) or count & (count - 1) == 0:
        return 0
    return 1 << (count.bit_length() - 1)


def _slice(b: ir.IRBuilder, v: ir.Value | None, lo: int, n: int) -> ir.Value | None:
    """Lanes lo to lo + n of vector `v` (a mask's None, all on, stays None)."""
    if v is None:
        return None
    return b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), shuffle_indices(range(lo, lo + n)))


def _concat(b: ir.IRBuilder, head: ir.Value, tail: ir.Value) -> ir.Value:
    """The lanes of `head` then those of `tail` (no longer than head) as one vector."""
    n, m = head.type.count, tail.type.count
    return b.shuffle_vector(head, _widen(b, tail, n, ir.Constant(tail.type, ir.Undefined)),
                            shuffle_indices(range(n + m)))


def _padded_lanes(count: int, masked_tails: bool) -> int:
    """The lanes a contiguous access of `count` lanes is made with: the next power of two with
    masked tails (its extra lanes off), else `count`."""
    return 1 << (count - 1).bit_length() if masked_tails and count > 2 else count


def _widen(b: ir.IRBuilder, v: ir.Value, lanes: int, fill: ir.Value) -> ir.Value:
    """Vector `v` with lanes appended up to `lanes`, taken from `fill` (same type as v)."""
    n = v.type.count
    return b.shuffle_vector(v, fill, shuffle_indices([i if i < n else n for i in range(lanes)]))


def _lanes_on(b: ir.IRBuilder, count: int, lanes: int, mask: ir.Value | None) -> ir.Value:
    """A `lanes`-lane mask: the first `count` lanes `mask`'s (or on), the rest off."""
    if mask is None:
        bits = [ir.Constant(ir.IntType(1), int(i < count)) for i in range(lanes)]
        return ir.Constant(ir.VectorType(ir.IntType(1), lanes), bits)
    return _widen(b, mask, lanes, const_like(mask.type, 0))


def load_vector(b: ir.IRBuilder, ptr: ir.Value, vty: ir.VectorType,
                mask: ir.Value | None = None, masked_tails: bool = False) -> ir.Value:
    """`vty.count` contiguous elements at `ptr` (aligned to one element); masked-off lanes are 0.
    With `masked_tails`, a count that is not a power of two is read as the next one, masked,
    beyond a register in pieces (`_power_of_two_head`)."""
    align = ir.Constant(I32, element_bytes(vty.element))
    head = _power_of_two_head(vty.count, vty.element, masked_tails)
    if head:
        elem, ranges = vty.element, ((0, head), (head, vty.count - head))
        parts = [load_vector(b, element_ptr(b, ptr, ir.Constant(I64, lo), elem), ir.VectorType(elem, n),
                             _slice(b, mask, lo, n), masked_tails) for lo, n in ranges]
        return _concat(b, *parts)
    lanes = _padded_lanes(vty.count, masked_tails)
    if lanes != vty.count:
        wide = vector_of(vty.element, lanes)
        loaded = call_intrinsic(b, "masked.load", [ptr, align, _lanes_on(b, vty.count, lanes, mask),
                                                   const_like(wide, 0)], overload=[wide, PTR], ret=wide)
        return b.shuffle_vector(loaded, ir.Constant(wide, ir.Undefined), shuffle_indices(range(vty.count)))
    if mask is None:
        return b.load(ptr, typ=vty, align=align.constant)
    return call_intrinsic(b, "masked.load", [ptr, align, mask, const_like(vty, 0)],
                          overload=[vty, PTR], ret=vty)


def load_strided(b: ir.IRBuilder, ptr: ir.Value, vty: ir.VectorType, stride: int,
                 mask: ir.Value | None = None) -> ir.Value:
    """Lane i reads ptr[i * stride]: the span from the first lane's element to the last one's
    loaded at once (masked: only the lanes' elements enabled), then shuffled into lanes. A
    gather would load each lane alone; the span never reads past the last lane's element. The
    span is never widened to a masked power of two (`load_vector`'s masked tails): a grouped
    stride-2 conv ran 6x slower so (1024 channels at 14x14, 32 groups: 79 -> 13 GFLOP/s)."""
    lanes = vty.count
    span = (lanes - 1) * stride + 1
    wide = vector_of(vty.element, span)
    picks = shuffle_indices([i * stride for i in range(lanes)])
    if mask is None:
        return b.shuffle_vector(b.load(ptr, typ=wide, align=element_bytes(vty.element)),
                                ir.Constant(wide, ir.Undefined), picks)
    off = ir.Constant(mask.type, [ir.Constant(ir.IntType(1), 0)] * lanes)
    spread = shuffle_indices([i // stride if i % stride == 0 else lanes for i in range(span)])
    wide_mask = b.shuffle_vector(mask, off, spread)
    loaded = load_vector(b, ptr, wide, wide_mask)
    return b.shuffle_vector(loaded, ir.Constant(wide, ir.Undefined), picks)


def load_spread(b: ir.IRBuilder, ptr: ir.Value, vty: ir.VectorType, picks: Sequence[int],
                mask: ir.Value | None = None, masked_tails: bool = False) -> ir.Value:
    """Lane i reads ptr[picks[i]] (min(picks) == 0): the span up to the largest pick loaded at
    once, then shuffled into lanes, where a gather would load each lane alone. Every element of
    the span lies between two that lanes read, so the span never leaves the buffer; masked, an
    element is read where a lane on reads it (the OR of those lanes' masks), and a lane off
    gives 0, as a masked gather's does."""
    lanes, span = vty.count, max(picks) + 1
    wide = ir.VectorType(vty.element, span)      # a vector even of one element (every lane reads it)
    wide_mask = None
    if mask is not None:
        off = ir.Constant(mask.type, [ir.Constant(ir.IntType(1), 0)] * lanes)
        readers: list[list[int]] = [[] for _ in range(span)]
        for lane, j in enumerate(picks):
            readers[j].append(lane)
        for r in range(max(len(x) for x in readers)):
            part = b.shuffle_vector(mask, off, shuffle_indices([x[r] if r < len(x) else lanes for x in readers]))
            wide_mask = part if wide_mask is None else b.or_(wide_mask, part)
    loaded = load_vector(b, ptr, wide, wide_mask, masked_tails)
    value = b.shuffle_vector(loaded, ir.Constant(wide, ir.Undefined), shuffle_indices(picks))
    return value if mask is None else b.select(mask, value, const_like(vty, 0))


WINDOW_LANES = 16      # the lanes of AVX-512's 32-bit permute (vpermps / vpermd)


def load_window(b: ir.IRBuilder, base: ir.Value, index: ir.Value, elem: ir.Type) -> ir.Value:
    """Lane i reads base[index[i]] for 16 indices of 32-bit elements that rise from lane 0 to
    lane 15 by less than 16: the 16 elements from lane 0's, those past lane 15's masked off (they
    may lie past the buffer's end), then permuted by index - index[0] (AVX-512's vpermps)."""
    first = b.extract_element(index, ir.Constant(I32, 0))
    last = b.extract_element(index, ir.Constant(I32, WINDOW_LANES - 1))
    vty, ity = ir.VectorType(elem, WINDOW_LANES), ir.VectorType(I32, WINDOW_LANES)
    width = b.trunc(b.sub(last, first), I32) if first.type != I32 else b.sub(last, first)
    mask = b.icmp_signed("<=", ir.Constant(ity, list(range(WINDOW_LANES))), splat(b, width, WINDOW_LANES))
    window = load_vector(b, element_ptr(b, base, first, elem), vty, mask)
    picks = b.sub(index, splat(b, first, WINDOW_LANES))
    if picks.type != ity:
        picks = b.trunc(picks, ity)
    kind = "sf" if isinstance(elem, ir.FloatType) else "si"
    permute = declare(b.module, f"llvm.x86.avx512.permvar.{kind}.512", vty, [vty, ity])
    return b.call(permute, [window, picks])


def store_vector(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, mask: ir.Value | None = None,
                 masked_tails: bool = False) -> None:
    """`value`'s lanes to contiguous elements at `ptr` (masked: the lanes on); with
    `masked_tails`, a count that is not a power of two is stored as the next one, masked,
    beyond a register in pieces (`_power_of_two_head`)."""
    align = ir.Constant(I32, element_bytes(value.type.element))
    count, elem = value.type.count, value.type.element
    head = _power_of_two_head(count, elem, masked_tails)
    if head:
        for lo, n in ((0, head), (head, count - head)):
            store_vector(b, _slice(b, value, lo, n), element_ptr(b, ptr, ir.Constant(I64, lo), elem),
                         _slice(b, mask, lo, n), masked_tails)
        return
    lanes = _padded_lanes(count, masked_tails)
    if lanes != count:
        mask = _lanes_on(b, count, lanes, mask)
        value = _widen(b, value, lanes, ir.Constant(value.type, ir.Undefined))
    if mask is None:
        b.store(value, ptr, align=align.constant)
    else:
        call_intrinsic(b, "masked.store", [value, ptr, align, mask], overload=[value.type, PTR], ret=VOID)


def gather(b: ir.IRBuilder, base: ir.Value, index: ir.Value, elem: ir.Type) -> ir.Value:
    """Lane i reads base[index[i]] (scalar loads + insertelement; LLVM forms vpgather if it pays)."""
    out = ir.Constant(ir.VectorType(elem, lanes_of(index)), ir.Undefined)
    for lane in range(lanes_of(index)):
        at = ir.Constant(I32, lane)
        ptr = element_ptr(b, base, b.extract_element(index, at), elem)
        out = b.insert_element(out, b.load(ptr, typ=elem, align=element_bytes(elem)), at)
    return out


def scatter(b: ir.IRBuilder, value: ir.Value, base: ir.Value, index: ir.Value,
            mask: ir.Value | None = None) -> None:
    """Lane i writes base[index[i]] in lane order (a repeated index keeps the last lane)."""
    elem = value.type.element
    for lane in range(lanes_of(index)):
        at = ir.Constant(I32, lane)
        ctx = contextlib.nullcontext() if mask is None else b.if_then(b.extract_element(mask, at))
        with ctx:
            ptr = element_ptr(b, base, b.extract_element(index, at), elem)
            b.store(b.extract_element(value, at), ptr, align=element_bytes(elem))
