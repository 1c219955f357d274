"""Vectorizable inline implementations of math intrinsics (exp, log, tanh, sigmoid, erf, rsqrt).

LLVM lowers `llvm.exp.v8f32` and friends to one libm call per lane, which keeps a loop from
being vectorized in any useful sense. These emitters produce plain arithmetic on scalar or
vector values instead. Each takes and returns a float value of scalar or vector type (float or
double) and matches numpy on the special values: overflow to inf, underflow to 0, NaN in ->
NaN out. Accuracy, against a float64 (or mpmath) reference, is tested in tests/codegen.
"""
from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Sequence

import numpy as np
from llvmlite import ir

from .jit import scales_vectors
from .llvm_helpers import (
    CONTRACT,
    I32,
    I64,
    call_intrinsic,
    const_like,
    declare,
    element_type,
    lanes_of,
    shuffle_indices,
    vector_of,
)
from .llvm_vecmath import emit_cos, emit_sin

Emitter = Callable[[ir.IRBuilder, ir.Value], ir.Value]


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


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    """x * y + z rounded once."""
    return call_intrinsic(b, "fma", [x, y, z])


def keep_nan(b: ir.IRBuilder, arg: ir.Value, result: ir.Value) -> ir.Value:
    """`result`, except NaN where `arg` is NaN (range clamps would otherwise hide it)."""
    return b.select(b.fcmp_unordered("uno", arg, arg), arg, result)


def _clamp(b: ir.IRBuilder, x: ir.Value, lo: float, hi: float) -> ir.Value:
    x = call_intrinsic(b, "maxnum", [x, const_like(x.type, lo)])
    return call_intrinsic(b, "minnum", [x, const_like(x.type, hi)])


# ---- exp ---------------------------------------------------------------------------------------

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
# float: e^r on |r| <= ln2/2 by its degree-6 interpolant at the Chebyshev nodes (relative error
# 2.5e-9, Taylor's degree 7 is 5e-9), one multiply-add fewer
_EXP_CHEBYSHEV_F32 = [float(c) for c in np.polynomial.Chebyshev.interpolate(
    np.exp, 6, domain=[-math.log(2) / 2, math.log(2) / 2]).convert(kind=np.polynomial.Polynomial).coef]

_CURRENT_ROUNDING = 4   # scalef's rounding argument: the MXCSR's mode (round to nearest)
# (clamp lo, clamp hi, exponent bias, mantissa bits, integer type): below lo the result rounds
# to 0, above hi it is inf; inside, n = round(x / ln 2) stays within [-2 * bias - 2, 2 * bias + 2]
_EXP_RANGE = {False: (-104.0, 89.0, 127, 23, I32), True: (-746.0, 710.0, 1023, 52, I64)}


def _scalef(b: ir.IRBuilder, x: ir.Value, n: ir.Value) -> ir.Value:
    """x * 2^n (n integral) by AVX-512's scalef, 512 bits at a time (a partial vector padded):
    one rounding, with IEEE overflow, subnormals and NaNs."""
    width = 8 if _is_double(x.type) else 16
    wide, mask = ir.VectorType(element_type(x.type), width), ir.IntType(width)
    fn = declare(b.module, f"llvm.x86.avx512.mask.scalef.{'pd' if width == 8 else 'ps'}.512", wide,
                 [wide, wide, wide, mask, I32])
    lanes = lanes_of(x)
    parts = []
    for start in range(0, lanes, width):
        picks = shuffle_indices([min(start + i, lanes) for i in range(width)])   # lane `lanes`: padding
        args = [b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), picks) for v in (x, n)]
        parts.append(b.call(fn, [*args, ir.Constant(wide, ir.Undefined), ir.Constant(mask, -1),
                                 ir.Constant(I32, _CURRENT_ROUNDING)]))
    while len(parts) > 1:       # concatenated pairwise (an odd one out with padding)
        if len(parts) % 2:
            parts.append(ir.Constant(parts[0].type, ir.Undefined))
        both = shuffle_indices(range(2 * parts[0].type.count))
        parts = [b.shuffle_vector(parts[i], parts[i + 1], both) for i in range(0, len(parts), 2)]
    whole = parts[0]
    if whole.type.count == lanes:
        return whole
    return b.shuffle_vector(whole, ir.Constant(whole.type, ir.Undefined), shuffle_indices(range(lanes)))


