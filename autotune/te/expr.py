"""Expression nodes shared by tensor expressions and the loop IR, with operator overloading.

Identity semantics as in TVM: two `Var("i")` are two variables. `a == b` builds a deferred
equality: an expression inside another expression, `a is b` when truth-tested. Structural
equality for tests lives in `autotune.ir.functor.structural_equal`.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..dtype import dtype_info, is_float, is_int

INDEX_DTYPE = "int32"


class BinOp(enum.Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"            # true division, floats only
    FLOORDIV = "//"      # floor division, integers only
    FLOORMOD = "%"       # floor modulo (sign of the divisor), integers only
    MAX = "max"
    MIN = "min"


class CmpOp(enum.Enum):
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    EQ = "=="
    NE = "!="


class Node:
    """Marker base of every IR node (expressions here, statements in `autotune.ir.nodes`)."""

    __slots__ = ()


class ExprOps:
    """Python operators that build expression nodes; shared by Expr and IterVar."""

    __slots__ = ()

    def __add__(self, o: Any) -> Expr: return binary(BinOp.ADD, self, o)
    def __radd__(self, o: Any) -> Expr: return binary(BinOp.ADD, o, self)
    def __sub__(self, o: Any) -> Expr: return binary(BinOp.SUB, self, o)
    def __rsub__(self, o: Any) -> Expr: return binary(BinOp.SUB, o, self)
    def __mul__(self, o: Any) -> Expr: return binary(BinOp.MUL, self, o)
    def __rmul__(self, o: Any) -> Expr: return binary(BinOp.MUL, o, self)
    def __truediv__(self, o: Any) -> Expr: return binary(BinOp.DIV, self, o)
    def __rtruediv__(self, o: Any) -> Expr: return binary(BinOp.DIV, o, self)
    def __floordiv__(self, o: Any) -> Expr: return binary(BinOp.FLOORDIV, self, o)
    def __rfloordiv__(self, o: Any) -> Expr: return binary(BinOp.FLOORDIV, o, self)
    def __mod__(self, o: Any) -> Expr: return binary(BinOp.FLOORMOD, self, o)
    def __rmod__(self, o: Any) -> Expr: return binary(BinOp.FLOORMOD, o, self)
    def __neg__(self) -> Expr: return binary(BinOp.SUB, const(0, as_expr(self).dtype), self)
    def __lt__(self, o: Any) -> Expr: return compare(CmpOp.LT, self, o)
    def __le__(self, o: Any) -> Expr: return compare(CmpOp.LE, self, o)
    def __gt__(self, o: Any) -> Expr: return compare(CmpOp.GT, self, o)
    def __ge__(self, o: Any) -> Expr: return compare(CmpOp.GE, self, o)

    def __eq__(self, o: Any) -> Any:
        if not isinstance(o, (ExprOps, int, float)):
            return NotImplemented
        return compare(CmpOp.EQ, self, o)

    def __ne__(self, o: Any) -> Any:
        if not isinstance(o, (ExprOps, int, float)):
            return NotImplemented
        return compare(CmpOp.NE, self, o)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError(
            f"cannot use the expression {self} as a Python bool; use te.all / te.any / "
            "te.if_then_else to build conditions"
        )

    def astype(self, dtype: str) -> Expr:
        return cast(dtype, self)


class Expr(ExprOps, Node):
    """Base of expression nodes. Every node has a `dtype`; vector nodes have `lanes` > 1."""

    __slots__ = ()
    dtype: str

    @property
    def lanes(self) -> int:
        return 1

    def __str__(self) -> str:
        from .printer import expr_str

        return expr_str(self)

    __repr__ = __str__


@dataclass(frozen=True, slots=True, eq=False)
class Var(Expr):
    """A scalar variable (loop variable, iteration variable). Identity is the variable."""

    name: str
    dtype: str = INDEX_DTYPE


@dataclass(frozen=True, slots=True, eq=False)
class Const(Expr):
    """A scalar constant of `dtype`; `value` is a Python int, float or bool."""

    value: int | float | bool
    dtype: str


class _TwoOperands(Expr):
    """Nodes with operands `a` and `b` of equal lane counts (after vectorization)."""

    __slots__ = ()
    a: Expr
    b: Expr

    @property
    def lanes(self) -> int:
        return max(self.a.lanes, self.b.lanes)


@dataclass(frozen=True, slots=True, eq=False)
class Binary(_TwoOperands):
    """Arithmetic `a op b`; operands share `dtype`."""

    op: BinOp
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.a.dtype


@dataclass(frozen=True, slots=True, eq=False)
class Compare(_TwoOperands):
    """Comparison `a op b` of same-dtype operands; dtype bool. EQ/NE truth-test as identity."""

    op: CmpOp
    a: Expr
    b: Expr

    dtype = "bool"

    def __bool__(self) -> bool:
        if self.op is CmpOp.EQ:
            return self.a is self.b
        if self.op is CmpOp.NE:
            return self.a is not self.b
        return ExprOps.__bool__(self)


@dataclass(frozen=True, slots=True, eq=False)
class And(_TwoOperands):
    """Logical and of two bool expressions."""

    a: Expr
    b: Expr
    dtype = "bool"


@dataclass(frozen=True, slots=True, eq=False)
class Or(_TwoOperands):
    """Logical or of two bool expressions."""

    a: Expr
    b: Expr
    dtype = "bool"


@dataclass(frozen=True, slots=True, eq=False)
class Not(Expr):
    """Logical negation of a bool expression."""

    a: Expr
    dtype = "bool"

    @property
    def lanes(self) -> int:
        return self.a.lanes


@dataclass(frozen=True, slots=True, eq=False)
class Select(Expr):
    """`cond ? t : f`; both branches are evaluated (no side effects in expressions)."""

    cond: Expr
    t: Expr
    f: Expr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.t.dtype

    @property
    def lanes(self) -> int:
        return max(self.cond.lanes, self.t.lanes, self.f.lanes)


@dataclass(frozen=True, slots=True, eq=False)
class Call(Expr):
    """A pure math intrinsic by name (see `INTRINSICS`), e.g. Call("exp", (x,), "float32")."""

    fn: str
    args: tuple[Expr, ...]
    dtype: str

    @property
    def lanes(self) -> int:
        return max((a.lanes for a in self.args), default=1)


@dataclass(frozen=True, slots=True, eq=False)
class Cast(Expr):
    """Conversion of `value` to `dtype` (numpy's astype semantics)."""

    dtype: str
    value: Expr

    @property
    def lanes(self) -> int:
        return self.value.lanes


@dataclass(frozen=True, slots=True, eq=False)
class IterVar(ExprOps):
    """An iteration axis: `var` ranges over [dom_min, dom_min + extent). kind: "data", "reduce"
    or "thread" (a GPU index from te.thread_axis, whose `thread_tag` is e.g. "threadIdx.x").

    Usable directly in expressions (it stands for its var), as in TVM.
    """

    var: Var
    dom_min: int
    extent: int
    kind: str = "data"
    thread_tag: str = ""

    @property
    def name(self) -> str:
        return self.var.name

    @property
    def dtype(self) -> str:
        return self.var.dtype

    def __str__(self) -> str:
        return f"IterVar({self.var.name}, [{self.dom_min}, {self.dom_min + self.extent}), {self.kind})"

    __repr__ = __str__


@dataclass(frozen=True, slots=True, eq=False)
class TensorLoad(Expr):
    """te only: `tensor[indices]` with one index per dimension (lowered to a flat Load)."""

    tensor: Any  # autotune.te.tensor.Tensor; typed loosely to keep expr.py free of cycles
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.tensor.dtype


@dataclass(frozen=True, slots=True, eq=False)
class Reduce(Expr):
    """te only: a commutative reduction of `source` over `axis` ("sum", "max" or "min").

    Lowered to an init store of the combiner's identity and an update store. Only legal as the
    whole body of a compute.
    """

    combiner: str
    source: Expr
    axis: tuple[IterVar, ...]
    condition: Expr | None = None

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.source.dtype


# Math intrinsics: name -> number of arguments. Backends map each name to their own function.
INTRINSICS = {
    "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "sigmoid": 1, "erf": 1,
    "fabs": 1, "floor": 1, "ceil": 1, "pow": 2, "sin": 1, "cos": 1,
}


def const(value: int | float | bool, dtype: str | None = None) -> Const:
    """A constant; dtype defaults to int32 for ints, float32 for floats, bool for bools."""
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else INDEX_DTYPE if isinstance(value, int) else "float32"
    info = dtype_info(dtype)
    if info.kind == "float":
        return Const(float(value), dtype)
    if info.kind == "bool":
        return Const(bool(value), dtype)
    if isinstance(value, float) and not value.is_integer():
        raise TypeError(f"constant {value} is not representable as {dtype}")
    return Const(int(value), dtype)


def as_expr(x: Any, like: str | None = None) -> Expr:
    """Convert an operand to an Expr; Python numbers take the dtype of the other operand."""
    if isinstance(x, Expr):
        return x
    if isinstance(x, IterVar):
        return x.var
    if isinstance(x, bool):
        return const(x, "bool")
    if isinstance(x, int):
        return const(x, like if like is not None and like != "bool" else INDEX_DTYPE)
    if isinstance(x, float):
        if like is not None and is_int(like):
            raise TypeError(f"cannot mix the float constant {x} with an {like} expression; use .astype")
        return const(x, like if like is not None and is_float(like) else "float32")
    if hasattr(x, "op") and hasattr(x, "shape"):
        raise TypeError(f"tensor {getattr(x, 'name', x)} used as a value; index it, e.g. {getattr(x, 'name', 'A')}[i]")
    raise TypeError(f"cannot use {type(x).__name__} {x!r} in an expression")


def _operands(a: Any, b: Any, what: str) -> tuple[Expr, Expr]:
    if not isinstance(a, (Expr, IterVar)) and isinstance(b, (Expr, IterVar)):
        eb = as_expr(b)
        return as_expr(a, eb.dtype), eb
    ea = as_expr(a)
    eb = as_expr(b, ea.dtype)
    if ea.dtype != eb.dtype:
        raise TypeError(f"{what} of mixed dtypes {ea.dtype} ({ea}) and {eb.dtype} ({eb}); use .astype to cast one")
    return ea, eb


def binary(op: BinOp, a: Any, b: Any) -> Expr:
    """Build `a op b` after dtype checks (integer-only and float-only operators)."""
    ea, eb = _operands(a, b, f"'{op.value}'")
    if op is BinOp.DIV and is_int(ea.dtype):
        raise TypeError(f"'/' on {ea.dtype} expressions ({ea} / {eb}); use // for integer division")
    if op in (BinOp.FLOORDIV, BinOp.FLOORMOD) and not is_int(ea.dtype):
        raise TypeError(f"'{op.value}' needs integer operands, got {ea.dtype} ({ea})")
    if ea.dtype == "bool":
        raise TypeError(f"arithmetic '{op.value}' on bool expression {ea}; use .astype")
    return Binary(op, ea, eb)


def compare(op: CmpOp, a: Any, b: Any) -> Compare:
    ea, eb = _operands(a, b, f"comparison '{op.value}'")
    return Compare(op, ea, eb)


def cast(dtype: str, x: Any) -> Expr:
    dtype_info(dtype)
    e = as_expr(x)
    return e if e.dtype == dtype else Cast(dtype, e)


def call(fn: str, *args: Any) -> Call:
    """An intrinsic call; float arguments only (integer arguments need an explicit cast)."""
    first = as_expr(args[0])
    exprs = tuple(as_expr(a, first.dtype) for a in args)
    for e in exprs:
        if not is_float(e.dtype):
            raise TypeError(f"{fn} needs float arguments, got {e.dtype} ({e}); use .astype('float32')")
        if e.dtype != first.dtype:
            raise TypeError(f"{fn} of mixed dtypes {first.dtype} and {e.dtype}; use .astype")
    if len(exprs) != INTRINSICS[fn]:
        raise TypeError(f"{fn} takes {INTRINSICS[fn]} argument(s), got {len(exprs)}")
    return Call(fn, exprs, first.dtype)


def as_bool(x: Any) -> Expr:
    e = as_expr(x)
    if e.dtype != "bool":
        raise TypeError(f"condition {e} has dtype {e.dtype}; expected a comparison (bool)")
    return e
