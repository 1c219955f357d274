"""Small llvmlite building blocks for the LLVM codegen: types, intrinsics, loops and allocas
(and which loops LLVM's own vectorizer must not see), integer/float arithmetic with Python/numpy
semantics (and the (op, kind) table of it), element pointers and heap buffers.

Vector loads and stores live in `llvm_vectors.py`, the inline math (exp, log, tanh, ...) in
`llvm_math.py`.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

from llvmlite import ir

from ..dtype import dtype_info
from ..ir.functor import structural_equal, walk
from ..ir.nodes import Load, Stmt, Store
from ..te.expr import BinOp

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()          # opaque pointer: element types travel with each load/store/gep
VOID = ir.VoidType()
CONTRACT = ("contract",)        # lets LLVM fuse fmul+fadd into FMA, otherwise IEEE results

_SCALAR = {"half": ir.HalfType(), "float": ir.FloatType(), "double": ir.DoubleType()}


def scalar_type(dtype: str) -> ir.Type:
    """The LLVM type of one value of `dtype` in registers (bool is i1)."""
    spelling = dtype_info(dtype).llvm
    return _SCALAR[spelling] if spelling in _SCALAR else ir.IntType(int(spelling[1:]))


def memory_type(dtype: str) -> ir.Type:
    """The LLVM type of one element in memory: bool is stored as a byte, like numpy's bool_."""
    return I8 if dtype == "bool" else scalar_type(dtype)


def vector_of(ty: ir.Type, lanes: int) -> ir.Type:
    return ty if lanes == 1 else ir.VectorType(ty, lanes)


def value_type(dtype: str, lanes: int = 1) -> ir.Type:
    return vector_of(scalar_type(dtype), lanes)


def lanes_of(value: ir.Value) -> int:
    return value.type.count if isinstance(value.type, ir.VectorType) else 1


def element_type(ty: ir.Type) -> ir.Type:
    return ty.element if isinstance(ty, ir.VectorType) else ty


def const_like(ty: ir.Type, value: float | int) -> ir.Constant:
    """A constant of scalar or vector type `ty` with every lane equal to `value`."""
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [ir.Constant(ty.element, value)] * ty.count)
    return ir.Constant(ty, value)


def splat(builder: ir.IRBuilder, value: ir.Value, lanes: int) -> ir.Value:
    """Broadcast a scalar into a `lanes`-wide vector (insertelement + zero-mask shuffle)."""
    if lanes_of(value) == lanes:
        return value
    assert lanes_of(value) == 1, f"cannot splat {value.type} to {lanes} lanes"
    if isinstance(value, ir.Constant):
        return ir.Constant(ir.VectorType(value.type, lanes), [value] * lanes)
    vty = ir.VectorType(value.type, lanes)
    one = builder.insert_element(ir.Constant(vty, ir.Undefined), value, ir.Constant(I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vty, ir.Undefined), shuffle_indices([0] * lanes))


def shuffle_indices(values: Sequence[int]) -> ir.Constant:
    """The lane indices of a shufflevector."""
    return ir.Constant(ir.VectorType(I32, len(values)), [ir.Constant(I32, v) for v in values])


def type_suffix(ty: ir.Type) -> str:
    """The overload suffix LLVM intrinsic names use: f32, f64, v8f32, i32, v4i1, p0."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{type_suffix(ty.element)}"
    if isinstance(ty, ir.PointerType):
        return "p0"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    return {"half": "f16", "float": "f32", "double": "f64"}[str(ty)]


def declare(module: ir.Module, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
    """The function `name` of the module, declared on first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, list(args)), name)
    return fn


def call_intrinsic(builder: ir.IRBuilder, base: str, args: Sequence[ir.Value],
                   overload: Sequence[ir.Type] | None = None, ret: ir.Type | None = None) -> ir.Value:
    """Call `llvm.<base>.<suffixes>`; by default overloaded on (and returning) the first arg's type."""
    overload = [args[0].type] if overload is None else overload
    name = ".".join([f"llvm.{base}", *(type_suffix(t) for t in overload)])
    fn = declare(builder.module, name, args[0].type if ret is None else ret, [a.type for a in args])
    return builder.call(fn, list(args))


def alloca_once(builder: ir.IRBuilder, ty: ir.Type, count: int = 1, name: str = "",
                align: int | None = None) -> ir.Value:
    """An alloca at the start of the function's entry block, so it is static and made once."""
    with builder.goto_entry_block():
        builder.position_at_start(builder.block)
        slot = builder.alloca(ty, size=None if count == 1 else ir.Constant(I32, count), name=name)
    if align is not None:
        slot.align = align
    # llvmlite types allocas as typed pointers ("float*"); everything else here uses opaque
    # pointers, which is what LLVM itself has used since version 17
    slot.type = PTR
    return slot


