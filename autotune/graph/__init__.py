"""The model layer: a dataflow graph of autotune ops (`ir`), what frontends produce and the
graph runtime runs."""
from .ir import VIEW, Graph, Node, Value

__all__ = ["VIEW", "Graph", "Node", "Value"]
