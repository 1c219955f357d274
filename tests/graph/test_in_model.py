"""Configs chosen by their times inside the model: a task's finalists are timed in whole runs of
the compiled model, the timings land in a real SQLite database under the model's key, and
compile_model then runs, per kernel, the config fastest there, for that model only."""
import os
import sys
import time

import numpy as np
import pytest

import autotune
from autotune.graph.in_model import time_finalists
from autotune.graph.tuning import model_tasks
from autotune.measure.types import ErrorKind, MeasureResult
from tuning_db import Record, TuningDB

sys.path.insert(0, os.path.dirname(__file__))
from graph_builder import GraphBuilder

RNG = np.random.default_rng(5)
X = RNG.standard_normal((7, 19)).astype(np.float32)
W = RNG.standard_normal((19, 11)).astype(np.float32)


def relu_matmul_graph():
    """relu(x @ w) with w a constant: one fused task whose configs differ in their loop nests."""
    g = GraphBuilder("relu_mm")
    x = g.input("x", X.shape)
    h = g.node("matmul", (x, g.const("w", W)), (7, 11), M=7, N=11, K=19)
    return g.build(g.node("relu", (h,), (7, 11), shape=(7, 11)))


def ok(seconds):
    return MeasureResult((seconds,) * 3, ErrorKind.OK, "", 0.1, time.time()).costs


@pytest.fixture
def tuned(tmp_path):
    """The graph's matmul task with records alone: `fast` 1 ms, `slow` 2 ms, the default 3 ms."""
    graph = relu_matmul_graph()
    path = tmp_path / "m.db"
    tasks = model_tasks(graph, db=path)
    task = tasks[0].task
    default = task.default_index
    fast, slow = [i for i in range(1, 60) if i != default and task.is_valid(i)][:2]
    with TuningDB(path) as db:
        run = db.start_run(task.workload_key, task.name, task.params, task.dtype, task.target_key, "xgb", 3, 0)
        db.add_records(run, [Record(task.workload_key, task.target_key, i, task.config(i).to_json(), ok(s), "ok", "",
                                    0.1, time.time()) for i, s in ((fast, 1e-3), (slow, 2e-3), (default, 3e-3))])
    return graph, tasks, path, dict(fast=fast, slow=slow, default=default)


def runs(m, workload_key):
    """(config index, provenance) of the kernel the model runs for `workload_key`."""
    (kernel,) = {id(k): k for k in m.kernels.values() if k.task.workload_key == workload_key}.values()
    return kernel.config["index"], kernel.provenance


def test_the_model_runs_the_config_fastest_inside_it_and_only_that_model(tuned):
    graph, tasks, path, c = tuned
    key = tasks[0].task.workload_key
    m = autotune.compile_model(graph, db=path)
    assert runs(m, key) == (c["fast"], "tuned")                 # no timings in the model yet: the best alone
    with TuningDB(path) as db:
        target = tasks[0].task.target_key
        db.add_model_timings(m.model_key, key, target, c["fast"], [3e-3] * 4)
        db.add_model_timings(m.model_key, key, target, c["slow"], [2.5e-3] * 4)
    inside = autotune.compile_model(graph, db=path)
    assert runs(inside, key) == (c["slow"], "tuned:in-model")
    assert inside.summary()["provenance"]["tuned"] == len(inside.kernels)
    np.testing.assert_allclose(inside(X)[0], np.maximum(X @ W, 0), rtol=1e-5, atol=1e-5)
    # the same kernels run in another layout are another model: its neighbours' caches differ
    other = autotune.compile_model(graph, db=path, layout="nchwc")
    assert other.model_key != inside.model_key and runs(other, key) == (c["fast"], "tuned")


def test_time_finalists_times_each_in_whole_runs_and_stores_what_won(tuned):
    graph, tasks, path, c = tuned
    key = tasks[0].task.workload_key
    chosen = time_finalists(graph, tasks, path, rounds=2)
    assert set(chosen) == {key} and chosen[key] in c.values()
    m = autotune.compile_model(graph, db=path)
    assert runs(m, key) == (chosen[key], "tuned:in-model")
    np.testing.assert_allclose(m(X)[0], np.maximum(X @ W, 0), rtol=1e-5, atol=1e-5)
    with TuningDB(path, readonly=True) as db:
        assert db.model_choices(m.model_key, tasks[0].task.target_key) == chosen


def test_past_the_deadline_nothing_is_compiled_or_stored(tuned):
    graph, tasks, path, _ = tuned
    assert time_finalists(graph, tasks, path, deadline=time.monotonic() - 1) == {}
    m = autotune.compile_model(graph, db=path)
    with TuningDB(path, readonly=True) as db:
        assert db.model_choices(m.model_key, tasks[0].task.target_key) == {}


def test_a_task_with_one_finalist_is_not_timed(tmp_path):
    graph = relu_matmul_graph()
    path = tmp_path / "one.db"
    tasks = model_tasks(graph, db=path)
    task = tasks[0].task
    with TuningDB(path) as db:
        run = db.start_run(task.workload_key, task.name, task.params, task.dtype, task.target_key, "xgb", 1, 0)
        db.add_records(run, [Record(task.workload_key, task.target_key, task.default_index,
                                    task.config(task.default_index).to_json(), ok(1e-3), "ok", "", 0.1, time.time())])
    assert time_finalists(graph, tasks, path) == {}


def test_the_choice_is_found_by_its_records_knobs_not_its_index(tuned):
    """Indices move when a template gains a knob; a choice whose knobs are gone is not run."""
    graph, tasks, path, c = tuned
    task = tasks[0].task
    stale, gone = 10**6, 10**6 + 1
    m = autotune.compile_model(graph, db=path)
    with TuningDB(path) as db:
        run = db.start_run(task.workload_key, task.name, task.params, task.dtype, task.target_key, "xgb", 2, 0)
        knobs = task.config(c["slow"]).to_json()["knobs"]
        db.add_records(run, [Record(task.workload_key, task.target_key, i, {"index": i, "knobs": k}, ok(5e-3), "ok",
                                    "", 0.1, time.time()) for i, k in ((stale, knobs), (gone, {"gone": 1}))])
        db.add_model_timings(m.model_key, task.workload_key, task.target_key, stale, [1e-3])
        assert runs(autotune.compile_model(graph, db=path), task.workload_key) == (c["slow"], "tuned:in-model")
        db.add_model_timings(m.model_key, task.workload_key, task.target_key, gone, [0.5e-3])
        assert runs(autotune.compile_model(graph, db=path), task.workload_key) == (c["fast"], "tuned")
