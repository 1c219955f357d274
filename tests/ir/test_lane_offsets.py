"""lane_offsets: a vector index as one scalar plus constant lane offsets, checked lane by lane
against the index evaluated with numbers for its variables."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from autotune.ir.lane_offsets import constant_lanes, lane_offsets, rising_spread
from autotune.ir.nodes import Broadcast, Ramp
from autotune.te.expr import Binary, BinOp, CmpOp, Compare, Const, Expr, Select, Var
from autotune.te.traversal import substitute

LANES = 8
i, j = Var("i"), Var("j")


def c(v: int) -> Const:
    return Const(v, "int32")


def b(e: Expr) -> Broadcast:
    return Broadcast(e, LANES)


def lanes_at(e: Expr, env: dict[Var, int]) -> list[int]:
    """Each lane of `e` with its variables replaced by numbers (then constants alone)."""
    out = constant_lanes(substitute(e, {v: c(x) for v, x in env.items()}))
    assert out is not None
    return out


def test_a_resize_source_column_is_a_scalar_plus_constants():
    index = Binary(BinOp.ADD, b(Binary(BinOp.MUL, i, c(8))),
                   Binary(BinOp.FLOORDIV, Ramp(c(-28), c(56), LANES), b(c(112))))
    base, offsets = lane_offsets(index)
    assert offsets == [(-28 + 56 * k) // 112 for k in range(LANES)]
    assert lanes_at(Binary(BinOp.ADD, Broadcast(base, LANES), Ramp(c(0), c(0), LANES)), {i: 3}) == [24] * LANES


def test_an_edge_clamp_of_constants_folds_lane_by_lane():
    cols = Binary(BinOp.ADD, Binary(BinOp.FLOORDIV, Ramp(c(0), c(14), LANES), b(c(28))), b(c(9)))
    clamped = Select(Compare(CmpOp.LT, cols, b(c(13))), cols, b(c(13)))
    assert constant_lanes(clamped) == [min(k * 14 // 28 + 9, 13) for k in range(LANES)]
    assert constant_lanes(Binary(BinOp.MIN, cols, b(c(11)))) == [min(k * 14 // 28 + 9, 11) for k in range(LANES)]


def test_a_division_of_a_variable_lane_part_is_not_a_constant_offset():
    assert lane_offsets(Binary(BinOp.FLOORDIV, Ramp(Binary(BinOp.MUL, i, c(16)), c(36), LANES), b(c(73)))) is None
    assert lane_offsets(Binary(BinOp.MAX, Ramp(i, c(1), LANES), b(c(0)))) is None
    assert constant_lanes(Binary(BinOp.FLOORDIV, Ramp(c(0), c(1), LANES), b(c(0)))) is None


_leaf = st.one_of(
    st.builds(lambda v, k: Ramp(v, c(k), LANES), st.sampled_from([i, j]), st.integers(-3, 3)),
    st.builds(lambda v: b(v), st.sampled_from([i, j])),
    st.builds(lambda s, k, d: Binary(BinOp.FLOORDIV, Ramp(c(s), c(k), LANES), b(c(d))),
              st.integers(-9, 9), st.integers(-9, 9), st.integers(1, 7)),
)
_index = st.recursive(_leaf, lambda sub: st.one_of(
    st.builds(lambda x, y: Binary(BinOp.ADD, x, y), sub, sub),
    st.builds(lambda x, y: Binary(BinOp.SUB, x, y), sub, sub),
    st.builds(lambda x, k: Binary(BinOp.MUL, x, b(c(k))), sub, st.integers(-3, 3)),
), max_leaves=6)


@settings(max_examples=200, deadline=None)
@given(index=_index, vi=st.integers(-50, 50), vj=st.integers(-50, 50))
def test_base_plus_offsets_equals_the_index_in_every_lane(index, vi, vj):
    split = lane_offsets(index)
    assert split is not None                # sums, differences and constant products of the leaves
    base, offsets = split
    base_value = 0 if base is None else lanes_at(Broadcast(base, LANES), {i: vi, j: vj})[0]
    assert lanes_at(index, {i: vi, j: vj}) == [base_value + o for o in offsets]


_rising_leaf = st.one_of(
    st.builds(lambda v, k: Ramp(v, c(k), LANES), st.sampled_from([i, j]), st.integers(0, 5)),
    st.builds(lambda v: b(v), st.sampled_from([i, j])),
)
_rising = st.recursive(_rising_leaf, lambda sub: st.one_of(
    st.builds(lambda x, y: Binary(BinOp.ADD, x, y), sub, sub),
    st.builds(lambda x, k: Binary(BinOp.MUL, x, b(c(k))), sub, st.integers(0, 3)),
    st.builds(lambda x, q: Binary(BinOp.FLOORDIV, x, b(c(q))), sub, st.integers(1, 97)),
    st.builds(lambda x, v: Binary(BinOp.MAX, x, b(v)), sub, st.sampled_from([i, j])),
    st.builds(lambda x, k: Binary(BinOp.MIN, x, b(c(k))), sub, st.integers(-20, 200)),
), max_leaves=6)


@settings(max_examples=200, deadline=None)
@given(index=_rising, vi=st.integers(-300, 300), vj=st.integers(-300, 300))
def test_rising_lanes_stay_within_their_spread(index, vi, vj):
    """What the codegen's window load rests on: lane 0 is the smallest, lane n-1 the largest,
    and they differ by at most the bound."""
    spread = rising_spread(index)
    assert spread is not None
    lanes = lanes_at(index, {i: vi, j: vj})
    assert all(a <= b for a, b in zip(lanes, lanes[1:]))
    assert lanes[-1] - lanes[0] <= spread


def test_falling_or_unordered_lanes_have_no_rising_spread():
    assert rising_spread(Ramp(i, c(-1), LANES)) is None
    assert rising_spread(Binary(BinOp.MUL, Ramp(i, c(1), LANES), b(c(-2)))) is None
    assert rising_spread(Binary(BinOp.FLOORMOD, Ramp(i, c(1), LANES), b(c(3)))) is None
    assert rising_spread(Binary(BinOp.FLOORDIV, Ramp(c(0), c(44), LANES), b(c(89)))) == 3
