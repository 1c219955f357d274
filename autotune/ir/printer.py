"""Readable text for loop-IR statements and functions (what `str(lower(...))` shows)."""
from __future__ import annotations

from ..te.printer import PRINTERS, expr_str
from .nodes import (
    Allocate,
    Broadcast,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    Let,
    Load,
    Prefetch,
    PrimFunc,
    Ramp,
    Seq,
    Stmt,
    Store,
    ThreadAllReduce,
)


def _load(e: Load) -> str:
    pred = "" if e.predicate is None else f" if {expr_str(e.predicate)}"
    return f"{e.buffer.name}[{expr_str(e.index)}{pred}]"


PRINTERS.update({
    Load: _load,
    Ramp: lambda e: f"ramp({expr_str(e.base)}, {expr_str(e.stride)}, {e.lanes})",
    Broadcast: lambda e: f"x{e.lanes}({expr_str(e.value)})",
})


def _lines(s: Stmt, indent: int, out: list[str]) -> None:
    pad = "  " * indent
    t = type(s)
    if type(s) is For:
        kind = s.kind.value if s.kind is not ForKind.THREAD_BOUND else f"bind[{s.thread}]"
        out.append(f"{pad}{kind} {s.var.name} in range({s.extent}):")
        _lines(s.body, indent + 1, out)
    elif type(s) is Store:
        pred = "" if s.predicate is None else f" if {expr_str(s.predicate)}"
        out.append(f"{pad}{s.buffer.name}[{expr_str(s.index)}] = {expr_str(s.value)}{pred}")
    elif type(s) is Allocate:
        b = s.buffer
        out.append(f"{pad}allocate {b.name}[{b.dtype} x {b.size}] in {b.scope}")
        _lines(s.body, indent, out)
    elif type(s) is IfThenElse:
        out.append(f"{pad}if {expr_str(s.cond)}:")
        _lines(s.then_case, indent + 1, out)
        if s.else_case is not None:
            out.append(f"{pad}else:")
            _lines(s.else_case, indent + 1, out)
    elif type(s) is Let:
        out.append(f"{pad}{s.var.name} = {expr_str(s.value)}")
        _lines(s.body, indent, out)
    elif type(s) is Evaluate:
        out.append(f"{pad}{expr_str(s.value)}")
    elif type(s) is Prefetch:
        out.append(f"{pad}prefetch {s.buffer.name}[{expr_str(s.index)}]")
    elif type(s) is ThreadAllReduce:
        out.append(f"{pad}{s.buffer.name}[0] = allreduce_{s.combiner}({s.buffer.name}[0]) over {s.thread}")
    elif type(s) is Seq:
        for x in s.stmts:
            _lines(x, indent, out)
    else:
        out.append(f"{pad}<{t.__name__}>")


def stmt_str(s: Stmt) -> str:
    out: list[str] = []
    _lines(s, 0, out)
    return "\n".join(out)


def func_str(f: PrimFunc) -> str:
    params = ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}" for b in f.params)
    out = [f"def {f.name}({params}):"]
    _lines(f.body, 1, out)
    return "\n".join(out)
