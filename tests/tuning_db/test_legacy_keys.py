"""Databases written before float parameters were floats still work: schema version 2, keys like
`layer_norm(M=5,N=13,eps=1:-5)float32` and params {"eps": [1, -5]}.

fixtures/legacy_v2.sql is the SQL dump (sqlite3's iterdump) of a database that `autotune tune`
of that version filled: layer_norm with eps=1:-5, rms_norm and attention with their default eps
and scale, pad with value=-15:-1 (-1.5), and matmul. Each test rebuilds it as a file."""
from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import autotune
from autotune import runtime
from autotune.cli import run
from autotune.legacy_keys import current_workload, upgrade
from autotune.measure.types import ErrorKind, MeasureResult
from tuning_db import SCHEMA_VERSION, TuningDB

FIXTURE = Path(__file__).parent / "fixtures" / "legacy_v2.sql"
RENAMED = {   # legacy key -> key today, and how many records the dump holds of it
    "layer_norm(M=5,N=13,eps=1:-5)float32": ("layer_norm(M=5,N=13,eps=1e-05)float32", 6),
    "rms_norm(M=3,N=17,eps=1:-6)float32": ("rms_norm(M=3,N=17,eps=1e-06)float32", 3),
    "pad(shape=5:7,pad_before=1:0,pad_after=0:2,value=-15:-1)float32":
        ("pad(shape=5:7,pad_before=1:0,pad_after=0:2,value=-1.5)float32", 3),
    "attention(batch=1,heads=2,seq_q=3,seq_k=5,head_dim=4,causal=0,scale=0:0)float32":
        ("attention(batch=1,heads=2,seq_q=3,seq_k=5,head_dim=4,causal=0,scale=0.0)float32", 2),
}
MATMUL = "matmul(M=4,N=3,K=5)float32"        # no float parameter: its key stays
LOADS = [("layer_norm", dict(M=5, N=13, eps=1e-5)), ("rms_norm", dict(M=3, N=17)),
         ("pad", dict(shape=(5, 7), pad_before=(1, 0), pad_after=(0, 2), value=-1.5)),
         ("attention", dict(batch=1, heads=2, seq_q=3, seq_k=5, head_dim=4, causal=0)),
         ("matmul", dict(M=4, N=3, K=5))]


@pytest.fixture
def legacy(tmp_path, monkeypatch) -> Path:
    """The dumped database as a file, its target key this machine's (the dump's CPU may not be)."""
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "legacy.db"
    with contextlib.closing(sqlite3.connect(path)) as raw:
        raw.executescript(FIXTURE.read_text())
        raw.execute("UPDATE targets SET key = ?", (here(),))
        raw.commit()
    runtime.clear_caches()
    yield path
    runtime.clear_caches()


def here() -> str:
    """This machine's llvm target key."""
    return autotune.create_task("matmul", M=4, N=3, K=5).target_key


def cli_json(*args: str) -> object:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run([*args, "--json"]) == 0
    return json.loads(out.getvalue())


def raw_rows(path: Path, sql: str) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(path)) as raw:
        return raw.execute(sql).fetchall()


def test_the_fixture_is_what_that_version_wrote(legacy):
    assert raw_rows(legacy, "SELECT value FROM meta WHERE key = 'schema_version'") == [("2",)]
    assert dict(raw_rows(legacy, "SELECT key, params FROM workloads"))["layer_norm(M=5,N=13,eps=1:-5)float32"] == \
        '{"M": 5, "N": 13, "eps": [1, -5]}'


def test_readers_find_legacy_records_under_todays_keys_and_change_nothing(legacy):
    before = legacy.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # a nearest or default fallback would warn
        for op, params in LOADS:
            assert autotune.load(op, db=str(legacy), **params).provenance == "tuned", op
    rows = cli_json("db", "workloads", "--db", str(legacy))
    assert sorted(r["key"] for r in rows) == sorted([new for new, _ in RENAMED.values()] + [MATMUL])
    assert next(r for r in rows if r["op"] == "layer_norm")["params"] == {"M": 5, "N": 13, "eps": 1e-5}
    assert all(r["best_rate"] for r in rows)          # their tasks are made from today's params
    shown = cli_json("db", "best", "layer_norm", "--shape", "M=5,N=13,eps=1e-05", "--db", str(legacy))
    assert shown["workload"] == "layer_norm(M=5,N=13,eps=1e-05)float32" and shown["trials"] == 6
    assert len(cli_json("db", "history", "layer_norm(M=5,N=13,eps=1e-05)float32", "--db", str(legacy))) == 6
    assert legacy.read_bytes() == before              # readers never write, so the file stays version 2


def test_a_writer_renames_legacy_workloads_once(legacy):
    with TuningDB(legacy) as db:
        assert upgrade(db) == len(RENAMED)
        assert upgrade(db) == 0                       # idempotent: every later writer finds nothing to do
        target = here()
        for old, (new, count) in RENAMED.items():
            assert len(db.records(new, target)) == count and db.records(old, target) == []
        assert len(db.records(MATMUL, target)) == 4
        params = {w.key: w.params for w in db.workloads()}
    assert params["layer_norm(M=5,N=13,eps=1e-05)float32"] == {"M": 5, "N": 13, "eps": 1e-5}
    assert params["attention(batch=1,heads=2,seq_q=3,seq_k=5,head_dim=4,causal=0,scale=0.0)float32"]["scale"] == 0.0
    assert raw_rows(legacy, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]


