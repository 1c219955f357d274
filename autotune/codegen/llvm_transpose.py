"""Transposed blocks in the LLVM codegen. A run of stores whose values read n-lane vectors at one
constant stride K from consecutive offsets (an unrolled loop over i of loads whose lane j reads
src[b + i + j*K]) reads a k x n block of src transposed: the repack of X and the unpack of the
blocked conv layout (`schedules.cpu.conv2d_nchwc`). Gathered, every lane is a load and an insert
of its own (or one vgatherdps per vector). Here the block is read as its n contiguous rows of k
elements and transposed in registers: log2(N) stages of two-vector shuffles, N the next power of
two of n and k, N shuffles each."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from llvmlite import ir

from ..ir.functor import structural_equal, written_buffers
from ..ir.nodes import Buffer, Load, Ramp, Store
from ..ir.passes.simplify import linear
from ..target import MAX_SHUFFLED_STRIDE
from ..te.expr import Const, Expr
from ..te.traversal import walk
from . import llvm_helpers as h, llvm_vectors as vec
from .llvm_helpers import I32

if TYPE_CHECKING:
    from .llvm import LLVMCodegen


class _SameVars(dict):
    """A structural_equal variable map that matches each variable only to itself."""

    def setdefault(self, key: Any, default: Any = None) -> Any:
        return key


def _same(a: Expr | None, b: Expr | None) -> bool:
    if a is None or b is None:
        return a is b
    return structural_equal(a, b, _SameVars())


def _split_offset(e: Expr) -> tuple[frozenset, int]:
    """e as (its non-constant terms, as a comparable key; its constant), by the simplifier's
    linear form: bases that differ by a constant have equal keys."""
    terms, c0 = linear(e)
    return frozenset((key, coeff) for key, (_, coeff) in terms.items()), int(c0)


@dataclass
class _Family:
    """Strided loads of one buffer, stride, lane count and predicate, whose bases differ by
    constants: `loads` maps each base's constant offset to its load."""

    buffer: Buffer
    stride: int
    lanes: int
    rest: frozenset
    predicate: Expr | None
    loads: dict[int, Load] = field(default_factory=dict)

    def takes(self, load: Load, stride: int, rest: frozenset) -> bool:
        return (load.buffer is self.buffer and stride == self.stride and load.lanes == self.lanes
                and rest == self.rest and _same(load.predicate, self.predicate))


def _loads(node: Any) -> list[Load]:
    found: list[Load] = []
    walk(node, lambda n: found.append(n) if isinstance(n, Load) else None)
    return found


def _strided(load: Load) -> bool:
    return (load.lanes > 1 and load.dtype != "bool" and isinstance(load.index, Ramp)
            and isinstance(load.index.stride, Const) and load.index.stride.value > MAX_SHUFFLED_STRIDE)


def transposed_blocks(stores: Sequence[Store]) -> list[list[Load]]:
    """The blocks among the loads of `stores`: runs of 2 to N loads at consecutive offsets, in
    offset order. Loads of a buffer that one of the stores writes are left alone (they would be
    read before that store)."""
    written: set[Buffer] = set()
    for store in stores:
        written |= written_buffers(store)
    families: list[_Family] = []
    for load in (load for store in stores for load in _loads(store.value) if _strided(load)):
        if load.buffer in written:
            continue
        ramp = load.index
        assert isinstance(ramp, Ramp) and isinstance(ramp.stride, Const)
        stride = int(ramp.stride.value)
        rest, offset = _split_offset(ramp.base)
        family = next((f for f in families if f.takes(load, stride, rest)), None)
        if family is None:
            family = _Family(load.buffer, stride, load.lanes, rest, load.predicate)
            families.append(family)
        family.loads.setdefault(offset, load)
    runs: list[list[Load]] = []
    for family in families:
        size, offsets = _square(family.lanes), sorted(family.loads)
        run = [offsets[0]]
        for offset in offsets[1:]:
            if offset == run[-1] + 1 and len(run) < size:
                run.append(offset)
            else:
                runs.append([family.loads[o] for o in run])
                run = [offset]
        runs.append([family.loads[o] for o in run])
    return [run for run in runs if len(run) > 1]


