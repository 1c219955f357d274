"""The measurement boundary carries data, not recipes: the tuning process (or a child it forked
to lower a pool of candidates, `Task.prelower`, which inherits the task) instantiates and lowers
each config once, workers never instantiate a template nor import one, and the runner gets the
task's check data as files made once per task."""
from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import autotune
from autotune import te
from autotune.measure import MeasureInput, MeasureOptions, Measurer
from autotune.measure.check_data import CheckDataStore, remove_orphans, task_inputs
from autotune.schedules import task as task_module
from autotune.schedules.space import ConfigEntity
from autotune.schedules.task import TEMPLATES, create_task, template

OPTIONS = MeasureOptions(repeat=2, min_repeat_ms=1, build_workers=2)
LOG = Path(os.environ.get("PYTEST_TMPDIR", "/tmp")) / f"autotune-instantiations-{os.getpid()}.jsonl"


def _counted_reference(a, **_):
    return np.maximum(a * 2.0, 0.0)


@template("testing.counted", reference=_counted_reference)
def counted(cfg, n: int, dtype: str = "float32"):
    """relu(2a), whose every instantiation is logged with the process that made it."""
    A = te.placeholder((n,), dtype, name="A")
    B = te.compute((n,), lambda i: te.maximum(A[i] * 2.0, te.const(0.0)), name="B")
    s = te.create_schedule(B.op)
    cfg.define_split("tile", n, num_outputs=2)
    cfg.define_knob("parallel", [0, 1])
    outer, inner = cfg["tile"].apply(s, B, B.op.axis[0])
    if cfg["parallel"].val:
        s[B].parallel(outer)
    if isinstance(cfg, ConfigEntity):                  # apply mode: one config
        with LOG.open("a") as f:
            f.write(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "index": cfg.index,
                                "process": multiprocessing.current_process().name}) + "\n")
    return s, [A, B]


@pytest.fixture
def log():
    LOG.unlink(missing_ok=True)
    yield LOG
    LOG.unlink(missing_ok=True)


