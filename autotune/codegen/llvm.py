"""Lowered PrimFunc -> llvmlite.ir.Module: one method per IR node, arithmetic from one table.

The generated function is `void name(T0* noalias p0, T1* noalias p1, ...)`, one pointer per
parameter buffer. PARALLEL loops are outlined into private functions launched by libgomp's
`GOMP_parallel`; the thread count comes from the module global NUM_THREADS_SYMBOL, which the
caller (`module.py`) sets before each call.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable

from llvmlite import ir

from ..dtype import dtype_info
from ..errors import BuildError
from ..ir.functor import walk
from ..ir.nodes import (Allocate, Broadcast, Evaluate, For, ForKind, IfThenElse, Let, Load,
                        PrimFunc, Ramp, Seq, Stmt, Store)
from ..te.expr import (And, Binary, BinOp, Call, Cast, Compare, Const, Expr, Not, Or,
                       Select, Var)
from . import llvm_helpers as h
from .llvm_helpers import CONTRACT, I32, PTR, VOID

NUM_THREADS_SYMBOL = "__autotune_num_threads"
RESERVED_NAMES = frozenset({NUM_THREADS_SYMBOL, "GOMP_parallel", "omp_get_thread_num",
                            "omp_get_num_threads", "aligned_alloc", "free", "erf"})
HEAP_THRESHOLD = 64 * 1024      # bytes: bigger "local" buffers go to the heap (thread stacks are small)
ALIGN = 64


@dataclass
class _Scope:
    """State of the LLVM function being emitted (the kernel or an outlined parallel body)."""

    builder: ir.IRBuilder
    vars: dict[Var, ir.Value]
    bufs: dict = field(default_factory=dict)        # Buffer -> pointer
    frees: list[ir.Value] = field(default_factory=list)  # hoisted heap buffers, freed at exit
    loop_depth: int = 0
    in_parallel: bool = False


# ---- arithmetic tables: (op, kind) -> fn(builder, x, y, nsw) ----------------------------------

def _float_op(name: str) -> Callable:
    return lambda b, x, y, nsw: getattr(b, name)(x, y, flags=CONTRACT)


def _int_op(name: str) -> Callable:
    return lambda b, x, y, nsw: getattr(b, name)(x, y, flags=("nsw",) if nsw else ())


def _pick(pred: str, kind: str) -> Callable:
    """max/min as compare + select (maps to maxps/minps; a NaN in `x` yields `y`)."""
    def emit(b, x, y, nsw):
        return b.select(h.compare(b, kind, pred, x, y), x, y)
    return emit


_FLOOR_DIVMOD = {"int": h.floor_divmod_signed, "uint": h.floor_divmod_unsigned}

_ARITH: dict[tuple[BinOp, str], Callable] = {
    (BinOp.ADD, "float"): _float_op("fadd"),
    (BinOp.SUB, "float"): _float_op("fsub"),
    (BinOp.MUL, "float"): _float_op("fmul"),
    (BinOp.DIV, "float"): lambda b, x, y, nsw: b.fdiv(x, y),
    (BinOp.MAX, "float"): _pick(">", "float"),
    (BinOp.MIN, "float"): _pick("<", "float"),
}
for _kind in ("int", "uint"):
    _ARITH.update({
        (BinOp.ADD, _kind): _int_op("add"),
        (BinOp.SUB, _kind): _int_op("sub"),
        (BinOp.MUL, _kind): _int_op("mul"),
        (BinOp.MAX, _kind): _pick(">", _kind),
        (BinOp.MIN, _kind): _pick("<", _kind),
        (BinOp.FLOORDIV, _kind): lambda b, x, y, nsw, k=_kind: _FLOOR_DIVMOD[k](b, x, y)[0],
        (BinOp.FLOORMOD, _kind): lambda b, x, y, nsw, k=_kind: _FLOOR_DIVMOD[k](b, x, y)[1],
    })

# Calls: LLVM intrinsics by name, or inline code (vectorizable, no libm call per lane).
_LLVM_INTRINSIC = {"exp": "exp", "log": "log", "sqrt": "sqrt", "fabs": "fabs", "floor": "floor",
                   "ceil": "ceil", "pow": "pow"}


_INLINE = {"rsqrt": h.emit_rsqrt, "tanh": h.emit_tanh, "sigmoid": h.emit_sigmoid, "erf": h.emit_erf}


def _is_contiguous(index: Expr) -> bool:
    return (isinstance(index, Ramp) and isinstance(index.stride, Const)
            and index.stride.value == 1)


def _captures(loop: For) -> tuple[list[Var], list]:
    """Free variables and buffers of a parallel loop's body, in first-use order."""
    used_vars: dict[Var, None] = {}
    bound_vars = {loop.var}
    used_bufs: dict = {}
    bound_bufs = set()

    def visit(n):
        if isinstance(n, Var):
            used_vars.setdefault(n)
        elif isinstance(n, (For, Let)):
            bound_vars.add(n.var)
        elif isinstance(n, (Load, Store)):
            used_bufs.setdefault(n.buffer)
        elif isinstance(n, Allocate):
            bound_bufs.add(n.buffer)

    walk(loop.body, visit)
    return ([v for v in used_vars if v not in bound_vars],
            [buf for buf in used_bufs if buf not in bound_bufs])


