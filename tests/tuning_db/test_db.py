"""TuningDB on real SQLite files and real PostgreSQL databases (the `location` fixture): queries,
JSONL exchange, compaction, and the failures users hit with TVM's logs (concurrent writers, killed
writers, wrong or foreign files, readonly readers)."""
from __future__ import annotations

import gc
import json
import math
import multiprocessing
import os
import signal
import sqlite3
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

from tuning_db import SCHEMA_VERSION, Record, TuningDB, TuningDBError

sys.path.insert(0, str(Path(__file__).parent))   # the spawned children import their bodies from here
import tuning_db_workers as workers  # noqa: E402
from tuning_db_workers import MODEL, OTHER_TARGET, PARAMS, TARGET, WORKLOAD, record, start  # noqa: E402

def without_run_id(records: list[Record]) -> list[tuple]:
    return [(r.workload_key, r.target_key, r.config_index, r.config, r.costs, r.error_kind, r.error_msg,
             r.build_seconds, r.timestamp) for r in records]


# -- queries ---------------------------------------------------------------------------------

def test_round_trip_keeps_every_field(db):
    run_id = start(db)
    batch = [record(3), record(-4), record(5, cost=2e-3)]
    db.add_records(run_id, batch)
    db.finish_run(run_id, 3)
    got = db.records()
    assert without_run_id(got) == without_run_id(batch)
    assert {r.run_id for r in got} == {run_id}
    assert got[1].cost is None and not got[1].ok and got[2].cost == pytest.approx(2e-3)
    (run,) = db.runs()
    assert (run.id, run.workload_key, run.target_key, run.tuner, run.trials_asked, run.trials_done, run.seed,
            run.status) == (run_id, WORKLOAD, TARGET, "random", 64, 3, 1, "finished")
    assert run.ended_at >= run.started_at


def test_best_is_the_lowest_ok_cost_per_target(db):
    run_id = start(db)
    db.add_records(run_id, [record(1, cost=5e-3), record(-2), record(3, cost=1e-3), record(4, cost=1e-3)])
    other = start(db, target=OTHER_TARGET)
    db.add_records(other, [record(9, cost=1e-6, target=OTHER_TARGET)])
    best = db.best(WORKLOAD, TARGET)
    assert (best.config_index, best.cost, best.run_id) == (3, pytest.approx(1e-3), run_id)  # ties: earliest
    assert db.best(WORKLOAD, OTHER_TARGET).config_index == 9
    assert db.best("conv2d(N=1)float32", TARGET) is None
    only_errors = start(db, workload="relu(N=3)float32", op="relu")
    db.add_records(only_errors, [record(-1, workload="relu(N=3)float32")])
    assert db.best("relu(N=3)float32", TARGET) is None


