"""Automatic fusion (issue 15, section 1): the groups the partitioner makes on small ONNX models
and hand-built graphs, the kernels they become, and the fused models' outputs against
onnxruntime and numpy."""
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import autotune
from autotune.graph import compile_model
from autotune.graph.fused_graph import fuse
from autotune.graph.fusion import (
    BROADCAST,
    ELEMWISE,
    INJECTIVE,
    OPAQUE,
    OUT_EWISE,
    REDUCTION,
    chain_budget,
    kind_of,
    partition,
)
from autotune.graph.ir import Node

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # the repository root: benchmarks.models
from graph_builder import GraphBuilder, dags, elementwise_graph

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
frontend = pytest.importorskip("autotune.frontend.onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

RNG = np.random.default_rng(5)


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def onnx_model(nodes, inputs, output, consts):
    graph = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a, n) for n, a in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def residual_block(C=8, H=9):
    """x -> conv1 -> bn1 -> relu1 -> conv2 -> bn2 -> add(x) -> relu2."""
    consts = {"w1": rand(C, C, 3, 3, scale=0.2), "w2": rand(C, C, 3, 3, scale=0.2)}
    for i in (1, 2):
        consts |= {f"g{i}": rand(C) + 1.5, f"b{i}": rand(C), f"m{i}": rand(C), f"v{i}": np.abs(rand(C)) + 0.5}
    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], "conv1", **conv),
             helper.make_node("BatchNormalization", ["c1", "g1", "b1", "m1", "v1"], ["n1"], "bn1"),
             helper.make_node("Relu", ["n1"], ["r1"], "relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], "conv2", **conv),
             helper.make_node("BatchNormalization", ["c2", "g2", "b2", "m2", "v2"], ["n2"], "bn2"),
             helper.make_node("Add", ["n2", "x"], ["s"], "add"),
             helper.make_node("Relu", ["s"], ["y"], "relu2")]
    return onnx_model(nodes, [("x", [1, C, H, H])], "y", consts)


def bert_ffn(B=2, S=5, D=12, H=20):
    """x -> matmul1 + bias1 -> gelu (erf form) -> matmul2 + bias2 -> add(x) -> layer_norm."""
    consts = {"w1": rand(D, H, scale=0.3), "bias1": rand(H), "w2": rand(H, D, scale=0.3), "bias2": rand(D),
              "gamma": rand(D), "beta": rand(D), "sqrt2": np.array(np.sqrt(2), np.float32),
              "one": np.array(1, np.float32), "half": np.array(0.5, np.float32)}
    mk = helper.make_node
    nodes = [mk("MatMul", ["x", "w1"], ["h0"], "mm1"), mk("Add", ["h0", "bias1"], ["h"], "bias_add1"),
             mk("Div", ["h", "sqrt2"], ["d"], "gelu_div"), mk("Erf", ["d"], ["e"], "gelu_erf"),
             mk("Add", ["e", "one"], ["e1"], "gelu_add"), mk("Mul", ["h", "e1"], ["p"], "gelu_mul"),
             mk("Mul", ["p", "half"], ["g"], "gelu_half"),
             mk("MatMul", ["g", "w2"], ["o0"], "mm2"), mk("Add", ["o0", "bias2"], ["o"], "bias_add2"),
             mk("Add", ["o", "x"], ["r"], "residual"),
             mk("LayerNormalization", ["r", "gamma", "beta"], ["y"], "ln", axis=-1, epsilon=1e-5)]
    return onnx_model(nodes, [("x", [B, S, D])], "y", consts)


def feeds_of(model):
    return {vi.name: rand(*[d.dim_value for d in vi.type.tensor_type.shape.dim]) for vi in model.graph.input}


def check_against_ort(model, m):
    feeds = feeds_of(model)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for got, w in zip(m.run(feeds), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max())))


def group_sets(fusion):
    return [(set(g.nodes), g.how) for g in fusion.groups]


@pytest.mark.parametrize("op, shape, axes", [("ReduceL2", (7, 203), [1]), ("ReduceSumSquare", (3, 5, 61), [2]),
                                             ("ReduceL1", (2, 3, 9, 11), [2, 3])])