def _instantiations(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("tuner", ["random", "xgb"])
def test_each_config_is_instantiated_once_and_only_here(tmp_path, log, monkeypatch, tuner):
    lowered = Counter()
    real_lower = task_module.lower

    def counting_lower(s, args, name):
        lowered["all"] += 1
        return real_lower(s, args, name=name)

    monkeypatch.setattr(task_module, "lower", counting_lower)
    task = create_task("testing.counted", n=2310)   # 32 divisors: a space of 64
    result = autotune.tune(task, trials=12, tuner=tuner, db=str(tmp_path / "t.db"), seed=1, batch_size=6,
                           measure_option=OPTIONS)
    assert result.trials == 12 and not result.errors
    made = _instantiations(log)
    here = [m for m in made if m["pid"] == os.getpid()]
    forked = [m for m in made if m["pid"] != os.getpid()]
    # build and run workers: no instantiation at all; only lowering children forked from here,
    # and those lower the schedule this process made when it checked the config, if it did
    assert all(m["ppid"] == os.getpid() and m["process"].startswith("ForkProcess") for m in forked)
    per_config = Counter(m["index"] for m in made)
    assert max(per_config.values()) == 1                      # validity, features, build: one instantiation
    assert lowered["all"] <= len(here)                        # what is lowered here was made here, once
    measured = {i for i, _ in result.history}
    assert measured <= set(per_config)
    if tuner == "random":                                     # it looks at nothing it does not measure
        assert len(per_config) == 12


def test_check_data_is_made_before_the_batch_builds():
    """numpy's reference leaves its BLAS threads spinning after it: made just before the first
    timing, it slowed that candidate's timings 2-3x. The builds now stand between them."""
    steps: list[str] = []
    with Measurer(OPTIONS) as m:
        real_get, real_build = m.runner.check_data.get, m.builder.build
        m.runner.check_data.get = lambda *a: (steps.append("check"), real_get(*a))[1]
        m.builder.build = lambda inputs: (steps.append("build"), real_build(inputs))[1]
        results = m.measure(create_task("matmul", M=13, N=7, K=29), [0, 1])
    assert all(r.ok for r in results)
    assert steps[:2] == ["check", "build"]


REFERENCE_CALLS = []


def _failing_reference(a, **_):
    REFERENCE_CALLS.append(a.shape)
    raise RuntimeError("no reference today")


@template("testing.no_reference", reference=_failing_reference)
def no_reference(cfg, n: int, dtype: str = "float32"):
    A = te.placeholder((n,), dtype, name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    return te.create_schedule(B.op), [A, B]


def test_a_failing_reference_fails_each_candidate_not_the_batch():
    REFERENCE_CALLS.clear()
    task = create_task("testing.no_reference", n=5)
    with Measurer(OPTIONS) as m:
        results = m.measure(task, [0, 0]) + m.measure(task, [0])
    assert [r.error_kind.name for r in results] == ["RUNTIME_ERROR"] * 3
    assert all("no reference today" in r.error_msg for r in results)
    assert len(REFERENCE_CALLS) == 1        # run once for the task, not again for each candidate


def test_check_data_is_made_once_per_task_and_read_back_exactly():
    task = create_task("matmul", M=13, N=7, K=29)
    store = CheckDataStore()
    try:
        options = OPTIONS.to_json()
        data = store.get(task, options)
        assert store.get(create_task("matmul", M=13, N=7, K=29), options) is data     # equal tasks share it
        files = sorted(p.name for p in Path(data.directory).iterdir())
        assert files == ["expected0.npy", "input0.npy", "input1.npy"]
        a, b = (np.load(Path(data.directory) / f"input{i}.npy", allow_pickle=False) for i in range(2))
        want = np.load(Path(data.directory) / "expected0.npy", allow_pickle=False)
        np.testing.assert_array_equal(a, task_inputs(task)[0])
        np.testing.assert_allclose(want, a @ b, rtol=1e-5, atol=1e-5)
        assert data.outputs[0]["shape"] == [13, 7] and data.outputs[0]["atol"] > data.outputs[0]["rtol"]
    finally:
        store.close()
    assert not Path(data.directory).exists()




KILLED_OWNER = """
import os, signal, sys
from autotune.measure.check_data import CheckDataStore
from autotune.schedules.task import create_task
from autotune.measure import MeasureOptions
store = CheckDataStore()
print(store.get(create_task("matmul", M=5, N=3, K=7), MeasureOptions().to_json()).directory, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_check_data_of_a_killed_process_is_removed_by_the_next_store(tmp_path):
    """A tuner killed by a signal runs no exit handler: the next store on the machine removes
    what it left (stores call remove_orphans when made), and leaves a live process's store alone."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    killed = subprocess.run([sys.executable, "-c", KILLED_OWNER], env=env, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    left = Path(killed.stdout.strip())
    assert left.exists() and left.parent.parent == tmp_path
    live = tmp_path / f"autotune-check-{os.getppid()}-abc"      # a live process's store
    live.mkdir()
    remove_orphans(tmp_path)
    assert not left.parent.exists() and live.exists()


WORKER_SIDE = """
import json, sys
from pathlib import Path
from autotune.measure.worker import serve, timing
from autotune.measure.worker.build import handle_build
from autotune.measure.worker.run import handle_run

ir, target, check, options = Path(sys.argv[1]).read_bytes(), sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
built, obj = handle_build({"target": target}, ir, print)
assert built["error_kind"] == "ok", built
ran, _ = handle_run({"signature": built["signature"], "check": check, "options": options, "num_threads": 1}, obj,
                    lambda event: None)
assert ran["error_kind"] == "ok", ran
print(json.dumps(sorted(sys.modules)))
"""
PARENT_ONLY = ("autotune.schedules.task", "autotune.schedules.cpu", "autotune.schedules.cuda", "autotune.topi",
               "autotune.search", "autotune.ops", "autotune.runtime", "autotune.costmodel", "tuning_db",
               "autotune.measure.builder", "autotune.measure.runner", "autotune.measure.check_data")


def test_a_worker_builds_and_runs_from_data_alone(tmp_path):
    """The worker side, in a fresh interpreter: serialized IR in, object code out, checked and
    timed against check data from files; it never loads the template, search or op modules."""
    from autotune.ir.serialize import dumps

    task = create_task("softmax", M=9, N=37)
    (tmp_path / "ir").write_bytes(dumps(task.lower(0)))
    store = CheckDataStore()
    try:
        check = store.get(task, OPTIONS.to_json())
        done = subprocess.run([sys.executable, "-c", WORKER_SIDE, str(tmp_path / "ir"), task.target_key,
                               json.dumps(check.to_json()), json.dumps(OPTIONS.to_json())],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
    finally:
        store.close()
    assert done.returncode == 0, done.stderr[-3000:]
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert "autotune.codegen.llvm" in modules
    assert [m for m in modules if m.startswith(PARENT_ONLY)] == []


def test_a_template_that_exists_only_in_this_process_measures_ok():
    """Registered here, after start-up, under a name no module defines: workers need nothing of it."""
    @template("testing.ephemeral", reference=lambda a, **_: a * 3.0)
    def ephemeral(cfg, n: int, dtype: str = "float32"):
        A = te.placeholder((n,), dtype, name="A")
        B = te.compute((n,), lambda i: A[i] * 3.0, name="B")
        s = te.create_schedule(B.op)
        cfg.define_split("tile", n, num_outputs=2)
        cfg["tile"].apply(s, B, B.op.axis[0])
        return s, [A, B]

    try:
        task = create_task("testing.ephemeral", n=255)   # 8 divisors
        with Measurer(OPTIONS) as m:
            results = m.measure_inputs([MeasureInput(task, i) for i in range(3)])
        assert all(r.ok for r in results), [r.error_msg for r in results]
    finally:
        del TEMPLATES[("testing.ephemeral", "llvm")]
