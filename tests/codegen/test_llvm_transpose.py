"""Transposed blocks in the LLVM backend (`codegen.llvm_transpose`): a run of stores reading
strided vectors from consecutive offsets is read as contiguous rows and shuffled, against numpy,
with odd lane counts, short blocks, predicated lanes and other dtypes."""
from __future__ import annotations

import os
import sys

import numpy as np
from hypothesis import given, settings, strategies as st

from autotune.codegen import build_module
from autotune.codegen.llvm_transpose import first_reads, transposed_blocks
from autotune.ir.nodes import Broadcast, Buffer, Load, PrimFunc, Ramp, Store, seq
from autotune.te.expr import CmpOp, Compare, Const, Var

sys.path.insert(0, os.path.dirname(__file__))
from llvm_ir_helpers import add, c, loop, mul, rng

_LLVM = {"float32": "float", "float64": "double", "int32": "i32"}


def _block_func(k: int, lanes: int, stride: int, offset: int, cut: int, dtype: str, repeats: int):
    """B[r, i, j] = A[offset + r*k + i + j*stride] * 2 + i (0 where j >= lanes - cut), the k
    stores of each r one run."""
    size = offset + (repeats - 1) * k + (k - 1) + (lanes - 1) * stride + 1
    A, B = Buffer("A", (size,), dtype), Buffer("B", (repeats * k * lanes,), dtype)
    r = Var("r")
    keep = Compare(CmpOp.LT, Ramp(c(0), c(1), lanes), Broadcast(c(lanes - cut), lanes)) if cut else None
    two = Broadcast(Const(2, dtype), lanes)
    stores = [Store(B, Ramp(add(mul(r, c(k * lanes)), c(i * lanes)), c(1), lanes),
                    add(mul(Load(A, Ramp(add(mul(r, c(k)), c(offset + i)), c(stride), lanes), keep), two),
                        Broadcast(Const(i, dtype), lanes)))
              for i in range(k)]
    return PrimFunc("block", (A, B), loop(r, repeats, seq(*stores))), size


@settings(max_examples=30, deadline=None)
@given(k=st.integers(2, 16), lanes=st.sampled_from([2, 3, 4, 7, 8, 12, 16]), extra=st.integers(0, 9),
       offset=st.integers(0, 3), cut=st.integers(0, 3), dtype=st.sampled_from(["float32", "float64", "int32"]),
       repeats=st.integers(1, 3))
def test_transposed_blocks_match_numpy(k, lanes, extra, offset, cut, dtype, repeats):
    """The buffer ends at the last block's last element: a row read past it would fault or
    read garbage; masked-off lanes give 0. Only a load left alone is gathered, a lane at a time."""
    stride = max(k, 5) + extra
    cut = min(cut, lanes - 1)
    func, size = _block_func(k, lanes, stride, offset, cut, dtype, repeats)
    f = build_module(func)
    a = (rng.random(size) * 100).astype(dtype)
    out = np.full(repeats * k * lanes, -7, dtype)
    f(a, out)
    i, j = np.meshgrid(np.arange(k), np.arange(lanes), indexing="ij")
    want = np.stack([np.where(j < lanes - cut, a[offset + r * k + i + j * stride], 0) * 2 + i
                     for r in range(repeats)]).astype(dtype)
    np.testing.assert_array_equal(out, want.ravel())
    source = f.get_source("ll-raw")
    assert "shufflevector" in source
    square = 1 << (lanes - 1).bit_length()      # blocks of at most that many loads; one left over is gathered
    assert (f"load {_LLVM[dtype]}," in source) == (k % square == 1)


def test_blocks_are_runs_of_consecutive_offsets_at_most_a_square():
    """Offsets 0-4 and 6-7 are two blocks; a 4-lane load's blocks hold at most 4 loads; an
    offset alone is no block."""
    A = Buffer("A", (4096,), "float32")
    B = Buffer("B", (4096,), "float32")
    offsets = [0, 1, 2, 3, 4, 6, 7, 9]
    stores = [Store(B, Ramp(c(16 * n), c(1), 4), Load(A, Ramp(c(o), c(64), 4))) for n, o in enumerate(offsets)]
    blocks = transposed_blocks(stores)
    starts = [[int(load.index.base.value) for load in block] for block in blocks]
    assert starts == [[0, 1, 2, 3], [6, 7]]


def test_a_run_that_writes_the_loaded_buffer_is_not_transposed():
    """Reading the block first would read A before the run's earlier stores to it."""
    A = Buffer("A", (4096,), "float32")
    stores = [Store(A, Ramp(c(2048 + 16 * i), c(1), 8), Load(A, Ramp(c(i), c(64), 8))) for i in range(8)]
    assert transposed_blocks(stores) == []


def test_loads_of_different_strides_or_predicates_are_different_blocks():
    A, B = Buffer("A", (4096,), "float32"), Buffer("B", (4096,), "float32")
    x = Var("x")
    keep = Compare(CmpOp.LT, Ramp(c(0), c(1), 8), Broadcast(x, 8))
    stores = ([Store(B, Ramp(c(16 * i), c(1), 8), Load(A, Ramp(c(i), c(64), 8))) for i in range(4)]
              + [Store(B, Ramp(c(512 + 16 * i), c(1), 8), Load(A, Ramp(c(i + 4), c(64), 8), keep)) for i in range(4)]
              + [Store(B, Ramp(c(1024 + 16 * i), c(1), 8), Load(A, Ramp(c(i + 8), c(65), 8))) for i in range(4)])
    assert sorted(len(block) for block in transposed_blocks(stores)) == [4, 4, 4]


def test_each_block_is_read_just_before_its_first_store():
    """Read all at once, a run's blocks would outnumber the registers and spill."""
    A, B = Buffer("A", (4096,), "float32"), Buffer("B", (4096,), "float32")
    offsets = [0, 1, 2, 3, 16, 17, 18, 19]
    stores = [Store(B, Ramp(c(16 * n), c(1), 4), Load(A, Ramp(c(o), c(64), 4))) for n, o in enumerate(offsets)]
    blocks = transposed_blocks(stores)
    assert [len(reads) for reads in first_reads(stores, blocks)] == [1, 0, 0, 0, 1, 0, 0, 0]
