"""Features of lowered loop IR: fixed length, deterministic, sensitive to the schedule (their
speed: benchmarks/costmodel_speed.py)."""
from __future__ import annotations

import numpy as np
import pytest

import autotune
from autotune import te
from autotune.costmodel.features import FEATURE_LEN, MAX_KNOBS, extract, feature_names
from autotune.ir.nodes import Buffer, For, ForKind, IfThenElse, Load, Prefetch, PrimFunc, Seq, Store
from autotune.schedules.cpu.matmul import default_schedule, hand_schedule
from autotune.target import CpuFacts
from autotune.te.expr import Var, const

NAMES = feature_names()


def feat(v: np.ndarray, name: str) -> float:
    return float(v[NAMES.index(name)])


def matmul_func(M, N, K, **kw):
    s, args = hand_schedule(M, N, K, **kw) if kw else default_schedule(M, N, K)
    return autotune.lower(s, args)


def vadd_func(n=1000, factor=16, vectorize=True, parallel=True):
    A = te.placeholder((n,), "float32", name="A")
    B = te.placeholder((n,), "float32", name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor)
    if vectorize:
        s[C].vectorize(xi)
    if parallel:
        s[C].parallel(xo)
    return autotune.lower(s, [A, B, C])


def reduce_func(rows=64, cols=301, unroll=0):
    X = te.placeholder((rows, cols), "float32", name="X")
    k = te.reduce_axis((0, cols), name="k")
    R = te.compute((rows,), lambda i: te.sum(X[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    if unroll:
        _, ki = s[R].split(k, unroll)
        s[R].unroll(ki)
    return autotune.lower(s, [X, R])


def thread_bound_func():
    """A hand-built GPU-style function: a THREAD_BOUND loop around a scalar store."""
    buf = Buffer("Y", (256,), "float32")
    i = Var("threadIdx.x")
    body = For(i, 256, ForKind.THREAD_BOUND, Store(buf, i, const(1.0, "float32")), "threadIdx.x")
    return PrimFunc("gpu", (buf,), body)


FUNCS = {
    "mm_hand": lambda: matmul_func(128, 128, 128, bn=32, rows=8, kfactor=4),
    "mm_tail": lambda: matmul_func(97, 61, 43, bn=16, rows=4, kfactor=3),
    "mm_big_unroll": lambda: matmul_func(200, 200, 200, bn=64, rows=16, kfactor=8),
    "mm_naive": lambda: matmul_func(33, 17, 9),
    "vadd_tail": lambda: vadd_func(1000),
    "vadd_scalar": lambda: vadd_func(1000, vectorize=False, parallel=False),
    "reduce": lambda: reduce_func(),
    "reduce_unrolled": lambda: reduce_func(unroll=8),
    "thread_bound": thread_bound_func,
    "empty": lambda: PrimFunc("empty", (), Store(Buffer("Z", (1,), "float32"), const(0), const(0.0, "float32"))),
}


@pytest.fixture(scope="module")
def funcs():
    return {name: make() for name, make in FUNCS.items()}


def test_names_match_length_and_are_unique():
    assert len(NAMES) == FEATURE_LEN == len(set(NAMES))


def test_fixed_length_finite_float32(funcs):
    for name, f in funcs.items():
        v = extract(f)
        assert v.shape == (FEATURE_LEN,) and v.dtype == np.float32, name
        assert np.all(np.isfinite(v)), name


def test_deterministic_across_calls_and_relowering(funcs):
    for name, make in FUNCS.items():
        a, b, c = extract(funcs[name]), extract(funcs[name]), extract(make())
        assert np.array_equal(a, b) and np.array_equal(a, c), name


def test_different_schedules_give_different_vectors():
    configs = [dict(bn=bn, rows=r, kfactor=kf) for bn in (8, 16, 32) for r in (2, 4) for kf in (1, 4)]
    vecs = [extract(matmul_func(128, 128, 128, **c)) for c in configs]
    vecs.append(extract(matmul_func(128, 128, 128)))
    distinct = {v.tobytes() for v in vecs}
    assert len(distinct) == len(vecs)


def test_vectorized_and_scalar_differ_in_lanes(funcs):
    vec, scalar = extract(funcs["vadd_tail"]), extract(funcs["vadd_scalar"])
    assert feat(vec, "vector_lanes") == pytest.approx(np.log2(17))
    assert feat(scalar, "vector_lanes") == pytest.approx(1.0)
    assert feat(vec, "loop0.is_vectorized") == 1.0 and feat(scalar, "loop0.is_vectorized") == 0.0
    assert feat(vec, "n_parallel") == 1.0 and feat(scalar, "n_parallel") == 0.0


def test_naive_matmul_strides_reuse_and_flops(funcs):
    v = extract(funcs["mm_naive"])   # for i<33: for j<17: for k<9: C[i*17+j] += A[i*9+k] * B[k*17+j]
    assert feat(v, "flops") == pytest.approx(np.log2(1 + 2 * 33 * 17 * 9))
    assert feat(v, "hot_depth") == 3 and feat(v, "unroll") == 1.0
    # innermost loop is k: C is reused 9 times (stride 0), A is contiguous, B strided by 17
    stride_of = {}
    for b in range(3):
        stride = round(2 ** feat(v, f"buf{b}.stride") - 1, 3)  # float32 logs
        stride_of[stride] = b
    assert sorted(stride_of) == [0, 1, 17]
    c = stride_of[0]
    assert feat(v, f"buf{c}.is_store") == 1.0
    assert feat(v, f"buf{c}.reuse0") == pytest.approx(np.log2(1 + 9))
    assert feat(v, f"buf{stride_of[17]}.reuse2") == pytest.approx(np.log2(1 + 33))  # B reused over i


def test_hand_schedule_sees_unroll_vector_parallel_and_local(funcs):
    v = extract(funcs["mm_hand"])
    assert feat(v, "loop0.is_vectorized") == 1.0 and feat(v, "loop0.extent") == pytest.approx(np.log2(33))
    assert feat(v, "loop1.is_unrolled") == 1.0 and feat(v, "unroll") == pytest.approx(np.log2(33))
    assert feat(v, "n_parallel") == 2.0 and feat(v, "parallel_frac") == 1.0
    assert feat(v, "n_local_alloc") == 1.0 and feat(v, "local_bytes") == pytest.approx(np.log2(1 + 8 * 32 * 4))
    assert feat(v, "flops") == pytest.approx(np.log2(1 + 2 * 128 ** 3), rel=1e-3)


def test_tails_show_guards_and_unrolled_reduction(funcs):
    assert feat(extract(funcs["vadd_tail"]), "inner_guards") > 0
    assert feat(extract(funcs["mm_tail"]), "n_guards") > 0
    assert feat(extract(funcs["mm_hand"]), "n_guards") == 0
    plain, unrolled = extract(funcs["reduce"]), extract(funcs["reduce_unrolled"])
    assert feat(plain, "flops") == pytest.approx(np.log2(1 + 64 * 301))
    assert feat(unrolled, "unroll") == pytest.approx(np.log2(9))
    # the unrolled reduction's tail is partitioned off (ir.passes.partition): no guard is left
    assert feat(unrolled, "inner_guards") == 0 and feat(plain, "inner_guards") == 0


def test_thread_bound_kind(funcs):
    v = extract(funcs["thread_bound"])
    assert feat(v, "loop0.is_thread") == 1.0 and feat(v, "parallel_extent") == pytest.approx(np.log2(257))


def test_knobs_padded_and_truncated(funcs):
    f = funcs["vadd_tail"]
    base = extract(f)
    at = NAMES.index("knob0")
    short = extract(f, [3, 5])
    assert list(short[at:at + 3]) == [3, 5, 0]
    assert np.array_equal(short[:at], base[:at])
    long = extract(f, list(range(1, 40)))
    assert list(long[at:]) == list(range(1, MAX_KNOBS + 1))


def test_every_feature_is_documented_in_the_module_table():
    import re

    from autotune.costmodel import features

    words = set(re.findall(r"[\w{}]+", features.__doc__))
    for name in NAMES:
        field = re.sub(r"(?<=[a-z])\d+$", "{i}", name.split(".")[-1])   # reuse3 -> reuse{i}
        if name.startswith("knob"):
            field = "knob{k}"
        assert field in words, f"{name} ({field}) is not in the features docstring"


# ---- target-relative and tail features ------------------------------------------------------------

AVX2 = CpuFacts(vector_bytes=32, l1d_bytes=32768, l2_bytes=2**20, cores=4)    # 8 float32 lanes


def scale_func(n, factor, parallel=True, vectorize=True):
    A = te.placeholder((n,), "float32", name="A")
    C = te.compute((n,), lambda i: A[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor)
    if vectorize:
        s[C].vectorize(xi)
    if parallel:
        s[C].parallel(xo)
    return autotune.lower(s, [A, C])


def test_lanes_relative_to_the_target():
    whole, half, wide, scalar = (extract(scale_func(1024, f, vectorize=v), cpu=AVX2)
                                 for f, v in ((8, True), (4, True), (16, True), (8, False)))
    assert feat(whole, "lane_ratio") == 0.0 and feat(whole, "lane_fill") == 1.0
    assert feat(half, "lane_ratio") == -1.0 and feat(half, "lane_fill") == 0.5
    assert feat(wide, "lane_ratio") == 1.0 and feat(wide, "lane_fill") == 1.0     # two whole registers
    assert feat(scalar, "lane_ratio") == -3.0 and feat(scalar, "lane_fill") == pytest.approx(1 / 8)
    # 12 lanes take two 8-lane registers; their vectors start at multiples of 12, not of 8
    twelve = extract(scale_func(1020, 12), cpu=AVX2)
    assert feat(twelve, "lane_fill") == pytest.approx(12 / 16)
    assert feat(twelve, "unaligned_frac") == 1.0 and feat(whole, "unaligned_frac") == 0.0
    # without target facts the relative features are 0, the IR's own lanes stay
    plain = extract(scale_func(1024, 4))
    assert feat(plain, "lane_ratio") == feat(plain, "lane_fill") == 0.0
    assert feat(plain, "vector_lanes") == feat(half, "vector_lanes") == pytest.approx(np.log2(5))


def test_parallel_balance_over_the_target_cores():
    even, uneven = extract(scale_func(1024, 8), cpu=AVX2), extract(scale_func(1000, 8 * 25), cpu=AVX2)
    assert feat(even, "parallel_balance") == 1.0                 # 128 iterations on 4 cores
    assert feat(uneven, "parallel_balance") == pytest.approx(5 / 8)   # 5 iterations: 2 rounds of 4
    assert feat(extract(scale_func(1024, 8, parallel=False), cpu=AVX2), "parallel_balance") == 0.0


def test_partitioned_tail_counts_only_what_it_runs():
    # 1000 = 62 vectors of 16 + one masked vector of 16 lanes (8 live) after the loop: no guard in a loop
    v = extract(scale_func(1000, 16, parallel=False), cpu=AVX2)
    assert feat(v, "tail_frac") == pytest.approx(16 / 1000, rel=0.1)
    assert feat(v, "guard_density") == 0.0
    assert feat(v, "vector_frac") == 1.0
    exact = extract(scale_func(1024, 16, parallel=False), cpu=AVX2)
    assert feat(exact, "tail_frac") == feat(exact, "guard_density") == 0.0
    # 64 lanes span several registers: the tail stays a scalar loop of 64 iterations under `i < 40`
    wide = extract(scale_func(1000, 64, parallel=False), cpu=AVX2)
    assert feat(wide, "tail_frac") == pytest.approx(40 / 1000, rel=0.1)
    assert feat(wide, "vector_frac") == pytest.approx(960 / 1000, rel=0.01)
    assert feat(wide, "guard_density") > 0


def test_versioned_tail_counts_its_share_of_the_parallel_loop():
    # parallel over 63 vectors: `if vector fits: vector store else: the same store masked`
    v = extract(scale_func(1000, 16), cpu=AVX2)
    assert feat(v, "else_frac") == pytest.approx(16 / 1000, rel=0.15)   # only 1 of 63 iterations
    assert feat(v, "tail_frac") == pytest.approx(16 / 1000, rel=0.15)
    assert feat(v, "flops") == pytest.approx(np.log2(1 + 1000), rel=0.01)


def test_branch_shares_on_hand_made_ir():
    i, y = Var("i"), Buffer("Y", (10,), "float32")
    then = Store(y, i, const(1.0, "float32"))
    other = Store(y, i, const(2.0, "float32") + const(1.0, "float32"))   # one float op
    body = For(i, 10, ForKind.SERIAL, IfThenElse(i < 3, then, other))
    v = extract(PrimFunc("f", (y,), body))
    assert feat(v, "else_frac") == 1.0           # every flop is in the else branch
    assert feat(v, "flops") == pytest.approx(np.log2(1 + 7), rel=0.05)    # it runs 7 of 10 times
    # a condition that reads memory cannot be evaluated: taken to hold half the time
    m = Buffer("M", (10,), "int32")
    data = For(i, 10, ForKind.SERIAL, IfThenElse(Load(m, i) > 0, then, other))
    assert feat(extract(PrimFunc("g", (y, m), data)), "flops") == pytest.approx(np.log2(1 + 5), rel=0.05)


def test_divmod_ops_count_integer_division():
    i, y = Var("i"), Buffer("Y", (64,), "float32")
    direct = For(i, 64, ForKind.SERIAL, Store(y, i, const(1.0, "float32")))
    split = For(i, 64, ForKind.SERIAL, Store(y, (i // 8) * 8 + i % 8, const(1.0, "float32")))
    assert feat(extract(PrimFunc("a", (y,), direct)), "divmod_ops") == 0.0
    assert feat(extract(PrimFunc("b", (y,), split)), "divmod_ops") == pytest.approx(np.log2(1 + 2 * 64))


def test_prefetches_count_the_lines_fetched_ahead():
    i, x, y = Var("i"), Buffer("X", (64,), "float32"), Buffer("Y", (64,), "float32")
    store = Store(y, i, Load(x, i))
    plain = For(i, 64, ForKind.SERIAL, store)
    fetching = For(i, 64, ForKind.SERIAL, Seq((Prefetch(x, i + 16), store)))
    assert feat(extract(PrimFunc("a", (x, y), plain)), "prefetches") == 0.0
    assert feat(extract(PrimFunc("b", (x, y), fetching)), "prefetches") == pytest.approx(np.log2(1 + 64))