def test_best_closes_the_rows_it_leaves_unread(db):
    """best() reads a few rows of many; the rest is closed at once, not by the garbage collector
    (on PostgreSQL a server-side cursor, whose finaliser then warns)."""
    db.add_records(start(db), [record(i) for i in range(1, 40)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert db.best(WORKLOAD, TARGET).config_index == 1
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_records_filters_and_measured_indices(db):
    run_id = start(db)
    db.add_records(run_id, [record(i if i % 3 else -i) for i in range(10)])
    db.add_records(run_id, [record(2, cost=1.0)])   # measured twice: one index
    other = start(db, target=OTHER_TARGET)
    db.add_records(other, [record(100, target=OTHER_TARGET)])
    assert len(db.records()) == 12
    assert [r.config_index for r in db.records(WORKLOAD, TARGET, limit=3)] == [0, 1, 2]
    assert all(r.ok for r in db.records(WORKLOAD, TARGET, ok_only=True))
    assert len(db.records(WORKLOAD, TARGET, ok_only=True)) == 8   # 3, 6 and 9 failed
    assert [r.config_index for r in db.records(target_key=OTHER_TARGET)] == [100]
    assert db.records("nope") == []
    assert db.measured_indices(WORKLOAD, TARGET) == set(range(10))   # errors count as measured
    assert db.measured_indices(WORKLOAD, "nope") == set()


def test_workloads_summarises_each_workload_and_target(db):
    run_id = start(db)
    db.add_records(run_id, [record(1, cost=3e-3, timestamp=100.0), record(-2, timestamp=200.0),
                            record(4, cost=2e-3, timestamp=150.0)])
    start(db, target=OTHER_TARGET)   # a run without records yet
    relu = start(db, workload="relu(N=3)float32", op="relu", params={"N": 3})
    db.add_records(relu, [record(0, cost=1e-4, workload="relu(N=3)float32")])
    summaries = db.workloads()
    assert [(s.key, s.target_key) for s in summaries] == [
        (WORKLOAD, OTHER_TARGET), (WORKLOAD, TARGET), ("relu(N=3)float32", TARGET)]
    empty, mm, _ = summaries
    assert (mm.op, mm.params, mm.dtype, mm.trials, mm.errors, mm.best_index, mm.last_timestamp) == (
        "matmul", PARAMS, "float32", 3, 1, 4, 200.0)
    assert mm.best_cost == pytest.approx(2e-3) and mm.best_config == record(4).config
    assert (empty.trials, empty.errors, empty.best_cost, empty.best_config, empty.last_timestamp) == (
        0, 0, None, None, None)
    assert [s.key for s in db.workloads(op="relu")] == ["relu(N=3)float32"]
    assert json.dumps([s.__dict__ for s in summaries])   # the CLI prints them as JSON


def test_add_records_rejects_the_whole_batch(db):
    run_id = start(db)
    with pytest.raises(TuningDBError, match="run .* tunes"):
        db.add_records(run_id, [record(1), record(2, workload="relu(N=3)float32")])
    with pytest.raises(TuningDBError, match="no run 999"):
        db.add_records(999, [record(1)])
    with pytest.raises(TypeError, match="item 0"):
        db.add_records(run_id, [{"config_index": 1}])
    assert db.records() == []
    with pytest.raises(TuningDBError, match="no run 999"):
        db.finish_run(999, 1)
    with pytest.raises(ValueError, match="status"):
        db.finish_run(run_id, 1, "done")


@pytest.mark.parametrize("change, field", [
    ({"costs": (1.0, math.nan)}, "costs"), ({"costs": (-1.0,)}, "costs"), ({"costs": (math.inf,)}, "costs"),
    ({"costs": ()}, "costs"), ({"error_kind": "segfault"}, "error_kind"), ({"config_index": True}, "config_index"),
    ({"config_index": -1}, "config_index"), ({"config": [1, 2]}, "config"), ({"config": {"x": math.nan}}, "config"),
    ({"config": {"x": object()}}, "config"), ({"workload_key": ""}, "workload_key"),
    ({"build_seconds": -0.5}, "build_seconds"), ({"timestamp": math.inf}, "timestamp"),
])
def test_record_validates_each_field(change, field):
    fields = {**record(1).__dict__, **change}
    with pytest.raises(ValueError, match=f"field '{field}'"):
        Record(**fields)


# -- JSONL -----------------------------------------------------------------------------------

def fill(db: TuningDB) -> None:
    run_id = start(db)
    db.add_records(run_id, [record(i if i % 4 else -i) for i in range(12)])
    other = start(db, workload="relu(N=3)float32", target=OTHER_TARGET, op="relu", params={"N": 3})
    db.add_records(other, [record(i, workload="relu(N=3)float32", target=OTHER_TARGET) for i in range(5)])


def test_export_then_import_into_a_fresh_database(db, tmp_path):
    fill(db)
    path = tmp_path / "records.jsonl"
    assert db.export_jsonl(path) == 17
    first = json.loads(path.read_text().splitlines()[0])
    assert (first["workload_key"], first["op"], first["params"], first["dtype"], first["target_key"]) == (
        WORKLOAD, "matmul", PARAMS, "float32", TARGET)
    with TuningDB(tmp_path / "fresh.db") as fresh:
        assert fresh.import_jsonl(path) == 17
        assert without_run_id(fresh.records()) == without_run_id(db.records())
        assert [(s.key, s.op, s.params, s.dtype, s.target_key, s.trials, s.errors, s.best_cost)
                for s in fresh.workloads()] == [
            (s.key, s.op, s.params, s.dtype, s.target_key, s.trials, s.errors, s.best_cost) for s in db.workloads()]
        assert {r.tuner for r in fresh.runs()} == {"import"}
        assert fresh.import_jsonl(path) == 0   # already present: skipped
        assert len(fresh.records()) == 17
    assert db.import_jsonl(path) == 0   # into the database it came from


GOOD = {"workload_key": WORKLOAD, "op": "matmul", "params": PARAMS, "dtype": "float32", "target_key": TARGET,
        "config_index": 1, "config": {"knobs": {}}, "costs": [0.001], "error_kind": "ok", "error_msg": "",
        "build_seconds": 0.1, "timestamp": 1.5}


@pytest.mark.parametrize("bad_line, field", [
    ('{"workload_key": "x", ', "not valid JSON"),
    ("[1, 2, 3]", "JSON object"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "costs"}), "'costs': missing"),
    (json.dumps({**GOOD, "costs": [0.001, -2.0]}), "'costs'"),
    (json.dumps({**GOOD, "costs": "0.001"}), "'costs'"),
    (json.dumps({**GOOD, "costs": [math.nan]}), "'costs'"),   # json.dumps writes the NaN token
    (json.dumps({**GOOD, "error_kind": "exploded"}), "'error_kind'"),
    (json.dumps({**GOOD, "config": [1, 2]}), "'config'"),
    (json.dumps({**GOOD, "config_index": "3"}), "'config_index'"),
    (json.dumps({**GOOD, "build_seconds": True}), "'build_seconds'"),
    (json.dumps({**GOOD, "op": "conv2d", "timestamp": 9.0}), "'op'/'params'/'dtype'"),   # same key, other workload
])
def test_import_of_a_malformed_line_imports_nothing(db, tmp_path, bad_line, field):
    path = tmp_path / "bad.jsonl"
    good = [json.dumps({**GOOD, "config_index": i, "timestamp": float(i)}) for i in range(2)]
    path.write_text("\n".join([*good, bad_line, good[0]]) + "\n")
    with pytest.raises(ValueError, match=r"line 3: .*" + field.replace("(", r"\(")):
        db.import_jsonl(path)
    assert db.records() == [] and db.runs() == [] and db.workloads() == []


