"""Lowered PrimFunc -> llvmlite.ir.Module: one method per IR node, arithmetic from one table.

Around it: llvm_abi.py (the kernel's signature, status codes and globals, as its caller sees
them), llvm_access.py (which way a vector index reads memory), llvm_helpers.py (types, loops,
arithmetic, memory access), llvm_loop_hints.py (the loops LLVM's vectorizer and unroller leave
alone), llvm_math.py (inline exp, log, tanh, ...) and llvm_parallel.py (PARALLEL loops outlined
for libgomp's `GOMP_parallel`).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, cast

from llvmlite import ir

from ..dtype import dtype_info
from ..errors import BuildError
from ..ir.nodes import (
    Allocate,
    Broadcast,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    Let,
    Load,
    Prefetch,
    PrimFunc,
    Ramp,
    Seq,
    Stmt,
    Store,
)
from ..te.expr import And, Binary, Call, Cast, Compare, Const, Expr, Not, Or, Select, Var
from . import llvm_helpers as h, llvm_vectors as vec
from .llvm_abi import NUM_THREADS_SYMBOL, define_heap_table, entry_symbol, status_error
from .llvm_access import is_contiguous, is_short_stride, rising_window, short_spread
from .llvm_helpers import I32, PTR, VOID
from .llvm_loop_hints import llvm_may_unroll, periodic_vars
from .llvm_math import INLINE
from .llvm_parallel import emit_parallel_for, warn_serial_once
from .llvm_transpose import emit_store_run

HEAP_THRESHOLD = 64 * 1024      # bytes: bigger "local" buffers go to the heap (thread stacks are small)
ALIGN = 64
REGISTER_FILE_BYTES = 32 * 64   # AVX-512's vector registers: the most a register tile can hold

__all__ = ["NUM_THREADS_SYMBOL", "LLVMCodegen", "emit_module", "entry_symbol", "status_error"]


@dataclass
class _Scope:
    """State of the LLVM function being emitted (the kernel or an outlined parallel body)."""

    builder: ir.IRBuilder
    vars: dict[Var, ir.Value]
    bufs: dict = field(default_factory=dict)        # Buffer -> pointer
    frees: list[ir.Value] = field(default_factory=list)  # hoisted heap buffers, freed at exit
    live_heap: list[ir.Value] = field(default_factory=list)  # enclosing heap buffers, innermost last
    loop_depth: int = 0
    in_parallel: bool = False
    status: ir.Value | None = None      # outlined body: where an allocation failure is reported
    fail: ir.Block | None = None        # the failure exit, made on first use
    fail_code: ir.PhiInstr | None = None


# Calls: inline code (llvm_math.INLINE: vectorizable, no libm call per lane), else LLVM intrinsics.
_LLVM_INTRINSIC = {"sqrt": "sqrt", "fabs": "fabs", "floor": "floor", "ceil": "ceil", "pow": "pow"}


class LLVMCodegen:
    """Emits one PrimFunc. `parallel=False` (no libgomp) runs PARALLEL loops serially.
    `masked_tails`: a contiguous access of a lane count that is not a power of two (14 columns of
    a tile) is one masked access of the next power of two, not the 8 + 4 + 2 pieces, each its
    own load and insert, that LLVM splits it into (it may not widen a load past its lanes).
    `vector_registers`: the target's, which decide the loops LLVM's unroller leaves alone
    (`llvm_loop_hints.llvm_may_unroll`)."""

    def __init__(self, func: PrimFunc, parallel: bool = True, masked_tails: bool = False,
                 vector_registers: int = 16):
        self.func = func
        self.parallel = parallel
        self.masked_tails = masked_tails
        self.vector_registers = vector_registers
        self.accumulated = h.accumulated_buffers(func.body)
        self.periodic = periodic_vars(func.body)      # loops over these stay away from LLVM's vectorizer
        self.module = ir.Module(name=func.name)
        self.scope: _Scope
        self._nsw = False
        self._outlined = 0
        self._status: ir.Value | None = None
        self._heap_table: list[tuple[str, int]] = []    # (buffer, bytes); error code = index + 1
        self.read: dict[int, ir.Value] = {}     # id of a Load -> its value, read by a transposed block
        self.num_threads = ir.GlobalVariable(self.module, I32, NUM_THREADS_SYMBOL)
        self.num_threads.initializer = ir.Constant(I32, 0)

    def build(self, triple: str = "", data_layout: str = "") -> ir.Module:
        if triple:
            self.module.triple = triple
        if data_layout:
            self.module.data_layout = data_layout
        params = self.func.params
        if len(set(map(id, params))) != len(params):
            raise BuildError(f"function {self.func.name}: a buffer appears twice in its params")
        fn = self.new_function(entry_symbol(self.func), [PTR] * len(params), noalias=len(params), ret=I32)
        for arg, buf in zip(fn.args, params):
            arg.name = buf.name
        self.emit_function(fn, {}, dict(zip(params, fn.args)), lambda: self.stmt(self.func.body))
        define_heap_table(self.module, self._heap_table)
        return self.module

    # ---- functions ---------------------------------------------------------------------------

    def new_function(self, name: str, args: list[ir.Type], noalias: int = 0,
                     internal: bool = False, ret: ir.Type = VOID) -> ir.Function:
        fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        fn.attributes.add("nounwind")
        if internal:
            fn.linkage = "internal"
        for arg in fn.args[:noalias]:
            arg.add_attribute("noalias")
        return fn

    def emit_function(self, fn: ir.Function, vars: dict, bufs: dict, body: Callable[[], None],
                      status: ir.Value | None = None) -> _Scope:
        """Generate `body` as the code of `fn` in a fresh scope; heap buffers freed at every exit.
        `status`: `fn` is an outlined parallel body, which reports failures there."""
        outer = getattr(self, "scope", None)
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        self.scope = scope = _Scope(builder, dict(vars), dict(bufs), in_parallel=status is not None,
                                    status=status)
        body()
        self._exit(fn, ir.Constant(I32, 0))
        if scope.fail is not None:
            builder.position_at_end(scope.fail)
            self._exit(fn, scope.fail_code)
        if outer is not None:
            self.scope = outer
        return scope

    def _exit(self, fn: ir.Function, code: ir.Value) -> None:
        b = self.b
        for ptr in self.scope.frees:
            h.heap_free(b, ptr)
        if fn.function_type.return_type == I32:
            b.ret(code)
            return
        if self.scope.status is not None and code is self.scope.fail_code:
            b.atomic_rmw("xchg", self.scope.status, code, "monotonic")   # threads may race
        b.ret_void()

    def fail_if(self, cond: ir.Value, code: ir.Value) -> None:
        """Where `cond` holds: free the enclosing heap buffers and exit with error `code`."""
        b, scope = self.b, self.scope
        with b.if_then(cond, likely=False):
            for ptr in reversed(scope.live_heap):
                h.heap_free(b, ptr)
            if scope.fail is None:
                scope.fail = b.function.append_basic_block("alloc_failed")
                with b.goto_block(scope.fail):
                    scope.fail_code = b.phi(I32, name="status")
            assert scope.fail_code is not None   # made with scope.fail, just above or earlier
            scope.fail_code.add_incoming(code, b.block)
            b.branch(scope.fail)

    def status_slot(self) -> ir.Value:
        """The kernel's i32 through which parallel threads report an allocation failure."""
        if self._status is None:
            self._status = h.alloca_once(self.b, I32, name="parallel.status")
        return self._status

    def outlined_name(self) -> str:
        self._outlined += 1
        return f"{entry_symbol(self.func)}__parallel{self._outlined - 1}"

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

    def var_value(self, e: Var) -> ir.Value:
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
        emit = h.ARITH.get((e.op, kind))
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
        if e.fn in INLINE:
            out = INLINE[e.fn](self.b, *args)
        elif e.fn in _LLVM_INTRINSIC:
            out = h.call_intrinsic(self.b, _LLVM_INTRINSIC[e.fn], args)
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

    def buffer_ptr(self, buf) -> ir.Value:
        ptr = self.scope.bufs.get(buf)
        if ptr is None:
            raise BuildError(f"llvm codegen: buffer {buf.name} is neither a parameter of "
                             f"{self.func.name} nor allocated around its use")
        return ptr

    def _masks_tails(self, buf) -> bool:
        """Masked tails for memory only: LLVM keeps a local buffer (a register tile) in registers
        through plain loads and stores, never through masked ones (measured 13x slower). A local
        buffer larger than the register file is memory (a stage computed per task: a strided
        conv's input phases, read 14 lanes at a time, took 8 + 4 + 2 pieces per load), unless a
        store accumulates into it: a blocked conv's row of 10-lane accumulators, 64 columns wide,
        went 30x slower through masked loads and stores."""
        small = buf.size * dtype_info(buf.dtype).bytes <= REGISTER_FILE_BYTES
        register_tile = buf.scope == "local" and (small or id(buf) in self.accumulated)
        return self.masked_tails and not register_tile

    def _mask(self, predicate: Expr | None, lanes: int) -> ir.Value | None:
        if predicate is None:
            return None
        if predicate.lanes not in (1, lanes):
            raise BuildError(f"llvm codegen: predicate {predicate} has {predicate.lanes} lanes "
                             f"for a {lanes}-lane access")
        return h.splat(self.b, self.expr(predicate), lanes)

    def _load(self, e: Load) -> ir.Value:
        if id(e) in self.read:
            return self.read[id(e)]
        base, elem, b = self.buffer_ptr(e.buffer), h.memory_type(e.dtype), self.b
        mask = self._mask(e.predicate, e.lanes)
        if isinstance(e.index, Broadcast):     # one element, every lane
            index = self.index(e.index.value)
            if mask is not None:    # read while any lane is on, else element 0 (always there)
                any_lane = h.call_intrinsic(b, "vector.reduce.or", [mask], ret=ir.IntType(1))
                index = b.select(any_lane, index, h.const_like(index.type, 0))
            value = h.splat(b, b.load(h.element_ptr(b, base, index, elem), typ=elem,
                                      align=h.element_bytes(elem)), e.lanes)
            if mask is not None:
                value = b.select(mask, value, h.const_like(value.type, 0))
        elif is_contiguous(e.index):
            ptr = h.element_ptr(b, base, self.index(e.index.base), elem)
            value = vec.load_vector(b, ptr, h.vector_of(elem, e.lanes), mask, self._masks_tails(e.buffer))
        elif is_short_stride(e.index) and e.lanes > 1:
            ptr = h.element_ptr(b, base, self.index(e.index.base), elem)
            stride = cast(Const, e.index.stride).value
            value = vec.load_strided(b, ptr, h.vector_of(elem, e.lanes), int(stride), mask)
        elif (spread := short_spread(e.index)) is not None:
            start, picks = spread
            ptr = h.element_ptr(b, base, self.index(start), elem)
            value = vec.load_spread(b, ptr, h.vector_of(elem, e.lanes), picks, mask, self._masks_tails(e.buffer))
        elif mask is None and rising_window(e):
            value = vec.load_window(b, base, self.index(e.index), elem)
        else:
            index = self.index(e.index)
            if mask is not None:    # masked-off lanes read element 0, which always exists
                index = b.select(mask, index, h.const_like(index.type, 0))
            if e.lanes == 1:
                value = b.load(h.element_ptr(b, base, index, elem), typ=elem,
                               align=h.element_bytes(elem))
            else:
                value = vec.gather(b, base, index, elem)
            if mask is not None:
                value = b.select(mask, value, h.const_like(value.type, 0))
        if e.dtype == "bool":
            value = b.icmp_unsigned("!=", value, h.const_like(value.type, 0))
        return value

    _EXPR: ClassVar[dict[type, Callable]] = {
        Var: var_value, Const: _const, Binary: _binary, Compare: _compare, And: _and, Or: _or,
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
        stmts, i = s.stmts, 0
        while i < len(stmts):
            end = i
            while end < len(stmts) and isinstance(stmts[end], Store):
                end += 1
            if end - i > 1:
                emit_store_run(self, cast(Sequence[Store], stmts[i:end]))
                i = end
            else:
                self.stmt(stmts[i])
                i += 1

    def _store(self, s: Store) -> None:
        base, elem, b = self.buffer_ptr(s.buffer), h.memory_type(s.buffer.dtype), self.b
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
        if is_contiguous(s.index):
            vec.store_vector(b, value, h.element_ptr(b, base, self.index(s.index.base), elem), mask,
                           self._masks_tails(s.buffer))
        elif lanes > 1:
            vec.scatter(b, value, base, self.index(s.index), mask)
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
        if s.kind is ForKind.PARALLEL and not self.parallel:
            warn_serial_once()
        if s.kind is ForKind.PARALLEL and self.parallel and not self.scope.in_parallel:
            emit_parallel_for(self, s)
        else:   # a PARALLEL loop inside a parallel body runs serially in its thread
            self.serial_loop(s.var, 0, s.extent, s.body)

    def serial_loop(self, var: Var, start, stop, body: Stmt) -> None:
        llvm_vectorize = var not in self.periodic
        llvm_unroll = llvm_may_unroll(start, stop, body, self.vector_registers)
        with h.for_range(self.b, start, stop, name=var.name, llvm_vectorize=llvm_vectorize,
                         llvm_unroll=llvm_unroll) as i, \
                h.bound(self.scope.vars, var, i):
            self.scope.loop_depth += 1
            self.stmt(body)
            self.scope.loop_depth -= 1

    def _allocate(self, s: Allocate) -> None:
        buf = s.buffer
        if buf.scope not in ("local", "global"):
            raise BuildError(f"llvm codegen: buffer {buf.name} has scope {buf.scope!r}; the llvm "
                             "target has only 'local' and 'global' memory")
        nbytes = buf.size * dtype_info(buf.dtype).bytes
        b, scope = self.b, self.scope
        if buf.scope == "local" and nbytes <= HEAP_THRESHOLD:
            ptr = h.alloca_once(b, h.memory_type(buf.dtype), max(buf.size, 1), name=buf.name, align=ALIGN)
            with h.bound(scope.bufs, buf, ptr):
                self.stmt(s.body)
            return
        hoist = scope.loop_depth > 0
        if hoist:   # once per function call instead of once per loop iteration
            with b.goto_entry_block():
                b.position_at_start(b.block)
                ptr = h.heap_alloc(b, nbytes, ALIGN)
            scope.frees.append(ptr)
        else:
            ptr = h.heap_alloc(b, nbytes, ALIGN)
        self._heap_table.append((buf.name, nbytes))
        self.fail_if(b.icmp_unsigned("==", ptr, ir.Constant(PTR, None)), ir.Constant(I32, len(self._heap_table)))
        if not hoist:
            scope.live_heap.append(ptr)
        with h.bound(scope.bufs, buf, ptr):
            self.stmt(s.body)
        if not hoist:
            scope.live_heap.pop()
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
        with h.bound(self.scope.vars, s.var, self.expr(s.value)):
            self.stmt(s.body)

    def _prefetch(self, s: Prefetch) -> None:
        """llvm.prefetch(address, read, locality 3 = keep in every cache level, data cache). The
        address is computed without `inbounds`: it may lie past the buffer (Prefetch's doc)."""
        index = self.index(s.index)
        if index.type.width < 64:
            index = self.b.sext(index, h.I64)
        ptr = self.b.gep(self.buffer_ptr(s.buffer), [index], source_etype=h.memory_type(s.buffer.dtype))
        h.call_intrinsic(self.b, "prefetch", [ptr, h.const_like(h.I32, 0), h.const_like(h.I32, 3),
                                              h.const_like(h.I32, 1)], ret=ir.VoidType())

    def _evaluate(self, s: Evaluate) -> None:
        if not isinstance(s.value, Const):
            raise BuildError(f"llvm codegen: cannot evaluate {s.value} for its effect on the "
                             "llvm target")

    _STMT: ClassVar[dict[type, Callable]] = {
        Seq: _seq, Store: _store, For: _for, Allocate: _allocate, IfThenElse: _if, Let: _let,
        Evaluate: _evaluate, Prefetch: _prefetch,
    }


def emit_module(func: PrimFunc, parallel: bool = True, triple: str = "",
                data_layout: str = "", masked_tails: bool = False, vector_registers: int = 16) -> ir.Module:
    """The llvmlite module of `func`; its entry point is `entry_symbol(func)`. `masked_tails`:
    the target has masked vector loads and stores (AVX-512), so `LLVMCodegen` emits them;
    `vector_registers`: the target's."""
    return LLVMCodegen(func, parallel, masked_tails, vector_registers).build(triple, data_layout)

