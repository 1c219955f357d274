"""The model layer: a dataflow graph of autotune ops (`ir`), what frontends produce; its fusion
groups (`fusion`: the partitioner; `compose`, `fused_task`: a group as one te computation and
task; `fused_graph`: the graph of fused kernels), its buffer plan (`planner`) and the runtime that
runs it on autotune's kernels (`executor`: `compile_model`, `CompiledModel`, loaded on first use
like `autotune.load`)."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .ir import VIEW, Graph, Node, Value

if TYPE_CHECKING:
    from .executor import CompiledModel, compile_model

__all__ = ["VIEW", "CompiledModel", "Graph", "Node", "Value", "compile_model"]


def __getattr__(name: str) -> Any:
    if name in ("CompiledModel", "compile_model"):
        return getattr(importlib.import_module(".executor", __name__), name)
    raise AttributeError(f"module 'autotune.graph' has no attribute {name!r}")
