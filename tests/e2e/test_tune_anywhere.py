"""Tuning a te computation from wherever a user writes one: `python -c`, code run by `exec`, a
function called after the program started, and a Jupyter notebook run headless. Measurement
workers get lowered IR and check data, never the user's code, so none of these needs a module
to re-import or an `if __name__ == "__main__":` guard.

Each case defines relu(x*w+b) and a row softmax with te, tunes both (8 trials each) with
`tune_tasks`, and loads the tuned kernels back in the same process, checked against numpy.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autotune.schedules.task import TEMPLATES

# The user's program. It prints one line: "ok <provenances>" or what went wrong.
PROGRAM = textwrap.dedent('''
    import numpy as np
    import autotune
    from autotune import te
    from autotune.measure import MeasureOptions

    def relu_mul_add(n, tag):
        x, w, b = (te.placeholder((n,), name=c) for c in "xwb")
        m = te.compute(x.shape, lambda i: x[i] * w[i], name="m")
        a = te.compute(x.shape, lambda i: m[i] + b[i], name="a")
        y = te.compute(x.shape, lambda i: te.maximum(a[i], te.const(0.0)), name="y")
        return autotune.create_task_from_te(y, [x, w, b], name=f"{tag}.relu_mul_add")

    def row_softmax(rows, cols, tag):
        x = te.placeholder((rows, cols), name="x")
        k = te.reduce_axis((0, cols), name="k")
        mx = te.compute((rows,), lambda i: te.max(x[i, k], axis=k), name="mx")
        e = te.compute((rows, cols), lambda i, j: te.exp(x[i, j] - mx[i]), name="e")
        k2 = te.reduce_axis((0, cols), name="k2")
        s = te.compute((rows,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
        y = te.compute((rows, cols), lambda i, j: e[i, j] / s[i], name="y")
        return autotune.create_task_from_te(y, [x], name=f"{tag}.softmax")

    def tune_and_load(db, tag):
        tasks = [relu_mul_add(1031, tag), row_softmax(37, 61, tag)]
        options = MeasureOptions(repeat=2, min_repeat_ms=1, build_workers=2)
        results = autotune.tune_tasks(tasks, trials=16, tuner="random", db=db, seed=0, batch_size=8,
                                      measure_option=options)
        bad = [(r.workload_key, r.trials, r.errors) for r in results if r.trials < 8 or r.errors]
        if bad:
            return f"tuning went wrong: {bad}"
        rng = np.random.default_rng(1)
        x, w, b = (rng.standard_normal(1031).astype(np.float32) for _ in range(3))
        k = autotune.load(f"{tag}.relu_mul_add", db=db, **tasks[0].params)
        np.testing.assert_allclose(k(x, w, b), np.maximum(x * w + b, 0), rtol=1e-6, atol=1e-6)
        s = rng.standard_normal((37, 61)).astype(np.float32)
        want = np.exp(s - s.max(axis=1, keepdims=True))
        want /= want.sum(axis=1, keepdims=True)
        ks = autotune.load(f"{tag}.softmax", db=db, **tasks[1].params)
        np.testing.assert_allclose(ks(s), want, rtol=1e-5, atol=1e-6)
        return f"ok {k.provenance} {ks.provenance}"
''')


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    """A private kernel cache; the templates a test registers in this process are dropped after it."""
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    before = set(TEMPLATES)
    yield tmp_path
    for key in set(TEMPLATES) - before:
        del TEMPLATES[key]


def _run(code: str, tmp_path: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_python_dash_c(tmp_path):
    db = tmp_path / "c.db"
    assert _run(PROGRAM + f"\nprint(tune_and_load({str(db)!r}, 'dash_c'))\n", tmp_path) == "ok tuned tuned"


def test_code_run_through_exec_of_a_string(tmp_path):
    """The whole program is a string handed to exec: no file holds any of it."""
    db = tmp_path / "exec.db"
    outer = f"namespace = {{}}\nexec({PROGRAM!r}, namespace)\nprint(namespace['tune_and_load']({str(db)!r}, 'execd'))\n"
    assert _run(outer, tmp_path) == "ok tuned tuned"


def test_a_computation_built_inside_a_function_at_run_time(tmp_path):
    """In this very process (pytest's), from shapes known only at run time."""
    namespace: dict = {}
    exec(compile(PROGRAM, "<built at run time>", "exec"), namespace)

    def later(n_rows: int) -> str:
        return namespace["tune_and_load"](str(tmp_path / "fn.db"), f"runtime{n_rows}")

    assert later(37) == "ok tuned tuned"


def _notebook(db: Path) -> dict:
    cells = [PROGRAM, f"result = tune_and_load({str(db)!r}, 'notebook')", "print(result)"]
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": {"name": "python3", "language": "python",
                                                                             "display_name": "Python 3"}},
            "cells": [{"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [],
                       "source": src} for i, src in enumerate(cells)]}


def test_a_jupyter_notebook_run_headless(tmp_path):
    nbformat = pytest.importorskip("nbformat", reason="the dev extra installs nbformat, nbclient and ipykernel")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.reads(json.dumps(_notebook(tmp_path / "nb.db")), as_version=4)
    env = {**os.environ, "AUTOTUNE_CACHE": str(tmp_path / "cache")}
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.km_kwargs = {"env": env}     # the kernel runs this interpreter's environment
    client.execute()
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("output_type") == "stream")
    assert printed.strip() == "ok tuned tuned"
