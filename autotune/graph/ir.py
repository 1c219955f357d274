"""The model-level IR: a dataflow graph of autotune ops with static shapes.

A `Graph` is what a frontend (ONNX) produces and what the graph runtime runs. Every tensor is a
`Value` with a name, a static shape and a dtype. Every `Node` is one autotune op:
- a kernel node names a template (`op`) and its shape parameters (`params`): the runtime gets
  its kernel with `autotune.load(op, dtype=dtype, **params)` and calls it with the node's input
  values in order, writing its output values (one per output the template has);
- a view node (`op == VIEW`) gives its one input a new shape without moving data (Reshape,
  Flatten, Squeeze, Unsqueeze of a contiguous tensor): it costs no kernel.
Weights and folded sub-graphs are `constants` (numpy arrays keyed by value name). Nodes are kept
in a topological order; `validate` checks that and every other invariant below.
"""
from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

VIEW = "view"


@dataclass(frozen=True)
class Value:
    """A tensor of the graph: name (unique in the graph), static shape, dtype name."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


@dataclass
class Node:
    """One autotune op. `name` is the source node's name (errors and summaries cite it);
    `op` a template name or VIEW; `params` the template's shape parameters; `dtype` the dtype the
    kernel is loaded for; `inputs`/`outputs` value names in the kernel's argument order."""

    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float32"

    @property
    def is_view(self) -> bool:
        return self.op == VIEW

    @property
    def kernel_key(self) -> tuple[str, str, str]:
        """What identifies the kernel the node runs (op, parameters, dtype): equal keys, one kernel."""
        return self.op, repr(sorted(self.params.items())), self.dtype


@dataclass(frozen=True)
class TrainingGuard:
    """A node the graph runs as in inference (a Dropout as the identity) whose training mode, or
    drop ratio, is a model input: each call checks that the inputs do not ask for training
    (`autotune.graph.input_checks`). `training_mode` and `ratio` name model inputs or hold the
    constant values."""

    node: str
    training_mode: str | bool
    ratio: str | float


@dataclass
class Graph:
    """Inputs and outputs (in the model's order), every value, the constants and the nodes;
    `guards`: what the calls' inputs must not ask for (`TrainingGuard`)."""

    inputs: list[Value]
    outputs: list[Value]
    values: dict[str, Value]
    constants: dict[str, np.ndarray]
    nodes: list[Node]
    name: str = "graph"
    guards: tuple[TrainingGuard, ...] = ()

    def value(self, name: str) -> Value:
        try:
            return self.values[name]
        except KeyError:
            raise ValueError(f"graph {self.name!r}: no value named {name!r}") from None

    def constant_positions(self, node: Node) -> list[int]:
        """Positions of the node's inputs that are constants of the graph (weights)."""
        return [p for p, v in enumerate(node.inputs) if v in self.constants]

    def kernel_uses(self) -> dict[tuple[str, str, str], list[Node]]:
        """The kernel nodes by `Node.kernel_key`, in first-use order: the distinct kernels the
        graph needs and the nodes that run each."""
        uses: dict[tuple[str, str, str], list[Node]] = {}
        for n in self.nodes:
            if not n.is_view:
                uses.setdefault(n.kernel_key, []).append(n)
        return uses

    def kernels(self) -> list[tuple[str, dict[str, Any], str]]:
        """The distinct (op, params, dtype) the graph needs kernels for, in first-use order."""
        return [(ns[0].op, ns[0].params, ns[0].dtype) for ns in self.kernel_uses().values()]

    def op_counts(self) -> Counter[str]:
        return Counter(n.op for n in self.nodes)

    def validate(self) -> None:
        """ValueError naming the first broken invariant: every value named is known; each value has
        exactly one producer (an input, a constant or one node output); nodes read only values
        produced before them; constants match their Value's shape and dtype; a view keeps the size."""
        produced: set[str] = set()
        for v in self.inputs:
            _define(self, produced, v.name, "an input")
        for name, array in self.constants.items():
            _define(self, produced, name, "a constant")
            v = self.value(name)
            if tuple(array.shape) != v.shape or str(array.dtype) != v.dtype:
                raise ValueError(f"graph {self.name!r}: constant {name!r} is {array.dtype}{list(array.shape)}, "
                                 f"its value says {v.dtype}{list(v.shape)}")
        for n in self.nodes:
            for i in n.inputs:
                if i not in produced:
                    raise ValueError(f"graph {self.name!r}: node {n.name!r} reads {i!r} before anything produces it")
            for o in n.outputs:
                _define(self, produced, o, f"an output of node {n.name!r}")
            if n.is_view and (len(n.inputs), len(n.outputs)) != (1, 1):
                raise ValueError(f"graph {self.name!r}: view node {n.name!r} needs one input and one output")
            if n.is_view and self.value(n.inputs[0]).size != self.value(n.outputs[0]).size:
                raise ValueError(f"graph {self.name!r}: view node {n.name!r} changes the element count")
        for v in self.outputs:
            if v.name not in produced:
                raise ValueError(f"graph {self.name!r}: output {v.name!r} is never produced")
        inputs = {v.name for v in self.inputs}
        for g in self.guards:
            for read in (g.training_mode, g.ratio):
                if isinstance(read, str) and read not in inputs:
                    raise ValueError(f"graph {self.name!r}: guard of node {g.node!r} reads {read!r}, not a model input")

    def structure_key(self, *context: str) -> str:
        """A hash of what the graph computes and how it is wired (its text, with the nodes'
        dtypes) and of `context` (how it runs: a layout), not of the weights' values: the key of
        timings taken inside this model, where a kernel's time depends on its neighbours."""
        text = "\n".join([str(self), " ".join(n.dtype for n in self.nodes), *context])
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def __str__(self) -> str:
        lines = [f"graph {self.name}(" + ", ".join(_sig(v) for v in self.inputs) + ")"]
        for n in self.nodes:
            params = ", ".join(f"{k}={v}" for k, v in n.params.items())
            lines.append(f"  {', '.join(n.outputs)} = {n.op}({', '.join(n.inputs)}; {params})  # {n.name}")
        lines.append("  return " + ", ".join(v.name for v in self.outputs))
        return "\n".join(lines)


def _define(graph: Graph, produced: set[str], name: str, what: str) -> None:
    graph.value(name)
    if name in produced:
        raise ValueError(f"graph {graph.name!r}: {name!r} is produced twice (again as {what})")
    produced.add(name)


def _sig(v: Value) -> str:
    return f"{v.name}: {v.dtype}{list(v.shape)}"


def values_of(items: Iterable[Value]) -> dict[str, Value]:
    return {v.name: v for v in items}