class Recording:
    """A measurer that notes which configs it was asked to measure (no hardware needed)."""

    def __init__(self) -> None:
        self.measured: list[int] = []

    def measure(self, task, indices):
        self.measured += indices
        return [MeasureResult((1e-3,), ErrorKind.OK, "", 0.0, time.time()) for _ in indices]

    def close(self) -> None:
        pass


def test_tuning_resumed_on_a_legacy_database_measures_only_new_configs(legacy):
    legacy_indices = {i for (i,) in raw_rows(legacy, "SELECT config_index FROM records WHERE workload_id = 1")}
    task = autotune.create_task("layer_norm", M=5, N=13, eps=1e-5)
    meas = Recording()
    result = autotune.tune(task, trials=4, tuner="grid", db=str(legacy), measurer=meas, confirm=False)
    assert len(meas.measured) == 4 and not set(meas.measured) & legacy_indices
    assert result.best_seconds < 1e-3                 # the legacy records' best (microseconds) is kept
    with TuningDB(legacy, readonly=True) as db:
        assert len(db.records(task.workload_key, task.target_key)) == len(legacy_indices) + 4
        assert [r.trials for r in db.workloads(op="layer_norm")] == [10]     # one workload, not two
    keys = {r["key"] for r in cli_json("db", "workloads", "--db", str(legacy))}
    assert keys == {new for new, _ in RENAMED.values()} | {MATMUL}


def test_a_legacy_jsonl_export_imports_under_todays_keys_once(legacy, tmp_path):
    with TuningDB(legacy, readonly=True) as old:
        old.export_jsonl(tmp_path / "old.jsonl")
    new = str(tmp_path / "new.db")
    for _ in range(2):                                # the second import adds nothing
        assert run(["db", "import", str(tmp_path / "old.jsonl"), "--db", new]) == 0
    with TuningDB(new, readonly=True) as db:
        counts = {w.key: w.trials for w in db.workloads()}
    assert counts == {**{new_key: n for new_key, n in RENAMED.values()}, MATMUL: 4}


def test_merging_keeps_every_record_once(tmp_path):
    """Two stored workloads that map to one key (eps=10:-6 is eps=1:-5) become one."""
    with TuningDB(tmp_path / "t.db") as db:
        target = "llvm -mcpu=x"
        for key, eps, indices in (("layer_norm(M=4,N=8,eps=1:-5)float32", [1, -5], (0, 1)),
                                  ("layer_norm(M=4,N=8,eps=10:-6)float32", [10, -6], (1, 2))):
            run_id = db.start_run(key, "layer_norm", {"M": 4, "N": 8, "eps": eps}, "float32", target, "grid", 2)
            db.add_records(run_id, [autotune_record(key, target, i) for i in indices])
            for i in indices:       # timed inside a model too: config 1 under both keys
                db.add_model_timings("m", key, target, i, [3e-3, 3e-3] if key.endswith("1:-5)float32") else [i * 1e-3])
        assert upgrade(db) == 2
        (w,) = db.workloads()
        assert (w.key, w.params, w.trials) == ("layer_norm(M=4,N=8,eps=1e-05)float32", {"M": 4, "N": 8, "eps": 1e-5}, 3)
        assert len(db.runs(w.key)) == 2 and db.measured_indices(w.key, target) == {0, 1, 2}
        # config 1's timings joined (median 3 ms of 3, 3, 1), so config 2's 2 ms is the model's choice
        assert db.model_choices("m", target) == {w.key: 2}


def autotune_record(key: str, target: str, index: int):
    """A record whose timestamp is its index: the same index under both keys is the same record."""
    from tuning_db import Record

    return Record(key, target, index, {"index": index}, (1e-3,), "ok", "", 0.0, float(index))


@pytest.mark.parametrize("params, new", [
    ({"M": 4, "N": 8, "eps": [1, -5]}, {"M": 4, "N": 8, "eps": 1e-5}),
    ({"M": 4, "N": 8, "eps": 0}, {"M": 4, "N": 8, "eps": 0.0}),           # a whole value was a plain int
    ({"M": 4, "N": 8, "eps": [25, -7]}, {"M": 4, "N": 8, "eps": 2.5e-6}),
    ({"M": 4, "N": 8, "eps": 1e-5}, None),                                  # already today's
    ({"M": 4, "N": 8, "eps": [1, 400]}, None),                              # no finite float: no task made it
    ({"M": 4, "N": 8, "eps": [1, -5, 0]}, None),
])
def test_current_workload_of_stored_params(params, new):
    got = current_workload("layer_norm", params, "float32")
    assert (got and got[1]) == new
    if new is not None:
        assert got[0] == autotune.create_task("layer_norm", **new).workload_key


def test_ops_without_float_parameters_keep_their_keys():
    assert current_workload("matmul", {"M": 4, "N": 3, "K": 5}, "float32") is None
    assert current_workload("sum", {"shape": [5, 7], "axes": 1, "keepdims": 0}, "float32") is None
    assert current_workload("no_such_op", {"eps": [1, -5]}, "float32") is None


def test_ops_compute_with_the_legacy_records(legacy):
    x = np.arange(35, dtype=np.float32).reshape(5, 7)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = autotune.ops.pad(x, ((1, 0), (0, 2)), value=-1.5, db=str(legacy))
    np.testing.assert_array_equal(y, np.pad(x, ((1, 0), (0, 2)), constant_values=-1.5))
