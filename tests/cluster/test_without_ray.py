"""Without Ray installed, asking for a cluster is one clear line, and nothing is recorded."""
from __future__ import annotations

import sys

import autotune
from autotune.cli import run
from tuning_db import TuningDB


def test_cluster_without_ray_names_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)          # `import ray` now fails as if not installed
    for name in [m for m in sys.modules if m.startswith("autotune.cluster")]:
        monkeypatch.delitem(sys.modules, name)
    db = tmp_path / "t.db"
    assert run(["tune", "matmul", "--shape", "M=5,N=5,K=5", "--trials", "1", "--db", str(db), "--cluster", "auto"]) == 2
    assert run(["worker", "--cluster", "127.0.0.1:6379"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("autotune: error")]
    assert len(lines) == 2 and all("pip install 'autotune[cluster]'" in line for line in lines)
    task = autotune.create_task("matmul", M=5, N=5, K=5)
    assert TuningDB(str(db)).records(task.workload_key, task.target_key) == []
