"""Claims with leases: tuners sharing one database never measure a config twice, a killed
tuner's claims expire, and a database of schema version 1 is upgraded by a writer."""
from __future__ import annotations

import multiprocessing
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tuning_db import SCHEMA_VERSION, TuningDB
from tuning_db.migrate import VERSION_TABLE

sys.path.insert(0, str(Path(__file__).parent))   # the spawned children import their bodies from here
import tuning_db_workers as workers  # noqa: E402
from tuning_db_workers import TARGET, WORKLOAD, record  # noqa: E402

PARAMS = {"M": 7, "N": 11, "K": 13}


def start(db: TuningDB) -> int:
    return db.start_run(WORKLOAD, "matmul", PARAMS, "float32", TARGET, "random", 64, 1)


def test_a_claimed_or_measured_config_is_not_handed_to_another_run(db):
    first, second = start(db), start(db)
    assert db.claim(first, [1, 2, 3, 3], lease_s=60) == [1, 2, 3]
    db.add_records(first, [record(1)])
    assert db.claim(second, [1, 2, 4, 5], lease_s=60) == [4, 5]     # 1 measured, 2 claimed by `first`
    assert db.claim(first, [2, 4], lease_s=60) == [2]               # its own claim renews
    db.finish_run(first, 1)                                         # releases 2 and 3, unmeasured
    assert db.claim(second, [2, 3], lease_s=60) == [2, 3]


def test_an_expired_claim_can_be_taken(db):
    dead, alive = start(db), start(db)
    assert db.claim(dead, [7, 8], lease_s=1.0) == [7, 8]            # its claimer is killed: never finishes
    assert db.claim(alive, [7, 8], lease_s=60) == []                # (a lease long enough for a busy machine)
    time.sleep(1.1)
    assert db.claim(alive, [7, 8], lease_s=60) == [7, 8]


@pytest.mark.parametrize("lease", [0, -1, float("nan"), float("inf")])
def test_a_lease_must_be_positive_finite_seconds(tmp_path, lease):
    with TuningDB(tmp_path / "t.db") as db, pytest.raises(ValueError, match="lease_s"):
        db.claim(start(db), [1], lease_s=lease)


def test_three_concurrent_tuners_never_measure_a_config_twice(location):
    path = location
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    children = [ctx.Process(target=workers.tune_concurrently, args=(path, seed, 24, barrier)) for seed in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(300)
        assert child.exitcode == 0
    with TuningDB(path, readonly=True) as db:
        counts = Counter(r.config_index for r in db.records())
    assert sum(counts.values()) == 3 * 24                           # every tuner got its trials
    assert max(counts.values()) == 1, [i for i, n in counts.items() if n > 1]


def _as_version_1(path: Path) -> None:
    """Turn a current database into one as autotune with schema version 1 wrote it (no claims nor
    model_timings, and no Alembic version table: that autotune predates it)."""
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TABLE claims")
        raw.execute("DROP TABLE model_timings")
        raw.execute(f"DROP TABLE {VERSION_TABLE}")
        raw.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    raw.close()


def test_a_version_1_database_is_read_as_is_and_upgraded_by_a_writer(tmp_path):
    path = tmp_path / "old.db"
    db = TuningDB(path)
    run_id = start(db)
    db.add_records(run_id, [record(3), record(4)])
    db.finish_run(run_id, 2)
    db.close()
    _as_version_1(path)
    before = path.read_bytes()
    reader = TuningDB(path, readonly=True)
    assert [r.config_index for r in reader.records()] == [3, 4]
    reader.close()
    assert path.read_bytes() == before                              # a reader changes nothing
    writer = TuningDB(path)
    assert writer.claim(start(writer), [3, 5], lease_s=60) == [5]
    writer.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    raw.close()
