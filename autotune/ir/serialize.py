"""The wire format of the loop IR: a lowered PrimFunc as JSON data, so that the process that
lowers a candidate sends build workers data to compile, never a recipe to re-run (and never a
pickle). `dumps`/`loads` give compact UTF-8 JSON bytes; `func_to_json`/`func_from_json` the
JSON value itself.

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

import json
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
    Node,
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
    PrimFunc,
    Ramp,
    Seq,
    Stmt,
    Store,
    ThreadAllReduce,
)

__all__ = ["FORMAT", "VERSION", "dumps", "func_from_json", "func_to_json", "loads"]

FORMAT = "autotune.loop_ir"
VERSION = 1
SCOPES = ("global", "local", "shared")
COMBINERS = ("sum", "max", "min")
MAX_ATTR_DEPTH = 64          # attrs are small facts; deeper nesting is garbage, not data
_TOP_KEYS = ("format", "version", "name", "attrs", "buffers", "params", "nodes", "body")
_SPECIAL_FLOATS = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


class _Bad(Exception):
    """A field that does not hold what the format says; re-raised as ValueError with its place."""


def _show(v: Any) -> str:
    """A found value for a message: never the whole of a (possibly huge or deep) container."""
    if isinstance(v, (list, tuple, dict)):
        return f"a {'list' if isinstance(v, tuple) else type(v).__name__} of {len(v)} item(s)"
    if type(v) is int and v.bit_length() > 200:
        return f"an int of {v.bit_length()} bits"
    text = repr(v)
    return text if len(text) <= 60 else text[:60] + "..."


def _ids(n: int) -> str:
    return f"0..{n - 1}" if n else "but there is none"


class _Writer:
    """Tables being written: node ids and buffer ids by object identity (`id`), so one object
    is one entry however often it is used."""

    def __init__(self) -> None:
        self.node_ids: dict[int, int] = {}
        self.nodes: list[list] = []
        self.buffer_ids: dict[int, int] = {}
        self.buffers: list[list] = []


class _Reader:
    """Tables read so far: a node may refer only to the nodes before it."""

    def __init__(self, buffers: list[Buffer]) -> None:
        self.nodes: list[Any] = []
        self.buffers = buffers


# ---- field types: how one field travels (writer, reader, child nodes) ---------------------------

@dataclass(frozen=True, slots=True)
class _Field:
    write: Callable[[Any, _Writer], Any]
    read: Callable[[Any, _Reader], Any]
    refs: Callable[[Any], tuple] = lambda v: ()


def _ref_field(cls: type, what: str, optional: bool = False) -> _Field:
    """A node-valued field: written as the id of the node, read back as that (earlier) node."""

    def write(v: Any, w: _Writer) -> Any:
        if v is None and optional:
            return None
        if not isinstance(v, cls):
            raise _Bad(f"expected {what}, got {type(v).__name__}")
        return w.node_ids[id(v)]

    def read(raw: Any, r: _Reader) -> Any:
        if raw is None and optional:
            return None
        if type(raw) is not int:
            raise _Bad(f"expected the id of {what}{' or null' if optional else ''}, got {_show(raw)}")
        if not 0 <= raw < len(r.nodes):
            raise _Bad(f"node id {raw} out of range: expected an earlier node, {_ids(len(r.nodes))}")
        node = r.nodes[raw]
        if not isinstance(node, cls):
            raise _Bad(f"expected {what}, node {raw} is a {type(node).__name__}")
        return node

    return _Field(write, read, (lambda v: () if v is None else (v,)) if optional else (lambda v: (v,)))


def _list_field(item: _Field) -> _Field:
    """A tuple of nodes, written as a JSON list of ids."""

    def write(v: Any, w: _Writer) -> list:
        if not isinstance(v, tuple):
            raise _Bad(f"expected a tuple, got {type(v).__name__}")
        return [item.write(x, w) for x in v]

    def read(raw: Any, r: _Reader) -> tuple:
        if not isinstance(raw, list):
            raise _Bad(f"expected a list of node ids, got {_show(raw)}")
        return tuple(item.read(x, r) for x in raw)

    return _Field(write, read, lambda v: v if isinstance(v, tuple) else ())


def _scalar_field(check: Callable[[Any], bool], what: str) -> _Field:
    """A field whose JSON value is its Python value (str, int, bool), checked both ways."""

    def same(v: Any, _: Any) -> Any:
        if not check(v):
            raise _Bad(f"expected {what}, got {_show(v)}")
        return v

    return _Field(same, same)


def _enum_field(enum: type[Enum]) -> _Field:
    """An enum member, written as its name (names are the stable identifiers, values are text)."""
    names = list(enum.__members__)

    def write(v: Any, _: _Writer) -> str:
        if not isinstance(v, enum):
            raise _Bad(f"expected a {enum.__name__}, got {_show(v)}")
        return v.name

    def read(raw: Any, _: _Reader) -> Any:
        if not isinstance(raw, str) or raw not in enum.__members__:
            raise _Bad(f"expected a {enum.__name__} name, one of {names}, got {_show(raw)}")
        return enum[raw]

    return _Field(write, read)


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_dtype(v: Any) -> bool:
    try:
        return isinstance(v, str) and dtype_info(v) is not None
    except TypeError:
        return False


def _write_value(v: Any, _: _Writer) -> Any:
    if isinstance(v, float):
        return float(v) if math.isfinite(v) else "inf" if v > 0 else "-inf" if v < 0 else "nan"
    if type(v) not in (int, bool):
        raise _Bad(f"expected an int, float or bool, got {_show(v)}")
    return v


def _read_value(raw: Any, _: _Reader) -> Any:
    if isinstance(raw, str) and raw in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[raw]
    if type(raw) not in (int, float, bool):
        raise _Bad(f"expected a number, true/false or one of {list(_SPECIAL_FLOATS)}, got {_show(raw)}")
    return raw


def _write_buffer(v: Any, w: _Writer) -> int:
    if not isinstance(v, Buffer):
        raise _Bad(f"expected a Buffer, got {type(v).__name__}")
    i = w.buffer_ids.get(id(v))
    if i is None:
        i = w.buffer_ids[id(v)] = len(w.buffers)
        w.buffers.append(_buffer_entry(v))
    return i


def _read_buffer(raw: Any, r: _Reader) -> Buffer:
    if type(raw) is not int or not 0 <= raw < len(r.buffers):
        raise _Bad(f"expected a buffer id, {_ids(len(r.buffers))}, got {_show(raw)}")
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
_KIND_OF = {cls: kind for kind, (cls, _) in NODES.items()}
# te-only nodes: what to call one in the error that refuses it.
TE_ONLY: dict[type, Callable[[Any], str]] = {
    TensorLoad: lambda n: f"TensorLoad of {getattr(n.tensor, 'name', '?')}",
    Reduce: lambda n: f"Reduce ({n.combiner})",
    IterVar: lambda n: f"IterVar {n.var.name}",
}


def _check_const(node: Const) -> None:
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
        raise _Bad(f"value {_show(v)} is not a {node.dtype} constant")


# ---- writing ------------------------------------------------------------------------------------

def _buffer_entry(b: Buffer) -> list:
    entry = [b.name, list(b.shape) if isinstance(b.shape, tuple) else b.shape, b.dtype, b.scope, b.double_buffer]
    for (field, ok, what), v in zip(BUFFER_FIELDS, entry):
        if not ok(v):
            raise _Bad(f"buffer {_show(b.name)}: {field} must be {what}, got {_show(v)}")
    return entry


def _kind_of(node: Any) -> str:
    kind = _KIND_OF.get(type(node))
    if kind is not None:
        return kind
    label = TE_ONLY.get(type(node))
    if label is not None:
        raise ValueError(f"cannot serialize the {label(node)}: a te-only node, which lowering removes; "
                         "serialize lowered loop IR (autotune.ir.lower)")
    raise ValueError(f"cannot serialize a {type(node).__name__}: not a loop-IR node")


def _write_node(node: Any, kind: str, w: _Writer) -> None:
    entry: list = [kind]
    name = ""
    try:
        for name, field in NODES[kind][1]:
            entry.append(field.write(getattr(node, name), w))
        if kind == "Const":
            name = "value"
            _check_const(node)
    except _Bad as e:
        raise ValueError(f"cannot serialize a {kind} node: field {name.rstrip('_')}: {e}") from None
    w.node_ids[id(node)] = len(w.nodes)
    w.nodes.append(entry)


def _write_nodes(root: Stmt, w: _Writer) -> int:
    """Write `root` and everything below it, children first, with an explicit stack: lowered
    expressions can be long chains, and Python recursion would stop at ~1000 levels."""
    stack: list[Any] = [root]
    while stack:
        node = stack[-1]
        if id(node) in w.node_ids:
            stack.pop()
            continue
        kind = _kind_of(node)
        pending = [c for name, field in NODES[kind][1] for c in field.refs(getattr(node, name))
                   if isinstance(c, (Node, IterVar)) and id(c) not in w.node_ids]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        _write_node(node, kind, w)
    return w.node_ids[id(root)]


def _attrs_to_json(v: Any, where: str, depth: int = 0) -> Any:
    """`v` as plain JSON data (tuples become lists); ValueError for anything JSON cannot carry
    exactly (a worker must see the same facts the parent had)."""
    if depth > MAX_ATTR_DEPTH:
        raise ValueError(f"PrimFunc.attrs{where}: nested deeper than {MAX_ATTR_DEPTH} levels")
    if v is None or type(v) in (bool, int, str) or (type(v) is float and math.isfinite(v)):
        return v
    if isinstance(v, (list, tuple)):
        return [_attrs_to_json(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(v)]
    if isinstance(v, dict):
        bad = next((k for k in v if not isinstance(k, str)), None)
        if bad is not None:
            raise ValueError(f"PrimFunc.attrs{where}: key {_show(bad)} is not a string; JSON keys are strings")
        return {k: _attrs_to_json(x, f"{where}[{_show(k)}]", depth + 1) for k, x in v.items()}
    raise ValueError(f"PrimFunc.attrs{where}: {_show(v)} ({type(v).__name__}) is not JSON-able; "
                     "expected None, bool, int, finite float, str, list, tuple or dict")


def func_to_json(func: PrimFunc) -> dict[str, Any]:
    """`func` as a JSON value of the format above (the module docstring)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"func_to_json expects a PrimFunc, got {type(func).__name__}")
    if not isinstance(func.name, str):
        raise ValueError(f"PrimFunc name must be a string, got {_show(func.name)}")
    attrs = _attrs_to_json(func.attrs, "")
    if not isinstance(attrs, dict):
        raise ValueError(f"PrimFunc {func.name}: attrs must be a dict, got {type(func.attrs).__name__}")
    w = _Writer()
    try:
        params = [_write_buffer(b, w) for b in func.params]
    except _Bad as e:
        raise ValueError(f"PrimFunc {func.name} params: {e}") from None
    if not isinstance(func.body, Stmt):
        raise ValueError(f"PrimFunc {func.name}: body must be a statement, got {type(func.body).__name__}")
    body = _write_nodes(func.body, w)
    return {"format": FORMAT, "version": VERSION, "name": func.name, "attrs": attrs,
            "buffers": w.buffers, "params": params, "nodes": w.nodes, "body": body}


