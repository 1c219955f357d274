"""The one generic traversal of IR nodes (expressions and statements): walk, transform, substitute.

Children of a node are its dataclass fields holding a Node (or a tuple of them). Every pass is
written with these functions instead of a visitor class per pass; `autotune.ir.functor`
re-exports them for the loop IR.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from .expr import Expr, Node, Var

_FIELDS: dict[type, tuple[str, ...]] = {}
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
# Field annotations that never hold a Node: such fields are skipped without being read (a
# traversal visits hundreds of thousands of nodes per lowering; most are leaves with no child).
_LEAF_ANNOTATIONS = frozenset({"str", "str | None", "int", "bool", "float", "int | float | bool", "dict",
                               "BinOp", "CmpOp", "ForKind", "Buffer", "tuple[int, ...]", "tuple[Buffer, ...]",
                               "tuple[IterVar, ...]"})


def field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    return names


def child_fields(cls: type) -> tuple[str, ...]:
    """The fields of `cls` that may hold a Node or a tuple of them, in field order."""
    names = _CHILD_FIELDS.get(cls)
    if names is None:
        names = _CHILD_FIELDS[cls] = tuple(f.name for f in fields(cls) if str(f.type) not in _LEAF_ANNOTATIONS)
    return names


def children(node: Node) -> list[Node]:
    """The direct Node children of `node`, in field order."""
    out: list[Node] = []
    for name in child_fields(type(node)):
        v = getattr(node, name)
        if isinstance(v, Node):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, Node))
    return out


def walk(node: Node, fn: Callable[[Node], Any]) -> None:
    """Call `fn` on every node, parents before children."""
    stack = [node]
    while stack:
        n = stack.pop()
        fn(n)
        stack.extend(reversed(children(n)))


def transform(node: Node, post: Callable[[Node], Node | None],
              pre: Callable[[Node], Node | None] | None = None) -> Any:
    """Rebuild `node` bottom-up: `post(n)` may return a replacement (None keeps n).

    `pre(n)`, if given, runs first; a non-None result replaces n without visiting its children.
    Nodes whose children did not change are kept as they are (no copies).
    """
    if pre is not None:
        r = pre(node)
        if r is not None:
            return r
    cls = type(node)
    changed = None
    for name in child_fields(cls):
        v = getattr(node, name)
        if isinstance(v, Node):
            nv = transform(v, post, pre)
            if nv is not v:
                changed = changed or {}
                changed[name] = nv
        elif isinstance(v, tuple) and any(isinstance(x, Node) for x in v):
            nt = tuple(transform(x, post, pre) if isinstance(x, Node) else x for x in v)
            if any(a is not b for a, b in zip(nt, v)):
                changed = changed or {}
                changed[name] = nt
    if changed:
        node = cls(**{n: changed.get(n, getattr(node, n)) for n in field_names(cls)})
    r = post(node)
    return node if r is None else r


def substitute(node: Node, mapping: Mapping[Var, Expr]) -> Any:
    """Replace variables by expressions (mapping keyed by Var identity)."""
    if not mapping:
        return node
    return transform(node, lambda n: mapping.get(n) if isinstance(n, Var) else None)
