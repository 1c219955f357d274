"""Many tuners on one PostgreSQL database, as a lab of machines would run them: tuner processes on
overlapping tasks lose no record and measure no config twice; a tuner killed mid-batch leaves
leases that expire and the others measure its configs; two `autotune tune` started together on a
fresh database both work, and `db`, export/import and `autotune.load` read what they stored;
readers never wait for a writer (SQLite too)."""
from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import create_engine, select

from tuning_db import TuningDB
from tuning_db.migrate import lock
from tuning_db.schema import ClaimRow, RecordRow, RunRow, record_row

sys.path.insert(0, str(Path(__file__).parent))   # the spawned children import their bodies from here
import tuning_db_workers as workers
from tuning_db_workers import SHAPES, SMALL, TARGET, WORKLOAD, record


def join_all(procs: list, timeout_s: float) -> list:
    """Their exit codes; one still running at the deadline is killed (and its code says so)."""
    deadline = time.monotonic() + timeout_s
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    return [p.exitcode for p in procs]


def task_key(shape: dict) -> str:
    import autotune

    return autotune.create_task("matmul", **shape).workload_key


def test_four_tuners_on_overlapping_tasks_lose_nothing_and_measure_nothing_twice(pg_url):
    plans = [[0, 1], [1, 2], [2, 0], [0, 1, 2]]   # every task is tuned by three of the four at once
    trials = 12
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(plans))
    procs = [ctx.Process(target=workers.tune_shapes, args=(pg_url, seed, plan, trials, barrier))
             for seed, plan in enumerate(plans)]
    for p in procs:
        p.start()
    assert join_all(procs, 240) == [0] * len(plans)
    with TuningDB(pg_url, readonly=True) as db:
        for i, shape in enumerate(SHAPES):
            counts = Counter(r.config_index for r in db.records(task_key(shape)))
            tuners = sum(i in plan for plan in plans)
            assert sum(counts.values()) == tuners * trials, shape        # every tuner got all its trials
            assert max(counts.values()) == 1, [c for c, n in counts.items() if n > 1]
        assert [(r.status, r.trials_done) for r in db.runs()] == [("finished", trials)] * sum(map(len, plans))


def claimed(url: str) -> list[tuple[int, int]]:
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = [(r.run_id, r.config_index) for r in conn.execute(select(ClaimRow))]
    engine.dispose()
    return rows


def test_a_tuner_killed_mid_batch_leaves_its_configs_to_the_others(pg_url):
    lease_s = 3.0
    TuningDB(pg_url).close()   # its tables, so that we can watch the claims table from the start
    ctx = multiprocessing.get_context("spawn")
    stuck = ctx.Process(target=workers.tune_stuck, args=(pg_url, lease_s))
    stuck.start()
    deadline = time.monotonic() + 60
    while not claimed(pg_url) and time.monotonic() < deadline:
        time.sleep(0.05)
    victim = claimed(pg_url)
    assert len(victim) == 4                                     # it holds its first batch, measuring it
    others = [ctx.Process(target=workers.tune_until_all_measured, args=(pg_url, seed, lease_s)) for seed in (1, 2)]
    for p in others:
        p.start()
    os.kill(stuck.pid, signal.SIGKILL)
    stuck.join(10)
    assert join_all(others, 180) == [0, 0]
    with TuningDB(pg_url, readonly=True) as db:
        key = task_key(SMALL)
        records = db.records(key)
        counts = Counter(r.config_index for r in records)
        assert len(counts) == 324 and max(counts.values()) == 1   # the whole space, each config once
        by_run = {r.config_index: r.run_id for r in records}
        dead_run = victim[0][0]
        assert all(by_run[i] != dead_run for _, i in victim)     # its configs measured by the others
        runs = {r.id: r for r in db.runs()}
        assert (runs[dead_run].status, runs[dead_run].trials_done) == ("running", 0)
    assert claimed(pg_url) == []                                # taken over, measured, released


def test_readers_never_wait_for_a_writer(location):
    db = TuningDB(location)
    run_id = db.start_run(WORKLOAD, "matmul", {"M": 7, "N": 11, "K": 13}, "float32", TARGET, "grid", 8)
    db.add_records(run_id, [record(1)])
    seen: list[int] = []

    def read() -> None:
        with TuningDB(location, readonly=True) as reader:   # opened, too, while the writer holds its locks
            seen.extend(r.config_index for r in reader.records())

    with db._writing() as session:   # a writer in the middle of a batch, holding the schema and write locks
        lock(session.connection())
        run = session.get_one(RunRow, run_id)
        session.add(RecordRow(**record_row(record(2), run_id, run.workload_id, run.target_id)))
        session.flush()
        reading = threading.Thread(target=read)
        started = time.monotonic()
        reading.start()
        reading.join(10)
        waited = time.monotonic() - started
    assert seen == [1] and waited < 5                           # at once, and without the uncommitted record
    assert db.measured_indices(WORKLOAD, TARGET) == {1, 2}
    db.close()


def cli(*args: str, **popen: object) -> subprocess.Popen:
    env = dict(os.environ, AUTOTUNE_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "autotune.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **popen)


def finished(p: subprocess.Popen) -> str:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return out


def test_two_cli_tuners_on_one_fresh_database_then_db_commands_and_load(pg_url, pg_server, tmp_path):
    shape = "M=9,N=7,K=5"
    tuners = [cli("tune", "matmul", "--shape", shape, "--trials", "6", "--tuner", "grid", "--db", pg_url)
              for _ in range(2)]
    for p in tuners:
        finished(p)
    with TuningDB(pg_url, readonly=True) as db:
        counts = Counter(r.config_index for r in db.records())
        assert sum(counts.values()) == 12 and max(counts.values()) == 1
        assert [r.status for r in db.runs()] == ["finished", "finished"]
        best = db.best(db.records()[0].workload_key, db.records()[0].target_key)
    out = finished(cli("db", "workloads", "--db", pg_url, "--json"))
    assert '"trials": 12' in out
    jsonl = tmp_path / "records.jsonl"
    finished(cli("db", "export", str(jsonl), "--db", pg_url))
    copy = pg_server.create_database("imported")
    assert "imported 12 records" in finished(cli("db", "import", str(jsonl), "--db", copy))

    import autotune

    kernel = autotune.load("matmul", db=copy, M=9, N=7, K=5)
    assert (kernel.provenance, kernel.config) == ("tuned", best.config)
    a, b = np.random.rand(9, 5).astype("float32"), np.random.rand(5, 7).astype("float32")
    np.testing.assert_allclose(kernel(a, b), a @ b, rtol=1e-5)
