"""Profiling a compiled model: one row per kernel node, timed inside whole runs, with its share,
throughput of the right kind and provenance; the CLI prints it, as JSON too, and plots it."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest

import autotune
from autotune.graph.profile import compare_with_defaults
from autotune.graph.tuning import model_tasks
from tuning_db.db import TuningDB

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))   # the repository root: benchmarks.models
from graph_builder import GraphBuilder

from benchmarks.models import reduced

RNG = np.random.default_rng(2)


def matmul_relu(n=64):
    g = GraphBuilder("mm")
    x = g.input("x", (n, n))
    h = g.node("matmul", (x, g.const("w", RNG.standard_normal((n, n)).astype(np.float32))), (n, n), M=n, N=n, K=n)
    return g.build(g.node("relu", (h,), (n, n), shape=(n, n)))


def test_profile_times_every_kernel_node(tmp_path):
    m = autotune.compile_model(matmul_relu(), db=tmp_path / "absent.db", fuse=False)   # two kernels to compare
    prof = m.profile(repeat=3)
    assert sorted(k.op for k in prof.kernels) == ["matmul_packed", "relu"]
    assert all(k.seconds > 0 and k.provenance == "default" for k in prof.kernels)
    assert [k.seconds for k in prof.kernels] == sorted((k.seconds for k in prof.kernels), reverse=True)
    assert sum(k.share for k in prof.kernels) == pytest.approx(1.0)
    assert prof.run_seconds >= prof.total_seconds * 0.5
    bound = {k.op: k.bound for k in prof.kernels}
    assert bound == {"matmul_packed": "compute", "relu": "memory"}    # 2n flop per 12 bytes vs none per 8
    with pytest.raises(ValueError, match="repeat"):
        m.profile(repeat=0)


def test_profile_cli_json_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    path, png = tmp_path / "mlp.onnx", tmp_path / "profile.png"
    onnx.save(reduced("mlp"), path)
    out = subprocess.run([sys.executable, "-m", "autotune.cli", "model", "profile", str(path), "--repeat", "2",
                          "--db", str(tmp_path / "absent.db"), "--json"], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert len(report["kernels"]) == 2 and report["repeat"] == 2 and report["kernel_ms"] > 0   # two layers chained, the third
    shown = subprocess.run([sys.executable, "-m", "autotune.cli", "model", "profile", str(path), "--repeat", "2",
                            "--db", str(tmp_path / "absent.db"), "--plot", str(png)], capture_output=True, text=True,
                           check=True)
    assert "fused_matmul_packed" in shown.stdout and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_with_defaults_times_each_kernel_node_in_both_models(tmp_path):
    """The model's one kernel (matmul + relu, fused) tuned into the database: timed in the model
    compiled with it and in the one with its default; bad counts are errors."""
    db = str(tmp_path / "t.db")
    g = matmul_relu()
    (task,) = model_tasks(g, db=db)
    autotune.tune(task.task, trials=2, db=db)
    autotune.runtime.clear_caches()
    c = compare_with_defaults(g, db, repeat=2, rounds=2)
    assert [(n.op.startswith("fused_matmul_packed_relu"), n.provenance) for n in c.nodes] == [(True, "tuned")]
    (n,) = c.nodes
    assert n.seconds > 0 and n.default_seconds > 0 and n.speedup == n.default_seconds / n.seconds
    assert c.run_seconds > 0 and c.default_run_seconds > 0 and (c.repeat, c.rounds) == (2, 2)
    assert c.rows()[0].keys() == {"node", "op", "provenance", "ms", "default_ms", "speedup", "same_config"}
    best = TuningDB(db).best(task.task.workload_key, task.task.target_key)
    assert n.same_config == (best.config_index == 0)      # the template's default is config 0
    with pytest.raises(ValueError, match="rounds must be an int >= 1"):
        compare_with_defaults(g, db, rounds=0)


def test_profile_cli_against_defaults(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(reduced("mlp"), path)
    args = [sys.executable, "-m", "autotune.cli", "model", "profile", str(path), "--repeat", "2", "--db",
            str(tmp_path / "absent.db"), "--against-defaults"]
    report = json.loads(subprocess.run(args + ["--json"], capture_output=True, text=True, check=True).stdout)
    assert len(report["nodes"]) == 2 and report["rounds"] == 3 and report["default_run_ms"] > 0
    assert {(n["provenance"], n["same_config"]) for n in report["nodes"]} == {("default", True)}
    shown = subprocess.run(args + ["--top", "1"], capture_output=True, text=True, check=True).stdout
    assert "every kernel at its default" in shown and shown.count("fused_matmul_packed") == 1
    refused = subprocess.run(args + ["--plot", str(tmp_path / "p.png")], capture_output=True, text=True)
    assert refused.returncode == 2 and "leave it out with --against-defaults" in refused.stderr
