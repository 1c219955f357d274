"""A model's weight transforms, done at compile time (issue 14: "never per call").

A conv kernel repacks or transforms its weight on every call: the blocked `kernel_vec` of
"nchwc", Winograd's U = G g G^T. For each kernel node reading graph constants, its kernel is
split (`autotune.runtime.hoist`: the same task and config, only the build differs): the
prologue runs here, once, on the constants, and the node's kernel reads what it made. The
hoisted tensors become weights of the model; a raw constant that no node reads any more is not
bound at all. Kernels sharing a weight and a kernel share what it became. `tune_model` measures
each such kernel split the same way (`Task.set_constant_inputs`), so the times it ranked configs
by are those of the kernels run here.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..interop import contiguous
from ..runtime import Hoisted, Kernel, hoist
from .ir import Graph, Node


@dataclass(frozen=True)
class HoistedWeights:
    """Per kernel node (by index) whose kernel was split: its function and argument names
    (inputs, then outputs); `constants`: the hoisted tensors by name; `unread`: the graph
    constants no node reads any more."""

    funcs: dict[int, Callable[..., None]] = field(default_factory=dict)
    args: dict[int, tuple[str, ...]] = field(default_factory=dict)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    unread: frozenset[str] = frozenset()


def hoist_weights(graph: Graph, kernels: dict[int, Kernel]) -> HoistedWeights:
    """Split every kernel node that reads constants (module docstring) and run the prologues."""
    funcs: dict[int, Callable[..., None]] = {}
    args: dict[int, tuple[str, ...]] = {}
    constants: dict[str, np.ndarray] = {}
    for i, kernel in kernels.items():
        node = graph.nodes[i]
        consts = graph.constant_positions(node)
        split = hoist(kernel, consts) if consts else None
        if split is None:
            continue
        names = [_name(node, kernel, split, j) for j in range(len(split.specs))]
        if any(n not in constants for n in names):
            constants.update(zip(names, _run_prologue(graph, node, split)))
        funcs[i] = split.func
        args[i] = (*(node.inputs[p] if kind == "input" else names[p] for kind, p in split.sources), *node.outputs)
    read = {v for i, n in enumerate(graph.nodes) for v in args.get(i, n.inputs)} | {v.name for v in graph.outputs}
    return HoistedWeights(funcs, args, constants, frozenset(c for c in graph.constants if c not in read))


def _name(node: Node, kernel: Kernel, split: Hoisted, j: int) -> str:
    """A hoisted tensor's name: its stage, the constants it is made from and the kernel (its
    workload, which fixes the config in a model), so equal transforms of one weight are one."""
    made_from = [node.inputs[p] for p in split.prologue_inputs]
    digest = hashlib.sha256(repr((made_from, kernel.workload_key)).encode()).hexdigest()[:8]
    return f"{made_from[0]}/{split.specs[j][0]}#{digest}"


def _run_prologue(graph: Graph, node: Node, split: Hoisted) -> list[np.ndarray]:
    """The hoisted tensors of `node`'s kernel, computed from the graph's constants."""
    ins = [contiguous(graph.constants[node.inputs[p]]) for p in split.prologue_inputs]
    outs = [np.empty(shape, dtype) for _, shape, dtype in split.specs]
    split.prologue(*ins, *outs)
    return outs