def test_a_fused_reduction_sums_in_vector_lanes(op, shape, axes):
    """square / abs + sum [+ sqrt] fused into one kernel whose sum runs as lane partials (the
    reduction template's rule), not a serial sum per row; the values as onnxruntime's."""
    node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
    model = onnx_model([node], [("x", list(shape))], "y", {"axes": np.array(axes, np.int64)})
    model.opset_import[0].version = 18
    m = compile_model(model)
    (kernel,) = m.kernels.values()
    assert re.search(r"sum\.lanes\[ramp\(0, 1, \d+\)\] = \(sum\.lanes\[ramp", str(kernel.task.lower(0)))
    check_against_ort(model, m)


def test_a_residual_block_gives_conv_bn_relu_and_conv_bn_add_relu_kernels():
    model = residual_block()
    fusion = fuse(frontend.load(model))
    assert group_sets(fusion) == [({"conv1", "bn1", "relu1"}, "template"),
                                  ({"conv2", "bn2", "add", "relu2"}, "anchor")]
    assert fusion.groups[0].kernel.op == "conv2d_bias_relu"          # batch norm folded into W and a bias
    assert fusion.graph.op_counts()["batch_norm"] == 0
    check_against_ort(model, compile_model(model))


GELU = {"gelu_div", "gelu_erf", "gelu_add", "gelu_mul", "gelu_half"}


def test_a_bert_feed_forward_gives_dense_bias_gelu_and_add_layer_norm_kernels():
    B, S = 2, 5
    H = chain_budget("llvm") // (B * S * 4) + 1     # BERT's: 128 x 3072 floats, past half of L2
    model = bert_ffn(B, S, H=H)
    fusion = fuse(frontend.load(model))
    assert group_sets(fusion) == [({"mm1", "bias_add1"} | GELU, "anchor"), ({"mm2", "bias_add2"}, "anchor"),
                                  ({"residual", "ln"}, "anchor")]
    check_against_ort(model, compile_model(model))


def layer_norm_op_by_op(shape):
    """A layer norm as exporters before opset 17 write it: mean, centre, square, mean, rsqrt, scale."""
    N = shape[-1]
    mk = helper.make_node
    nodes = [mk("ReduceMean", ["x"], ["m"], axes=[-1]), mk("Sub", ["x", "m"], ["d"]), mk("Pow", ["d", "two"], ["p"]),
             mk("ReduceMean", ["p"], ["v"], axes=[-1]), mk("Add", ["v", "eps"], ["ve"]), mk("Sqrt", ["ve"], ["s"]),
             mk("Div", ["d", "s"], ["n"]), mk("Mul", ["n", "gamma"], ["ng"]), mk("Add", ["ng", "beta"], ["y"])]
    consts = {"gamma": rand(N), "beta": rand(N), "two": np.array(2, np.float32), "eps": np.array(1e-5, np.float32)}
    model = onnx_model(nodes, [("x", list(shape))], "y", consts)
    model.opset_import[0].version = 13
    return model


def softmax_op_by_op(shape):
    mk = helper.make_node
    nodes = [mk("ReduceMax", ["x"], ["m"], axes=[-1]), mk("Sub", ["x", "m"], ["d"]), mk("Exp", ["d"], ["e"]),
             mk("ReduceSum", ["e", "axes"], ["t"]), mk("Div", ["e", "t"], ["y"])]
    model = onnx_model(nodes, [("x", list(shape))], "y", {"axes": np.array([-1], np.int64)})
    model.opset_import[0].version = 13
    return model


@pytest.mark.parametrize("make, shape", [(layer_norm_op_by_op, (3, 7, 37)), (layer_norm_op_by_op, (11, 101)),
                                         (softmax_op_by_op, (2, 3, 13, 29)), (softmax_op_by_op, (5, 257))])
def test_row_statistics_over_the_same_rows_are_one_kernel(make, shape):
    """A variance after its mean, a sum of exponentials after its row max: the second reduction
    joins the first's group with the pointwise nodes between (two kernels before: 128 x 768
    layer norm 0.8x onnxruntime, 1.6x as one)."""
    model = make(shape)
    fusion = fuse(frontend.load(model))
    assert len(fusion.groups) == 1
    check_against_ort(model, compile_model(model))


def test_reductions_over_other_rows_stay_apart():
    """A column mean after a row mean reduces other axes: never in one group."""
    mk = helper.make_node
    nodes = [mk("ReduceMean", ["x"], ["m"], axes=[-1]), mk("Sub", ["x", "m"], ["d"]),
             mk("ReduceMean", ["d"], ["y"], axes=[0])]
    model = onnx_model(nodes, [("x", [9, 13])], "y", {})
    model.opset_import[0].version = 13
    groups = [set(g.nodes) for g in fuse(frontend.load(model)).groups]
    assert not any({"ReduceMean_0", "ReduceMean_2"} <= g for g in groups)
    check_against_ort(model, compile_model(model))


