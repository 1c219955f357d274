"""Readable text for expressions; a table from node type to printer that the IR extends."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .expr import And, Binary, BinOp, Call, Cast, Compare, Const, Not, Or, Reduce, Select, TensorLoad, Var

PRINTERS: dict[type, Callable[[Any], str]] = {}


def register(cls: type) -> Callable:
    def deco(fn: Callable[[Any], str]) -> Callable[[Any], str]:
        PRINTERS[cls] = fn
        return fn
    return deco


def expr_str(e: Any) -> str:
    fn = PRINTERS.get(type(e))
    return fn(e) if fn is not None else f"<{type(e).__name__}>"


def _const(e: Const) -> str:
    if e.dtype in ("int32", "bool", "float32"):
        return str(e.value)
    return f"{e.dtype}({e.value})"


def _binary(e: Binary) -> str:
    if e.op in (BinOp.MAX, BinOp.MIN):
        return f"{e.op.value}({expr_str(e.a)}, {expr_str(e.b)})"
    return f"({expr_str(e.a)} {e.op.value} {expr_str(e.b)})"


PRINTERS.update({
    Var: lambda e: e.name,
    Const: _const,
    Binary: _binary,
    Compare: lambda e: f"({expr_str(e.a)} {e.op.value} {expr_str(e.b)})",
    And: lambda e: f"({expr_str(e.a)} && {expr_str(e.b)})",
    Or: lambda e: f"({expr_str(e.a)} || {expr_str(e.b)})",
    Not: lambda e: f"!{expr_str(e.a)}",
    Select: lambda e: f"select({expr_str(e.cond)}, {expr_str(e.t)}, {expr_str(e.f)})",
    Call: lambda e: f"{e.fn}({', '.join(expr_str(a) for a in e.args)})",
    Cast: lambda e: f"{e.dtype}({expr_str(e.value)})",
    TensorLoad: lambda e: f"{e.tensor.name}[{', '.join(expr_str(i) for i in e.indices)}]",
    Reduce: lambda e: f"{e.combiner}({expr_str(e.source)}, axis=[{', '.join(a.var.name for a in e.axis)}])",
})
