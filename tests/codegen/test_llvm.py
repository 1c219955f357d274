"""The LLVM backend against numpy: PrimFuncs built by hand from the loop-IR nodes."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from autotune.codegen import BuiltFunction, build_module
from autotune.errors import ArgumentError, BuildError
from autotune.ir.nodes import (Allocate, Broadcast, Buffer, Evaluate, For, ForKind, IfThenElse, Let,
                               Load, PrimFunc, Ramp, Store, seq)
from autotune.te.expr import (And, Binary, BinOp, Call, Cast, CmpOp, Compare, Const, Not, Select,
                              Var)

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from llvm_ir_helpers import DIV, SUB, add, c, elementwise, loop, mul, rng, vector_map  # noqa: E402


# ---- scalar code, dtypes ---------------------------------------------------------------------

def test_scalar_elementwise_2d_odd_shape():
    A, B, C = (Buffer(n, (7, 13), "float32") for n in "ABC")
    i, j = Var("i"), Var("j")
    idx = add(mul(i, c(13)), j)
    body = loop(i, 7, loop(j, 13, Store(C, idx, add(mul(Load(A, idx), Load(B, idx)), Const(0.5, "float32")))))
    f = build_module(PrimFunc("fma2d", (A, B, C), body, {"outputs": (2,)}))
    a, b = rng.random((7, 13), np.float32), rng.random((7, 13), np.float32)
    out = np.zeros((7, 13), np.float32)
    f(a, b, out)
    np.testing.assert_allclose(out, a * b + 0.5, rtol=1e-6)
    assert isinstance(f, BuiltFunction) and f.name == "fma2d" and f.func.params[2] is C


def test_float64_and_int32_buffers():
    f = elementwise("f64", "float64", 101, lambda x: Binary(DIV, mul(x, Const(3.0, "float64")), Const(7.0, "float64")))
    a, out = rng.standard_normal(101), np.zeros(101)
    f(a, out)
    np.testing.assert_allclose(out, a * 3.0 / 7.0, rtol=1e-15)

    g = elementwise("i32", "int32", 101, lambda x: Binary(BinOp.MAX, Binary(SUB, mul(x, x), c(3)), Binary(BinOp.MIN, x, c(-5))))
    a = rng.integers(-1000, 1000, 101, dtype=np.int32)
    out = np.zeros(101, np.int32)
    g(a, out)
    np.testing.assert_array_equal(out, np.maximum(a * a - 3, np.minimum(a, -5)))


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8"])
def test_floor_div_mod_match_python_for_every_sign(dtype):
    values = [-17, -9, -8, -7, -1, 0, 1, 5, 7, 8, 9, 17, -128 if dtype == "int8" else -2**31 + 1]
    divisors = [-9, -8, -3, -1, 1, 2, 3, 8, 9]
    pairs = [(x, d) for x in values for d in divisors]
    n = len(pairs)
    A, D, Q, R = (Buffer(nm, (n,), dtype) for nm in "ADQR")
    i = Var("i")
    a, d = Load(A, i), Load(D, i)
    body = loop(i, n, seq(Store(Q, i, Binary(BinOp.FLOORDIV, a, d)), Store(R, i, Binary(BinOp.FLOORMOD, a, d))))
    f = build_module(PrimFunc("divmod_" + dtype, (A, D, Q, R), body))
    av = np.array([p[0] for p in pairs], dtype)
    dv = np.array([p[1] for p in pairs], dtype)
    q, r = np.zeros(n, dtype), np.zeros(n, dtype)
    f(av, dv, q, r)
    expect_q = np.array([int(x) // int(y) for x, y in zip(av, dv)]).astype(dtype)  # wraps like numpy
    np.testing.assert_array_equal(q, expect_q)
    np.testing.assert_array_equal(r, np.array([int(x) % int(y) for x, y in zip(av, dv)], dtype))


@pytest.mark.parametrize("divisor", [-7, -1, 3, 8])
def test_floor_div_mod_by_constant_and_vector(divisor):
    n, lanes = 96, 8
    A, Q, R = (Buffer(nm, (n,), "int32") for nm in "AQR")
    i = Var("i")
    idx = Ramp(mul(i, c(lanes)), c(1), lanes)
    dv = Broadcast(c(divisor), lanes)
    body = loop(i, n // lanes, seq(Store(Q, idx, Binary(BinOp.FLOORDIV, Load(A, idx), dv)),
                                   Store(R, idx, Binary(BinOp.FLOORMOD, Load(A, idx), dv))))
    f = build_module(PrimFunc("cdivmod", (A, Q, R), body))
    a = np.arange(-48, 48, dtype=np.int32)
    q, r = np.zeros(n, np.int32), np.zeros(n, np.int32)
    f(a, q, r)
    np.testing.assert_array_equal(q, a // divisor)
    np.testing.assert_array_equal(r, a % divisor)


def test_division_by_zero_gives_zero_like_numpy():
    A, D, Q, R = (Buffer(nm, (3,), "int32") for nm in "ADQR")
    i = Var("i")
    body = loop(i, 3, seq(Store(Q, i, Binary(BinOp.FLOORDIV, Load(A, i), Load(D, i))),
                          Store(R, i, Binary(BinOp.FLOORMOD, Load(A, i), Load(D, i)))))
    f = build_module(PrimFunc("div0", (A, D, Q, R), body))
    q, r = np.ones(3, np.int32), np.ones(3, np.int32)
    f(np.array([5, -5, 0], np.int32), np.zeros(3, np.int32), q, r)
    np.testing.assert_array_equal(q, 0)
    np.testing.assert_array_equal(r, 0)


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"), ("int8", "int32"),
                                     ("uint8", "float32"), ("int32", "int8"), ("float64", "float32"),
                                     ("float32", "float64"), ("uint8", "int32"), ("int64", "int32")])
def test_casts_follow_numpy_astype(src, dst):
    f = elementwise(f"cast_{src}_{dst}", src, 61, lambda x: Cast(dst, x), out_dtype=dst)
    if src.startswith(("int", "uint")):
        info = np.iinfo(src)
        a = rng.integers(max(info.min, -200), min(info.max, 200), 61).astype(src)
    else:
        a = (rng.standard_normal(61) * 100).astype(src)
    out = np.zeros(61, dst)
    f(a, out)
    np.testing.assert_array_equal(out, a.astype(dst))


def test_float64_to_float16_rounds_once():
    """LLVM lowers double -> half to a library call the JIT lacks (it crashed); through float32
    rounded to odd it rounds as numpy's one rounding: 1 + 2**-11 + 2**-40 is just above the
    midpoint of 1 and 1 + 2**-10, which rounding to nearest float32 first would make a tie
    (rounded down, to even)."""
    f = elementwise("cast_f64_f16", "float64", 61, lambda x: Cast("float16", x), out_dtype="float16")
    a = rng.standard_normal(61) * 10.0 ** rng.integers(-9, 7, 61)
    a[:6] = [1 + 2**-11 + 2**-40, -(1 + 2**-11 + 2**-40), 1 + 2**-11, 1e300, np.nan, -1e-50]
    out = np.zeros(61, np.float16)
    f(a, out)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, a.astype(np.float16))
    assert out[0] == np.float16(1 + 2**-10) and out[2] == 1.0


def test_bool_buffers_and_logic():
    n = 37
    A, M, B = Buffer("A", (n,), "float32"), Buffer("M", (n,), "bool"), Buffer("B", (n,), "bool")
    i = Var("i")
    gt = Compare(CmpOp.GT, Load(A, i), Const(0.0, "float32"))
    body = loop(i, n, Store(B, i, And(gt, Not(Load(M, i)))))
    f = build_module(PrimFunc("logic", (A, M, B), body))
    a, m = rng.standard_normal(n).astype(np.float32), rng.random(n) > 0.5
    out = np.zeros(n, bool)
    f(a, m, out)
    np.testing.assert_array_equal(out, (a > 0) & ~m)


def test_float16_arithmetic_and_calls():
    n, lanes = 48, 8
    f = vector_map("half", "float16", n, lanes,
                   lambda x: add(Call("exp", (x,), "float16"), mul(x, Broadcast(Const(0.5, "float16"), lanes))))
    a, out = rng.standard_normal(n).astype(np.float16), np.zeros(n, np.float16)
    f(a, out)
    np.testing.assert_allclose(out, np.exp(a) + a * np.float16(0.5), rtol=2e-3)


@pytest.mark.parametrize("name", ["free", "erf", "GOMP_parallel"])
def test_kernel_named_like_a_runtime_function(name):
    f = elementwise(name, "float32", 5, lambda x: mul(x, x))
    a, out = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    f(a, out)
    np.testing.assert_array_equal(out, a * a)
    assert f.name == name


# ---- allocations ------------------------------------------------------------------------------

def test_reduction_into_local_allocate():
    m, k = 11, 37
    A, B = Buffer("A", (m, k), "float32"), Buffer("B", (m,), "float32")
    acc = Buffer("acc", (1,), "float32", scope="local")
    i, r = Var("i"), Var("r")
    body = loop(i, m, Allocate(acc, seq(
        Store(acc, c(0), Const(0.0, "float32")),
        loop(r, k, Store(acc, c(0), add(Load(acc, c(0)), Load(A, add(mul(i, c(k)), r))))),
        Store(B, i, Load(acc, c(0))))))
    f = build_module(PrimFunc("rowsum", (A, B), body))
    a, out = rng.random((m, k), np.float32), np.zeros(m, np.float32)
    f(a, out)
    np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("scope,n", [("global", 1001), ("local", 20011)])   # 80 KB local -> heap
def test_heap_allocate_as_intermediate(scope, n):
    A, B = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32")
    T = Buffer("T", (n,), "float32", scope=scope)
    i, j, rep = Var("i"), Var("j"), Var("rep")
    inner = Allocate(T, seq(loop(i, n, Store(T, i, mul(Load(A, i), Const(2.0, "float32")))),
                            loop(j, n, Store(B, j, add(Load(T, j), Load(B, j))))))
    f = build_module(PrimFunc("inter_" + scope, (A, B), seq(inner, loop(rep, 2, inner))))
    a, out = rng.random(n, np.float32), np.zeros(n, np.float32)
    f(a, out)
    np.testing.assert_allclose(out, a * 6, rtol=1e-6)
    raw = f.get_source("ll-raw")
    assert "call ptr @\"aligned_alloc\"" in raw and "call void @\"free\"" in raw


# ---- control flow -----------------------------------------------------------------------------

def test_select_and_if_then_else_and_let():
    n = 53
    A, B, C = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32"), Buffer("C", (n,), "int32")
    i, t = Var("i"), Var("t", "float32")
    x = Load(A, i)
    body = loop(i, n, seq(
        Let(t, mul(x, Const(2.0, "float32")),
            Store(B, i, Select(Compare(CmpOp.GT, t, Const(0.0, "float32")), t, Const(-1.0, "float32")))),
        IfThenElse(Compare(CmpOp.LT, Binary(BinOp.FLOORMOD, i, c(3)), c(1)),
                   Store(C, i, c(7)), Store(C, i, Cast("int32", x))),
        IfThenElse(Compare(CmpOp.EQ, i, c(n - 1)), Store(C, i, c(-9))),
        Evaluate(c(0))))
    f = build_module(PrimFunc("ctrl", (A, B, C), body))
    a = (rng.standard_normal(n) * 10).astype(np.float32)
    b, cc = np.zeros(n, np.float32), np.zeros(n, np.int32)
    f(a, b, cc)
    np.testing.assert_allclose(b, np.where(a * 2 > 0, a * 2, -1), rtol=1e-6)
    expect = np.where(np.arange(n) % 3 < 1, 7, a.astype(np.int32))
    expect[-1] = -9
    np.testing.assert_array_equal(cc, expect)


# ---- parallel ---------------------------------------------------------------------------------

@pytest.mark.parametrize("threads", ["1", "2"])
def test_parallel_loop_large_array(monkeypatch, threads):
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", threads)
    rows, cols, lanes = 257, 4096, 8
    A, B = Buffer("A", (rows, cols), "float32"), Buffer("B", (rows, cols), "float32")
    acc = Buffer("tmp", (lanes,), "float32", scope="local")
    i, j, k, s = Var("i"), Var("j"), Var("k"), Var("s")
    idx = Ramp(add(mul(i, c(cols)), mul(j, c(lanes))), c(1), lanes)
    scale = Broadcast(Cast("float32", s), lanes)
    inner = loop(j, cols // lanes, Allocate(acc, seq(
        Store(acc, Ramp(c(0), c(1), lanes), mul(Load(A, idx), scale)),
        # a PARALLEL loop nested in a parallel body runs serially inside it
        loop(k, 1, Store(B, idx, add(Load(acc, Ramp(c(0), c(1), lanes)), Broadcast(Cast("float32", i), lanes))),
             ForKind.PARALLEL))))
    body = Let(s, c(3), loop(i, rows, inner, ForKind.PARALLEL))
    f = build_module(PrimFunc("par", (A, B), body))
    a, out = rng.random((rows, cols), np.float32), np.zeros((rows, cols), np.float32)
    f(a, out)
    np.testing.assert_allclose(out, a * 3 + np.arange(rows, dtype=np.float32)[:, None], rtol=1e-6)
    assert "GOMP_parallel" in f.get_source("ll")


def test_parallel_loop_with_global_allocate_inside(monkeypatch):
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    rows, cols = 9, 5003
    A, B = Buffer("A", (rows, cols), "float64"), Buffer("B", (rows, cols), "float64")
    T = Buffer("T", (cols,), "float64", scope="global")
    i, j, jj = Var("i"), Var("j"), Var("jj")
    body = loop(i, rows, Allocate(T, seq(
        loop(j, cols, Store(T, j, Load(A, add(mul(i, c(cols)), j)))),
        loop(jj, cols, Store(B, add(mul(i, c(cols)), jj), add(Load(T, Binary(SUB, c(cols - 1), jj)), Const(1.0, "float64")))))),
        ForKind.PARALLEL)
    f = build_module(PrimFunc("par_alloc", (A, B), body))
    a, out = rng.random((rows, cols)), np.zeros((rows, cols))
    f(a, out)
    np.testing.assert_array_equal(out, a[:, ::-1] + 1)


def test_parallel_loop_runs_serially_without_libgomp_and_says_so_once(monkeypatch):
    import autotune.codegen.jit as jit
    import autotune.codegen.llvm_parallel as llvm_parallel
    monkeypatch.setattr(jit, "has_openmp", lambda: False)
    monkeypatch.setattr(llvm_parallel, "_warned_serial", False)
    A, B = Buffer("A", (1001,), "int32"), Buffer("B", (1001,), "int32")
    i = Var("i")
    func = PrimFunc("serial_par", (A, B), loop(i, 1001, Store(B, i, mul(Load(A, i), c(3))), ForKind.PARALLEL))
    with pytest.warns(RuntimeWarning, match=r"libgomp\.so\.1 .*could not be loaded: parallel loops run serially"):
        f = build_module(func)
    a, out = np.arange(1001, dtype=np.int32), np.zeros(1001, np.int32)
    f(a, out)
    np.testing.assert_array_equal(out, a * 3)
    assert "GOMP_parallel" not in f.get_source("ll-raw")
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # once per process: the second build is quiet
        build_module(func)


HUGE = (2**25, 2**25)   # 2**52 bytes of float32: more than any address space, so aligned_alloc fails


@pytest.mark.parametrize("where", ["top", "loop", "parallel"])
def test_failed_heap_allocation_is_a_memory_error(monkeypatch, where):
    """A NULL from aligned_alloc ends the kernel (freeing what it allocated) with a status that
    the call turns into a MemoryError naming the buffer and its size; "loop" allocations are
    hoisted to the function entry, "parallel" ones fail inside a libgomp thread."""
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "2")
    n = 16
    A, B = Buffer("A", (4, n), "float32"), Buffer("B", (4, n), "float32")
    S, T = Buffer("S", (n,), "float32", "global"), Buffer("T", HUGE, "float32", "global")
    r, j, jj = Var("r"), Var("j"), Var("jj")
    row = lambda v: add(mul(r, c(n)), v)
    body = Allocate(S, Allocate(T, seq(
        loop(j, n, seq(Store(S, j, Load(A, row(j))), Store(T, j, Load(S, j)))),
        loop(jj, n, Store(B, row(jj), Load(T, Binary(SUB, c(n - 1), jj)))))))
    if where == "top":
        body = Let(r, c(0), body)
    else:
        body = loop(r, 4, body, ForKind.PARALLEL if where == "parallel" else ForKind.SERIAL)
    f = build_module(PrimFunc("huge_" + where, (A, B), body))
    a, out = np.ones((4, n), np.float32), np.zeros((4, n), np.float32)
    message = rf"huge_{where}: could not allocate {2**52} bytes for buffer T \(aligned_alloc returned NULL\)"
    with pytest.raises(MemoryError, match=message):
        f(a, out)
    with pytest.raises(MemoryError, match=message):
        f.bind(a, out)()


def test_bad_thread_count_is_reported(monkeypatch):
    f = elementwise("threads_env", "float32", 3, lambda x: x)
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="AUTOTUNE_NUM_THREADS"):
        f(np.zeros(3, np.float32), np.zeros(3, np.float32))


@pytest.mark.parametrize("user_env, expected", [
    ({}, "3000"),                                   # bounded spinning by default
    ({"GOMP_SPINCOUNT": "5"}, "5"),                 # the user's settings win
    ({"OMP_WAIT_POLICY": "active"}, None),
])
def test_libgomp_spin_is_bounded_unless_the_user_says(user_env, expected):
    """libgomp reads its environment once, when it loads: the JIT sets the spin count first."""
    code = ("import os, autotune.codegen.jit as j\n"
            "assert j.host().openmp\n"
            "print(os.environ.get('GOMP_SPINCOUNT'))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    p = subprocess.run([sys.executable, "-c", code], env={**env, **user_env}, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(expected)


# ---- argument checks --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def three_args():
    A, B, C = Buffer("A", (7, 13), "float32"), Buffer("B", (7, 13), "float32"), Buffer("C", (7, 13), "float32")
    i = Var("i")
    body = loop(i, 91, Store(C, i, add(Load(A, i), Load(B, i))))
    return build_module(PrimFunc("args", (A, B, C), body, {"outputs": (2,)}))


def _arrays():
    return [np.zeros((7, 13), np.float32) for _ in range(3)]


@pytest.mark.parametrize("mutate,error,message", [
    (lambda a: a[:2], ArgumentError, r"takes 3 arrays \(A, B, C\), got 2"),
    (lambda a: [a[0], a[1].tolist(), a[2]], ArgumentError, r"argument 1 \(B\): expected a numpy.ndarray, got list"),
    (lambda a: [a[0], a[1], a[2].astype(np.float64)], ArgumentError, r"argument 2 \(C\): expected dtype float32, got float64"),
    (lambda a: [a[0], a[1], np.zeros((7, 12), np.float32)], ValueError, r"argument 2 \(C\): expected shape \(7, 13\), got \(7, 12\)"),
    (lambda a: [np.zeros((13, 7), np.float32).T, a[1], a[2]], ValueError, r"argument 0 \(A\): expected a C-contiguous"),
    (lambda a: [a[0], a[1], _readonly(a[2])], ValueError, r"argument 2 \(C\): is written"),
    (lambda a: [a[0], a[1], a[0]], ValueError, r"argument 0 \(A\) and argument 2 \(C\) share memory"),
    (lambda a: [a[0], a[1], a[1][...]], ValueError, r"argument 1 \(B\) and argument 2 \(C\) share memory"),
    (lambda a: [a[0], a[1], _misaligned()], ValueError, r"argument 2 \(C\): expected an array aligned"),
])
def test_argument_errors(three_args, mutate, error, message):
    with pytest.raises(error, match=message):
        three_args(*mutate(_arrays()))


def test_read_only_inputs_are_fine(three_args):
    a, b, out = _arrays()
    a += 1
    b += 2
    three_args(_readonly(a), _readonly(b), out)
    np.testing.assert_array_equal(out, 3)
    run = three_args.bind(a, b, out)
    run()
    np.testing.assert_array_equal(out, 3)


def test_inputs_may_alias_each_other(three_args):
    """Kernel parameters are noalias, which only forbids overlap with memory the kernel writes."""
    a, _, out = _arrays()
    a += np.arange(91, dtype=np.float32).reshape(7, 13)
    three_args(a, a, out)
    np.testing.assert_array_equal(out, 2 * a)


def test_bind_free_checks_what_it_is_given_once_and_takes_the_others_by_address(three_args):
    """A model binds each kernel to its fixed memory and passes the inputs and outputs it checked
    or made itself, as addresses, at every call."""
    a, b, out = _arrays()
    a += 1
    run = three_args.bind_free(a, None, None)
    for value in (2, 5):
        b[...] = value
        run(b.ctypes.data, out.ctypes.data)
        np.testing.assert_array_equal(out, 1 + value)
    with pytest.raises(ValueError, match=r"argument 0 \(A\): expected shape \(7, 13\), got \(7, 12\)"):
        three_args.bind_free(np.zeros((7, 12), np.float32), None, None)
    with pytest.raises(ValueError, match=r"argument 2 \(C\): is written"):
        three_args.bind_free(a, None, _readonly(out))
    with pytest.raises(ArgumentError, match=r"takes 3 arrays \(A, B, C\), got 4"):
        three_args.bind_free(a, None, None, None)


def _readonly(a):
    a = a.copy()
    a.setflags(write=False)
    return a


def _misaligned():
    raw = np.zeros(7 * 13 * 4 + 1, np.uint8)
    return raw[1:].view(np.float32).reshape(7, 13)


# ---- build errors -----------------------------------------------------------------------------

def test_thread_bound_loop_is_a_build_error():
    A = Buffer("A", (32,), "float32")
    tx = Var("tx")
    func = PrimFunc("gpu", (A,), For(tx, 32, ForKind.THREAD_BOUND, Store(A, tx, Const(1.0, "float32")), "threadIdx.x"))
    with pytest.raises(BuildError, match="bound to threadIdx.x.*target='cuda'"):
        build_module(func)


@pytest.mark.parametrize("body,message", [
    (lambda A, i: loop(i, 4, Store(A, i, Const(1.0, "float32")), ForKind.VECTORIZED), "still VECTORIZED"),
    (lambda A, i: Evaluate(Load(A, c(0))), "cannot evaluate"),
    (lambda A, i: Store(A, i, Const(1.0, "float32")), "variable i"),
    (lambda A, i: Store(A, c(0), Load(Buffer("X", (1,), "float32"), c(0))), "buffer X"),
    (lambda A, i: Allocate(Buffer("S", (4,), "float32", "shared"), Evaluate(c(0))), "scope 'shared'"),
])
def test_unsupported_ir_is_a_build_error(body, message):
    A = Buffer("A", (4,), "float32")
    with pytest.raises(BuildError, match=message):
        build_module(PrimFunc("bad", (A,), body(A, Var("i"))))


# ---- a tiled matmul: correctness and compile time -----------------------------------------------

def matmul_kernel(m, n, k, tm=4, tn=16, lanes=8):
    """C = A @ B with a parallel outer loop, a tm x tn register tile in a local buffer, a vector
    body (broadcast A, contiguous B) and a predicated tail on n."""
    A, B, C = Buffer("A", (m, k), "float32"), Buffer("B", (k, n), "float32"), Buffer("C", (m, n), "float32")
    acc = Buffer("acc", (tm * tn,), "float32", scope="local")
    io, jo, kk, ii, jv, i2, j2 = (Var(x) for x in ("io", "jo", "k", "ii", "jv", "i2", "j2"))
    nb = tn // lanes
    ones = lambda base: Ramp(base, c(1), lanes)
    row = lambda ii_: add(mul(io, c(tm)), ii_)
    col = lambda jv_: add(mul(jo, c(tn)), mul(jv_, c(lanes)))
    in_rows = lambda ii_: Compare(CmpOp.LT, row(ii_), c(m))
    col_pred = lambda jv_: Compare(CmpOp.LT, ones(col(jv_)), Broadcast(c(n), lanes))
    acc_at = lambda ii_, jv_: ones(add(mul(ii_, c(tn)), mul(jv_, c(lanes))))
    zero = Broadcast(Const(0.0, "float32"), lanes)
    init = loop(i2, tm, loop(j2, nb, Store(acc, acc_at(i2, j2), zero)))
    update = loop(kk, k, loop(ii, tm, IfThenElse(in_rows(ii), loop(jv, nb, Store(
        acc, acc_at(ii, jv),
        add(Load(acc, acc_at(ii, jv)),
            mul(Broadcast(Load(A, add(mul(row(ii), c(k)), kk)), lanes),
                Load(B, ones(add(mul(kk, c(n)), col(jv))), col_pred(jv)))))))))
    write = loop(i2, tm, IfThenElse(in_rows(i2), loop(j2, nb, Store(
        C, ones(add(mul(row(i2), c(n)), col(j2))), Load(acc, acc_at(i2, j2)), col_pred(j2)))))
    body = loop(io, (m + tm - 1) // tm, loop(jo, (n + tn - 1) // tn, Allocate(acc, seq(init, update, write))),
                ForKind.PARALLEL)
    return PrimFunc("matmul", (A, B, C), body, {"outputs": (2,)})


def test_tiled_matmul_correct():
    """(Its compile time is reported by benchmarks/matmul_cpu.py, not asserted here.)"""
    m, n, k = 67, 101, 53
    f = build_module(matmul_kernel(m, n, k))
    a, b = rng.random((m, k), np.float32), rng.random((k, n), np.float32)
    out = np.zeros((m, n), np.float32)
    f(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)