def _scale(b: ir.IRBuilder, shifted: ir.Value, ty: ir.Type, bias: int, shift: int) -> ir.Value:
    """2.0**n as a float of type `ty`, given n << shift (n in the normal exponent range)."""
    return b.bitcast(b.add(shifted, const_like(shifted.type, bias << shift)), ty)


def emit_exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """exp(x) = 2^n * e^r with n = round(x / ln 2), r = x - n ln 2 (Cody-Waite: ln 2 in two parts,
    each step one fused multiply-add), e^r by a polynomial (|r| <= ln2/2: the degree-6 Chebyshev
    interpolant in float, Taylor's degree 12 in double).

    n is rounded by adding 1.5 * 2^m (m the mantissa bits) to x / ln 2: the sum's low mantissa
    bits are then n itself, so n << m, the exponent field of 2^n, is those bits shifted (the
    constant's own bits shift out), with no float-to-integer conversion.

    2^n is applied with one rounding, so that large x overflows to inf and very negative x goes
    through the subnormals to 0, as libm does: a vector on an AVX-512 CPU by scalef (one
    instruction for what takes eight below; exp of 2^16 floats in cache, one core of a Zen 5:
    2.7 -> 1.8 ns per 16 with the polynomial and rounding above), otherwise in two parts, each a
    normal power of two built in its exponent field: poly * 2^(n - n//2) (exact), times 2^(n//2)
    (the one rounding). A NaN passes the range clamps and the two products. That path is the
    AVX2 one, where the dependent chain, not the instruction count, bounded exp: its float
    polynomial runs in Estrin's order (three multiply-adds deep, not six). With the two products
    (no NaN select) that ran, x the Horner and add-to-exponent form, Zen 3, 2 threads, in turns,
    two runs: exp 1.02-1.09x, sigmoid 1.06-1.20x, erf 1.08-1.13x (1000 x 1001), softmax
    1.17x (1000 x 1001), 1.06-1.29x (37 x 50257), 0.87-1.11x (4096 x 1024), gelu 1.10-1.17x.
    """
    double = _is_double(x.type)
    lo, hi, bias, shift, int_ty = _EXP_RANGE[double]
    ln2_hi, ln2_lo = _LN2_F64 if double else _LN2_F32
    x = b.select(b.fcmp_ordered("<", x, const_like(x.type, lo)), const_like(x.type, lo), x)   # NaN stays
    x = b.select(b.fcmp_ordered(">", x, const_like(x.type, hi)), const_like(x.type, hi), x)
    magic = const_like(x.type, 1.5 * 2.0 ** shift)
    biased = _fma(b, x, const_like(x.type, 1.4426950408889634), magic)
    n = b.fsub(biased, magic)                                    # exact: round(x / ln 2)
    r = _fma(b, n, const_like(x.type, -ln2_hi), x)
    r = _fma(b, n, const_like(x.type, -ln2_lo), r)
    coeffs = _EXP_TAYLOR[:13] if double else _EXP_CHEBYSHEV_F32
    if lanes_of(x) > 1 and scales_vectors():
        return _scalef(b, horner(b, r, coeffs), n)
    poly = horner(b, r, coeffs) if double else _estrin6(b, r, coeffs)
    ity = vector_of(int_ty, lanes_of(x))
    shifted = b.shl(b.bitcast(biased, ity), const_like(ity, shift))               # n << shift
    half = b.and_(b.ashr(shifted, const_like(ity, 1)), const_like(ity, -1 << shift))   # (n // 2) << shift
    exact = b.fmul(poly, _scale(b, b.sub(shifted, half), x.type, bias, shift))
    return b.fmul(exact, _scale(b, half, x.type, bias, shift))


def _estrin6(b: ir.IRBuilder, x: ir.Value, c: Sequence[float]) -> ir.Value:
    """c0 + c1 x + ... + c6 x^6 as (c0 + c1 x) + x^2 (c2 + c3 x) + x^4 (c4 + c5 x + c6 x^2)."""
    k = lambda v: const_like(x.type, v)       # noqa: E731
    x2 = _fmul(b, x, x)
    x4 = _fmul(b, x2, x2)
    low = _fma(b, _fma(b, k(c[3]), x, k(c[2])), x2, _fma(b, k(c[1]), x, k(c[0])))
    high = _fma(b, k(c[6]), x2, _fma(b, k(c[5]), x, k(c[4])))
    return _fma(b, high, x4, low)


# ---- log ---------------------------------------------------------------------------------------

