"""Register tiles without masks: a local tile whose columns cross the layer's edge accumulates
through plain vector loads and stores (LLVM keeps it in registers), the global store keeps its
mask, and the kernel still computes numpy's result; buffers where a masked-off lane could be
observed keep their masks."""
import numpy as np
import pytest

import autotune
from autotune.ir.functor import walk
from autotune.ir.nodes import Allocate, Broadcast, Buffer, For, ForKind, IfThenElse, Load, Ramp, Seq, Store
from autotune.ir.passes.register_tiles import unmask_register_tiles
from autotune.te.expr import Binary, BinOp, CmpOp, Compare, Const, Var


def _accesses(body, scope):
    out = []
    walk(body, lambda n: out.append(n) if type(n) in (Load, Store) and n.buffer.scope == scope else None)
    return out


@pytest.mark.parametrize("H,W", [(8, 29), (9, 37)], ids=["column-tail", "row-and-column-tails"])
def test_depthwise_tile_across_the_right_edge_accumulates_unmasked(H, W):
    params = dict(N=1, C=5, H=H, W=W, F=5, KH=7, KW=7, stride=1, padding=3, dilation=1, groups=5)
    task = autotune.create_task("conv2d_grouped", **params)
    knobs = task.config(0).to_json()["knobs"]
    s, args = task.instantiate(task.config_space.from_json({"knobs": {**knobs, "algorithm": "nchw"}}).index)
    func = autotune.lower(s, args)
    assert _accesses(func.body, "local")
    assert not [a for a in _accesses(func.body, "local") if a.predicate is not None]
    assert [a for a in _accesses(func.body, "global") if type(a) is Store and a.predicate is not None]
    kernel = autotune.build(s, args)
    x, w = task.make_inputs(np.random.default_rng(W))
    out = np.empty(task.arg_specs[2][0], np.float32)
    kernel(x, w, out)
    np.testing.assert_allclose(out, task.reference([x, w])[0], rtol=1e-4, atol=1e-4)


def _broadcast(value, dtype="int32"):
    return Broadcast(Const(value, dtype), 16)


def _store(buf, base, mask):
    return Store(buf, Ramp(Const(base, "int32"), Const(1, "int32"), 16), _broadcast(0.0, "float32"), mask)


def _lanes_below(bound, first=Const(16, "int32")):
    return Compare(CmpOp.LT, Ramp(first, Const(1, "int32"), 16), _broadcast(bound))


def _tile(*accesses):
    buf = Buffer("acc", (32,), "float32", "local")
    return Allocate(buf, Seq(tuple(store(buf) for store in accesses)))


def test_masks_stay_where_a_masked_off_lane_could_be_read():
    p, q = _lanes_below(29), _lanes_below(29, Const(0, "int32"))
    for alloc in (
        _tile(lambda b: _store(b, 0, p), lambda b: _store(b, 16, p)),
        _tile(lambda b: _store(b, 0, p), lambda b: _store(b, 16, q)),       # each vector its own mask
        _tile(lambda b: _store(b, 0, p), lambda b: _store(b, 16, None)),    # one vector unmasked throughout
    ):
        assert all(a.predicate is None for a in _accesses(unmask_register_tiles(alloc), "local"))
    for alloc in (
        _tile(lambda b: _store(b, 0, p), lambda b: _store(b, 0, None)),     # one access of a vector unmasked
        _tile(lambda b: _store(b, 0, p), lambda b: _store(b, 0, q)),        # one vector, two masks
        _tile(lambda b: _store(b, 0, p), lambda b: _store(b, 8, p)),        # vectors overlap lanes
        _tile(lambda b: _store(b, 0, p), lambda b: _store(b, 32, p)),       # past the buffer
    ):
        assert unmask_register_tiles(alloc) is alloc
    i = Var("i", "int32")
    buf = Buffer("acc", (32,), "float32", "local")
    loop = Allocate(buf, For(i, 2, ForKind.SERIAL, _store(buf, 0, _lanes_below(29, i))))
    assert unmask_register_tiles(loop) is loop                                           # the mask changes inside
    row = Ramp(Binary(BinOp.MUL, i, Const(16, "int32")), Const(1, "int32"), 16)
    either = Allocate(buf, Seq((For(i, 2, ForKind.SERIAL, Store(buf, row, _broadcast(0.0, "float32"), p)),
                                _store(buf, 16, q))))
    assert unmask_register_tiles(either) is either        # vector i = 1 is the other store's, under another mask


def test_unmasked_accesses_mix_in_only_where_every_lane_is_on():
    """A vector loop versioned per vector: the full-vector copy, unmasked, under a test of the
    mask's last lane (x*16 + 15 < 29), the masked copy in the else branch."""
    x = Var("x", "int32")
    first = Binary(BinOp.MUL, x, Const(16, "int32"))
    mask = _lanes_below(29, first)
    last_lane = Compare(CmpOp.LT, Binary(BinOp.ADD, first, Const(15, "int32")), Const(29, "int32"))

    def versioned(cond):
        buf = Buffer("acc", (32,), "float32", "local")
        return For(x, 2, ForKind.SERIAL, Allocate(buf, IfThenElse(cond, _store(buf, 16, None), _store(buf, 16, mask))))

    loop = versioned(last_lane)
    assert all(a.predicate is None for a in _accesses(unmask_register_tiles(loop), "local"))
    other = versioned(Compare(CmpOp.LT, Binary(BinOp.ADD, first, Const(14, "int32")), Const(29, "int32")))
    assert unmask_register_tiles(other) is other              # x*16 + 14 < 29 leaves lane 15 off