def test_import_of_a_missing_file(db, tmp_path):
    with pytest.raises(TuningDBError, match="cannot read"):
        db.import_jsonl(tmp_path / "nope.jsonl")


# -- compact ---------------------------------------------------------------------------------

def test_compact_keeps_the_top_k_ok_records_and_every_run(db, tmp_path):
    fill(db)
    big = start(db)
    db.add_records(big, [record(i, cost=(i % 17 + 1) * 1e-3) for i in range(20, 400)])
    before = {(s.key, s.target_key): s.best_cost for s in db.workloads()}
    runs = db.runs()
    ok = {}
    for r in db.records(ok_only=True):
        ok.setdefault((r.workload_key, r.target_key), []).append(r)
    expected = {k: sorted(rs, key=lambda r: (r.cost, r.timestamp))[:3] for k, rs in ok.items()}
    total = len(db.records())
    pages = sqlite3.connect(db.path).execute("PRAGMA page_count").fetchone()[0] if db.path else None

    deleted = db.compact(top_k=3)

    assert deleted == total - 6
    kept = db.records()
    for key, best in expected.items():
        assert without_run_id([r for r in kept if (r.workload_key, r.target_key) == key]) == \
            without_run_id(sorted(best, key=lambda r: (r.run_id, r.timestamp)))
    assert db.runs() == runs
    assert {(s.key, s.target_key): s.best_cost for s in db.workloads()} == before
    assert db.compact(top_k=3) == 0
    # a config timed inside a model keeps its record: the model may run it
    slowest = expected[(WORKLOAD, TARGET)][-1]
    db.add_model_timings("resnet", WORKLOAD, TARGET, slowest.config_index, [1e-3])
    assert db.compact(top_k=2) == 1          # the other workload's third
    assert slowest.config_index in {r.config_index for r in db.records(WORKLOAD, TARGET)}
    if db.path is not None:
        with sqlite3.connect(db.path) as raw:
            assert raw.execute("PRAGMA page_count").fetchone()[0] < pages   # VACUUM gave the space back
            assert raw.execute("PRAGMA freelist_count").fetchone()[0] == 0
    with pytest.raises(ValueError, match="top_k"):
        db.compact(0)


