"""Traversal of the loop IR: the generic walk/transform/substitute plus queries built on them."""
from __future__ import annotations

from typing import Any

from ..te.expr import And, Expr, IterVar, Node, Var
from ..te.traversal import children, field_names, substitute, transform, walk
from .nodes import Allocate, Buffer, Load, Store

__all__ = [
    "children",
    "conjuncts",
    "free_vars",
    "replace_buffers",
    "structural_equal",
    "substitute",
    "transform",
    "uses_var",
    "walk",
    "written_buffers",
]


def free_vars(node: Node) -> set[Var]:
    """Variables used in `node` (including loop variables it binds)."""
    out: set[Var] = set()
    walk(node, lambda n: out.add(n) if isinstance(n, Var) else None)
    return out


def conjuncts(e: Expr) -> list[Expr]:
    """The operands of a chain of logical ands, left to right (`e` itself if it is not one)."""
    return conjuncts(e.a) + conjuncts(e.b) if type(e) is And else [e]


def uses_var(node: Node, var: Var) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if n is var:
            return True
        stack.extend(children(n))
    return False


def written_buffers(node: Node) -> set[Buffer]:
    """Buffers `node` stores to."""
    out: set[Buffer] = set()
    walk(node, lambda n: out.add(n.buffer) if isinstance(n, Store) else None)
    return out


def replace_buffers(node: Node, mapping: dict[Buffer, Buffer], offset: Expr | None = None) -> Any:
    """`node` with every allocation and access of a buffer in `mapping` moved to its replacement;
    `offset`, if given, is added to the index of each moved access."""

    def moved(index: Expr) -> Expr:
        return index if offset is None else offset + index

    def post(n: Node) -> Node | None:
        if isinstance(n, Load) and n.buffer in mapping:
            return Load(mapping[n.buffer], moved(n.index), n.predicate)
        if isinstance(n, Store) and n.buffer in mapping:
            return Store(mapping[n.buffer], moved(n.index), n.value, n.predicate)
        if isinstance(n, Allocate) and n.buffer in mapping:
            return Allocate(mapping[n.buffer], n.body)
        return None

    return transform(node, post)


def structural_equal(a: Any, b: Any, vmap: dict[Var, Var] | None = None) -> bool:
    """Same shape and constants, variables matched consistently (for tests and dedup)."""
    vmap = {} if vmap is None else vmap
    if isinstance(a, Var) and isinstance(b, Var):
        if a.dtype != b.dtype:
            return False
        return vmap.setdefault(a, b) is b
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(structural_equal(x, y, vmap) for x, y in zip(a, b))
    if isinstance(a, IterVar):
        return a.extent == b.extent and a.dom_min == b.dom_min and structural_equal(a.var, b.var, vmap)
    if not isinstance(a, Node):
        return a is b or a == b
    return all(structural_equal(getattr(a, n), getattr(b, n), vmap) for n in field_names(type(a)))