class LLVMCodegen:
    """Emits one PrimFunc. `parallel=False` (no libgomp) runs PARALLEL loops serially."""

    def __init__(self, func: PrimFunc, parallel: bool = True):
        self.func = func
        self.parallel = parallel
        self.module = ir.Module(name=func.name)
        self.scope: _Scope
        self._nsw = False
        self._outlined = 0
        self._num_threads = ir.GlobalVariable(self.module, I32, NUM_THREADS_SYMBOL)
        self._num_threads.initializer = ir.Constant(I32, 0)

    def build(self, triple: str = "", data_layout: str = "") -> ir.Module:
        if triple:
            self.module.triple = triple
        if data_layout:
            self.module.data_layout = data_layout
        params = self.func.params
        if len(set(map(id, params))) != len(params):
            raise BuildError(f"function {self.func.name}: a buffer appears twice in its params")
        fn = self._new_function(entry_symbol(self.func), [PTR] * len(params), noalias=len(params))
        for arg, buf in zip(fn.args, params):
            arg.name = buf.name
        self._emit(fn, {}, dict(zip(params, fn.args)), lambda: self.stmt(self.func.body))
        return self.module

    # ---- functions ---------------------------------------------------------------------------

    def _new_function(self, name: str, args: list[ir.Type], noalias: int = 0,
                      internal: bool = False) -> ir.Function:
        fn = ir.Function(self.module, ir.FunctionType(VOID, args), name)
        fn.attributes.add("nounwind")
        if internal:
            fn.linkage = "internal"
        for arg in fn.args[:noalias]:
            arg.add_attribute("noalias")
        return fn

    def _emit(self, fn: ir.Function, vars: dict, bufs: dict, body: Callable[[], None],
              in_parallel: bool = False) -> None:
        """Generate `body` as the code of `fn` in a fresh scope; heap buffers freed at exit."""
        outer = getattr(self, "scope", None)
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        self.scope = _Scope(builder, dict(vars), dict(bufs), in_parallel=in_parallel)
        body()
        for ptr in self.scope.frees:
            h.heap_free(builder, ptr)
        builder.ret_void()
        if outer is not None:
            self.scope = outer

    @property
    def b(self) -> ir.IRBuilder:
        return self.scope.builder

    # ---- expressions -------------------------------------------------------------------------

    def expr(self, e: Expr) -> ir.Value:
        method = self._EXPR.get(type(e))
        if method is None:
            raise BuildError(f"llvm codegen: cannot compile expression {type(e).__name__} {e} "
                             "(lowering should have removed it)")
        return method(self, e)

    def index(self, e: Expr) -> ir.Value:
        """An int32 index expression; its arithmetic is marked nsw (no signed wrap)."""
        saved, self._nsw = self._nsw, True
        try:
            return self.expr(e)
        finally:
            self._nsw = saved

    def _pair(self, a: Expr, b: Expr) -> tuple[ir.Value, ir.Value]:
        x, y = self.expr(a), self.expr(b)
        lanes = max(h.lanes_of(x), h.lanes_of(y))
        return h.splat(self.b, x, lanes), h.splat(self.b, y, lanes)

    def _var(self, e: Var) -> ir.Value:
        value = self.scope.vars.get(e)
        if value is None:
            raise BuildError(f"llvm codegen: variable {e.name} is used outside the loop or let "
                             "that binds it")
        return value

    def _const(self, e: Const) -> ir.Value:
        value = int(e.value) if e.dtype == "bool" else e.value
        return ir.Constant(h.scalar_type(e.dtype), value)

    def _binary(self, e: Binary) -> ir.Value:
        kind = dtype_info(e.dtype).kind
        emit = _ARITH.get((e.op, kind))
        if emit is None:
            raise BuildError(f"llvm codegen: operator '{e.op.value}' is not defined on {e.dtype} "
                             f"(in {e})")
        x, y = self._pair(e.a, e.b)
        return emit(self.b, x, y, self._nsw)

    def _compare(self, e: Compare) -> ir.Value:
        x, y = self._pair(e.a, e.b)
        return h.compare(self.b, dtype_info(e.a.dtype).kind, e.op.value, x, y)

    def _and(self, e: And) -> ir.Value:
        return self.b.and_(*self._pair(e.a, e.b))

    def _or(self, e: Or) -> ir.Value:
        return self.b.or_(*self._pair(e.a, e.b))

    def _not(self, e: Not) -> ir.Value:
        return self.b.not_(self.expr(e.a))

    def _select(self, e: Select) -> ir.Value:
        t, f = self._pair(e.t, e.f)
        cond = self.expr(e.cond)
        if h.lanes_of(cond) != h.lanes_of(t):
            lanes = max(h.lanes_of(cond), h.lanes_of(t))
            cond, t, f = (h.splat(self.b, v, lanes) for v in (cond, t, f))
        return self.b.select(cond, t, f)

    def _cast(self, e: Cast) -> ir.Value:
        return h.cast_value(self.b, self.expr(e.value), e.value.dtype, e.dtype)

    def _call(self, e: Call) -> ir.Value:
        args = [self.expr(a) for a in e.args]
        lanes = max(h.lanes_of(a) for a in args)
        args = [h.splat(self.b, a, lanes) for a in args]
        if e.dtype == "float16":   # compute in float, like the hardware would
            args = [self.b.fpext(a, h.value_type("float32", lanes)) for a in args]
        if e.fn in _LLVM_INTRINSIC:
            out = h.call_intrinsic(self.b, _LLVM_INTRINSIC[e.fn], args)
        elif e.fn in _INLINE:
            out = _INLINE[e.fn](self.b, *args)
        else:
            raise BuildError(f"llvm codegen: unknown intrinsic {e.fn!r} in {e}")
        return self.b.fptrunc(out, h.value_type("float16", lanes)) if e.dtype == "float16" else out

    def _ramp(self, e: Ramp) -> ir.Value:
        base = h.splat(self.b, self.expr(e.base), e.lanes)
        ity = h.value_type(e.dtype, e.lanes)
        if isinstance(e.stride, Const):
            steps = ir.Constant(ity, [ir.Constant(ity.element, i * e.stride.value) for i in range(e.lanes)])
        else:
            iota = ir.Constant(ity, [ir.Constant(ity.element, i) for i in range(e.lanes)])
            steps = self.b.mul(h.splat(self.b, self.expr(e.stride), e.lanes), iota)
        return self.b.add(base, steps, flags=("nsw",) if self._nsw else ())

    def _broadcast(self, e: Broadcast) -> ir.Value:
        return h.splat(self.b, self.expr(e.value), e.lanes)

    def _buffer(self, buf) -> ir.Value:
        ptr = self.scope.bufs.get(buf)
        if ptr is None:
            raise BuildError(f"llvm codegen: buffer {buf.name} is neither a parameter of "
                             f"{self.func.name} nor allocated around its use")
        return ptr

    def _mask(self, predicate: Expr | None, lanes: int) -> ir.Value | None:
        if predicate is None:
            return None
        if predicate.lanes not in (1, lanes):
            raise BuildError(f"llvm codegen: predicate {predicate} has {predicate.lanes} lanes "
                             f"for a {lanes}-lane access")
        return h.splat(self.b, self.expr(predicate), lanes)

    def _load(self, e: Load) -> ir.Value:
        base, elem, b = self._buffer(e.buffer), h.memory_type(e.dtype), self.b
        mask = self._mask(e.predicate, e.lanes)
        if isinstance(e.index, Broadcast) and mask is None:     # one element, every lane
            value = h.splat(b, b.load(h.element_ptr(b, base, self.index(e.index.value), elem),
                                      typ=elem, align=h.element_bytes(elem)), e.lanes)
        elif _is_contiguous(e.index):
            ptr = h.element_ptr(b, base, self.index(e.index.base), elem)
            value = h.load_vector(b, ptr, h.vector_of(elem, e.lanes), mask)
        else:
            index = self.index(e.index)
            if mask is not None:    # masked-off lanes read element 0, which always exists
                index = b.select(mask, index, h.const_like(index.type, 0))
            if e.lanes == 1:
                value = b.load(h.element_ptr(b, base, index, elem), typ=elem,
                               align=h.element_bytes(elem))
            else:
                value = h.gather(b, base, index, elem)
            if mask is not None:
                value = b.select(mask, value, h.const_like(value.type, 0))
        if e.dtype == "bool":
            value = b.icmp_unsigned("!=", value, h.const_like(value.type, 0))
        return value

    _EXPR: dict[type, Callable] = {
        Var: _var, Const: _const, Binary: _binary, Compare: _compare, And: _and, Or: _or,
        Not: _not, Select: _select, Cast: _cast, Call: _call, Ramp: _ramp,
        Broadcast: _broadcast, Load: _load,
    }

    # ---- statements --------------------------------------------------------------------------

    def stmt(self, s: Stmt) -> None:
        method = self._STMT.get(type(s))
        if method is None:
            raise BuildError(f"llvm codegen: cannot compile statement {type(s).__name__}:\n{s}")
        method(self, s)

    def _seq(self, s: Seq) -> None:
        for child in s.stmts:
            self.stmt(child)

    def _store(self, s: Store) -> None:
        base, elem, b = self._buffer(s.buffer), h.memory_type(s.buffer.dtype), self.b
        lanes = s.index.lanes
        value = self.expr(s.value)
        if h.lanes_of(value) != lanes:
            if h.lanes_of(value) != 1:
                raise BuildError(f"llvm codegen: store of {h.lanes_of(value)} lanes through a "
                                 f"{lanes}-lane index: {s}")
            value = h.splat(b, value, lanes)
        if s.buffer.dtype == "bool":
            value = b.zext(value, h.vector_of(elem, lanes))
        mask = self._mask(s.predicate, lanes)
        if _is_contiguous(s.index):
            h.store_vector(b, value, h.element_ptr(b, base, self.index(s.index.base), elem), mask)
        elif lanes > 1:
            h.scatter(b, value, base, self.index(s.index), mask)
        else:
            with (b.if_then(mask) if mask is not None else contextlib.nullcontext()):
                b.store(value, h.element_ptr(b, base, self.index(s.index), elem),
                        align=h.element_bytes(elem))

    def _for(self, s: For) -> None:
        if s.kind is ForKind.THREAD_BOUND:
            raise BuildError(f"loop {s.var.name} is bound to {s.thread}: the llvm target cannot "
                             "run thread-bound loops; build for target='cuda'")
        if s.kind in (ForKind.VECTORIZED, ForKind.UNROLLED):
            raise BuildError(f"loop {s.var.name} is still {s.kind.name}: the vectorize/unroll "
                             "passes of lowering should have removed it")
        if s.kind is ForKind.PARALLEL and self.parallel and not self.scope.in_parallel:
            self._parallel_for(s)
        else:   # a PARALLEL loop inside a parallel body runs serially in its thread
            self._loop(s.var, 0, s.extent, s.body)

    def _loop(self, var: Var, start, stop, body: Stmt) -> None:
        with h.for_range(self.b, start, stop, name=var.name) as i:
            with _bound(self.scope.vars, var, i):
                self.scope.loop_depth += 1
                self.stmt(body)
                self.scope.loop_depth -= 1

    def _parallel_for(self, s: For) -> None:
        """Outline the loop: body(bufs..., vars..., begin, end) does a chunk of iterations and is
        inlined into launcher(closure), which GOMP_parallel runs on every thread. The body's
        buffer pointers are noalias parameters, so inlining keeps their no-alias facts."""
        vars, bufs = _captures(s)
        values = [self._var(v) for v in vars]
        ptrs = [self._buffer(buf) for buf in bufs]
        name = f"{entry_symbol(self.func)}__parallel{self._outlined}"
        self._outlined += 1
        types = [PTR] * len(ptrs) + [v.type for v in values]
        body = self._new_function(f"{name}_body", types + [I32, I32], noalias=len(ptrs), internal=True)
        body.attributes.add("alwaysinline")
        args = body.args
        for arg, label in zip(args, [buf.name for buf in bufs] + [v.name for v in vars] + ["begin", "end"]):
            arg.name = label
        self._emit(body, dict(zip(vars, args[len(ptrs):-2])), dict(zip(bufs, args[:len(ptrs)])),
                   lambda: self._loop(s.var, args[-2], args[-1], s.body), in_parallel=True)
        closure_ty = ir.LiteralStructType(types)
        launcher = self._new_function(name, [PTR], internal=True)
        self._emit(launcher, {}, {}, lambda: self._launcher_body(launcher, closure_ty, body, s.extent))
        b = self.b
        closure = h.alloca_once(b, closure_ty, name=f"{name}.closure")
        for k, v in enumerate(ptrs + values):
            b.store(v, b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True,
                             source_etype=closure_ty))
        gomp = h.declare(self.module, "GOMP_parallel", VOID, [PTR, PTR, I32, I32])
        threads = b.load(self._num_threads, typ=I32)      # 0 (never set) lets libgomp choose
        cap = ir.Constant(I32, s.extent)                   # no idle threads for short loops
        threads = b.select(b.icmp_signed(">", threads, cap), cap, threads)
        b.call(gomp, [launcher, closure, threads, ir.Constant(I32, 0)])

    def _launcher_body(self, launcher: ir.Function, closure_ty, body: ir.Function, extent: int) -> None:
        b = self.b
        fields = [b.load(b.gep(launcher.args[0], [ir.Constant(I32, 0), ir.Constant(I32, k)],
                               inbounds=True, source_etype=closure_ty), typ=ty)
                  for k, ty in enumerate(closure_ty.elements)]
        tid = b.call(h.declare(self.module, "omp_get_thread_num", I32, []), [])
        nthreads = b.call(h.declare(self.module, "omp_get_num_threads", I32, []), [])
        # static schedule: thread t runs [t*chunk, min(extent, (t+1)*chunk))
        chunk = b.sdiv(b.add(nthreads, ir.Constant(I32, extent - 1)), nthreads)
        begin = b.mul(tid, chunk)
        end = b.add(begin, chunk)
        end = b.select(b.icmp_signed("<", end, ir.Constant(I32, extent)), end, ir.Constant(I32, extent))
        b.call(body, fields + [begin, end])

    def _allocate(self, s: Allocate) -> None:
        buf = s.buffer
        if buf.scope not in ("local", "global"):
            raise BuildError(f"llvm codegen: buffer {buf.name} has scope {buf.scope!r}; the llvm "
                             "target has only 'local' and 'global' memory")
        elem = h.memory_type(buf.dtype)
        nbytes = buf.size * dtype_info(buf.dtype).bytes
        b = self.b
        on_heap = buf.scope == "global" or nbytes > HEAP_THRESHOLD
        hoist = on_heap and self.scope.loop_depth > 0
        if not on_heap:
            ptr = h.alloca_once(b, elem, max(buf.size, 1), name=buf.name, align=ALIGN)
        elif hoist:   # once per function call instead of once per loop iteration
            with b.goto_entry_block():
                b.position_at_start(b.block)
                ptr = h.heap_alloc(b, nbytes, ALIGN)
            self.scope.frees.append(ptr)
        else:
            ptr = h.heap_alloc(b, nbytes, ALIGN)
        with _bound(self.scope.bufs, buf, ptr):
            self.stmt(s.body)
        if on_heap and not hoist:
            h.heap_free(self.b, ptr)

    def _if(self, s: IfThenElse) -> None:
        cond = self.expr(s.cond)
        if h.lanes_of(cond) != 1:
            raise BuildError(f"llvm codegen: if condition {s.cond} is a vector")
        if s.else_case is None:
            with self.b.if_then(cond):
                self.stmt(s.then_case)
            return
        with self.b.if_else(cond) as (then, other):
            with then:
                self.stmt(s.then_case)
            with other:
                self.stmt(s.else_case)

    def _let(self, s: Let) -> None:
        with _bound(self.scope.vars, s.var, self.expr(s.value)):
            self.stmt(s.body)

    def _evaluate(self, s: Evaluate) -> None:
        if not isinstance(s.value, Const):
            raise BuildError(f"llvm codegen: cannot evaluate {s.value} for its effect on the "
                             "llvm target")

    _STMT: dict[type, Callable] = {
        Seq: _seq, Store: _store, For: _for, Allocate: _allocate, IfThenElse: _if, Let: _let,
        Evaluate: _evaluate,
    }


@contextlib.contextmanager
def _bound(table: dict, key, value):
    """table[key] = value for the extent of a `with`, then any outer binding again."""
    saved = table.get(key)
    table[key] = value
    try:
        yield
    finally:
        if saved is None:
            del table[key]
        else:
            table[key] = saved


def entry_symbol(func: PrimFunc) -> str:
    """The kernel's symbol: its name, unless that is a function the generated code calls."""
    name = func.name
    return f"{name}__kernel" if name in RESERVED_NAMES or name.startswith("llvm.") else name


def emit_module(func: PrimFunc, parallel: bool = True, triple: str = "",
                data_layout: str = "") -> ir.Module:
    """The llvmlite module of `func`; its entry point is `entry_symbol(func)`."""
    return LLVMCodegen(func, parallel).build(triple, data_layout)