def first_reads(stores: Sequence[Store], blocks: list[list[Load]]) -> list[list[list[Load]]]:
    """For each store, the blocks to read just before it: those it is the first to use. Read all
    at once, the blocks of a run (64 vectors for a 32-channel unpack of two column vectors)
    outnumber the registers and spill."""
    owner = {id(load): n for n, block in enumerate(blocks) for load in block}
    read: set[int] = set()
    before: list[list[list[Load]]] = []
    for store in stores:
        found = [owner[id(load)] for load in _loads(store.value) if id(load) in owner]
        fresh = [n for n in dict.fromkeys(found) if n not in read]
        read.update(fresh)
        before.append([blocks[n] for n in fresh])
    return before


def _square(lanes: int) -> int:
    return 1 << (lanes - 1).bit_length()


def transpose(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """The columns of N rows of N lanes (N a power of two): stage `bit` swaps that bit between
    row and column index, element (r, c) moving to (r ^ bit, c ^ bit) where the bits differ."""
    n = len(rows)
    bit = 1
    while bit < n:
        out = list(rows)
        for r in range(n):
            if r & bit:
                continue
            low = [c if not c & bit else n + (c ^ bit) for c in range(n)]
            high = [n + c if c & bit else c ^ bit for c in range(n)]
            out[r] = b.shuffle_vector(rows[r], rows[r | bit], h.shuffle_indices(low))
            out[r | bit] = b.shuffle_vector(rows[r], rows[r | bit], h.shuffle_indices(high))
        rows, bit = out, bit * 2
    return rows


def read_block(b: ir.IRBuilder, base: ir.Value, start: ir.Value, stride: int, block: list[Load],
               elem: ir.Type, predicate: ir.Value | None) -> list[ir.Value]:
    """The values of `block`'s loads (k loads of n lanes; load i reads base[start + i + j*stride]
    at lane j, where `predicate` (n lanes, or one) holds; 0 elsewhere), from n row reads."""
    k, lanes = len(block), block[0].lanes
    size = _square(max(k, lanes))
    vty = h.vector_of(elem, size)
    first_k = ir.Constant(ir.VectorType(ir.IntType(1), size), [ir.Constant(ir.IntType(1), int(i < k))
                                                                for i in range(size)])
    rows = []
    for j in range(lanes):
        on = first_k if k < size else None
        if predicate is not None:
            lane = predicate if h.lanes_of(predicate) == 1 else b.extract_element(predicate, ir.Constant(I32, j))
            on = b.and_(h.splat(b, lane, size), first_k)
        ptr = h.element_ptr(b, base, b.add(start, ir.Constant(start.type, j * stride)), elem)
        rows.append(vec.load_vector(b, ptr, vty, on))
    rows += [ir.Constant(vty, ir.Undefined)] * (size - lanes)
    columns = transpose(b, rows)[:k]
    if size == lanes:
        return columns
    first = h.shuffle_indices(range(lanes))
    return [b.shuffle_vector(c, ir.Constant(vty, ir.Undefined), first) for c in columns]


def emit_store_run(cg: LLVMCodegen, run: Sequence[Store]) -> None:
    """A run of stores; each transposed block their loads read is read just before the first
    store that uses it, its values left in `cg.read` for the codegen's loads."""
    blocks = transposed_blocks(run)
    for store, reads in zip(run, first_reads(run, blocks)):
        for block in reads:
            first = block[0]
            ramp = cast(Ramp, first.index)
            predicate = None if first.predicate is None else cg.expr(first.predicate)
            values = read_block(cg.b, cg.buffer_ptr(first.buffer), cg.index(ramp.base),
                                int(cast(Const, ramp.stride).value), block, h.memory_type(first.dtype), predicate)
            cg.read.update((id(load), value) for load, value in zip(block, values))
        cg.stmt(store)
    for block in blocks:
        for load in block:
            del cg.read[id(load)]
