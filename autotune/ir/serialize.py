"""Loop IR across processes: a lowered PrimFunc as JSON data, so that the process that lowers a
candidate sends build workers data to compile, never a recipe to re-run (and never a pickle).
`dumps`/`loads` give compact UTF-8 JSON bytes; `func_to_json`/`func_from_json` the JSON value
itself. The format, version and node table are `autotune.ir.wire_format`'s.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from ..te.expr import Const, IterVar, Node
from .nodes import Buffer, PrimFunc, Stmt
from .wire_format import (
    BUFFER,
    BUFFER_FIELDS,
    FORMAT,
    KIND_OF,
    MAX_ATTR_DEPTH,
    NODES,
    STMT,
    TE_ONLY,
    TOP_KEYS,
    VERSION,
    FieldError,
    Reader,
    Writer,
    check_const,
    show,
)

__all__ = ["FORMAT", "VERSION", "dumps", "func_from_json", "func_to_json", "loads"]


# ---- writing ------------------------------------------------------------------------------------

def _kind_of(node: Any) -> str:
    kind = KIND_OF.get(type(node))
    if kind is not None:
        return kind
    label = TE_ONLY.get(type(node))
    if label is not None:
        raise ValueError(f"cannot serialize the {label(node)}: a te-only node, which lowering removes; "
                         "serialize lowered loop IR (autotune.ir.lower)")
    raise ValueError(f"cannot serialize a {type(node).__name__}: not a loop-IR node")


def _write_node(node: Any, kind: str, w: Writer) -> None:
    entry: list = [kind]
    name = ""
    try:
        for name, field in NODES[kind][1]:
            entry.append(field.write(getattr(node, name), w))
        if kind == "Const":
            name = "value"
            check_const(node)
    except FieldError as e:
        raise ValueError(f"cannot serialize a {kind} node: field {name.rstrip('_')}: {e}") from None
    w.node_ids[id(node)] = len(w.nodes)
    w.nodes.append(entry)


def _write_nodes(root: Stmt, w: Writer) -> int:
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
            raise ValueError(f"PrimFunc.attrs{where}: key {show(bad)} is not a string; JSON keys are strings")
        return {k: _attrs_to_json(x, f"{where}[{show(k)}]", depth + 1) for k, x in v.items()}
    raise ValueError(f"PrimFunc.attrs{where}: {show(v)} ({type(v).__name__}) is not JSON-able; "
                     "expected None, bool, int, finite float, str, list, tuple or dict")


def func_to_json(func: PrimFunc) -> dict[str, Any]:
    """`func` as a JSON value of the format above (the module docstring)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"func_to_json expects a PrimFunc, got {type(func).__name__}")
    if not isinstance(func.name, str):
        raise ValueError(f"PrimFunc name must be a string, got {show(func.name)}")
    attrs = _attrs_to_json(func.attrs, "")
    if not isinstance(attrs, dict):
        raise ValueError(f"PrimFunc {func.name}: attrs must be a dict, got {type(func.attrs).__name__}")
    w = Writer()
    try:
        params = [BUFFER.write(b, w) for b in func.params]
    except FieldError as e:
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
        raise ValueError(f"loop IR: expected a JSON object, found {show(d)}")
    if d.get("format") != FORMAT:
        raise ValueError(f"loop IR: expected format {FORMAT!r}, found {show(d.get('format'))}")
    version = d.get("version")
    if type(version) is not int or version != VERSION:
        raise ValueError(f"loop IR: expected version {VERSION} of {FORMAT}, found {show(version)}")
    missing = [k for k in TOP_KEYS if k not in d]
    extra = [k for k in d if k not in TOP_KEYS]
    if missing or extra:
        raise ValueError(f"loop IR: expected the keys {list(TOP_KEYS)}; missing {missing}, unknown "
                         f"{[show(k) for k in extra]}")
    for key, typ in (("name", str), ("attrs", dict), ("buffers", list), ("params", list), ("nodes", list)):
        if not isinstance(d[key], typ):
            raise ValueError(f"loop IR: {key!r} must be a JSON {_JSON_NAMES[typ]}, found {show(d[key])}")


def _read_buffer_entry(i: int, e: Any) -> Buffer:
    if not isinstance(e, list) or len(e) != len(BUFFER_FIELDS):
        raise ValueError(f"loop IR buffers[{i}]: expected [{', '.join(f for f, _, _ in BUFFER_FIELDS)}], "
                         f"found {show(e)}")
    for (field, ok, what), v in zip(BUFFER_FIELDS, e):
        if not ok(v):
            raise ValueError(f"loop IR buffers[{i}] ({show(e[0])}) {field}: expected {what}, found {show(v)}")
    name, shape, dtype, scope, double = e
    return Buffer(name, tuple(shape), dtype, scope, double)


def _read_node(i: int, e: Any, r: Reader) -> Any:
    if not isinstance(e, list) or not e or not isinstance(e[0], str) or e[0] not in NODES:
        kind = e[0] if isinstance(e, list) and e else e
        raise ValueError(f"loop IR nodes[{i}]: unknown node kind {show(kind)}; expected [kind, fields...] with "
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
            check_const(node)
    except FieldError as err:
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
    r = Reader([_read_buffer_entry(i, e) for i, e in enumerate(d["buffers"])])
    for i, e in enumerate(d["nodes"]):
        r.nodes.append(_read_node(i, e, r))
    params = tuple(_read_top(f"params[{i}]", BUFFER.read, p, r) for i, p in enumerate(d["params"]))
    body = _read_top("body", STMT.read, d["body"], r)
    return PrimFunc(d["name"], params, body, _attrs_from_json(d["attrs"]))


def _read_top(where: str, read: Callable[[Any, Reader], Any], raw: Any, r: Reader) -> Any:
    try:
        return read(raw, r)
    except FieldError as e:
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
