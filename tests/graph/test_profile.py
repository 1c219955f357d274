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
    assert len(report["kernels"]) == 3 and report["repeat"] == 2 and report["kernel_ms"] > 0   # fused layers
    shown = subprocess.run([sys.executable, "-m", "autotune.cli", "model", "profile", str(path), "--repeat", "2",
                            "--db", str(tmp_path / "absent.db"), "--plot", str(png)], capture_output=True, text=True,
                           check=True)
    assert "fused_matmul_packed" in shown.stdout and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