def loop_id(module: ir.Module, vectorize: bool, unroll: bool) -> ir.values.MDValue:
    """A fresh `!llvm.loop` node asking LLVM's loop vectorizer (`vectorize=False`) and its
    unroller (`unroll=False`) to leave the loop alone."""
    options = []
    if not vectorize:
        options.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.vectorize.enable"),
                                            ir.Constant(I1, 0)]))
    if not unroll:
        options.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")]))
    node = ir.values.MDValue(module, [], name=str(len(module.metadata)))
    node.operands = (node, *options)    # a loop ID starts with a reference to itself
    return node


@contextlib.contextmanager
def for_range(builder: ir.IRBuilder, start: ir.Value | int, stop: ir.Value | int,
              name: str = "i", llvm_vectorize: bool = True, llvm_unroll: bool = True) -> Iterator[ir.Value]:
    """`for i in range(start, stop)` with an i32 induction variable (cond/body/end blocks, a phi).

    The body is generated inside the `with`; the builder ends positioned in the end block.
    `llvm_vectorize=False` keeps LLVM's loop vectorizer off the loop, `llvm_unroll=False` its
    unroller.
    """
    start = ir.Constant(I32, start) if isinstance(start, int) else start
    stop = ir.Constant(I32, stop) if isinstance(stop, int) else stop
    pre = builder.block
    cond = builder.append_basic_block(f"{name}.cond")
    body = builder.append_basic_block(f"{name}.body")
    end = builder.append_basic_block(f"{name}.end")
    builder.branch(cond)
    builder.position_at_end(cond)
    index = builder.phi(I32, name=name)
    index.add_incoming(start, pre)
    builder.cbranch(builder.icmp_signed("<", index, stop), body, end)
    builder.position_at_end(body)
    yield index
    nxt = builder.add(index, ir.Constant(I32, 1), name=f"{name}.next", flags=("nsw",))
    index.add_incoming(nxt, builder.block)
    backedge = builder.branch(cond)
    if not (llvm_vectorize and llvm_unroll):
        backedge.set_metadata("llvm.loop", loop_id(builder.module, llvm_vectorize, llvm_unroll))
    builder.position_at_end(end)


@contextlib.contextmanager
def bound(table: dict, key, value) -> Iterator[None]:
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


# ---- arithmetic --------------------------------------------------------------------------------

def compare(b: ir.IRBuilder, kind: str, pred: str, x: ir.Value, y: ir.Value) -> ir.Value:
    if kind == "float":
        return b.fcmp_unordered(pred, x, y) if pred == "!=" else b.fcmp_ordered(pred, x, y)
    return (b.icmp_signed if kind == "int" else b.icmp_unsigned)(pred, x, y)


def floor_divmod_signed(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    """Python's // and % for any signs. A divisor of 0 gives 0 and 0 (numpy), -1 gives -x and 0;
    both are routed around sdiv, whose x86 instruction would trap on them."""
    zero, one = const_like(y.type, 0), const_like(y.type, 1)
    is_zero = b.icmp_signed("==", y, zero)
    is_neg1 = b.icmp_signed("==", y, const_like(y.type, -1))
    safe = b.select(b.or_(is_zero, is_neg1), one, y)
    q, r = b.sdiv(x, safe), b.srem(x, safe)
    # the truncated remainder has the dividend's sign; floor semantics want the divisor's
    fix = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, safe), zero))
    q = b.sub(q, b.zext(fix, q.type))
    r = b.add(r, b.select(fix, safe, zero))
    q = b.select(is_zero, zero, b.select(is_neg1, b.sub(zero, x), q))
    return q, r


