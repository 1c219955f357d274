"""Weights packed at compile time: a matmul/dense whose weight is a constant runs its `*_packed`
kernel on a weight packed once, gives the same answer, and takes its panel width from the
database (tuned packed kernel, else the tuned plain kernel's tile) or the rule."""
import os
import sys
import time

import numpy as np

import autotune
from autotune.graph.prepack import prepack_weights
from autotune.schedules.cpu.panels import default_panel
from autotune.target import Target
from tuning_db import Record, TuningDB

sys.path.insert(0, os.path.dirname(__file__))
from graph_builder import GraphBuilder

RNG = np.random.default_rng(5)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def shared_weight_graph(M=7, K=29, N=37):
    """x @ w twice (one constant feeding two matmuls), y @ b with b an input, and a dense."""
    g = GraphBuilder("prepack")
    x, b = g.input("x", (M, K)), g.input("b", (K, N))
    w, wd, bias = g.const("w", rand(K, N)), g.const("wd", rand(N, N)), g.const("bias", rand(N))
    h1 = g.node("matmul", (x, w), (M, N), M=M, N=N, K=K)
    h2 = g.node("matmul", (x, w), (M, N), M=M, N=N, K=K)
    h3 = g.node("matmul", (x, b), (M, N), M=M, N=N, K=K)
    s = g.node("add", (h1, h2), (M, N), a_shape=(M, N), b_shape=(M, N))
    s = g.node("add", (s, h3), (M, N), a_shape=(M, N), b_shape=(M, N))
    return g.build(g.node("dense", (s, wd, bias), (M, N), M=M, N=N, K=N))


def reference(graph, x, b):
    c = graph.constants
    s = 2 * (x @ c["w"]) + x @ b
    return np.maximum(s @ c["wd"].T + c["bias"], 0)


def test_constant_weights_are_packed_once_and_answers_stay(tmp_path):
    g = shared_weight_graph()
    m = autotune.compile_model(g, db=tmp_path / "absent.db", fuse=False)
    ops = [n.op for n in m.graph.nodes]
    assert ops == ["matmul_packed", "matmul_packed", "matmul", "add", "add", "dense_packed"]
    assert [k["op"] for k in m.summary()["kernels"]] == ["matmul_packed", "matmul", "add", "dense_packed"]
    panel = default_panel(Target.parse("llvm"), "float32", 37)
    # w packed once for both matmuls; the unpacked sources dropped
    assert sorted(m.graph.constants) == ["bias", f"w.panels{panel}", f"wd.panels{panel}"]
    x, b = rand(7, 29), rand(29, 37)
    np.testing.assert_allclose(m(x, b)[0], reference(g, x, b), rtol=1e-4, atol=1e-4)
    plain = autotune.compile_model(g, db=tmp_path / "absent.db", prepack=False, fuse=False)
    assert [n.op for n in plain.graph.nodes] == [n.op for n in g.nodes]
    np.testing.assert_allclose(plain(x, b)[0], m(x, b)[0], rtol=1e-5, atol=1e-5)
    fused = autotune.compile_model(g, db=tmp_path / "absent.db")          # a packed matmul anchors its group
    assert f"w.panels{panel}" in fused.graph.constants and "w" not in fused.graph.constants
    np.testing.assert_allclose(fused(x, b)[0], reference(g, x, b), rtol=1e-4, atol=1e-4)


def test_graph_given_is_left_unchanged(tmp_path):
    g = shared_weight_graph()
    before = [(n.op, n.inputs) for n in g.nodes], sorted(g.constants)
    prepack_weights(g, "llvm", tmp_path / "absent.db").validate()
    assert ([(n.op, n.inputs) for n in g.nodes], sorted(g.constants)) == before


def _store(db_path, op, params, config, cost):
    task = autotune.create_task(op, **params)
    with TuningDB(db_path) as db:
        run = db.start_run(task.workload_key, op, params, "float32", task.target_key, "random", 1, 1)
        db.add_records(run, [Record(task.workload_key, task.target_key, task.config(config).index,
                                    task.config(config).to_json(), (cost,), "ok", "", 0.1, time.time())])


def _panel_of(db_path):
    g = shared_weight_graph()
    return prepack_weights(g, "llvm", db_path).nodes[0].params["panel"]


def test_panel_comes_from_the_database_then_the_rule(tmp_path):
    path = tmp_path / "tuning.db"
    params = dict(M=7, N=37, K=29)
    assert _panel_of(tmp_path / "absent.db") == default_panel(Target.parse("llvm"), "float32", 37)
    plain = autotune.create_task("matmul", **params)
    index = next(i for i in range(len(plain.config_space)) if plain.config(i)["tile_x"].size[-1] == 24)
    _store(path, "matmul", params, index, 1e-3)
    assert _panel_of(path) == 24                             # the tuned plain kernel's tile width
    for panel, cost in ((64, 2e-5), (8, 1e-5), (96, 3e-5)):
        _store(path, "matmul_packed", {**params, "panel": panel}, 0, cost)
    assert _panel_of(path) == 8                              # the fastest tuned packed kernel
