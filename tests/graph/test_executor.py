"""CompiledModel on hand-built graphs: numpy's answers, memory planned once and reused, inputs
checked and read in place, provenance per node."""
import os
import re
import sys

import numpy as np
import pytest
from hypothesis import given, settings

import autotune
from autotune.graph import CompiledModel, compile_model

sys.path.insert(0, os.path.dirname(__file__))
from graph_builder import GraphBuilder, dags, elementwise_graph

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def mlp(M=5, K=13, H=17, N=11):
    b = GraphBuilder("mlp")
    x = b.input("x", (M, K))
    w1, b1, w2 = b.const("w1", rand(K, H)), b.const("b1", rand(H)), b.const("w2", rand(H, N))
    h = b.node("matmul", (x, w1), (M, H), M=M, N=H, K=K)
    h = b.node("add", (h, b1), (M, H), a_shape=(M, H), b_shape=(H,))
    h = b.node("relu", (h,), (M, H), shape=(M, H))
    y = b.node("matmul", (h, w2), (M, N), M=M, N=N, K=H)
    y = b.node("softmax", (y,), (M, N), M=M, N=N)
    return b.build(y)


def mlp_reference(g, x):
    c = g.constants
    return softmax(np.maximum(x @ c["w1"] + c["b1"], 0) @ c["w2"])


def test_mlp_matches_numpy_and_both_call_forms_agree():
    g = mlp()
    m = autotune.compile_model(g)
    x = rand(5, 13)
    (y,) = m(x)
    np.testing.assert_allclose(y, mlp_reference(g, x), rtol=1e-5, atol=1e-6)
    (again,) = m.run({"x": x})
    np.testing.assert_array_equal(again, y)
    assert again is not y                              # fresh each call: the caller owns it
    assert m.inputs == [("x", (5, 13), "float32")] and m.outputs == [(g.outputs[0].name, (5, 11), "float32")]


