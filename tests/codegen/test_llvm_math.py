"""LLVM backend math intrinsics: accuracy against numpy, special values, vectorized code."""
from __future__ import annotations

import math

import numpy as np
import pytest

from autotune.codegen import build_module, jit, llvm_math
from autotune.ir.nodes import Allocate, Buffer, IfThenElse, Load, PrimFunc, Ramp, Store, seq
from autotune.te.expr import Binary, BinOp, Call, CmpOp, Compare, Var

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from llvm_ir_helpers import add, c, elementwise, loop, mul, rng, vector_map  # noqa: E402


# ---- math intrinsics --------------------------------------------------------------------------

WIDE = np.concatenate([np.linspace(-60, 60, 2401), [-50, 50, -1e-6, 1e-6, 0.0, -0.0, 1e-30, 3.99, 4.01]])
POSITIVE = np.concatenate([np.geomspace(1e-30, 1e30, 601), [1.0, 2.0, 0.5]])


def _sigmoid(x):
    return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))


ERF = np.vectorize(math.erf)
CASES = {   # fn: (numpy reference, inputs, rtol, atol) for float32
    "exp": (np.exp, np.linspace(-80, 80, 1601), 2e-7, 0),
    "log": (np.log, POSITIVE, 2e-7, 0),
    "sqrt": (np.sqrt, POSITIVE, 2e-7, 0),
    "rsqrt": (lambda x: 1 / np.sqrt(x), POSITIVE, 3e-7, 0),
    "fabs": (np.abs, WIDE, 0, 0),
    "floor": (np.floor, WIDE, 0, 0),
    "ceil": (np.ceil, WIDE, 0, 0),
    "tanh": (np.tanh, WIDE, 3e-7, 1e-30),
    "sigmoid": (_sigmoid, WIDE, 1e-6, 1e-30),
    "erf": (ERF, np.concatenate([np.linspace(-8, 8, 40001), WIDE, [0.9, 0.8999999, -0.9]]), 0, 1e-7),
}


def _pad(x, lanes):
    return np.concatenate([x, np.full(-len(x) % lanes, x[0])])


@pytest.mark.parametrize("fn", sorted(CASES))
@pytest.mark.parametrize("lanes", [1, 8])
def test_call_intrinsics_float32(fn, lanes):
    ref, xs, rtol, atol = CASES[fn]
    x = _pad(np.asarray(xs, np.float32), lanes)
    call = lambda v: Call(fn, (v,), "float32")
    f = elementwise(fn, "float32", len(x), call) if lanes == 1 else vector_map(fn, "float32", len(x), lanes, call)
    out = np.zeros_like(x)
    f(x, out)
    with np.errstate(all="ignore"):
        expect = ref(x.astype(np.float64))
    np.testing.assert_allclose(out, expect.astype(np.float32) if atol == 0 and rtol == 0 else expect,
                               rtol=rtol, atol=atol)
    assert np.isfinite(out).all()


F64_RTOL = {"exp": 1e-15, "log": 1e-15, "sqrt": 1e-15, "rsqrt": 1e-15, "tanh": 1e-14,
            "sigmoid": 1e-14, "erf": 1e-15}


@pytest.mark.parametrize("fn", sorted(CASES))
def test_call_intrinsics_float64(fn):
    ref, xs, _, _ = CASES[fn]
    x = _pad(np.asarray(xs, np.float64), 4)
    f = vector_map(fn + "_f64", "float64", len(x), 4, lambda v: Call(fn, (v,), "float64"))
    out = np.zeros_like(x)
    f(x, out)
    np.testing.assert_allclose(out, ref(x), rtol=F64_RTOL.get(fn, 0), atol=1e-300)


# exp (float32 and float64) and log (float32) are inline code: accurate, with libm's special values

F32 = np.finfo(np.float32)
F32_MIN_SUBNORMAL = 2.0 ** -149


def _map(fn, x, lanes):
    x = _pad(x, lanes)
    call = lambda v: Call(fn, (v,), str(x.dtype))
    f = elementwise(fn, str(x.dtype), len(x), call) if lanes == 1 else vector_map(fn, str(x.dtype), len(x), lanes, call)
    out = np.zeros_like(x)
    f(x, out)
    return out, f


@pytest.fixture(params=["scalef", "two-part"])
def scaling(request, monkeypatch):
    """Both ways exp applies 2^n to a vector: AVX-512's scalef where the CPU has it, and the
    two-part scaling of other CPUs (forced here on any CPU)."""
    if request.param == "scalef" and not llvm_math.scales_vectors():
        pytest.skip("this CPU has no AVX-512 scalef")
    if request.param == "two-part":
        monkeypatch.setattr(llvm_math, "scales_vectors", lambda: False)
    return request.param


