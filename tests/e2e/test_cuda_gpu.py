"""End to end on a GPU (skipped without one): tuning through the real CLI and API into a real
database, measured on the GPU, then loaded back and run on numpy and GPU arrays."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import autotune
from autotune.codegen.cuda_device import gpu_available


pytestmark = pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU (or PyCUDA) on this machine")


def test_cli_tunes_on_the_gpu_and_the_kernel_loads_back(tmp_path):
    db = str(tmp_path / "t.db")
    p = subprocess.run([sys.executable, "-m", "autotune.cli", "tune", "matmul", "--shape", "M=96,N=80,K=72",
                        "--target", "cuda", "--trials", "16", "--db", db, "--json"],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["target"].startswith("cuda -arch=sm_") and summary["best_gflops"] > 0
    k = autotune.load("matmul", target="cuda", db=db, M=96, N=80, K=72)
    assert k.provenance == "tuned"
    a, b = np.random.rand(96, 72).astype("float32"), np.random.rand(72, 80).astype("float32")
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-4)


def test_api_tuning_of_fused_and_reduction_ops(tmp_path):
    db = str(tmp_path / "t.db")
    for op, params in (("relu", {"shape": (1 << 20,)}), ("softmax", {"M": 256, "N": 1000})):
        task = autotune.create_task(op, target="cuda", **params)
        res = autotune.tune(task, trials=12, db=db, seed=0)
        assert res.best_config is not None, [r.error_msg for _, r in res.history][:3]