def dumps(func: PrimFunc) -> bytes:
    """`func` as compact UTF-8 JSON bytes (ASCII in fact: any odd character in a name is escaped)."""
    return json.dumps(func_to_json(func), separators=(",", ":"), allow_nan=False,
                      check_circular=False).encode("utf-8")


# ---- reading ------------------------------------------------------------------------------------

_JSON_NAMES = {str: "string", dict: "object", list: "array"}


def _check_header(d: Any) -> None:
    if not isinstance(d, dict):
        raise ValueError(f"loop IR: expected a JSON object, found {_show(d)}")
    if d.get("format") != FORMAT:
        raise ValueError(f"loop IR: expected format {FORMAT!r}, found {_show(d.get('format'))}")
    version = d.get("version")
    if type(version) is not int or version != VERSION:
        raise ValueError(f"loop IR: expected version {VERSION} of {FORMAT}, found {_show(version)}")
    missing = [k for k in _TOP_KEYS if k not in d]
    extra = [k for k in d if k not in _TOP_KEYS]
    if missing or extra:
        raise ValueError(f"loop IR: expected the keys {list(_TOP_KEYS)}; missing {missing}, unknown "
                         f"{[_show(k) for k in extra]}")
    for key, typ in (("name", str), ("attrs", dict), ("buffers", list), ("params", list), ("nodes", list)):
        if not isinstance(d[key], typ):
            raise ValueError(f"loop IR: {key!r} must be a JSON {_JSON_NAMES[typ]}, found {_show(d[key])}")