def test_conv_block_with_bias_relu_view_and_dense():
    N, C, H, W, F = 1, 3, 9, 11, 6
    b = GraphBuilder("conv")
    x = b.input("x", (N, C, H, W))
    wc, bc = b.const("wc", rand(F, 1, 3, 3)), b.const("bc", rand(F, 1, 1))
    wd, bd = b.const("wd", rand(5, F * H * W)), b.const("bd", rand(5))
    h = b.node("conv2d_grouped", (x, wc), (N, F, H, W), N=N, C=C, H=H, W=W, F=F, KH=3, KW=3,
               stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=3)
    h = b.node("add", (h, bc), (N, F, H, W), a_shape=(N, F, H, W), b_shape=(F, 1, 1))
    h = b.node("relu", (h,), (N, F, H, W), shape=(N, F, H, W))
    flat = b.view(h, (N, F * H * W))
    y = b.node("dense", (flat, wd, bd), (N, 5), M=N, N=5, K=F * H * W)
    m = compile_model(b.build(y, flat))
    xv = rand(N, C, H, W)
    y_got, flat_got = m(xv)
    conv = np.zeros((N, F, H, W), np.float32)
    xp = np.pad(xv, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for f in range(F):
        c = f // 2                                        # groups=3: two filters per input channel
        for i in range(3):
            for j in range(3):
                conv[:, f] += xp[:, c, i:i + H, j:j + W] * b.constants["wc"][f, 0, i, j]
    want_flat = np.maximum(conv + b.constants["bc"], 0).reshape(N, -1)
    np.testing.assert_allclose(flat_got, want_flat, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y_got, np.maximum(want_flat @ b.constants["wd"].T + b.constants["bd"], 0),
                               rtol=1e-4, atol=1e-4)


def test_residual_add_reads_a_value_across_a_branch():
    b = GraphBuilder("residual")
    x = b.input("x", (7, 3))
    w = b.const("w", rand(3, 3))
    h = b.node("relu", (x,), (7, 3), shape=(7, 3))
    t = b.node("matmul", (h, w), (7, 3), M=7, N=3, K=3)
    t = b.node("relu", (t,), (7, 3), shape=(7, 3))
    y = b.node("add", (t, h), (7, 3), a_shape=(7, 3), b_shape=(7, 3))
    m = compile_model(b.build(y))
    xv = rand(7, 3)
    h_ref = np.maximum(xv, 0)
    np.testing.assert_allclose(m(xv)[0], np.maximum(h_ref @ b.constants["w"], 0) + h_ref, rtol=1e-5, atol=1e-6)


def test_outputs_that_are_inputs_constants_or_their_views_are_copies():
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    c = b.const("c", rand(6))
    xv, cv = b.view(x, (3, 2)), b.view(c, (2, 3))
    m = compile_model(b.build(xv, cv, x))
    xa = rand(2, 3)
    got = m(xa)
    np.testing.assert_array_equal(got[0], xa.reshape(3, 2))
    np.testing.assert_array_equal(got[1], b.constants["c"].reshape(2, 3))
    assert not any(np.shares_memory(o, a) for o in got for a in (xa, b.constants["c"]))


def test_intermediates_share_the_arena_and_are_the_same_arrays_at_every_call():
    b = GraphBuilder("chain")
    v = b.input("x", (9, 7))
    for _ in range(5):
        v = b.node("relu", (v,), (9, 7), shape=(9, 7))
    m = compile_model(b.build(v), fuse=False)          # fused, the chain is one kernel
    before = dict(m.buffers)
    intermediates = [r for r in m.plan.offsets]
    assert len(intermediates) == 4 and m.plan.arena_bytes < m.plan.unshared_bytes
    assert all(np.shares_memory(m.buffers[r], m.arena) for r in intermediates)
    x = rand(9, 7)
    for _ in range(3):
        np.testing.assert_array_equal(m(x)[0], np.maximum(x, 0))
    assert m.buffers.keys() == before.keys() and all(m.buffers[k] is before[k] for k in before)
    mem = m.summary()["memory"]
    assert mem["arena_bytes"] == m.plan.arena_bytes < mem["unshared_bytes"] and mem["output_bytes"] == 9 * 7 * 4


class OnlyArrayInterface:
    def __init__(self, a):
        self.__array_interface__ = a.__array_interface__
        self._keep = a


class OnlyDLPack:
    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


@pytest.mark.parametrize("wrap", [lambda a: a, OnlyArrayInterface, OnlyDLPack])
def test_inputs_are_read_in_place_through_dlpack_or_the_array_interface(wrap, monkeypatch):
    from autotune.graph import executor

    seen = []
    monkeypatch.setattr(executor, "contiguous", lambda a: seen.append(a) or a)
    b = GraphBuilder()
    y = b.node("relu", (b.input("x", (3, 5)),), (3, 5), shape=(3, 5))
    m = compile_model(b.build(y))
    x = rand(3, 5)
    np.testing.assert_array_equal(m(wrap(x))[0], np.maximum(x, 0))
    assert np.shares_memory(seen[0], x)
    k = autotune.load("relu", shape=(3, 5))                          # the op kernels take them too
    np.testing.assert_array_equal(k(wrap(x)), np.maximum(x, 0))


def test_a_non_contiguous_input_is_copied_once_and_still_right():
    b = GraphBuilder()
    y = b.node("relu", (b.input("x", (3, 5)),), (3, 5), shape=(3, 5))
    m = compile_model(b.build(y))
    x = rand(5, 3).T
    np.testing.assert_array_equal(m(x)[0], np.maximum(x, 0))


def test_a_misaligned_input_is_copied_once_and_still_right():
    """The kernels that read a model's inputs take their addresses unchecked: a float32 input one
    byte off its alignment must reach them as an aligned copy."""
    g = mlp()
    x = rand(5, 13)
    raw = np.zeros(x.nbytes + 1, np.uint8)
    shifted = raw[1:].view(np.float32).reshape(x.shape)
    shifted[...] = x
    assert not shifted.flags.aligned and shifted.flags.c_contiguous
    (y,) = compile_model(g)(shifted)
    np.testing.assert_allclose(y, mlp_reference(g, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, error, message", [
    (lambda m: m(), TypeError, "model 'mlp' takes 1 input(s) (x), got 0"),
    (lambda m: m.run({}), ValueError, "missing input(s) 'x'; its inputs are x"),
    (lambda m: m.run({"x": rand(5, 13), "z": 1}), ValueError, "unknown input(s) 'z'"),
    (lambda m: m(rand(5, 12)), ValueError, "input 'x': expected shape (5, 13), got (5, 12)"),
    (lambda m: m(rand(5, 13).astype(np.float64)), TypeError, "input 'x': expected dtype float32, got float64"),
    (lambda m: m("text"), TypeError, "input 'x': expected a numpy array or an object with __dlpack__"),
])
def test_inputs_are_checked_and_named(call, error, message):
    m = compile_model(mlp())
    with pytest.raises(error, match=re.escape(message)):
        call(m)


def test_shapes_may_only_restate_a_graphs_inputs():
    g = mlp()
    assert isinstance(compile_model(g, shapes={"x": (5, 13)}), CompiledModel)
    with pytest.raises(ValueError, match=re.escape("input 'x' of graph 'mlp' is (5, 13), got (1, 13)")):
        compile_model(g, shapes={"x": (1, 13)})
    with pytest.raises(ValueError, match="'y' is not an input"):
        compile_model(g, shapes={"y": (1,)})


def test_a_node_whose_kernel_does_not_fit_its_values_is_named_at_compile_time():
    b = GraphBuilder()
    y = b.node("relu", (b.input("x", (3, 5)),), (3, 5), shape=(5, 3))
    want = "node 'n0': kernel relu(shape=5:3)float32 expects float32[5, 3] where the node has 'x': float32[3, 5]"
    with pytest.raises(ValueError, match=re.escape(want)):
        compile_model(b.build(y))


def test_summary_counts_provenance_per_node_default_then_tuned(env):
    db = str(env / "fresh.db")
    g = mlp()
    s = compile_model(g, db=db, fuse=False).summary()
    assert s["provenance"] == {"tuned": 0, "nearest": 0, "default": 5} and s["kernel_nodes"] == 5
    assert len(s["kernels"]) == 5 and {k["provenance"] for k in s["kernels"]} == {"default"}
    relu = next(n for n in g.nodes if n.op == "relu")
    autotune.tune(autotune.create_task("relu", **relu.params), trials=2, db=db)
    autotune.runtime.clear_caches()
    m = compile_model(g, db=db, fuse=False)
    s = m.summary()
    assert s["provenance"] == {"tuned": 1, "nearest": 0, "default": 4}
    assert [k["provenance"] for k in s["kernels"] if k["op"] == "relu"] == ["tuned"]
    assert s["warnings"] == len(m.load_warnings) == 4                 # collected, one per untuned kernel
    np.testing.assert_allclose(m(x := rand(5, 13))[0], mlp_reference(g, x), rtol=1e-5, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(dags())
def test_random_dags_of_shared_buffers_compute_what_numpy_does(dag):
    edges, n_outputs = dag
    m = compile_model(elementwise_graph(edges, n_outputs), fuse=False)   # the plan's sharing; fused: test_fusion
    x = rand(5, 3)
    vals = [x]
    for reads in edges:
        vals.append(np.maximum(vals[reads[0]], 0) if len(reads) == 1 else vals[reads[0]] + vals[reads[1]])
    for _ in range(2):                                  # the second call reuses every buffer
        for got, want in zip(m(x), vals[-n_outputs:]):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def _embedding_model(rows=13, width=7, seq=5):
    from onnx import TensorProto, helper, numpy_helper

    table = rand(rows, width)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0),
         helper.make_node("Relu", ["emb"], ["y"])],
        "embedding", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, seq])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, seq, width])],
        [numpy_helper.from_array(table, "table")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), table


def test_gather_counts_negative_ids_back_and_rejects_ids_out_of_range():
    model, table = _embedding_model()
    m = compile_model(model)
    ids = np.array([[0, -1, 12, -13, 3], [5, 6, -7, 8, 1]], np.int64)
    np.testing.assert_array_equal(m(ids)[0], np.maximum(table[ids], 0))
    for bad in (13, -14, 1 << 40):
        with pytest.raises(ValueError, match=rf"input 'ids': index {bad} is out of range .* 13 entries"):
            m(np.where(np.arange(5) == 2, bad, ids).astype(np.int64))
