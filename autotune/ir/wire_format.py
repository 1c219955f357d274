"""The wire format of the loop IR, a lowered PrimFunc as JSON data: the document described here,
how each field type is written and read back (checked both ways), and the table of node kinds.
`autotune.ir.serialize` writes and reads whole documents.

Format "autotune.loop_ir", version 1
------------------------------------
The document is one JSON object with exactly these keys::

    {"format": "autotune.loop_ir", "version": 1,
     "name": str,                      the PrimFunc's name
     "attrs": object,                  PrimFunc.attrs (JSON arrays are read back as tuples)
     "buffers": [buffer, ...],         every buffer; a buffer's id is its position here
     "params": [buffer id, ...],       the argument buffers, in call order
     "nodes": [node, ...],             every expression and statement; id = position here
     "body": node id}                  the function body (a statement)

A buffer is ``[name: str, shape: [int >= 0, ...], dtype, scope, double_buffer: bool]`` with
scope one of "global", "local", "shared". A dtype is its name ("float32", "int32", "bool", ...).

A node is ``[kind, field, ...]``: its kind, then its fields in the order of the table below.
A field that holds a node holds that node's id, and ids refer only to earlier entries of
"nodes" (children come first), so a reader builds the nodes in one pass and the table cannot
hold a cycle. Identity: each object of the original is written once and every use refers to
it, so one Var used in many places is one node, and two Vars of the same name are two nodes;
buffers likewise (one entry per Buffer object, however many accesses name it).

Field types: expr / stmt: a node id of an expression / a statement; var: the id of a Var node;
buffer: a buffer id; "?" means the value may also be null; [expr] / [stmt]: a list of ids;
lanes: int >= 1; extent: int >= 0. BinOp, CmpOp and ForKind are written as member names
(ADD, SUB, MUL, DIV, FLOORDIV, FLOORMOD, MAX, MIN; LT, LE, GT, GE, EQ, NE; SERIAL, PARALLEL,
VECTORIZED, UNROLLED, THREAD_BOUND).

=================  ==================================================================
kind               fields
=================  ==================================================================
Var                name: str, dtype
Const              value, dtype
Binary             op: BinOp, a: expr, b: expr
Compare            op: CmpOp, a: expr, b: expr
And                a: expr, b: expr
Or                 a: expr, b: expr
Not                a: expr
Select             cond: expr, t: expr, f: expr
Call               fn: str, args: [expr], dtype
Cast               dtype, value: expr
Load               buffer, index: expr, predicate: expr?
Ramp               base: expr, stride: expr, lanes
Broadcast          value: expr, lanes
For                var, extent, kind: ForKind, body: stmt, thread: str?
Store              buffer, index: expr, value: expr, predicate: expr?
Allocate           buffer, body: stmt
IfThenElse         cond: expr, then_case: stmt, else_case: stmt?
Let                var, value: expr, body: stmt
Evaluate           value: expr
Prefetch           buffer, index: expr
ThreadAllReduce    buffer, combiner: "sum" | "max" | "min", thread: str
Seq                stmts: [stmt]
=================  ==================================================================

A Const value matches its dtype: a JSON integer within the dtype's range for int/uint dtypes,
true/false for bool, and for float dtypes a number or one of the strings "inf", "-inf",
"nan" (JSON has no literal for them). te-only nodes (TensorLoad, Reduce, IterVar) never occur
after lowering and are refused.

Example: ``def inc(A: float32[4], B: float32[4]): for i in range(4): B[i] = A[i] + 1.0`` is
(spaces added)::

    {"format": "autotune.loop_ir", "version": 1, "name": "inc", "attrs": {"outputs": [1]},
     "buffers": [["A", [4], "float32", "global", false], ["B", [4], "float32", "global", false]],
     "params": [0, 1],
     "nodes": [["Const", 1.0, "float32"], ["Var", "i", "int32"], ["Load", 0, 1, null],
               ["Binary", "ADD", 2, 0], ["Store", 1, 1, 3, null], ["For", 1, 4, "SERIAL", 4, null]],
     "body": 5}

Reading validates everything it reads and raises ValueError naming the place (node id, kind,
field) with expected vs found; structure only: dtype agreement and variable scoping are the
verifier's (`ir.passes.verify`).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..dtype import dtype_info
from ..te.expr import (
    And,
    Binary,
    BinOp,
    Call,
    Cast,
    CmpOp,
    Compare,
    Const,
    Expr,
    IterVar,
    Not,
    Or,
    Reduce,
    Select,
    TensorLoad,
    Var,
)
from .nodes import (
    Allocate,
    Broadcast,
    Buffer,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    Let,
    Load,
    Prefetch,
    Ramp,
    Seq,
    Stmt,
    Store,
    ThreadAllReduce,
)

FORMAT = "autotune.loop_ir"
VERSION = 1
SCOPES = ("global", "local", "shared")
COMBINERS = ("sum", "max", "min")
MAX_ATTR_DEPTH = 64          # attrs are small facts; deeper nesting is garbage, not data
TOP_KEYS = ("format", "version", "name", "attrs", "buffers", "params", "nodes", "body")
SPECIAL_FLOATS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class FieldError(Exception):
    """A field that does not hold what the format says; re-raised as ValueError with its place."""


def show(v: Any) -> str:
    """A found value for a message: never the whole of a (possibly huge or deep) container."""
    if isinstance(v, (list, tuple, dict)):
        return f"a {'list' if isinstance(v, tuple) else type(v).__name__} of {len(v)} item(s)"
    if type(v) is int and v.bit_length() > 200:
        return f"an int of {v.bit_length()} bits"
    text = repr(v)
    return text if len(text) <= 60 else text[:60] + "..."


def _ids(n: int) -> str:
    return f"0..{n - 1}" if n else "but there is none"


class Writer:
    """Tables being written: node ids and buffer ids by object identity (`id`), so one object
    is one entry however often it is used."""

    def __init__(self) -> None:
        self.node_ids: dict[int, int] = {}
        self.nodes: list[list] = []
        self.buffer_ids: dict[int, int] = {}
        self.buffers: list[list] = []


class Reader:
    """Tables read so far: a node may refer only to the nodes before it."""

    def __init__(self, buffers: list[Buffer]) -> None:
        self.nodes: list[Any] = []
        self.buffers = buffers


# ---- field types: how one field travels (writer, reader, child nodes) ---------------------------

@dataclass(frozen=True, slots=True)
class _Field:
    write: Callable[[Any, Writer], Any]
    read: Callable[[Any, Reader], Any]
    refs: Callable[[Any], tuple] = lambda v: ()


def _ref_field(cls: type, what: str, optional: bool = False) -> _Field:
    """A node-valued field: written as the id of the node, read back as that (earlier) node."""

    def write(v: Any, w: Writer) -> Any:
        if v is None and optional:
            return None
        if not isinstance(v, cls):
            raise FieldError(f"expected {what}, got {type(v).__name__}")
        return w.node_ids[id(v)]

    def read(raw: Any, r: Reader) -> Any:
        if raw is None and optional:
            return None
        if type(raw) is not int:
            raise FieldError(f"expected the id of {what}{' or null' if optional else ''}, got {show(raw)}")
        if not 0 <= raw < len(r.nodes):
            raise FieldError(f"node id {raw} out of range: expected an earlier node, {_ids(len(r.nodes))}")
        node = r.nodes[raw]
        if not isinstance(node, cls):
            raise FieldError(f"expected {what}, node {raw} is a {type(node).__name__}")
        return node

    return _Field(write, read, (lambda v: () if v is None else (v,)) if optional else (lambda v: (v,)))


def _list_field(item: _Field) -> _Field:
    """A tuple of nodes, written as a JSON list of ids."""

    def write(v: Any, w: Writer) -> list:
        if not isinstance(v, tuple):
            raise FieldError(f"expected a tuple, got {type(v).__name__}")
        return [item.write(x, w) for x in v]

    def read(raw: Any, r: Reader) -> tuple:
        if not isinstance(raw, list):
            raise FieldError(f"expected a list of node ids, got {show(raw)}")
        return tuple(item.read(x, r) for x in raw)

    return _Field(write, read, lambda v: v if isinstance(v, tuple) else ())


def _scalar_field(check: Callable[[Any], bool], what: str) -> _Field:
    """A field whose JSON value is its Python value (str, int, bool), checked both ways."""

    def same(v: Any, _: Any) -> Any:
        if not check(v):
            raise FieldError(f"expected {what}, got {show(v)}")
        return v

    return _Field(same, same)


def _enum_field(enum: type[Enum]) -> _Field:
    """An enum member, written as its name (names are the stable identifiers, values are text)."""
    names = list(enum.__members__)

    def write(v: Any, _: Writer) -> str:
        if not isinstance(v, enum):
            raise FieldError(f"expected a {enum.__name__}, got {show(v)}")
        return v.name

    def read(raw: Any, _: Reader) -> Any:
        if not isinstance(raw, str) or raw not in enum.__members__:
            raise FieldError(f"expected a {enum.__name__} name, one of {names}, got {show(raw)}")
        return enum[raw]

    return _Field(write, read)


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_dtype(v: Any) -> bool:
    try:
        return isinstance(v, str) and dtype_info(v) is not None
    except TypeError:
        return False


def _write_value(v: Any, _: Writer) -> Any:
    if isinstance(v, float):
        return float(v) if math.isfinite(v) else "inf" if v > 0 else "-inf" if v < 0 else "nan"
    if type(v) not in (int, bool):
        raise FieldError(f"expected an int, float or bool, got {show(v)}")
    return v


def _read_value(raw: Any, _: Reader) -> Any:
    if isinstance(raw, str) and raw in SPECIAL_FLOATS:
        return SPECIAL_FLOATS[raw]
    if type(raw) not in (int, float, bool):
        raise FieldError(f"expected a number, true/false or one of {list(SPECIAL_FLOATS)}, got {show(raw)}")
    return raw


def _write_buffer(v: Any, w: Writer) -> int:
    if not isinstance(v, Buffer):
        raise FieldError(f"expected a Buffer, got {type(v).__name__}")
    i = w.buffer_ids.get(id(v))
    if i is None:
        i = w.buffer_ids[id(v)] = len(w.buffers)
        w.buffers.append(_buffer_entry(v))
    return i


def _read_buffer(raw: Any, r: Reader) -> Buffer:
    if type(raw) is not int or not 0 <= raw < len(r.buffers):
        raise FieldError(f"expected a buffer id, {_ids(len(r.buffers))}, got {show(raw)}")
    return r.buffers[raw]


EXPR = _ref_field(Expr, "an expression")
STMT = _ref_field(Stmt, "a statement")
VAR = _ref_field(Var, "a Var")
OPT_EXPR = _ref_field(Expr, "an expression", optional=True)
OPT_STMT = _ref_field(Stmt, "a statement", optional=True)
EXPRS = _list_field(EXPR)
STMTS = _list_field(STMT)
STR = _scalar_field(lambda v: isinstance(v, str), "a string")
OPT_STR = _scalar_field(lambda v: v is None or isinstance(v, str), "a string or null")
DTYPE = _scalar_field(_is_dtype, "a dtype name")
LANES = _scalar_field(lambda v: _is_int(v) and v >= 1, "an int >= 1")
EXTENT = _scalar_field(lambda v: _is_int(v) and v >= 0, "an int >= 0")
COMBINER = _scalar_field(lambda v: isinstance(v, str) and v in COMBINERS, f"one of {list(COMBINERS)}")
VALUE = _Field(_write_value, _read_value)
BUFFER = _Field(_write_buffer, _read_buffer)

# A buffer entry: (field, check of its JSON value, what it must be), in entry order.
BUFFER_FIELDS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("name", lambda v: isinstance(v, str), "a string"),
    ("shape", lambda v: isinstance(v, list) and all(_is_int(s) and s >= 0 for s in v), "a list of ints >= 0"),
    ("dtype", _is_dtype, "a dtype name"),
    ("scope", lambda v: isinstance(v, str) and v in SCOPES, f"one of {list(SCOPES)}"),
    ("double_buffer", lambda v: type(v) is bool, "true or false"),
)

# ---- the node table: kind -> (class, its fields in dataclass order) -----------------------------

NODES: dict[str, tuple[type, tuple[tuple[str, _Field], ...]]] = {
    "Var": (Var, (("name", STR), ("dtype", DTYPE))),
    "Const": (Const, (("value", VALUE), ("dtype", DTYPE))),
    "Binary": (Binary, (("op", _enum_field(BinOp)), ("a", EXPR), ("b", EXPR))),
    "Compare": (Compare, (("op", _enum_field(CmpOp)), ("a", EXPR), ("b", EXPR))),
    "And": (And, (("a", EXPR), ("b", EXPR))),
    "Or": (Or, (("a", EXPR), ("b", EXPR))),
    "Not": (Not, (("a", EXPR),)),
    "Select": (Select, (("cond", EXPR), ("t", EXPR), ("f", EXPR))),
    "Call": (Call, (("fn", STR), ("args", EXPRS), ("dtype", DTYPE))),
    "Cast": (Cast, (("dtype", DTYPE), ("value", EXPR))),
    "Load": (Load, (("buffer", BUFFER), ("index", EXPR), ("predicate", OPT_EXPR))),
    "Ramp": (Ramp, (("base", EXPR), ("stride", EXPR), ("lanes_", LANES))),
    "Broadcast": (Broadcast, (("value", EXPR), ("lanes_", LANES))),
    "For": (For, (("var", VAR), ("extent", EXTENT), ("kind", _enum_field(ForKind)), ("body", STMT),
                  ("thread", OPT_STR))),
    "Store": (Store, (("buffer", BUFFER), ("index", EXPR), ("value", EXPR), ("predicate", OPT_EXPR))),
    "Allocate": (Allocate, (("buffer", BUFFER), ("body", STMT))),
    "IfThenElse": (IfThenElse, (("cond", EXPR), ("then_case", STMT), ("else_case", OPT_STMT))),
    "Let": (Let, (("var", VAR), ("value", EXPR), ("body", STMT))),
    "Evaluate": (Evaluate, (("value", EXPR),)),
    "Prefetch": (Prefetch, (("buffer", BUFFER), ("index", EXPR))),
    "ThreadAllReduce": (ThreadAllReduce, (("buffer", BUFFER), ("combiner", COMBINER), ("thread", STR))),
    "Seq": (Seq, (("stmts", STMTS),)),
}
KIND_OF = {cls: kind for kind, (cls, _) in NODES.items()}
# te-only nodes: what to call one in the error that refuses it.
TE_ONLY: dict[type, Callable[[Any], str]] = {
    TensorLoad: lambda n: f"TensorLoad of {getattr(n.tensor, 'name', '?')}",
    Reduce: lambda n: f"Reduce ({n.combiner})",
    IterVar: lambda n: f"IterVar {n.var.name}",
}


def check_const(node: Const) -> None:
    """A Const's value must be one its dtype can hold: a worker must not get a silently
    truncated constant (or an int where a bool belongs)."""
    info = dtype_info(node.dtype)
    v = node.value
    if info.kind == "bool":
        ok = type(v) is bool
    elif info.kind == "float":
        ok = isinstance(v, float) or (type(v) is int and abs(v) < 2 ** 1024)
    else:
        bits = 8 * info.bytes
        low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if info.kind == "int" else (0, 2 ** bits - 1)
        ok = type(v) is int and low <= v <= high
    if not ok:
        raise FieldError(f"value {show(v)} is not a {node.dtype} constant")


def _buffer_entry(b: Buffer) -> list:
    entry = [b.name, list(b.shape) if isinstance(b.shape, tuple) else b.shape, b.dtype, b.scope, b.double_buffer]
    for (field, ok, what), v in zip(BUFFER_FIELDS, entry):
        if not ok(v):
            raise FieldError(f"buffer {show(b.name)}: {field} must be {what}, got {show(v)}")
    return entry