# log(1 + f) = f - f^2/2 + f^3 * P(f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: Cephes' logf
# minimax coefficients (S. L. Moshier, Cephes Math Library 2.2, single precision).
_LOG_P_F32 = [3.3333331174e-1, -2.4999993993e-1, 2.0000714765e-1, -1.6668057665e-1,
              1.4249322787e-1, -1.2420140846e-1, 1.1676998740e-1, -1.1514610310e-1,
              7.0376836292e-2]
_LN2_HI_CEPHES, _LN2_LO_CEPHES = 0.693359375, -2.12194440e-4
_FLT_MIN = 1.1754943508222875e-38


def emit_log(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """Natural log. float: x = 2^e * m with m in [sqrt(1/2), sqrt(2)) read from the bits
    (subnormals first scaled by 2^23), log(m) = log(1 + f) by Cephes' polynomial, plus e * ln 2
    in two parts; log(0) = -inf, log(x < 0) = NaN, log(inf) = inf. double: `llvm.log` (libm),
    whose accuracy an inline version would have to match to 1 ulp."""
    if _is_double(x.type):
        return call_intrinsic(b, "log", [x])
    ity = vector_of(I32, lanes_of(x))
    tiny = b.fcmp_ordered("<", x, const_like(x.type, _FLT_MIN))
    bits = b.bitcast(b.select(tiny, b.fmul(x, const_like(x.type, 2.0 ** 23)), x), ity)
    e = b.sub(b.and_(b.lshr(bits, const_like(ity, 23)), const_like(ity, 0xFF)),
              b.select(tiny, const_like(ity, 127 + 23), const_like(ity, 127)))
    m = b.bitcast(b.or_(b.and_(bits, const_like(ity, 0x7FFFFF)), const_like(ity, 0x3F800000)), x.type)
    big = b.fcmp_ordered(">", m, const_like(x.type, 1.4142135623730951))
    m = b.select(big, b.fmul(m, const_like(x.type, 0.5)), m)
    fe = b.sitofp(b.add(e, b.zext(big, ity)), x.type)
    f = b.fsub(m, const_like(x.type, 1.0))          # exact: m is within a factor 2 of 1
    z = b.fmul(f, f)
    y = _fmul(b, _fmul(b, f, z), horner(b, f, _LOG_P_F32))
    y = _fadd(b, y, _fmul(b, fe, const_like(x.type, _LN2_LO_CEPHES)))
    y = b.fsub(y, b.fmul(z, const_like(x.type, 0.5)))
    out = _fadd(b, b.fadd(f, y), _fmul(b, fe, const_like(x.type, _LN2_HI_CEPHES)))
    out = b.select(b.fcmp_ordered("==", x, const_like(x.type, float("inf"))), x, out)
    out = b.select(b.fcmp_ordered("==", x, const_like(x.type, 0.0)), const_like(x.type, float("-inf")), out)
    return b.select(b.fcmp_unordered("<", x, const_like(x.type, 0.0)), const_like(x.type, float("nan")), out)


# ---- tanh, sigmoid -----------------------------------------------------------------------------

# tanh(x) = x + x^3*(c1 + c2 x^2 + ...) near 0: its Taylor coefficients (2^2k (2^2k-1) B_2k/(2k)!).
_TANH_TAYLOR = [-1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925, 21844 / 6081075,
                -929569 / 638512875]


# float tanh as one rational function, fitted by scripts/fit_tanh_float.py (it prints these and
# their relative error in float32 arithmetic, 2.8e-7): tanh(x) = x * P(x^2) / Q(x^2) for |x| <= 9,
# beyond which tanh rounds to +-1 in float32.
_TANH_TOP = 9.0
_TANH_P = [0.9999999796336182, 0.13380979930507653, 0.0034955331085484136, 2.0608162367902482e-05,
           1.3353384411319046e-08]
_TANH_Q = [1.0, 0.4671429558895437, 0.02587677459620202, 0.00032855440324087477, 7.776034907301775e-07]


def emit_tanh_float(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """tanh of float32 values: x clamped to +-9, then x * P(x^2) / Q(x^2), capped at +-1; no exp
    and no second range: about half the instructions per lane of the exp form below, which it
    replaced for float (onnxruntime evaluates tanh as a rational function too). Past the clamp
    the result is +-1 exactly, as float32 rounds it: the ratio at 9 is an ulp or two short of 1,
    by how the host contracts its multiply-adds (AVX2 code of a vector tail returned -0.99999988)."""
    xc = _clamp(b, x, -_TANH_TOP, _TANH_TOP)
    v = b.fmul(xc, xc)
    ratio = _clamp(b, b.fdiv(b.fmul(xc, horner(b, v, _TANH_P)), horner(b, v, _TANH_Q)), -1.0, 1.0)
    beyond = b.fcmp_ordered(">", call_intrinsic(b, "fabs", [x]), const_like(x.type, _TANH_TOP))
    saturated = call_intrinsic(b, "copysign", [const_like(x.type, 1.0), x])
    return keep_nan(b, x, b.select(beyond, saturated, ratio))


def emit_tanh(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """tanh; double via e = exp(-2|x|) in [0, 1]: (1 - e) / (1 + e) with the sign of x; no
    overflow, so +-large gives +-1 and never NaN. Near 0 (where 1 - e cancels) the Taylor series
    is used."""
    if not _is_double(x.type):
        return emit_tanh_float(b, x)
    ax = call_intrinsic(b, "fabs", [x])
    e = emit_exp(b, b.fmul(ax, const_like(x.type, -2.0)))
    one = const_like(x.type, 1.0)
    far = b.fdiv(b.fsub(one, e), b.fadd(one, e))
    x2 = b.fmul(ax, ax)
    near = _fadd(b, ax, _fmul(b, _fmul(b, ax, x2), horner(b, x2, _TANH_TAYLOR)))
    small = b.fcmp_ordered("<", ax, const_like(x.type, 0.1))
    return call_intrinsic(b, "copysign", [b.select(small, near, far), x])


def emit_sigmoid(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """1 / (1 + exp(-x)) via e = exp(-|x|): 1/(1+e) for x >= 0 and e/(1+e) below, which keeps
    full relative precision for very negative x and never overflows."""
    e = emit_exp(b, b.fneg(call_intrinsic(b, "fabs", [x])))
    s = b.fdiv(const_like(x.type, 1.0), b.fadd(const_like(x.type, 1.0), e))
    return b.select(b.fcmp_ordered(">=", x, const_like(x.type, 0.0)), s, b.fmul(e, s))


# ---- erf, rsqrt --------------------------------------------------------------------------------

# float erf in two ranges, both polynomials fitted by scripts/fit_erf_float.py (it prints these
# and their error in float32 arithmetic): near |x| < 0.9, erf(x) = x * P(x^2); from 0.9 to 4,
# erf(|x|) = 1 - exp(Q(|x|)), Q near log erfc, so that the small erfc keeps its relative precision
# and 1 - erfc rounds once. Beyond 4, erf rounds to +-1 in float32.
_ERF_SPLIT, _ERF_TOP = 0.9, 4.0
_ERF_NEAR = [1.128379091894975, -0.3761237474751085, 0.11281134315228869, -0.026750925196616142,
             0.004977808167356774, -0.0005938417706455699]
_ERF_FAR = [-0.001877552339750539, -1.1201911760873107, -0.6507547479268329, -0.09110957687869196,
            0.01557919789487995, -0.0012515836363367393]


def emit_erf_float(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """erf of float32 values in float32 arithmetic, no division and no libm call: both ranges are
    evaluated and one selected per lane (a vector's lanes straddle them). Max abs error ~1e-7
    (tests/codegen); the double rational this replaced cost twice the instructions per lane."""
    ax = call_intrinsic(b, "fabs", [x])
    near = _fmul(b, x, horner(b, _fmul(b, x, x), _ERF_NEAR))
    tail = emit_exp(b, horner(b, call_intrinsic(b, "minnum", [ax, const_like(x.type, _ERF_TOP)]), _ERF_FAR))
    far = call_intrinsic(b, "copysign", [b.fsub(const_like(x.type, 1.0), tail), x])
    out = b.select(b.fcmp_ordered("<", ax, const_like(x.type, _ERF_SPLIT)), near, far)
    return keep_nan(b, x, out)


def emit_erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    if _is_double(x.type):   # double precision wants libm's erf
        return per_lane_call(b, declare(b.module, "erf", element_type(x.type), [element_type(x.type)]), x)
    return emit_erf_float(b, x)


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


# The calls the codegen emits inline, by te name; the others map to LLVM intrinsics.
INLINE: dict[str, Emitter] = {"exp": emit_exp, "log": emit_log, "tanh": emit_tanh,
                              "sigmoid": emit_sigmoid, "erf": emit_erf, "rsqrt": emit_rsqrt,
                              "sin": emit_sin, "cos": emit_cos}