def test_a_small_feed_forward_chains_its_two_matmuls_into_one_kernel():
    model = bert_ffn()                               # the 10 x 20 intermediate fits in cache
    fusion = fuse(frontend.load(model))
    assert group_sets(fusion) == [({"mm1", "bias_add1", "mm2", "bias_add2"} | GELU, "anchor"),
                                  ({"residual", "ln"}, "anchor")]
    assert fusion.groups[0].kernel.inputs[1:3] == ("w1", "w2")     # A, then each product's B
    check_against_ort(model, compile_model(model))
    check_against_ort(model, compile_model(model, prepack=False))   # B packed by the kernel, per config


def test_fused_tasks_are_tuned_into_the_database_and_their_names_are_stable(env):
    import subprocess

    import autotune
    from autotune import runtime

    model = bert_ffn()
    fusion = fuse(frontend.load(model))
    ln = fusion.groups[-1].kernel                    # residual add + layer norm, under layer_norm's schedule
    db = str(env / "fused.db")
    autotune.tune(autotune.create_task(ln.op, **ln.params), trials=3, db=db, tuner="random", seed=1)
    runtime.clear_caches()
    s = compile_model(model, db=db).summary()
    assert [k["provenance"] for k in s["kernels"] if k["op"] == ln.op] == ["tuned"]
    code = ("import sys; sys.path.insert(0, 'tests/graph'); from test_fusion import bert_ffn, fuse, frontend; "
            "print([g.kernel.op for g in fuse(frontend.load(bert_ffn())).groups])")
    root = Path(__file__).resolve().parents[2]
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True)
    assert other.stdout.strip() == repr([g.kernel.op for g in fusion.groups])   # the records' keys: same process or not


def test_identical_groups_are_one_task_weighted_by_their_count():
    b = GraphBuilder("twice")
    x = b.input("x", (6, 6))
    w = b.const("w", rand(6, 6))
    bias = b.const("bias", rand(6))
    for _ in range(3):               # each product reads the one before as its right operand: no GEMM chain
        x = b.node("matmul", (w, x), (6, 6), M=6, N=6, K=6)
        x = b.node("add", (x, bias), (6, 6), a_shape=(6, 6), b_shape=(6,))
        x = b.node("tanh", (x,), (6, 6), shape=(6, 6))
    fusion = fuse(b.build(x))
    assert len(fusion.groups) == 3 and list(fusion.tasks().values()) == [3]
    xv = b.constants["w"]
    h = np.ones((6, 6), np.float32)
    want = h
    for _ in range(3):
        want = np.tanh(xv @ want + b.constants["bias"])
    np.testing.assert_allclose(compile_model(b.build(x))(h)[0], want, rtol=1e-5, atol=1e-5)


def mlp_graph(M=7, sizes=(37, 61, 29, 10), reuse_hidden=False):
    """x -> (matmul + bias + relu) per hidden layer -> matmul + bias; `reuse_hidden`: the first
    hidden value is also added to the second layer's output (a second reader)."""
    b = GraphBuilder("mlp")
    x = b.input("x", (M, sizes[0]))
    h1 = None
    for i, (k, n) in enumerate(zip(sizes, sizes[1:])):
        x = b.node("matmul", (x, b.const(f"w{i}", rand(k, n, scale=0.3))), (M, n), M=M, N=n, K=k)
        x = b.node("add", (x, b.const(f"b{i}", rand(n))), (M, n), a_shape=(M, n), b_shape=(n,))
        if i < len(sizes) - 2:
            x = b.node("relu", (x,), (M, n), shape=(M, n))
        if i == 1 and reuse_hidden:
            x = b.node("add", (x, h1), (M, n), a_shape=(M, n), b_shape=(M, n))
        h1 = x
    return b.build(x)


def mlp_numpy(g, x):
    for i in range(len([n for n in g.nodes if n.op == "matmul"])):
        x = x @ g.constants[f"w{i}"] + g.constants[f"b{i}"]
        x = np.maximum(x, 0) if f"w{i + 1}" in g.constants else x
    return x


