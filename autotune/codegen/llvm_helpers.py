"""Small llvmlite building blocks for the LLVM codegen: types, intrinsics, loops and allocas,
integer/float arithmetic with Python/numpy semantics, vector memory access, and the inline math
(exp, tanh, sigmoid, erf) emitted instead of one libm call per vector lane, so that kernels
using it stay vectorized.
"""
from __future__ import annotations

import contextlib
import decimal
from collections.abc import Iterator, Sequence

from llvmlite import ir

from ..dtype import dtype_info

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
    mask = ir.Constant(ir.VectorType(I32, lanes), [ir.Constant(I32, 0)] * lanes)
    return builder.shuffle_vector(one, ir.Constant(vty, ir.Undefined), mask)


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


@contextlib.contextmanager
def for_range(builder: ir.IRBuilder, start: ir.Value | int, stop: ir.Value | int,
              name: str = "i") -> Iterator[ir.Value]:
    """`for i in range(start, stop)` with an i32 induction variable (cond/body/end blocks, a phi).

    The body is generated inside the `with`; the builder ends positioned in the end block.
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
    builder.branch(cond)
    builder.position_at_end(end)


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
        grow = element_bytes(element_type(to)) > element_bytes(element_type(v.type))
        return b.fpext(v, to) if grow else b.fptrunc(v, to)
    if sk == "float":
        return b.fptosi(v, to) if dk == "int" else b.fptoui(v, to)
    if dk == "float":
        return b.sitofp(v, to) if sk == "int" else b.uitofp(v, to)
    if element_type(to).width < element_type(v.type).width:
        return b.trunc(v, to)
    return b.sext(v, to) if sk == "int" else b.zext(v, to)


# ---- inline math -------------------------------------------------------------------------------
# Each function takes and returns a float value of scalar or vector type (float or double).

def _is_double(ty: ir.Type) -> bool:
    return isinstance(element_type(ty), ir.DoubleType)


def _fmul(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.fmul(x, y, flags=CONTRACT)


def _fadd(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.fadd(x, y, flags=CONTRACT)


def horner(b: ir.IRBuilder, x: ir.Value, coeffs: Sequence[float]) -> ir.Value:
    """c0 + x*(c1 + x*(c2 + ...)), coefficients from the constant term up."""
    acc = const_like(x.type, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        acc = _fadd(b, _fmul(b, acc, x), const_like(x.type, c))
    return acc


def _ln2_split(mantissa_bits: int) -> tuple[float, float]:
    """ln 2 as hi + lo, hi with few enough bits that n*hi is exact for every exponent n."""
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        ln2 = decimal.Decimal(2).ln()
        scale = 2 ** mantissa_bits
        hi = decimal.Decimal(int(ln2 * scale)) / scale
        return float(hi), float(ln2 - hi)


_LN2_F32 = _ln2_split(12)
_LN2_F64 = _ln2_split(32)
_EXP_TAYLOR = [1.0]
for _k in range(1, 13):
    _EXP_TAYLOR.append(_EXP_TAYLOR[-1] / _k)


def emit_exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """exp(x) = 2^n * e^r with n = round(x / ln 2), |r| <= ln2/2, e^r by its Taylor series.

    x is clamped to the range where 2^n is a normal number, so huge arguments saturate (to about
    1.6e38 / 8e307 and 1e-38 / 1e-308) instead of producing inf or NaN.
    """
    double = _is_double(x.type)
    lo, hi = (-708.0, 709.0) if double else (-87.0, 88.0)
    ln2_hi, ln2_lo = _LN2_F64 if double else _LN2_F32
    ity = vector_of(I64 if double else I32, lanes_of(x))
    arg = x
    x = call_intrinsic(b, "maxnum", [x, const_like(x.type, lo)])
    x = call_intrinsic(b, "minnum", [x, const_like(x.type, hi)])
    n = call_intrinsic(b, "floor", [_fadd(b, _fmul(b, x, const_like(x.type, 1.4426950408889634)),
                                          const_like(x.type, 0.5))])
    r = b.fsub(x, b.fmul(n, const_like(x.type, ln2_hi)))
    r = b.fsub(r, b.fmul(n, const_like(x.type, ln2_lo)))
    poly = horner(b, r, _EXP_TAYLOR[:13] if double else _EXP_TAYLOR[:8])
    bias, shift = (1023, 52) if double else (127, 23)
    bits = b.shl(b.add(b.fptosi(n, ity), const_like(ity, bias)), const_like(ity, shift))
    return keep_nan(b, arg, b.fmul(poly, b.bitcast(bits, x.type)))


def keep_nan(b: ir.IRBuilder, arg: ir.Value, result: ir.Value) -> ir.Value:
    """`result`, except NaN where `arg` is NaN (the clamps above would have hidden it)."""
    return b.select(b.fcmp_unordered("uno", arg, arg), arg, result)


# tanh(x) = x + x^3*(c1 + c2 x^2 + ...) near 0: its Taylor coefficients (2^2k (2^2k-1) B_2k/(2k)!).
_TANH_TAYLOR = [-1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075,
                -929569 / 638512875]


def emit_tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """tanh via e = exp(-2|x|) in (0, 1]: (1 - e) / (1 + e) with the sign of x; no overflow,
    so +-large gives +-1 and never NaN. Near 0 (where 1 - e cancels) the Taylor series is used."""
    double = _is_double(x.type)
    ax = call_intrinsic(b, "fabs", [x])
    e = emit_exp(b, b.fmul(ax, const_like(x.type, -2.0)))
    one = const_like(x.type, 1.0)
    far = b.fdiv(b.fsub(one, e), b.fadd(one, e))
    x2 = b.fmul(ax, ax)
    near = _fadd(b, ax, _fmul(b, _fmul(b, ax, x2), horner(b, x2, _TANH_TAYLOR if double else _TANH_TAYLOR[:5])))
    small = b.fcmp_ordered("<", ax, const_like(x.type, 0.1 if double else 0.3))
    return call_intrinsic(b, "copysign", [b.select(small, near, far), x])


def emit_sigmoid(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 / (1 + exp(-x)) via e = exp(-|x|): 1/(1+e) for x >= 0 and e/(1+e) below, which keeps
    full relative precision for very negative x and never overflows."""
    e = emit_exp(b, b.fneg(call_intrinsic(b, "fabs", [x])))
    s = b.fdiv(const_like(x.type, 1.0), b.fadd(const_like(x.type, 1.0), e))
    return b.select(b.fcmp_ordered(">=", x, const_like(x.type, 0.0)), s, b.fmul(e, s))