def floor_divmod_unsigned(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> tuple[ir.Value, ir.Value]:
    zero = const_like(y.type, 0)
    is_zero = b.icmp_unsigned("==", y, zero)
    safe = b.select(is_zero, const_like(y.type, 1), y)
    return b.select(is_zero, zero, b.udiv(x, safe)), b.urem(x, safe)


def _to_float32_round_to_odd(b: ir.IRBuilder, d: ir.Value) -> ir.Value:
    """float64 -> float32 rounded to odd (toward zero, then the last bit set when inexact): a
    second rounding, to float16, then rounds as one direct rounding would. LLVM lowers a direct
    double -> half truncation to a runtime-library call that the JIT does not provide."""
    lanes = lanes_of(d)
    f = b.fptrunc(d, value_type("float32", lanes))
    back = b.fpext(f, d.type)
    zero = const_like(d.type, 0.0)
    away = b.select(b.fcmp_ordered(">", d, zero), b.fcmp_ordered(">", back, d), b.fcmp_ordered("<", back, d))
    bits = b.bitcast(f, value_type("int32", lanes))
    bits = b.sub(bits, b.zext(away, bits.type))
    bits = b.or_(bits, b.zext(b.fcmp_ordered("!=", back, d), bits.type))
    return b.bitcast(bits, f.type)


def cast_value(b: ir.IRBuilder, v: ir.Value, src: str, dst: str) -> ir.Value:
    """numpy astype semantics between any two dtypes of the table, scalar or vector."""
    sk, dk = dtype_info(src).kind, dtype_info(dst).kind
    lanes = lanes_of(v)
    to = value_type(dst, lanes)
    if dk == "bool":    # nonzero -> True
        zero = const_like(v.type, 0)
        return b.fcmp_unordered("!=", v, zero) if sk == "float" else b.icmp_unsigned("!=", v, zero)
    if v.type == to:
        return v
    if sk == "float" and dk == "float":
        if src == "float64" and dst == "float16":
            v = _to_float32_round_to_odd(b, v)
        grow = element_bytes(element_type(to)) > element_bytes(element_type(v.type))
        return b.fpext(v, to) if grow else b.fptrunc(v, to)
    if sk == "float":
        return b.fptosi(v, to) if dk == "int" else b.fptoui(v, to)
    if dk == "float":
        return b.sitofp(v, to) if sk == "int" else b.uitofp(v, to)
    if element_type(to).width < element_type(v.type).width:
        return b.trunc(v, to)
    return b.sext(v, to) if sk == "int" else b.zext(v, to)


# ---- the arithmetic table: (op, kind) -> fn(builder, x, y, nsw) ----------------------------------

def _float_op(name: str) -> Callable:
    return lambda b, x, y, nsw: getattr(b, name)(x, y, flags=CONTRACT)


def _int_op(name: str) -> Callable:
    return lambda b, x, y, nsw: getattr(b, name)(x, y, flags=("nsw",) if nsw else ())


def _pick(pred: str, kind: str) -> Callable:
    """max/min as compare + select (maps to maxps/minps; a NaN in `x` yields `y`)."""
    def emit(b, x, y, nsw):
        return b.select(compare(b, kind, pred, x, y), x, y)
    return emit


_FLOOR_DIVMOD = {"int": floor_divmod_signed, "uint": floor_divmod_unsigned}

ARITH: dict[tuple[BinOp, str], Callable] = {
    (BinOp.ADD, "float"): _float_op("fadd"),
    (BinOp.SUB, "float"): _float_op("fsub"),
    (BinOp.MUL, "float"): _float_op("fmul"),
    (BinOp.DIV, "float"): lambda b, x, y, nsw: b.fdiv(x, y),
    (BinOp.MAX, "float"): _pick(">", "float"),
    (BinOp.MIN, "float"): _pick("<", "float"),
}
for _kind in ("int", "uint"):
    ARITH.update({
        (BinOp.ADD, _kind): _int_op("add"),
        (BinOp.SUB, _kind): _int_op("sub"),
        (BinOp.MUL, _kind): _int_op("mul"),
        (BinOp.MAX, _kind): _pick(">", _kind),
        (BinOp.MIN, _kind): _pick("<", _kind),
        (BinOp.FLOORDIV, _kind): lambda b, x, y, nsw, k=_kind: _FLOOR_DIVMOD[k](b, x, y)[0],
        (BinOp.FLOORMOD, _kind): lambda b, x, y, nsw, k=_kind: _FLOOR_DIVMOD[k](b, x, y)[1],
    })
ARITH.update({   # bool as ordered False < True: max is or, min is and (reductions: any, all)
    (BinOp.MAX, "bool"): lambda b, x, y, nsw: b.or_(x, y),
    (BinOp.MIN, "bool"): lambda b, x, y, nsw: b.and_(x, y),
})


# ---- memory access ----------------------------------------------------------------------------

def element_ptr(b: ir.IRBuilder, base: ir.Value, index: ir.Value, elem: ir.Type) -> ir.Value:
    """&base[index]; indices are signed (int32 ones are sign-extended to 64 bits)."""
    if index.type.width < 64:
        index = b.sext(index, I64)
    return b.gep(base, [index], inbounds=True, source_etype=elem)


def accumulated_buffers(body: Stmt) -> set[int]:
    """Ids of the buffers some store updates in place (it reads the element it writes): a
    reduction's accumulators, which LLVM keeps in registers while the update loop runs, whatever
    the size of the buffer that holds them between loops."""
    found: set[int] = set()

    def visit(n: object) -> None:
        if type(n) is Store and id(n.buffer) not in found and reads_itself(n):
            found.add(id(n.buffer))

    walk(body, visit)
    return found


def reads_itself(store: Store) -> bool:
    """Whether `store`'s value reads the element it writes (an update in place)."""
    found: list[bool] = []
    walk(store.value, lambda e: found.append(True) if type(e) is Load and e.buffer is store.buffer
         and structural_equal(e.index, store.index) else None)
    return bool(found)


def element_bytes(ty: ir.Type) -> int:
    return {"half": 2, "float": 4, "double": 8}.get(str(ty)) or max(1, ty.width // 8)


def heap_alloc(b: ir.IRBuilder, nbytes: int, align: int) -> ir.Value:
    """aligned_alloc(align, nbytes rounded up to align), resolved from the process's libc."""
    fn = declare(b.module, "aligned_alloc", PTR, [I64, I64])
    size = max(align, (nbytes + align - 1) // align * align)
    return b.call(fn, [ir.Constant(I64, align), ir.Constant(I64, size)])


def heap_free(b: ir.IRBuilder, ptr: ir.Value) -> None:
    b.call(declare(b.module, "free", VOID, [PTR]), [ptr])
