"""Whole-model tuning: the model's distinct kernels become weighted tasks, one budget tunes them
into the database, compile_model then runs them tuned, and the CLI resumes and stops on Ctrl-C
or a time budget without losing a measurement."""
import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import autotune
from autotune.graph.tuning import model_tasks
from tuning_db import TuningDB

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))   # the repository root: benchmarks.models
from benchmarks.models import reduced

sys.path.insert(0, os.path.dirname(__file__))
from graph_builder import GraphBuilder

RNG = np.random.default_rng(11)


def twin_graph():
    """Two identical matmul + relu branches, each a graph output (one fused task, weight 2), and their sum."""
    g = GraphBuilder("twins")
    x = g.input("x", (5, 13))
    outs = []
    for i in range(2):
        h = g.node("matmul", (x, g.const(f"w{i}", RNG.standard_normal((13, 13)).astype(np.float32))), (5, 13),
                   M=5, N=13, K=13)
        outs.append(g.node("relu", (h,), (5, 13), shape=(5, 13)))
    return g.build(*outs, g.node("add", tuple(outs), (5, 13), a_shape=(5, 13), b_shape=(5, 13)))


def test_identical_kernels_are_one_weighted_task(tmp_path):
    tasks = model_tasks(twin_graph(), db=tmp_path / "absent.db")
    # what runs is tuned: the fused groups, their constant weights packed
    assert [(t.task.name.split("_")[:4], t.weight) for t in tasks] == [
        (["fused", "matmul", "packed", "relu"], 2), (["add"], 1)]


def test_tune_model_then_compile_model_runs_tuned_kernels(tmp_path):
    db = tmp_path / "model.db"
    model = reduced("mlp")
    result = autotune.tune_model(model, trials=24, db=db, tuner="random", seed=0)
    assert result.trials == 24 and not result.interrupted
    assert result.estimated_seconds is not None and result.estimated_seconds > 0   # every task measured
    assert all(r.trials >= 1 for r in result.results)
    with TuningDB(db, readonly=True) as reader:
        records = reader.records()
        best = {r.workload_key: reader.best(r.workload_key, r.target) for r in result.results}
    counts = Counter(r.workload_key for r in records)
    assert set(counts) == {t.task.workload_key for t in result.tasks} and sum(counts.values()) == 24
    # the confirmation round timed each task's finalists again, into their records; then they
    # were timed inside the model, and the results report the configs the model runs
    assert max(len(r.costs) for r in records) > 5
    m = autotune.compile_model(model, db=db)
    assert m.summary()["provenance"]["default"] == 0
    runs = {k.task.workload_key: (k.config, k.provenance) for k in m.kernels.values()}
    assert {r.workload_key: r.best_config for r in result.results} == {k: c for k, (c, _) in runs.items()}
    assert all(r.best_seconds == best[r.workload_key].cost or runs[r.workload_key][1] == "tuned:in-model"
               for r in result.results)
    assert any(p == "tuned:in-model" for _, p in runs.values())
    x = RNG.standard_normal(m.inputs[0][1]).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {
        m.inputs[0][0]: x})
    np.testing.assert_allclose(m(x)[0], want[0], rtol=1e-4, atol=1e-5)


def test_time_budget_stops_at_the_batch_boundary(tmp_path):
    result = autotune.tune_model(twin_graph(), trials=500, db=tmp_path / "b.db", tuner="random", seed=0,
                                 time_budget=1e-3, batch_size=2)
    assert result.interrupted and result.trials == 1          # the first task's first config, then the budget
    with pytest.raises(ValueError, match="time_budget"):
        autotune.tune_model(twin_graph(), db=tmp_path / "b.db", time_budget=0)


def cli(*args, check=True):
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True, text=True,
                          check=check, env=dict(os.environ, AUTOTUNE_NUM_THREADS="1"))


def test_tune_model_cli_resumes_and_counts_exactly(tmp_path):
    path, db = tmp_path / "bert.onnx", str(tmp_path / "cli.db")
    onnx.save(reduced("bert_layer"), path)
    first = json.loads(cli("tune-model", str(path), "--trials", "20", "--tuner", "random", "--db", db, "--seed", "1",
                           "--json").stdout)
    assert first["trials"] == 20 and not first["interrupted"]
    again = json.loads(cli("tune-model", str(path), "--trials", "20", "--tuner", "random", "--db", db, "--seed", "2",
                           "--json").stdout)
    assert again["trials"] == 20
    with TuningDB(db, readonly=True) as reader:
        records = reader.records()
    assert len(records) == 40
    assert len({(r.workload_key, r.config_index) for r in records}) == 40     # a resumed run never re-measures
    bad = cli("tune-model", str(path), "--time-budget", "soon", "--db", db, check=False)
    assert bad.returncode == 2 and "--time-budget" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_tune_model_cli_ctrl_c_keeps_every_measurement(tmp_path, interrupt_when_measured):
    path, db = tmp_path / "mlp.onnx", str(tmp_path / "int.db")
    onnx.save(reduced("mlp"), path)
    p = subprocess.Popen([sys.executable, "-m", "autotune.cli", "tune-model", str(path), "--trials", "5000",
                          "--tuner", "random", "--db", db, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=dict(os.environ, AUTOTUNE_NUM_THREADS="1"))
    interrupt_when_measured(p, db)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    summary = json.loads(out)
    assert summary["interrupted"] and 0 < summary["trials"] < 5000
    with TuningDB(db, readonly=True) as reader:
        assert len(reader.records()) == summary["trials"]
