"""The loop-nest IR: the single input of the LLVM codegen, the CUDA codegen and the cost model.

Expressions are the te nodes (`Var`, `Const`, `Binary`, `Compare`, `And`, `Or`, `Not`, `Select`,
`Call`, `Cast`) plus three that exist only after lowering: `Load`, `Ramp`, `Broadcast`.
Statements are below. Every node is immutable; passes rebuild what they change.

Invariants (checked by `ir.passes.verify`): loops start at 0 and have constant extents; buffers
are flat (one index per access); after lowering no `TensorLoad`/`Reduce` remain, and no loop is
VECTORIZED or UNROLLED (those passes turned them into `Ramp`/`Broadcast` lanes and copies).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..te.expr import Expr, Node, Var


@dataclass(frozen=True, slots=True, eq=False)
class Buffer:
    """A flat, row-major memory region.

    name: for printing and codegen symbols. shape: logical shape (row-major strides follow).
    dtype: element dtype. scope: "global" (function argument or heap), "local" (stack/registers),
    "shared" (GPU block-shared). double_buffer: GPU, a shared buffer refilled at each iteration
    of the loop around its allocation, to be split in two by the double-buffer pass.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    scope: str = "global"
    double_buffer: bool = False

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


@dataclass(frozen=True, slots=True, eq=False)
class Load(Expr):
    """Read `buffer[index]`. A vector `index` (lanes > 1) reads that many elements.

    predicate: None, or a bool expression with the index's lanes; lanes where it is false are
    not read (their value is undefined).
    """

    buffer: Buffer
    index: Expr
    predicate: Expr | None = None

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.buffer.dtype

    @property
    def lanes(self) -> int:
        return self.index.lanes


@dataclass(frozen=True, slots=True, eq=False)
class Ramp(Expr):
    """The int vector [base, base + stride, ..., base + (lanes-1)*stride]; base and stride scalar."""

    base: Expr
    stride: Expr
    lanes_: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.base.dtype

    @property
    def lanes(self) -> int:
        return self.lanes_


@dataclass(frozen=True, slots=True, eq=False)
class Broadcast(Expr):
    """The scalar `value` repeated `lanes_` times."""

    value: Expr
    lanes_: int

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.value.dtype

    @property
    def lanes(self) -> int:
        return self.lanes_


class Stmt(Node):
    """Base of statements."""

    __slots__ = ()

    def __str__(self) -> str:
        from .printer import stmt_str

        return stmt_str(self)

    __repr__ = __str__


class ForKind(enum.Enum):
    SERIAL = "for"
    PARALLEL = "parallel"        # iterations spread over CPU threads
    VECTORIZED = "vectorized"    # removed by the vectorize pass
    UNROLLED = "unrolled"        # removed by the unroll pass
    THREAD_BOUND = "bound"       # GPU: the loop is a thread/block index named by `thread`


@dataclass(frozen=True, slots=True, eq=False)
class For(Stmt):
    """`for var in range(extent): body`. The loop starts at 0; extent is a constant.

    thread: for THREAD_BOUND loops the axis name ("blockIdx.x", "threadIdx.y", "vthread", ...).
    """

    var: Var
    extent: int
    kind: ForKind
    body: Stmt
    thread: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class Store(Stmt):
    """`buffer[index] = value`; vector index and value write `lanes` elements.

    predicate: None, or a bool expression with the value's lanes; false lanes are not written.
    """

    buffer: Buffer
    index: Expr
    value: Expr
    predicate: Expr | None = None


@dataclass(frozen=True, slots=True, eq=False)
class Allocate(Stmt):
    """Storage for `buffer` (its scope says where) live during `body`."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False)
class IfThenElse(Stmt):
    """`if cond: then_case else: else_case` (else_case may be None)."""

    cond: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, slots=True, eq=False)
class Let(Stmt):
    """Bind `var = value` (evaluated once) for `body`."""

    var: Var
    value: Expr
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False)
class Prefetch(Stmt):
    """A hint that `buffer[index]` (a scalar index) will be read soon: its cache line is fetched
    ahead, nothing is read or written. The index may lie past the buffer's end (a prefetch of
    what the last iterations would read next); no access happens there, so that is harmless."""

    buffer: Buffer
    index: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Evaluate(Stmt):
    """Evaluate an expression for its effect (e.g. a barrier intrinsic on GPU)."""

    value: Expr


@dataclass(frozen=True, slots=True, eq=False)
class ThreadAllReduce(Stmt):
    """GPU: combine `buffer[0]` (a local accumulator) across the threads of `thread` (e.g.
    "threadIdx.x") with `combiner` ("sum", "max", "min"); afterwards every one of those threads
    holds the total. Lowered from a reduction whose axis is bound to threads. Read serially (one
    accumulator for all iterations of the bound loop) it is a no-op."""

    buffer: Buffer
    combiner: str
    thread: str


@dataclass(frozen=True, slots=True, eq=False)
class Seq(Stmt):
    """Statements in order."""

    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True, eq=False)
class PrimFunc:
    """A lowered function: `params` are the argument buffers in call order; `body` the code.

    attrs: free-form facts for backends (e.g. {"target": "llvm"}).
    """

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    attrs: dict = field(default_factory=dict)

    def __str__(self) -> str:
        from .printer import func_str

        return func_str(self)

    __repr__ = __str__


def seq(*stmts: Stmt | None) -> Stmt:
    """A Seq of the given statements, flattening nested Seqs and dropping None."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        flat.extend(s.stmts if isinstance(s, Seq) else (s,))
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))