def test_two_matmuls_chain_into_one_group_and_a_third_starts_the_next():
    g = mlp_graph()
    assert partition(g, chain_bytes=7 * 61 * 4) == [[0, 1, 2, 3, 4, 5], [6, 7]]
    assert partition(g, chain_bytes=7 * 61 * 4 - 1) == [[0, 1, 2], [3, 4, 5, 6, 7]]   # 61 wide: over budget
    assert partition(g) == [[0, 1, 2], [3, 4, 5], [6, 7]]                         # no budget, no chains
    fusion = fuse(g)
    assert [len(grp.nodes) for grp in fusion.groups] == [6, 2]
    xv = rand(7, 37)
    np.testing.assert_allclose(compile_model(g)(xv)[0], mlp_numpy(g, xv), rtol=1e-4, atol=1e-4)


def test_a_hidden_value_read_twice_is_not_chained():
    g = mlp_graph(M=5, sizes=(9, 29, 29), reuse_hidden=False)
    assert len(partition(g, chain_bytes=1 << 20)) == 1
    g = mlp_graph(M=5, sizes=(9, 29, 29, 29), reuse_hidden=True)
    assert partition(g, chain_bytes=1 << 20) == [[0, 1, 2], [3, 4, 5, 6, 7, 8]]   # the next one chains


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_every_config_of_a_gemm_chain_computes_the_mlp(seed):
    """Each product of the chain has its own knobs (l0.*, l1.*); random points of the joint
    space, weights pre-packed in panels or packed by the kernel, give numpy's answer."""
    import random

    from autotune import create_task
    from autotune.graph.executor import prepare_graph

    g = mlp_graph(M=3, sizes=(23, 45, 17))
    rng = random.Random(seed)
    graph, groups = prepare_graph(g, prepack=rng.random() < 0.5)
    (kernel,) = [grp.kernel for grp in groups]
    task = create_task(kernel.op, **kernel.params)
    space = task.config_space
    assert {n.split(".")[0] for n in space.knobs} == {"l0", "l1"} and space["l0.tile_x"].size[-1] > 1
    index = rng.randrange(len(space))
    inputs = [np.ascontiguousarray(graph.constants[v]) if v in graph.constants else rand(3, 23) for v in kernel.inputs]
    s, args = task.instantiate(index)
    out = np.full((3, 17), np.nan, np.float32)
    autotune.build(s, args)(*inputs, out)
    want = np.maximum(inputs[0] @ g.constants["w0"] + g.constants["b0"], 0) @ g.constants["w1"] + g.constants["b1"]
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=str(task.config(index)))


def test_a_value_read_outside_its_group_ends_the_group():
    b = GraphBuilder()
    x = b.input("x", (5, 3))
    h = b.node("relu", (x,), (5, 3), shape=(5, 3))
    y = b.node("sigmoid", (h,), (5, 3), shape=(5, 3))
    z = b.node("tanh", (y,), (5, 3), shape=(5, 3))
    g = b.build(z, h)                               # h is an output: it must be materialized
    assert partition(g) == [[0], [1, 2]]
    xv = rand(5, 3)
    got = compile_model(g)(xv)
    np.testing.assert_allclose(got[0], np.tanh(1 / (1 + np.exp(-np.maximum(xv, 0)))), rtol=1e-5)
    np.testing.assert_array_equal(got[1], np.maximum(xv, 0))


def test_two_chains_from_one_value_are_two_groups_not_one_that_branches():
    """A group has one output, its last node: a second consumer of a member starts its own
    group instead of branching the first (which every later cut then peeled back to single
    nodes: seven relus ran as seven kernels)."""
    b = GraphBuilder()
    x = b.input("x", (4, 6))
    h = b.node("relu", (x,), (4, 6), shape=(4, 6))
    a1 = b.node("exp", (h,), (4, 6), shape=(4, 6))
    c1 = b.node("tanh", (h,), (4, 6), shape=(4, 6))
    a2 = b.node("relu", (a1,), (4, 6), shape=(4, 6))
    c2 = b.node("exp", (c1,), (4, 6), shape=(4, 6))
    g = b.build(a2, c2)
    assert partition(g) == [[0], [1, 3], [2, 4]]
    xv = rand(4, 6)
    got = compile_model(g)(xv)
    np.testing.assert_allclose(got[0], np.maximum(np.exp(np.maximum(xv, 0)), 0), rtol=1e-5)
    np.testing.assert_allclose(got[1], np.exp(np.tanh(np.maximum(xv, 0))), rtol=1e-5)


