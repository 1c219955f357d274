"""The LLVM backend's vector loads and stores against numpy: gathers, scatters, predicated
tails and strided loads, in PrimFuncs built by hand from the loop-IR nodes."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from autotune.codegen import BuiltFunction, build_module, jit
from autotune.codegen.llvm import REGISTER_FILE_BYTES, emit_module, entry_symbol
from autotune.ir.nodes import Allocate, Broadcast, Buffer, Load, PrimFunc, Ramp, Store, seq
from autotune.te.expr import Binary, BinOp, CmpOp, Compare, Const, Var

sys.path.insert(0, os.path.dirname(__file__))
from llvm_ir_helpers import add, c, loop, mul, rng  # noqa: E402


# ---- vectors ----------------------------------------------------------------------------------

def test_vector_loop_with_gather_and_broadcast():
    n, lanes = 120, 8
    A, B = Buffer("A", (3 * n,), "float32"), Buffer("B", (n,), "float32")
    S = Buffer("S", (1,), "float32")
    i = Var("i")
    out_idx = Ramp(mul(i, c(lanes)), c(1), lanes)
    gather_idx = Ramp(mul(i, c(3 * lanes)), c(3), lanes)          # A[3*j]: a strided gather
    value = add(mul(Load(A, gather_idx), Broadcast(Const(2.0, "float32"), lanes)), Broadcast(Load(S, c(0)), lanes))
    f = build_module(PrimFunc("gather", (A, S, B), loop(i, n // lanes, Store(B, out_idx, value))))
    a, s = rng.random(3 * n, np.float32), np.array([0.25], np.float32)
    out = np.zeros(n, np.float32)
    f(a, s, out)
    np.testing.assert_allclose(out, a[::3] * 2 + 0.25, rtol=1e-6)
    assert "<8 x float>" in f.get_source("ll")
    assert "<8 x float>" in f.get_source("ll-raw")
    assert len(f.get_source("asm")) > 0


def test_vector_scatter_and_contiguous_vector_store():
    n, lanes = 64, 8
    A, B = Buffer("A", (n,), "int32"), Buffer("B", (n,), "int32")
    i = Var("i")
    rev = Ramp(add(mul(i, c(lanes)), c(lanes - 1)), c(-1), lanes)   # reversed within each block
    f = build_module(PrimFunc("scatter", (A, B), loop(i, n // lanes, Store(B, rev, Load(A, Ramp(mul(i, c(lanes)), c(1), lanes))))))
    a, out = np.arange(n, dtype=np.int32), np.zeros(n, np.int32)
    f(a, out)
    np.testing.assert_array_equal(out, a.reshape(-1, lanes)[:, ::-1].ravel())


def test_predicated_vector_tail():
    n, lanes = 29, 8            # 4 blocks, the last one 5 lanes long
    A, B = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32")
    i = Var("i")
    idx = Ramp(mul(i, c(lanes)), c(1), lanes)
    pred = Compare(CmpOp.LT, idx, Broadcast(c(n), lanes))
    strided = Ramp(mul(i, c(lanes)), c(1), lanes)
    value = add(Load(A, idx, pred), Broadcast(Const(1.0, "float32"), lanes))
    body = loop(i, 4, Store(B, strided, value, pred))
    f = build_module(PrimFunc("tail", (A, B), body))
    a, out = rng.random(n, np.float32), np.zeros(n, np.float32)
    f(a, out)
    np.testing.assert_allclose(out, a + 1, rtol=1e-6)
    assert "masked.load" in f.get_source("ll-raw")


def test_predicated_gather_and_scatter():
    n, lanes = 20, 4
    A, B = Buffer("A", (2 * n,), "float32"), Buffer("B", (2 * n,), "float32")
    i = Var("i")
    idx = Ramp(mul(i, c(2 * lanes)), c(2), lanes)
    pred = Compare(CmpOp.LT, idx, Broadcast(c(2 * n - 9), lanes))
    body = loop(i, n // lanes, Store(B, idx, mul(Load(A, idx, pred), Broadcast(Const(3.0, "float32"), lanes)), pred))
    f = build_module(PrimFunc("pgather", (A, B), body))
    a, out = rng.random(2 * n, np.float32), np.full(2 * n, -1, np.float32)
    f(a, out)
    expect = np.full(2 * n, -1, np.float32)
    sel = np.arange(0, 2 * n, 2)
    sel = sel[sel < 2 * n - 9]
    expect[sel] = a[sel] * 3
    np.testing.assert_allclose(out, expect, rtol=1e-6)


def test_predicated_broadcast_reads_one_element():
    """A broadcast element under a lane mask (a tail tile's weight) is one scalar load, not a
    gather; where no lane is on its address is never read (here past the end of W)."""
    n, lanes = 3, 8
    W, B = Buffer("W", (n,), "float32"), Buffer("B", ((n + 1) * lanes,), "float32")
    i = Var("i")
    out = Ramp(mul(i, c(lanes)), c(1), lanes)
    on = Compare(CmpOp.LT, Broadcast(i, lanes), Broadcast(c(n), lanes))     # off for i == n
    body = loop(i, n + 1, Store(B, out, Load(W, Broadcast(i, lanes), on)))
    f = build_module(PrimFunc("bcast", (W, B), body))
    w, got = rng.random(n, np.float32), np.full((n + 1) * lanes, -1, np.float32)
    f(w, got)
    np.testing.assert_array_equal(got, np.repeat(np.append(w, 0), lanes))
    assert "gather" not in f.get_source("ll-raw") and "vector.reduce.or" in f.get_source("ll-raw")


@settings(max_examples=25, deadline=None)
@given(stride=st.integers(2, 5), lanes=st.sampled_from([2, 4, 8, 16]), blocks=st.integers(1, 5),
       offset=st.integers(0, 3), cut=st.integers(0, 40))
def test_short_strided_loads_match_numpy(stride, lanes, blocks, offset, cut):
    """Strides 2-4 load one span and shuffle it (stride 5 still gathers); the buffer ends at the
    last lane's element, so a span reaching past it would read out of bounds; with a predicate
    the masked-off lanes read nothing and give 0."""
    n = blocks * lanes
    size = offset + (n - 1) * stride + 1
    A, B, P = Buffer("A", (size,), "float32"), Buffer("B", (n,), "float32"), Buffer("P", (n,), "float32")
    i = Var("i")
    out = Ramp(mul(i, c(lanes)), c(1), lanes)
    src = Ramp(add(mul(i, c(lanes * stride)), c(offset)), c(stride), lanes)
    keep = Compare(CmpOp.LT, out, Broadcast(c(n - cut), lanes))
    body = loop(i, blocks, seq(Store(B, out, Load(A, src)), Store(P, out, Load(A, src, keep))))
    f = build_module(PrimFunc("strided", (A, B, P), body))
    a = rng.random(size, np.float32)
    full, masked = np.zeros(n, np.float32), np.full(n, -1, np.float32)
    f(a, full, masked)
    expect = a[offset::stride][:n]
    np.testing.assert_array_equal(full, expect)
    np.testing.assert_array_equal(masked, np.where(np.arange(n) < n - cut, expect, 0))
    span = f"<{(lanes - 1) * stride + 1} x float>"
    assert (span in f.get_source("ll-raw")) == (stride <= 4)


@settings(max_examples=40, deadline=None)
@given(lanes=st.sampled_from([4, 8, 16]), num=st.integers(0, 6), den=st.integers(1, 5), shift=st.integers(-4, 4),
       step=st.integers(0, 9), blocks=st.integers(1, 4), cut=st.integers(0, 20))
def test_lanes_at_constant_offsets_from_one_scalar_read_one_span(lanes, num, den, shift, step, blocks, cut):
    """B[i*lanes + l] = A[i*step + 4 + (l*num + shift) // den]: every lane one scalar plus a
    constant (a resize's source columns). Within the short-stride span that is one contiguous
    load and a shuffle, no per-lane loads; A ends at the last element a lane reads, and with a
    predicate the masked-off lanes (even those sharing an element with a lane on) give 0."""
    n = blocks * lanes
    offsets = [(lane * num + shift) // den for lane in range(lanes)]
    sources = [b * step + 4 + o for b in range(blocks) for o in offsets]
    A, B, P = Buffer("A", (max(sources) + 1,), "float32"), Buffer("B", (n,), "float32"), Buffer("P", (n,), "float32")
    i = Var("i")
    out = Ramp(mul(i, c(lanes)), c(1), lanes)
    lane_part = Binary(BinOp.FLOORDIV, Ramp(c(shift), c(num), lanes), Broadcast(c(den), lanes))
    src = add(Broadcast(add(mul(i, c(step)), c(4)), lanes), lane_part)
    keep = Compare(CmpOp.LT, out, Broadcast(c(n - cut), lanes))
    body = loop(i, blocks, seq(Store(B, out, Load(A, src)), Store(P, out, Load(A, src, keep))))
    f = build_module(PrimFunc("spread", (A, B, P), body))
    a = rng.random(max(sources) + 1, np.float32)
    full, masked = np.zeros(n, np.float32), np.full(n, -1, np.float32)
    f(a, full, masked)
    expect = a[sources]
    np.testing.assert_array_equal(full, expect)
    np.testing.assert_array_equal(masked, np.where(np.arange(n) < n - cut, expect, 0))
    within = max(offsets) - min(offsets) <= (lanes - 1) * 4
    assert ("extractelement" not in f.get_source("ll-raw")) == within


@settings(max_examples=30, deadline=None)
@given(num=st.integers(1, 15), den=st.integers(1, 97), step=st.integers(1, 50), blocks=st.integers(1, 4),
       offset=st.integers(0, 20))
def test_rising_lanes_within_a_vector_read_one_window(num, den, step, blocks, offset):
    """B[16 i + l] = A[(i * step + offset + l * num) // den]: no period of 16 lanes (a 37 -> 74
    align_corners resize's source columns), so no constant offsets, but the lanes rise by less
    than 16: one masked load from lane 0's element and a permute where the CPU has AVX-512's
    vpermps (else a gather). A ends at lane 15's element of the last block."""
    lanes = 16
    n = blocks * lanes
    sources = [(blk * step + offset + lane * num) // den for blk in range(blocks) for lane in range(lanes)]
    A, B = Buffer("A", (max(sources) + 1,), "float32"), Buffer("B", (n,), "float32")
    i = Var("i")
    src = Binary(BinOp.FLOORDIV, Ramp(add(mul(i, c(step)), c(offset)), c(num), lanes), Broadcast(c(den), lanes))
    f = build_module(PrimFunc("window", (A, B), loop(i, blocks, Store(B, Ramp(mul(i, c(lanes)), c(1), lanes),
                                                                       Load(A, src)))))
    a, out = rng.random(max(sources) + 1, np.float32), np.zeros(n, np.float32)
    f(a, out)
    np.testing.assert_array_equal(out, a[sources])
    window = (15 * num) // den + 1 < lanes
    assert ("permvar" in f.get_source("ll-raw")) == (window and jit.permutes_vectors())


def build_masked_tails(func: PrimFunc, masked_tails: bool) -> BuiltFunction:
    """`func` compiled with masked tails on or off, whatever this CPU's default."""
    triple, layout = jit.triple_and_layout()
    text = str(emit_module(func, parallel=False, triple=triple, data_layout=layout, masked_tails=masked_tails))
    return BuiltFunction(func, jit.compile_ir(text, entry_symbol(func)), text)


def pieces(lanes):
    """The lane counts of the pieces an access of `lanes` is made in with masked tails:
    powers of two while more than a register (16 floats) and not a power of two, then the rest."""
    out = []
    while lanes > 16 and lanes & (lanes - 1):
        out.append(1 << (lanes.bit_length() - 1))
        lanes -= out[-1]
    return [*out, lanes]


@settings(max_examples=30, deadline=None)
@given(lanes=st.sampled_from([3, 5, 6, 7, 12, 14, 24, 28, 33, 75, 80]), blocks=st.integers(1, 4), cut=st.integers(0, 30),
       masked_tails=st.booleans())
def test_odd_lane_counts_are_one_masked_access_of_the_next_power_of_two(lanes, blocks, cut, masked_tails):
    """With masked tails (AVX-512), a contiguous access of 14 lanes is one masked access of 16
    (LLVM would split it into 8 + 4 + 2); the buffers end at the last lane, and a predicate
    still masks its lanes. Beyond a register, plain pieces of a power of two and the rest so
    (75: 64 plain + 11 of a masked 16; 80: 64 + 16, none masked). A local buffer (a register
    tile) keeps plain loads and stores, which LLVM promotes to registers."""
    check_odd_lanes(lanes, blocks, cut, masked_tails)


@pytest.mark.parametrize("lanes", [17, 33])
def test_a_piece_of_one_lane_past_a_power_of_two(lanes):
    check_odd_lanes(lanes, 3, 5, True)


def check_odd_lanes(lanes, blocks, cut, masked_tails):
    n = blocks * lanes
    A, B, P = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32"), Buffer("P", (n,), "float32")
    T = Buffer("T", (lanes,), "float32", "local")
    i = Var("i")
    at, tile = Ramp(mul(i, c(lanes)), c(1), lanes), Ramp(c(0), c(1), lanes)
    keep = Compare(CmpOp.LT, at, Broadcast(c(n - cut), lanes))
    twice = mul(Load(A, at), Broadcast(Const(2.0, "float32"), lanes))
    body = loop(i, blocks, Allocate(T, seq(Store(T, tile, twice), Store(B, at, Load(T, tile)),
                                           Store(P, at, Load(A, at, keep), keep))))
    f = build_masked_tails(PrimFunc("odd_lanes", (A, B, P), body), masked_tails)
    a = rng.random(n, np.float32)
    twice_a, masked = np.zeros(n, np.float32), np.full(n, -1, np.float32)
    f(a, twice_a, masked)
    np.testing.assert_array_equal(twice_a, a * 2)
    np.testing.assert_array_equal(masked, np.where(np.arange(n) < n - cut, a, -1))
    raw = f.get_source("ll-raw")
    *heads, rest = pieces(lanes) if masked_tails else [lanes]
    wide = 1 << (rest - 1).bit_length()
    assert (f"masked.load.v{wide}f32" in raw) == (masked_tails or wide == lanes)    # P's predicated load
    assert (f"masked.store.v{wide}f32" in raw) == (masked_tails or wide == lanes)
    assert all(f"load <{n} x float>" in raw and f"store <{n} x float>" in raw for n in heads)   # A and B
    assert f"store <{lanes} x float>" in raw              # the local tile: a plain store


def test_a_local_buffer_larger_than_the_register_file_is_memory():
    """A stage computed per task (a strided conv's input phases) is a local buffer that no
    register file holds: its 14-lane accesses are one masked access of 16, as for memory."""
    lanes, rows = 14, REGISTER_FILE_BYTES // (14 * 4) + 1
    A, B = Buffer("A", (rows * lanes,), "float32"), Buffer("B", (rows * lanes,), "float32")
    T = Buffer("T", (rows * lanes,), "float32", "local")
    i = Var("i")
    at = Ramp(mul(i, c(lanes)), c(1), lanes)
    body = Allocate(T, seq(loop(i, rows, Store(T, at, Load(A, at))), loop(i, rows, Store(B, at, Load(T, at)))))
    f = build_masked_tails(PrimFunc("big_local", (A, B), body), True)
    a = rng.random(rows * lanes, np.float32)
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_array_equal(b, a)
    raw = f.get_source("ll-raw")
    assert f"store <{lanes} x float>" not in raw and raw.count("masked.store.v16f32") >= 2


def test_a_large_local_buffer_that_accumulates_keeps_plain_accesses():
    """A row of accumulators larger than the register file (a blocked conv's 10-lane outputs, 64
    columns) is updated tile by tile, each tile in registers while its reduction runs: masked
    loads and stores would keep every update in memory (30x slower)."""
    lanes, rows, steps = 10, REGISTER_FILE_BYTES // (10 * 4) + 1, 3
    A, B = Buffer("A", (steps * lanes,), "float32"), Buffer("B", (rows * lanes,), "float32")
    T = Buffer("T", (rows * lanes,), "float32", "local")
    i, k = Var("i"), Var("k")
    at = Ramp(mul(i, c(lanes)), c(1), lanes)
    update = Store(T, at, add(Load(T, at), Load(A, Ramp(mul(k, c(lanes)), c(1), lanes))))
    body = Allocate(T, seq(loop(i, rows, Store(T, at, Broadcast(Const(0.0, "float32"), lanes))),
                           loop(i, rows, loop(k, steps, update)), loop(i, rows, Store(B, at, Load(T, at)))))
    f = build_masked_tails(PrimFunc("accumulated_local", (A, B), body), True)
    a = rng.random(steps * lanes, np.float32)
    b = np.zeros(rows * lanes, np.float32)
    f(a, b)
    np.testing.assert_allclose(b, np.tile(a.reshape(steps, lanes).sum(0), rows), rtol=1e-6)
    raw = f.get_source("ll-raw")
    assert f"store <{lanes} x float>" in raw and f"load <{lanes} x float>" in raw    # T's; A and B masked


def register_tile(accumulators: int, steps: int) -> PrimFunc:
    """Y[a] = sum_k X[k, a] * W[k] for `accumulators` 8-lane vectors, the shape of a conv's
    register tile: a local tile updated in place by a loop of `steps` broadcast multiply-adds."""
    lanes = 8
    X, W = Buffer("X", (steps * accumulators,), "float32"), Buffer("W", (steps * lanes,), "float32")
    Y, T = Buffer("Y", (accumulators * lanes,), "float32"), Buffer("T", (accumulators * lanes,), "float32", "local")
    k = Var("k")
    at = [Ramp(c(a * lanes), c(1), lanes) for a in range(accumulators)]
    weights = Load(W, Ramp(mul(k, c(lanes)), c(1), lanes))
    inputs = [Broadcast(Load(X, add(mul(k, c(accumulators)), c(a))), lanes) for a in range(accumulators)]
    update = seq(*[Store(T, at[a], add(Load(T, at[a]), mul(inputs[a], weights))) for a in range(accumulators)])
    zero, out = Broadcast(Const(0.0, "float32"), lanes), [Store(Y, at[a], Load(T, at[a])) for a in range(accumulators)]
    body = seq(*[Store(T, at[a], zero) for a in range(accumulators)], loop(k, steps, update), *out)
    return PrimFunc("tile", (X, W, Y), Allocate(T, body))


def test_llvm_does_not_unroll_the_reduction_loop_of_a_register_tile_of_half_the_registers():
    """LLVM partially unrolls a long reduction loop, and then hoists the second copy's loads
    above the first's multiply-adds: with 16 registers a 9-accumulator tile spilled 3 of them.
    The loop of a tile of at least half the registers carries llvm.loop.unroll.disable; a loop of
    few updates in all (LLVM flattens it) and a small tile keep the unroller; results match numpy
    either way."""
    triple, layout = jit.triple_and_layout()

    def marked(func: PrimFunc, registers: int) -> bool:
        text = str(emit_module(func, parallel=False, triple=triple, data_layout=layout, vector_registers=registers))
        return "llvm.loop.unroll.disable" in text

    assert marked(register_tile(9, 32), 16)
    assert not marked(register_tile(9, 32), 32)          # AVX-512: 9 of 32 registers
    assert marked(register_tile(16, 32), 32)
    assert not marked(register_tile(7, 32), 16)
    assert marked(register_tile(11, 7), 16)              # a row of 7 taps: unrolled 3 x 2 and a remainder
    assert not marked(register_tile(9, 3), 16)           # flattened by LLVM: its copies share loads
    for accumulators, steps in ((9, 32), (11, 7), (9, 3), (7, 33)):
        f = build_module(register_tile(accumulators, steps))
        x, w = rng.random(steps * accumulators, np.float32), rng.random(steps * 8, np.float32)
        out = np.zeros(accumulators * 8, np.float32)
        f(x, w, out)
        want = x.reshape(steps, accumulators).T @ w.reshape(steps, 8)
        np.testing.assert_allclose(out, want.ravel(), rtol=1e-5)