@pytest.mark.parametrize("lanes", [1, 8, 37])
def test_exp_float32_accuracy_overflow_underflow_nan(lanes, scaling):
    edges = np.float32(88.72284) + np.arange(-40, 40, dtype=np.float32) * np.spacing(np.float32(88.7))
    x = np.concatenate([np.linspace(-100, 100, 200_001, dtype=np.float32), edges,
                        np.linspace(-104.5, -102.5, 2001, dtype=np.float32)])
    got, _ = _map("exp", x, lanes)
    got = got[:len(x)].astype(np.float64)
    ref = np.exp(x.astype(np.float64))
    normal = (ref >= F32.tiny) & (ref <= F32.max)
    assert np.max(np.abs(got[normal] - ref[normal]) / ref[normal]) <= 2e-7
    tiny = ref < F32.tiny                   # subnormal results, then 0: within one subnormal step
    with np.errstate(under="ignore"):
        assert np.max(np.abs(got[tiny] - ref[tiny].astype(np.float32))) <= F32_MIN_SUBNORMAL
    assert (got[x < -104] == 0).all() and (got[x == -100] > 0).all()
    assert np.isinf(got[ref > F32.max]).all() and np.isfinite(got[ref <= F32.max]).all()
    special = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30], np.float32)
    out, _ = _map("exp", special, lanes)
    np.testing.assert_array_equal(out[:len(special)], [np.inf, 0, np.nan, 1, 1, np.inf, 0])


@pytest.mark.parametrize("lanes", [1, 4, 11])
def test_exp_float64_accuracy_overflow_underflow_nan(lanes, scaling):
    x = np.concatenate([np.linspace(-746, 710, 200_001), np.linspace(-1, 1, 2001)])
    got, _ = _map("exp", x, lanes)
    got = got[:len(x)]
    with np.errstate(over="ignore"):
        ref = np.exp(x)
    normal = (ref >= np.finfo(np.float64).tiny) & np.isfinite(ref)
    assert np.max(np.abs(got[normal] - ref[normal]) / ref[normal]) <= 1e-14
    assert np.max(np.abs(got[~normal & (ref < 1)] - ref[~normal & (ref < 1)])) <= 2.0 ** -1074
    assert np.isinf(got[np.isinf(ref)]).all()
    special = np.array([np.inf, -np.inf, np.nan, 0.0, 1e300, -1e300])
    out, _ = _map("exp", special, lanes)
    np.testing.assert_array_equal(out[:len(special)], [np.inf, 0, np.nan, 1, np.inf, 0])


@pytest.mark.parametrize("lanes", [1, 8])
def test_log_float32_accuracy_subnormals_and_special_values(lanes):
    bits = np.concatenate([rng.integers(1, 0x7F800000, 200_000), rng.integers(1, 0x800000, 20_000)])
    near_one = np.float32(1) + np.arange(-2000, 2000, dtype=np.float32) * np.float32(2.0 ** -23)
    x = np.concatenate([bits.astype(np.uint32).view(np.float32), near_one, [F32.max, F32.tiny, F32_MIN_SUBNORMAL]])
    x = x.astype(np.float32)
    got, _ = _map("log", x, lanes)
    got = got[:len(x)].astype(np.float64)
    ref = np.log(x.astype(np.float64))
    nonzero = ref != 0
    assert np.max(np.abs(got[nonzero] - ref[nonzero]) / np.abs(ref[nonzero])) <= 2e-7
    assert (got[x == 1] == 0).all()
    special = np.array([0.0, -0.0, -1.0, -1e-45, -np.inf, np.inf, np.nan], np.float32)
    out, _ = _map("log", special, lanes)
    np.testing.assert_array_equal(out[:len(special)], [-np.inf, -np.inf, np.nan, np.nan, np.nan, np.inf, np.nan])


@pytest.mark.parametrize("fn,dtype,vector", [("exp", "float32", "<8 x float>"), ("log", "float32", "<8 x float>"),
                                             ("exp", "float64", "<4 x double>")])
def test_exp_and_log_stay_vectorized(fn, dtype, vector):
    lanes = int(vector[1])
    f = vector_map(f"vectorized_{fn}_{dtype}", dtype, 64, lanes, lambda v: Call(fn, (v,), dtype))
    code = f.get_source("ll")
    assert vector in code
    assert not any(call in code for call in (f"@llvm.{fn}.", f"@{fn}(", f"@{fn}f("))   # no libm call per lane


