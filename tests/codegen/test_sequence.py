"""Kernels called in order from one native function (`autotune.codegen.sequence`): fixed arrays
bound by address, per-call arrays by name, thread counts set per kernel, and the first failing
kernel stopping the sequence with its status."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from autotune.codegen import build_module
from autotune.codegen.sequence import NativeSequence
from autotune.ir.nodes import Allocate, Buffer, ForKind, Load, PrimFunc, Store, seq
from autotune.te.expr import Binary, BinOp, Var

sys.path.insert(0, os.path.dirname(__file__))
from llvm_ir_helpers import add, c, elementwise, loop, mul

N = 1001


def parallel_add_one(name: str):
    A, B = Buffer("A", (N,), "float32"), Buffer("B", (N,), "float32")
    i = Var("i")
    return build_module(PrimFunc(name, (A, B), loop(i, N, Store(B, i, add(Load(A, i), c(1.0, "float32"))),
                                                    ForKind.PARALLEL)))


def failing_kernel():
    """Allocates 2**52 bytes on the heap: aligned_alloc fails, the kernel returns its status."""
    A, B = Buffer("A", (N,), "float32"), Buffer("B", (N,), "float32")
    T = Buffer("T", (2**25, 2**25), "float32", "global")
    i = Var("i")
    reversed_i = Binary(BinOp.SUB, c(N - 1), i)          # not a plain copy, which LLVM would see through
    return build_module(PrimFunc("huge", (A, B), Allocate(T, seq(loop(i, N, Store(T, i, Load(A, i))),
                                                                 loop(i, N, Store(B, i, Load(T, reversed_i)))))))


def test_fixed_and_per_call_arrays_in_order():
    triple = elementwise("seq_triple", "float32", N, lambda x: mul(x, c(3.0, "float32")))
    plus_one = parallel_add_one("seq_plus_one")
    mid = np.zeros(N, np.float32)                     # fixed: bound by address once
    s = NativeSequence([triple.native_call("x", mid), plus_one.native_call(mid, "y")], keep=(triple, plus_one))
    assert s.names == ("x", "y")
    for threads in (1, 2):
        x, y = np.random.default_rng(threads).random(N, dtype=np.float32), np.zeros(N, np.float32)
        assert s([x.ctypes.data, y.ctypes.data], threads) is None
        np.testing.assert_allclose(y, x * 3 + 1, rtol=1e-6)


def test_the_first_failing_kernel_stops_the_sequence_with_its_status():
    triple = elementwise("seq_triple2", "float32", N, lambda x: mul(x, c(3.0, "float32")))
    huge, plus_one = failing_kernel(), parallel_add_one("seq_plus_one2")
    mid, scratch = np.zeros(N, np.float32), np.zeros(N, np.float32)
    s = NativeSequence([triple.native_call("x", mid), huge.native_call(mid, scratch), plus_one.native_call(mid, "y")])
    x, y = np.ones(N, np.float32), np.zeros(N, np.float32)
    index, status = s([x.ctypes.data, y.ctypes.data], 2)
    assert index == 1 and status != 0
    np.testing.assert_array_equal(mid, 3.0)         # the kernel before it ran
    assert not y.any()                                # the one after it did not
    with pytest.raises(MemoryError, match=r"huge: could not allocate 4503599627370496 bytes for buffer T"):
        raise huge.status_error(status)


def test_fixed_arrays_are_checked_when_the_call_is_made():
    triple = elementwise("seq_triple3", "float32", N, lambda x: mul(x, c(3.0, "float32")))
    with pytest.raises(ValueError, match=r"argument 1 \(B\): expected shape"):
        triple.native_call("x", np.zeros(N + 1, np.float32))


def test_a_model_run_raises_the_failing_kernels_own_error():
    """The graph runtime's native steps: per-call arrays by name, fixed ones bound, and a failing
    kernel's status raised as that kernel's MemoryError."""
    from autotune.graph.executor import _native_sequence, _Step

    triple, huge = elementwise("seq_triple4", "float32", N, lambda x: mul(x, c(3.0, "float32"))), failing_kernel()
    buffers = {"mid": np.zeros(N, np.float32)}
    steps = [(0, _Step(triple, ("x", "mid"), triple.bind_free(None, buffers["mid"]), ("x",))),
             (1, _Step(huge, ("mid", "y"), huge.bind_free(buffers["mid"], None), ("y",)))]
    native = _native_sequence(steps, buffers)
    assert native is not None
    env = {"x": np.ones(N, np.float32), "y": np.zeros(N, np.float32)}
    with pytest.raises(MemoryError, match="huge: could not allocate"):
        native.run(env)
    np.testing.assert_array_equal(buffers["mid"], 3.0)
