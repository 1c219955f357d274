"""Tensors and the operations that produce them (placeholder, compute and extern)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .expr import Expr, IterVar, Reduce, TensorLoad, as_expr
from .traversal import walk


class Operation:
    """Base of operations; each produces one tensor (`output(0)`)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    # Declared, not defined: schedule templates read a compute op's axes through the Operation of a
    # tensor or stage (TVM's `s[C].op.axis`). Only ComputeOp sets them; on another op the read is an
    # AttributeError, as it always was.
    axis: tuple[IterVar, ...]
    reduce_axis: tuple[IterVar, ...]

    def output(self, index: int = 0) -> Tensor:
        if index != 0:
            raise IndexError(f"operation {self.name} has one output, asked for output {index}")
        return self._tensor  # type: ignore[attr-defined]

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name}, shape={self.shape}, {self.dtype})"


@dataclass(eq=False, repr=False)
class PlaceholderOp(Operation):
    """An input tensor supplied by the caller."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        self._tensor = Tensor(self, 0)


@dataclass(eq=False, repr=False)
class ComputeOp(Operation):
    """`out[axis] = body`; the body is an expression of `axis` vars, or a single Reduce.

    axis: one data-parallel IterVar per output dimension. reduce_axis: the Reduce's axes.
    """

    name: str
    axis: tuple[IterVar, ...]
    body: Expr
    dtype: str = ""
    reduce_axis: tuple[IterVar, ...] = field(default=())
    tag: str = ""

    def __post_init__(self) -> None:
        self.dtype = self.body.dtype
        self.shape = tuple(iv.extent for iv in self.axis)
        self.reduce_axis = self.body.axis if isinstance(self.body, Reduce) else ()
        self._tensor = Tensor(self, 0)

    @property
    def input_tensors(self) -> list[Tensor]:
        seen: dict[int, Tensor] = {}

        def visit(n: Any) -> None:
            if isinstance(n, TensorLoad) and id(n.tensor) not in seen:
                seen[id(n.tensor)] = n.tensor

        walk(self.body, visit)
        return list(seen.values())


@dataclass(eq=False, repr=False)
class ExternOp(Operation):
    """An output whose loops are written by hand as loop IR (TVM's te.extern + ir_builder): for
    algorithms the schedule language cannot express, such as a recurrence carried across a loop
    (the online softmax of flash attention). Its stage has no axes to schedule; what would be
    schedule knobs (tile sizes, vector widths) are arguments of the function that writes the IR.
    CPU only: the IR builder writes no GPU thread-bound loops.

    build(inputs, output): given the flat buffers of `inputs` and of the output, the statement
    that writes every element of the output. flop: float operations of one run (for GFLOP/s).
    reduction: the longest sum behind one output element (sets the float tolerance of checks).
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    inputs: tuple[Tensor, ...]
    build: Callable[..., Any]
    flop: float
    reduction: int = 1
    tag: str = ""

    def __post_init__(self) -> None:
        self._tensor = Tensor(self, 0)

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self.inputs)


class Tensor:
    """The output of an operation: index it (`A[i, j]` or `A(i, j)`) to build a load."""

    __slots__ = ("op", "value_index")

    def __init__(self, op: Operation, value_index: int) -> None:
        self.op = op
        self.value_index = value_index

    @property
    def shape(self) -> tuple[int, ...]:
        return self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtype

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.op.shape)

    def __call__(self, *indices: Any) -> TensorLoad:
        if len(indices) == 1 and isinstance(indices[0], (tuple, list)):
            indices = tuple(indices[0])
        if len(indices) != self.ndim:
            raise IndexError(f"tensor {self.name} has {self.ndim} dimensions, indexed with {len(indices)}")
        exprs = tuple(as_expr(i) for i in indices)
        for e in exprs:
            if e.dtype not in ("int32", "int64"):
                raise TypeError(f"index {e} of tensor {self.name} has dtype {e.dtype}; expected an integer")
        return TensorLoad(self, exprs)

    def __getitem__(self, indices: Any) -> TensorLoad:
        return self(*indices) if isinstance(indices, tuple) else self(indices)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={self.shape}, {self.dtype})"

    def __bool__(self) -> bool:
        return True


def post_order(ops: Iterable[Operation]) -> list[Operation]:
    """The operations reachable from `ops`, each once, producers before their consumers."""
    order: list[Operation] = []
    seen: set[int] = set()

    def visit(op: Operation) -> None:
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in op.input_tensors:
            visit(t.op)
        order.append(op)

    for op in ops:
        visit(op)
    return order