# erf(x) ~= x * P(x^2) / Q(x^2) on |x| <= 4 (erf(4) = 1 - 1.5e-8), fitted by us (iteratively
# reweighted least squares on Chebyshev nodes, mpmath reference); max abs error 7.5e-10 in double.
_ERF_P = [1.1283791746094411, 0.1694733049487675, 0.051468415896255844, 0.003088787519690546,
          0.00031876121618795993, 5.27229926159634e-07, -4.021418858412952e-08]
_ERF_Q = [1.0, 0.48352524990133333, 0.10678724732281664, 0.013791295565574931,
          0.0010822567159518705, 4.4876224734631893e-05, -5.246314946382432e-07]


def emit_erf_rational(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """erf of a float32 value, evaluated in double (float32 rounding inside the rational would
    cost ~3e-7 near |x| = 4), then rounded once; vectorizes and calls no libm function."""
    dty = vector_of(ir.DoubleType(), lanes_of(x))
    xd = b.fpext(x, dty)
    xd = call_intrinsic(b, "minnum", [call_intrinsic(b, "maxnum", [xd, const_like(dty, -4.0)]),
                                      const_like(dty, 4.0)])
    t = b.fmul(xd, xd)
    y = b.fdiv(b.fmul(xd, horner(b, t, _ERF_P)), horner(b, t, _ERF_Q))
    return keep_nan(b, x, b.fptrunc(y, x.type))


def emit_erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    if _is_double(x.type):   # double precision wants libm's erf; the rational gives ~1e-9
        return per_lane_call(b, declare(b.module, "erf", element_type(x.type), [element_type(x.type)]), x)
    return emit_erf_rational(b, x)


def emit_rsqrt(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return b.fdiv(const_like(x.type, 1.0), call_intrinsic(b, "sqrt", [x]))


def per_lane_call(b: ir.IRBuilder, fn: ir.Function, x: ir.Value) -> ir.Value:
    """Apply a scalar external function to each lane of `x` (used only where precision wins)."""
    if lanes_of(x) == 1:
        return b.call(fn, [x])
    out = ir.Constant(x.type, ir.Undefined)
    for lane in range(lanes_of(x)):
        idx = ir.Constant(I32, lane)
        out = b.insert_element(out, b.call(fn, [b.extract_element(x, idx)]), idx)
    return out


# ---- memory access ----------------------------------------------------------------------------

def element_ptr(b: ir.IRBuilder, base: ir.Value, index: ir.Value, elem: ir.Type) -> ir.Value:
    """&base[index]; indices are signed (int32 ones are sign-extended to 64 bits)."""
    if index.type.width < 64:
        index = b.sext(index, I64)
    return b.gep(base, [index], inbounds=True, source_etype=elem)


def load_vector(b: ir.IRBuilder, ptr: ir.Value, vty: ir.VectorType,
                mask: ir.Value | None = None) -> ir.Value:
    """`vty.count` contiguous elements at `ptr` (aligned to one element); masked-off lanes are 0."""
    align = ir.Constant(I32, element_bytes(vty.element))
    if mask is None:
        return b.load(ptr, typ=vty, align=align.constant)
    return call_intrinsic(b, "masked.load", [ptr, align, mask, const_like(vty, 0)],
                          overload=[vty, PTR], ret=vty)


def store_vector(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, mask: ir.Value | None = None) -> None:
    align = ir.Constant(I32, element_bytes(value.type.element))
    if mask is None:
        b.store(value, ptr, align=align.constant)
    else:
        call_intrinsic(b, "masked.store", [value, ptr, align, mask], overload=[value.type, PTR], ret=VOID)


def gather(b: ir.IRBuilder, base: ir.Value, index: ir.Value, elem: ir.Type) -> ir.Value:
    """Lane i reads base[index[i]] (scalar loads + insertelement; LLVM forms vpgather if it pays)."""
    out = ir.Constant(ir.VectorType(elem, lanes_of(index)), ir.Undefined)
    for lane in range(lanes_of(index)):
        at = ir.Constant(I32, lane)
        ptr = element_ptr(b, base, b.extract_element(index, at), elem)
        out = b.insert_element(out, b.load(ptr, typ=elem, align=element_bytes(elem)), at)
    return out


def scatter(b: ir.IRBuilder, value: ir.Value, base: ir.Value, index: ir.Value,
            mask: ir.Value | None = None) -> None:
    """Lane i writes base[index[i]] in lane order (a repeated index keeps the last lane)."""
    elem = value.type.element
    for lane in range(lanes_of(index)):
        at = ir.Constant(I32, lane)
        ctx = contextlib.nullcontext() if mask is None else b.if_then(b.extract_element(mask, at))
        with ctx:
            ptr = element_ptr(b, base, b.extract_element(index, at), elem)
            b.store(b.extract_element(value, at), ptr, align=element_bytes(elem))


def element_bytes(ty: ir.Type) -> int:
    return {"half": 2, "float": 4, "double": 8}.get(str(ty)) or max(1, ty.width // 8)


def heap_alloc(b: ir.IRBuilder, nbytes: int, align: int) -> ir.Value:
    """aligned_alloc(align, nbytes rounded up to align), resolved from the process's libc."""
    fn = declare(b.module, "aligned_alloc", PTR, [I64, I64])
    size = max(align, (nbytes + align - 1) // align * align)
    return b.call(fn, [ir.Constant(I64, align), ir.Constant(I64, size)])


def heap_free(b: ir.IRBuilder, ptr: ir.Value) -> None:
    b.call(declare(b.module, "free", VOID, [PTR]), [ptr])
