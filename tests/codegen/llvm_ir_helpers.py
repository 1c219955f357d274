"""Helpers shared by the LLVM backend tests: small loop-IR builders (imported via sys.path)."""
from __future__ import annotations

import numpy as np

from autotune.codegen import build_module
from autotune.ir.nodes import Buffer, For, ForKind, Load, PrimFunc, Ramp, Store
from autotune.te.expr import Binary, BinOp, Const, Var

ADD, SUB, MUL, DIV = BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV
rng = np.random.default_rng(0)


def c(value, dtype="int32"):
    return Const(value, dtype)


def add(a, b):
    return Binary(ADD, a, b)


def mul(a, b):
    return Binary(MUL, a, b)


def loop(var, extent, body, kind=ForKind.SERIAL):
    return For(var, extent, kind, body)


def elementwise(name, dtype, n, fn, out_dtype=None):
    """B[i] = fn(A[i]) for i < n, scalar code."""
    A, B = Buffer("A", (n,), dtype), Buffer("B", (n,), out_dtype or dtype)
    i = Var("i")
    return build_module(PrimFunc(name, (A, B), loop(i, n, Store(B, i, fn(Load(A, i))))))


def vector_map(name, dtype, n, lanes, fn):
    """B[i*lanes : (i+1)*lanes] = fn(A[...]) with vector loads and stores (n % lanes == 0)."""
    A, B = Buffer("A", (n,), dtype), Buffer("B", (n,), dtype)
    i = Var("i")
    idx = Ramp(mul(i, c(lanes)), c(1), lanes)
    return build_module(PrimFunc(name, (A, B), loop(i, n // lanes, Store(B, idx, fn(Load(A, idx))))))
