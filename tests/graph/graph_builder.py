"""Builds Graphs by hand for the graph tests (imported via sys.path): one call per input,
constant, kernel node or view, each returning the new value's name."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from autotune.graph import VIEW, Graph, Node, Value


class GraphBuilder:
    def __init__(self, name: str = "g") -> None:
        self.name = name
        self.inputs: list[Value] = []
        self.values: dict[str, Value] = {}
        self.constants: dict[str, np.ndarray] = {}
        self.nodes: list[Node] = []

    def _value(self, name: str, shape: tuple[int, ...], dtype: str) -> str:
        self.values[name] = Value(name, tuple(shape), dtype)
        return name

    def input(self, name: str, shape: tuple[int, ...], dtype: str = "float32") -> str:
        self.inputs.append(Value(name, tuple(shape), dtype))
        return self._value(name, shape, dtype)

    def const(self, name: str, array: np.ndarray) -> str:
        self.constants[name] = array
        return self._value(name, array.shape, str(array.dtype))

    def node(self, op: str, inputs: tuple[str, ...], out_shape: tuple[int, ...], /, out_dtype: str = "float32",
             dtype: str = "float32", **params: Any) -> str:
        """One kernel node with one output of `out_shape`, named after the node; `params` the template's."""
        out = f"v{len(self.nodes)}_{op}"
        self.nodes.append(Node(f"n{len(self.nodes)}", op, tuple(inputs), (out,), params, dtype))
        return self._value(out, out_shape, out_dtype)

    def view(self, x: str, shape: tuple[int, ...]) -> str:
        out = f"v{len(self.nodes)}_view"
        self.nodes.append(Node(f"n{len(self.nodes)}", VIEW, (x,), (out,)))
        return self._value(out, shape, self.values[x].dtype)

    def build(self, *outputs: str) -> Graph:
        g = Graph(list(self.inputs), [self.values[o] for o in outputs], dict(self.values), dict(self.constants),
                  list(self.nodes), self.name)
        g.validate()
        return g


def elementwise_graph(edges: list[tuple[int, ...]], n_outputs: int, shape: tuple[int, ...] = (5, 3)) -> Graph:
    """A random-DAG test graph of elementwise nodes: node i reads the values listed in edges[i]
    (indices into [input, node 0, node 1, ...], all earlier): one read -> relu, two -> add.
    The last `n_outputs` nodes are the graph's outputs."""
    b = GraphBuilder("dag")
    vals = [b.input("x", shape)]
    for reads in edges:
        args = tuple(vals[r] for r in reads)
        vals.append(b.node("relu", args, shape, shape=shape) if len(args) == 1
                    else b.node("add", args, shape, a_shape=shape, b_shape=shape))
    return b.build(*vals[-n_outputs:])


@st.composite
def dags(draw: Any) -> tuple[list[tuple[int, ...]], int]:
    """(edges, n_outputs) for `elementwise_graph`: random chains and diamonds, up to 12 nodes,
    each reading one or two earlier values, with 1 to 3 outputs."""
    n = draw(st.integers(1, 12))
    edges = [tuple(draw(st.lists(st.integers(0, i), min_size=k, max_size=k))) for i in range(n)
             for k in [draw(st.integers(1, 2))]]
    return edges, draw(st.integers(1, min(3, n)))
