"""Traversal of the loop IR: the generic walk/transform/substitute plus queries built on them."""
from __future__ import annotations

from typing import Any

from ..te.expr import IterVar, Node, Var
from ..te.traversal import children, field_names, substitute, transform, walk

__all__ = ["children", "walk", "transform", "substitute", "free_vars", "uses_var", "structural_equal"]


def free_vars(node: Node) -> set[Var]:
    """Variables used in `node` (including loop variables it binds)."""
    out: set[Var] = set()
    walk(node, lambda n: out.add(n) if isinstance(n, Var) else None)
    return out


def uses_var(node: Node, var: Var) -> bool:
    stack = [node]
    while stack:
        n = stack.pop()
        if n is var:
            return True
        stack.extend(children(n))
    return False


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
