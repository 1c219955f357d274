"""The simplifier and interval bounds, checked by evaluation on random bindings (hypothesis)."""
from hypothesis import given, settings, strategies as st

from autotune.ir.bounds import const_bound
from autotune.ir.nodes import Broadcast, Buffer, Load, Ramp
from autotune.ir.passes.simplify import simplify_expr
from autotune.te.expr import Binary, BinOp, CmpOp, Compare, Const, Select, Var

VARS = [Var("a"), Var("b"), Var("c")]
OPS = {BinOp.ADD: lambda x, y: x + y, BinOp.SUB: lambda x, y: x - y, BinOp.MUL: lambda x, y: x * y,
       BinOp.FLOORDIV: lambda x, y: x // y, BinOp.FLOORMOD: lambda x, y: x % y,
       BinOp.MAX: max, BinOp.MIN: min}
CMPS = {CmpOp.LT: lambda x, y: x < y, CmpOp.LE: lambda x, y: x <= y, CmpOp.GE: lambda x, y: x >= y,
        CmpOp.EQ: lambda x, y: x == y, CmpOp.NE: lambda x, y: x != y, CmpOp.GT: lambda x, y: x > y}


def evaluate(e, env):
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Binary):
        return OPS[e.op](evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, Compare):
        return CMPS[e.op](evaluate(e.a, env), evaluate(e.b, env))
    if isinstance(e, Select):
        return evaluate(e.t, env) if evaluate(e.cond, env) else evaluate(e.f, env)
    raise AssertionError(type(e))


leaves = st.one_of(st.sampled_from(VARS), st.integers(-20, 40).map(lambda v: Const(v, "int32")))
divisors = st.integers(1, 17).map(lambda v: Const(v, "int32"))


def _extend(children):
    arith = st.tuples(st.sampled_from([BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.MAX, BinOp.MIN]), children, children)
    divmod_ = st.tuples(st.sampled_from([BinOp.FLOORDIV, BinOp.FLOORMOD]), children, divisors)
    return st.one_of(arith, divmod_).map(lambda t: Binary(*t))


exprs = st.recursive(leaves, _extend, max_leaves=12)
ranges = st.tuples(*[st.tuples(st.integers(-5, 30), st.integers(0, 40)) for _ in VARS]).map(
    lambda rs: {v: (lo, lo + w) for v, (lo, w) in zip(VARS, rs)})


@settings(max_examples=300, deadline=None)
@given(exprs, ranges, st.data())
def test_simplify_preserves_value_and_bounds_contain_it(e, r, data):
    simple = simplify_expr(e, r)
    bound = const_bound(e, r)
    for _ in range(5):
        env = {v: data.draw(st.integers(lo, hi)) for v, (lo, hi) in r.items()}
        value = evaluate(e, env)
        assert evaluate(simple, env) == value, (str(e), str(simple), env)
        if bound is not None:
            assert bound[0] <= value <= bound[1], (str(e), bound, env)


@settings(max_examples=200, deadline=None)
@given(exprs, exprs, st.sampled_from(list(CMPS)), ranges, st.data())
def test_simplified_comparisons_keep_their_truth(a, b, op, r, data):
    e = Compare(op, a, b)
    simple = simplify_expr(e, r)
    for _ in range(5):
        env = {v: data.draw(st.integers(lo, hi)) for v, (lo, hi) in r.items()}
        assert evaluate(simple, env) == evaluate(e, env), (str(e), str(simple), env)


@settings(max_examples=200, deadline=None)
@given(exprs, st.integers(-3, 3), exprs, st.sampled_from([CmpOp.LT, CmpOp.LE, CmpOp.GT, CmpOp.GE]), ranges, st.data())
def test_a_mask_folds_only_where_every_lane_agrees(base, stride, bound, op, r, data):
    """ramp(base, stride, 4) op x4(bound): a constant vector only where each lane has its truth."""
    mask = Compare(op, Ramp(base, Const(stride, "int32"), 4), Broadcast(bound, 4))
    simple = simplify_expr(mask, r)
    if type(simple) is not Broadcast:
        return
    for _ in range(5):
        env = {v: data.draw(st.integers(lo, hi)) for v, (lo, hi) in r.items()}
        lanes = [CMPS[op](evaluate(base, env) + lane * stride, evaluate(bound, env)) for lane in range(4)]
        assert lanes == [simple.value.value] * 4, (str(mask), str(simple), env)


def test_a_tail_tile_s_masks_fold_per_vector():
    """The vectors of a 32-column tile at column 192 of 197: the first straddles the edge, the
    second lies past it; a row operand read under the first's mask is read unmasked."""
    j = Var("j")
    past, straddling = (Compare(CmpOp.LT, Ramp(Const(c, "int32"), Const(1, "int32"), 16), Broadcast(Const(197, "int32"), 16))
                        for c in (208, 192))
    assert str(simplify_expr(past)) == "x16(False)"
    assert simplify_expr(straddling) is straddling
    inside = Compare(CmpOp.LT, Ramp(j * 32 + 16, Const(1, "int32"), 16), Broadcast(Const(197, "int32"), 16))
    assert str(simplify_expr(inside, {j: (0, 5)})) == "x16(True)"
    a = Buffer("A", (8,), "float32")
    row = Load(a, Broadcast(j, 16), straddling)
    assert str(simplify_expr(row, {j: (0, 7)})) == "x16(A[j])"
    assert simplify_expr(Load(a, Broadcast(j, 16), Compare(CmpOp.LT, Ramp(j, Const(1, "int32"), 16),
                                                           Broadcast(Const(5, "int32"), 16))), {j: (0, 7)}).predicate is not None


def test_split_index_arithmetic_folds_away():
    io, ii = Var("io"), Var("ii")
    r = {io: (0, 9), ii: (0, 7)}
    x = io * 8 + ii
    assert str(simplify_expr(x // 8, r)) == "io"
    assert str(simplify_expr(x % 8, r)) == "ii"
    assert simplify_expr(x < 80, r).value is True
    assert str(simplify_expr(x < 75, r)) == "(((io * 8) + ii) < 75)"
    assert str(simplify_expr((io * 8 + ii) - io * 8 + 3 + 4, r)) == "(ii + 7)"