# -- opening: paths, readonly, foreign files, versions ----------------------------------------

def test_sqlite_connections_use_wal_and_a_busy_timeout(tmp_path):
    db = TuningDB(tmp_path / "tuning.db")
    with db._engine.connect() as conn:
        pragma = lambda name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()  # noqa: E731
        assert (pragma("journal_mode"), pragma("busy_timeout"), pragma("foreign_keys"), pragma("synchronous")) == (
            "wal", 30000, 1, 1)
    with sqlite3.connect(tmp_path / "tuning.db") as raw:
        meta = dict(raw.execute("SELECT key, value FROM meta"))
        assert meta["schema_version"] == str(SCHEMA_VERSION) and meta["created_by"].startswith("autotune")
        indexes = {row[1] for row in raw.execute("PRAGMA index_list(records)")}
        assert {"ix_records_best", "ix_records_index"} <= indexes
        plan = " ".join(str(row) for row in raw.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM records WHERE workload_id = 1 AND target_id = 1 "
            "AND cost IS NOT NULL ORDER BY cost LIMIT 1"))
        assert "ix_records_best" in plan and "TEMP B-TREE" not in plan
    db.close()


def test_default_location_and_urls(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AUTOTUNE_DB", raising=False)
    TuningDB().close()
    assert (tmp_path / "tuning.db").exists()
    monkeypatch.setenv("AUTOTUNE_DB", str(tmp_path / "env.db"))
    TuningDB().close()
    assert (tmp_path / "env.db").exists()
    with TuningDB(f"sqlite:///{tmp_path / 'url.db'}") as via_url:
        start(via_url)
    with TuningDB(tmp_path / "url.db", readonly=True) as again:
        assert len(again.runs()) == 1


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_libpq_style_urls_open_with_the_installed_driver(pg_url, scheme):
    with TuningDB(pg_url.replace("postgresql+psycopg", scheme)) as via_libpq_url:
        start(via_libpq_url)
        assert via_libpq_url.name == pg_url   # what it says it opened
    with TuningDB(pg_url, readonly=True) as again:
        assert len(again.runs()) == 1


def test_readonly_never_creates_and_never_writes(tmp_path, location, db):
    missing = tmp_path / "missing.db"
    with pytest.raises(TuningDBError, match="missing.db does not exist"):
        TuningDB(missing, readonly=True)
    assert not missing.exists()
    run_id = start(db)
    db.add_records(run_id, [record(1)])
    reader = TuningDB(location, readonly=True)
    assert reader.best(WORKLOAD, TARGET).config_index == 1
    db.add_records(run_id, [record(2, cost=1e-9)])   # the writer keeps writing while a reader is open
    assert reader.best(WORKLOAD, TARGET).config_index == 2
    for write in (lambda: start(reader), lambda: reader.add_records(run_id, [record(3)]),
                  lambda: reader.finish_run(run_id, 1), lambda: reader.compact(1),
                  lambda: reader.import_jsonl(tmp_path / "x.jsonl"),
                  lambda: reader.add_model_timings(MODEL, WORKLOAD, TARGET, 1, [1e-3])):
        with pytest.raises(TuningDBError, match="readonly"):
            write()
    with reader._engine.connect() as conn:   # even around our checks, the database itself refuses
        with pytest.raises(Exception, match="readonly|read-only"):
            conn.exec_driver_sql("DELETE FROM records")
    reader.close()
    assert len(db.records()) == 2


def test_missing_parent_directory_is_a_clear_error(tmp_path):
    with pytest.raises(TuningDBError, match="directory .*nowhere does not exist"):
        TuningDB(tmp_path / "nowhere" / "tuning.db")


def make_text(path: Path) -> None:
    path.write_text("this is a tuning log from some other tool\n")


def make_foreign_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")


@pytest.mark.parametrize("readonly", [False, True])
@pytest.mark.parametrize("make, message", [
    (make_text, "not an SQLite file"), (make_foreign_sqlite, r"tables \['photos'\] and no 'meta'"),
    (lambda p: p.touch(), "empty file"), (lambda p: p.mkdir(), "is a directory"),
])
def test_a_file_that_is_not_a_tuning_database(tmp_path, make, message, readonly):
    path = tmp_path / "other.db"
    make(path)
    before = path.read_bytes() if path.is_file() else None
    with pytest.raises(TuningDBError, match=message) as info:
        TuningDB(path, readonly=readonly)
    assert str(path) in str(info.value)
    assert (path.read_bytes() if path.is_file() else None) == before   # left exactly as it was


@pytest.mark.parametrize("readonly", [False, True])
def test_another_schema_version_is_refused(location, db, readonly):
    start(db)
    with db._engine.begin() as conn:
        conn.exec_driver_sql("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    db.close()
    with pytest.raises(TuningDBError, match=f"schema version 7, but this library reads versions 1 to {SCHEMA_VERSION}"):
        TuningDB(location, readonly=readonly)


# -- concurrency -----------------------------------------------------------------------------

def test_insert_or_get_reads_back_a_key_another_writer_inserted(db):
    from tuning_db.schema import WorkloadRow, get_or_create

    start(db)
    with db._writing() as session:
        real, looks = session.scalar, []

        def first_look_misses(*args, **kwargs):   # as if the other writer committed just after our select
            looks.append(args)
            return None if len(looks) == 1 else real(*args, **kwargs)

        session.scalar = first_look_misses
        workload_id = get_or_create(session, WorkloadRow, WORKLOAD, op="matmul", params=PARAMS, dtype="float32")
        assert (workload_id, len(looks)) == (1, 2)   # the insert hit the unique key; the retry found the row
    start(db)   # the transaction survived (a savepoint was rolled back, not the whole of it)
    assert [s.key for s in db.workloads()] == [WORKLOAD] and len(db.runs()) == 2


def test_in_memory_database():
    with TuningDB(":memory:") as mem:
        mem.add_records(start(mem), [record(1)])
        assert mem.best(WORKLOAD, TARGET).config_index == 1


def test_readers_on_many_threads_while_writing(db):
    run_id = start(db)
    db.add_records(run_id, [record(0, cost=1.0)])
    errors: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(40):
                assert db.best(WORKLOAD, TARGET) is not None
                db.measured_indices(WORKLOAD, TARGET)
        except BaseException as e:   # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for i in range(1, 30):
        db.add_records(run_id, [record(i, cost=1.0 / (i + 1))])
    for t in threads:
        t.join()
    assert errors == []
    assert db.best(WORKLOAD, TARGET).config_index == 29


def test_two_writer_processes_on_one_new_database(location):
    path = location   # neither finds it: both race to create its tables and the workload
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=workers.write_batches, args=(path, offset, 20, 10, barrier))
             for offset in (0, 10_000)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    with TuningDB(path, readonly=True) as db:
        indices = sorted(r.config_index for r in db.records())
        assert indices == [*range(200), *range(10_000, 10_200)]
        assert [(r.trials_done, r.status) for r in db.runs()] == [(200, "finished")] * 2
        assert [(s.key, s.trials) for s in db.workloads()] == [(WORKLOAD, 400)]


def test_a_writer_killed_mid_batch_loses_at_most_that_batch(tmp_path):
    path = tmp_path / "killed.db"
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=workers.write_until_killed, args=(str(path), 10, 0.002))
    child.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if path.exists():
                try:
                    with TuningDB(path, readonly=True) as reader:
                        if len(reader.records()) >= 60:
                            break
                except TuningDBError:
                    pass   # caught while the child was still creating it
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.join(10)
    assert child.exitcode == -signal.SIGKILL
    with TuningDB(path) as db:
        indices = [r.config_index for r in db.records()]
        assert len(indices) >= 60 and len(indices) % 10 == 0   # whole batches only
        assert indices == list(range(len(indices)))              # and none lost before the last
        assert [r.status for r in db.runs()] == ["running"]      # it never finished
        with db._engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"
        run_id = start(db)                                       # and it takes new writes
        db.add_records(run_id, [record(10**6)])
        assert len(db.records()) == len(indices) + 1