def _read_buffer_entry(i: int, e: Any) -> Buffer:
    if not isinstance(e, list) or len(e) != len(BUFFER_FIELDS):
        raise ValueError(f"loop IR buffers[{i}]: expected [{', '.join(f for f, _, _ in BUFFER_FIELDS)}], "
                         f"found {_show(e)}")
    for (field, ok, what), v in zip(BUFFER_FIELDS, e):
        if not ok(v):
            raise ValueError(f"loop IR buffers[{i}] ({_show(e[0])}) {field}: expected {what}, found {_show(v)}")
    name, shape, dtype, scope, double = e
    return Buffer(name, tuple(shape), dtype, scope, double)


def _read_node(i: int, e: Any, r: _Reader) -> Any:
    if not isinstance(e, list) or not e or not isinstance(e[0], str) or e[0] not in NODES:
        kind = e[0] if isinstance(e, list) and e else e
        raise ValueError(f"loop IR nodes[{i}]: unknown node kind {_show(kind)}; expected [kind, fields...] with "
                         f"kind one of {list(NODES)}")
    cls, fields = NODES[e[0]]
    if len(e) != len(fields) + 1:
        raise ValueError(f"loop IR nodes[{i}] ({e[0]}): expected {len(fields)} field(s) "
                         f"{[n.rstrip('_') for n, _ in fields]}, found {len(e) - 1}")
    name = ""
    try:
        values = []
        for (field_name, field), raw in zip(fields, e[1:]):
            name = field_name   # the field being read, named by the error below
            values.append(field.read(raw, r))
        node = cls(*values)
        if cls is Const:
            name = "value"
            _check_const(node)
    except _Bad as err:
        raise ValueError(f"loop IR nodes[{i}] ({e[0]}) field {name.rstrip('_')}: {err}") from None
    return node