def test_a_layout_change_is_a_boundary():
    b = GraphBuilder()
    x = b.input("x", (4, 6))
    h = b.node("relu", (x,), (4, 6), shape=(4, 6))
    t = b.node("transpose", (h,), (6, 4), shape=(4, 6), axes=(1, 0))
    y = b.node("exp", (t,), (6, 4), shape=(6, 4))
    g = b.build(y)
    assert partition(g) == [[0], [1, 2]]            # the transpose takes the pointwise op after it
    xv = rand(4, 6)
    np.testing.assert_allclose(compile_model(g)(xv)[0], np.exp(np.maximum(xv, 0).T), rtol=1e-5)


def test_a_group_that_cannot_be_one_computation_runs_its_nodes_one_by_one():
    b = GraphBuilder()
    x = b.input("x", (4, 5))
    p = b.node("pad", (x,), (4, 7), shape=(4, 5), pad_before=(0, 1), pad_after=(0, 1), value=0.5)
    y = b.node("relu", (p,), (4, 7), shape=(4, 7))
    g = b.build(y)
    assert partition(g) == [[0, 1]]                 # an injective op takes a pointwise epilogue...
    fusion = fuse(g)                                # ...but pad has no te compute to compose here
    assert [(grp.ops, grp.how.split(":")[0]) for grp in fusion.groups] == [(("pad",), "unfused"),
                                                                          (("relu",), "unfused")]
    assert "pad has no te compute" in fusion.groups[0].how
    xv = rand(4, 5)
    want = np.maximum(np.pad(xv, ((0, 0), (1, 1)), constant_values=0.5), 0)
    np.testing.assert_array_equal(compile_model(g)(xv)[0], want)


def test_composed_activations_are_one_kernel_each():
    """Mish (softplus, tanh, mul) and PRelu (less, where, mul) import as pointwise chains, each
    fused into one kernel, which runs what onnxruntime does."""
    for op, inputs, consts in (("Mish", ["x"], {}), ("PRelu", ["x", "slope"], {"slope": rand(3, 1, 1)})):
        model = onnx_model([helper.make_node(op, inputs, ["y"], op)], [("x", [2, 3, 7, 11])], "y", consts)
        model.opset_import[0].version = 18
        fusion = fuse(frontend.load(model))
        assert [len(g.ops) for g in fusion.groups] == [3], op
        check_against_ort(model, compile_model(model))


def test_pattern_kinds_come_from_one_table():
    def node(op, outputs=1):
        return Node("n", op, ("a",), tuple(f"o{i}" for i in range(outputs)))

    assert [kind_of(node(op)) for op in ("relu", "add", "transpose", "layer_norm", "conv2d_grouped",
                                         "max_pool2d")] == [ELEMWISE, BROADCAST, INJECTIVE, REDUCTION,
                                                            OUT_EWISE, OPAQUE]
    assert kind_of(node("relu", outputs=2)) == OPAQUE


@settings(max_examples=60, deadline=None)
@given(dags())
@example(dag=([(0,), (1,), (1,), (0,), (0,), (2,), (4, 1), (0,), (3,), (6,)], 3))   # found by hypothesis
def test_every_partition_covers_each_node_once_and_runs_after_what_it_reads(dag):
    g = elementwise_graph(*dag)
    groups = partition(g)
    assert sorted(i for grp in groups for i in grp) == list(range(len(g.nodes)))
    fusion = fuse(g)                                 # validate() checks the order and every value
    assert len([n for n in fusion.graph.nodes if not n.is_view]) == len(fusion.groups) <= len(groups)


@settings(max_examples=8, deadline=None)
@given(dags())
@example(([(0,), (0,), (1, 2), (1,)], 1))           # nodes 1 and 2 are dead: fusion drops them
def test_fused_random_dags_compute_what_numpy_does(dag):
    edges, n_outputs = dag
    m = compile_model(elementwise_graph(edges, n_outputs))
    x = rand(5, 3)
    vals = [x]
    for reads in edges:
        vals.append(np.maximum(vals[reads[0]], 0) if len(reads) == 1 else vals[reads[0]] + vals[reads[1]])
    for got, want in zip(m(x), vals[-n_outputs:]):
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("name", ["resnet18", "bert_layer"])
def test_fused_kernels_are_at_most_half_the_nodes(name):
    from benchmarks.models import reduced

    g = frontend.load(reduced(name))
    fusion = fuse(g)
    assert len(fusion.groups) <= len(g.nodes) / 2
    assert not [grp.how for grp in fusion.groups if grp.how.startswith("unfused")]