def test_periodic_index_is_kept_from_llvms_loop_vectorizer():
    """LLVM 22's loop vectorizer reads B[4*jo + f % 4] in loop f as if it were B[4*jo + f] (one
    consecutive vector) on AVX2/AVX-512 hosts; the codegen marks such loops llvm.loop.vectorize
    off. This kernel is the lowering of a fused cache_write stage (random schedule tests)."""
    n = 29
    B, C, L = Buffer("B", (n,), "float32"), Buffer("C", (13, n), "float32"), Buffer("L", (52,), "float32", "local")
    jo, f, ji, ii = Var("jo"), Var("f"), Var("ji"), Var("ii")
    col = add(mul(jo, c(4)), Binary(BinOp.FLOORMOD, f, c(4)))
    fill = loop(f, 52, IfThenElse(Compare(CmpOp.LT, col, c(n)), Store(L, f, Load(B, col))))
    copy = loop(ji, 4, IfThenElse(Compare(CmpOp.LT, add(mul(jo, c(4)), ji), c(n)), loop(ii, 13, Store(
        C, add(add(mul(ii, c(n)), mul(jo, c(4))), ji), Load(L, add(mul(ii, c(4)), ji))))))
    fn = build_module(PrimFunc("periodic", (B, C), loop(jo, 8, Allocate(L, seq(fill, copy)))))
    b, out = np.arange(1, n + 1, dtype=np.float32), np.zeros((13, n), np.float32)
    fn(b, out)
    np.testing.assert_array_equal(out, np.tile(b, (13, 1)))
    assert "llvm.loop.vectorize.enable" in fn.get_source("ll-raw")


def test_float_tanh_is_within_3e7_relative_on_a_dense_grid():
    """The rational float tanh (fitted to 2.8e-7) through its whole range, its clamp at 9 and tiny inputs."""
    x = np.concatenate([np.linspace(-9.5, 9.5, 190_001), np.geomspace(1e-30, 1e-2, 2_001)]).astype(np.float32)
    f = elementwise("tanh_dense", "float32", len(x), lambda v: Call("tanh", (v,), "float32"))
    out = np.zeros_like(x)
    f(x, out)
    np.testing.assert_allclose(out, np.tanh(x.astype(np.float64)), rtol=3e-7, atol=0)


def test_tanh_saturates_and_keeps_nan():
    x = np.array([-50, 50, -1e30, 1e30, np.inf, -np.inf, np.nan, 20, -20], np.float32)
    f = elementwise("tanh_sat", "float32", len(x), lambda v: Call("tanh", (v,), "float32"))
    out = np.zeros_like(x)
    f(x, out)
    np.testing.assert_array_equal(out[:6], [-1, 1, -1, 1, 1, -1])
    assert np.isnan(out[6])
    np.testing.assert_array_equal(out[7:], [1, -1])


def test_pow_two_arguments():
    n, lanes = 64, 8
    A, B, C = (Buffer(nm, (n,), "float32") for nm in "ABC")
    i = Var("i")
    idx = Ramp(mul(i, c(lanes)), c(1), lanes)
    f = build_module(PrimFunc("pow", (A, B, C), loop(i, n // lanes, Store(C, idx, Call("pow", (Load(A, idx), Load(B, idx)), "float32")))))
    a, b = rng.random(n, np.float32) * 10, rng.standard_normal(n).astype(np.float32) * 3
    out = np.zeros(n, np.float32)
    f(a, b, out)
    np.testing.assert_allclose(out, a ** b, rtol=2e-6)


LARGE = np.concatenate([np.linspace(-1e5, 1e5, 4001), np.linspace(-10, 10, 2001), [0.0, -0.0, 1e-30, np.pi]])


@pytest.mark.parametrize("fn", ["sin", "cos"])
@pytest.mark.parametrize("lanes", [1, 13, 16, 40])
def test_sin_and_cos_over_the_whole_range(fn, lanes):
    """A register of lanes per libmvec call where glibc has it (odd lane counts in padded chunks),
    libm per lane elsewhere: both within a few ulp of the double result, up to 1e5 radians."""
    x = _pad(LARGE.astype(np.float32), lanes)
    call = lambda v: Call(fn, (v,), "float32")
    f = elementwise(fn, "float32", len(x), call) if lanes == 1 else vector_map(f"{fn}{lanes}", "float32", len(x),
                                                                              lanes, call)
    out = np.zeros_like(x)
    f(x, out)
    np.testing.assert_allclose(out, getattr(np, fn)(x.astype(np.float64)), rtol=0, atol=3e-7)
    if lanes > 1 and jit.vector_libm() is not None:
        isa, width = jit.vector_libm()
        assert f"_ZGV{isa}N{width}v_{fn}f" in f.get_source("ll") and f"@{fn}f(" not in f.get_source("ll")