def _attrs_from_json(v: Any, depth: int = 0) -> Any:
    """JSON attrs back as the IR keeps them: arrays as tuples (PrimFuncs are immutable)."""
    if depth > MAX_ATTR_DEPTH:
        raise ValueError(f"loop IR attrs: nested deeper than {MAX_ATTR_DEPTH} levels")
    if isinstance(v, list):
        return tuple(_attrs_from_json(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return {k: _attrs_from_json(x, depth + 1) for k, x in v.items()}
    if type(v) is float and not math.isfinite(v):
        raise ValueError(f"loop IR attrs: {v} is not JSON")
    return v


def func_from_json(d: Any) -> PrimFunc:
    """The PrimFunc of a JSON value of this format, validated (ValueError naming the place)."""
    _check_header(d)
    r = _Reader([_read_buffer_entry(i, e) for i, e in enumerate(d["buffers"])])
    for i, e in enumerate(d["nodes"]):
        r.nodes.append(_read_node(i, e, r))
    params = tuple(_read_top(f"params[{i}]", _read_buffer, p, r) for i, p in enumerate(d["params"]))
    body = _read_top("body", STMT.read, d["body"], r)
    return PrimFunc(d["name"], params, body, _attrs_from_json(d["attrs"]))


def _read_top(where: str, read: Callable[[Any, _Reader], Any], raw: Any, r: _Reader) -> Any:
    try:
        return read(raw, r)
    except _Bad as e:
        raise ValueError(f"loop IR {where}: {e}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"loop IR: {name} is not JSON (non-finite floats are written as strings)")


def loads(data: bytes) -> PrimFunc:
    """The PrimFunc of `dumps` output; ValueError (never RecursionError) for anything else."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"loads expects bytes, got {type(data).__name__}")
    try:
        d = json.loads(bytes(data).decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("loop IR: JSON nested too deeply (the format nests at most a few levels)") from None
    except ValueError as e:
        raise ValueError(f"loop IR: not valid UTF-8 JSON: {e}") from None
    return func_from_json(d)
