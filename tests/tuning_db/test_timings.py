"""Timings taken again, on real SQLite files and real PostgreSQL databases (the `location`
fixture): a config's timings measured again alone (`add_timings`), and its timings inside a
model (`add_model_timings`, `model_choices`), with the writers that add them at once."""
from __future__ import annotations

import math
import re
import sys
import threading
from pathlib import Path

import pytest

from tuning_db import TuningDBError

sys.path.insert(0, str(Path(__file__).parent))
from tuning_db_workers import MODEL, OTHER_MODEL, OTHER_TARGET, TARGET, WORKLOAD, record, start


def test_timings_added_to_a_config_move_its_cost_and_the_best(db):
    """A config timed once in a lucky phase leads; timed again, its record's cost is the median of
    all its timings, and the best is the config that stays fast."""
    run_id = start(db)
    db.add_records(run_id, [record(1, cost=1.0e-3), record(2, cost=1.2e-3), record(-3)])
    assert db.best(WORKLOAD, TARGET).config_index == 1
    assert db.add_timings(WORKLOAD, TARGET, 1, [1.5e-3, 1.6e-3, 1.5e-3, 1.4e-3]) == pytest.approx(1.4e-3)
    assert db.add_timings(WORKLOAD, TARGET, 2, [1.2e-3, 1.25e-3]) == pytest.approx(1.2e-3)
    best = db.best(WORKLOAD, TARGET)
    assert (best.config_index, best.cost, len(best.costs)) == (2, pytest.approx(1.2e-3), 5)
    assert db.records(WORKLOAD, TARGET)[0].costs == pytest.approx((1.0e-3, 1.1e-3, 0.9e-3, 1.5e-3, 1.6e-3,
                                                                    1.5e-3, 1.4e-3))
    assert {s.best_index for s in db.workloads()} == {2}
    assert db.ok_record(WORKLOAD, TARGET, 1).costs == db.records(WORKLOAD, TARGET)[0].costs   # what timings went to
    assert db.ok_record(WORKLOAD, TARGET, 3) is None and db.ok_record(WORKLOAD, OTHER_TARGET, 1) is None
    with pytest.raises(TuningDBError, match="no ok record of config 3"):
        db.add_timings(WORKLOAD, TARGET, 3, [1e-3])
    for bad in ([], [0.0], [math.inf], [-1e-3]):
        with pytest.raises(ValueError, match="add_timings: costs must be positive finite seconds"):
            db.add_timings(WORKLOAD, TARGET, 1, bad)


def test_in_model_timings_choose_each_workloads_config_per_model_and_target(db):
    """The config a model runs is the one fastest inside it, whatever its time alone; the times
    of one model, or on one target, decide nothing for another."""
    assert db.model_choices(MODEL, TARGET) == {}
    db.add_records(start(db), [record(1, cost=1.0e-3), record(2, cost=1.2e-3)])
    relu = "relu(N=3)float32"
    db.add_records(start(db, workload=relu, op="relu"), [record(5, workload=relu)])
    db.add_records(start(db, target=OTHER_TARGET), [record(1, target=OTHER_TARGET)])
    assert db.add_model_timings(MODEL, WORKLOAD, TARGET, 1, [2.0e-3, 2.2e-3]) == pytest.approx(2.1e-3)
    assert db.add_model_timings(MODEL, WORKLOAD, TARGET, 1, [1.9e-3]) == pytest.approx(2.0e-3)   # median of 3
    assert db.add_model_timings(MODEL, WORKLOAD, TARGET, 2, [1.5e-3]) == pytest.approx(1.5e-3)
    db.add_model_timings(MODEL, relu, TARGET, 5, [1e-4])
    assert db.model_choices(MODEL, TARGET) == {WORKLOAD: 2, relu: 5}
    assert db.best(WORKLOAD, TARGET).config_index == 1   # a record's cost is its time alone, unchanged
    db.add_model_timings(OTHER_MODEL, WORKLOAD, TARGET, 1, [1e-3])
    db.add_model_timings(OTHER_MODEL, WORKLOAD, TARGET, 2, [1e-3])   # a tie: the lower index
    assert db.model_choices(OTHER_MODEL, TARGET) == {WORKLOAD: 1}
    assert db.model_choices(MODEL, TARGET) == {WORKLOAD: 2, relu: 5}
    assert db.model_choices(MODEL, OTHER_TARGET) == {}
    db.add_model_timings(MODEL, WORKLOAD, OTHER_TARGET, 1, [9e-3])
    assert db.model_choices(MODEL, OTHER_TARGET) == {WORKLOAD: 1}
    assert db.model_choices(MODEL, TARGET) == {WORKLOAD: 2, relu: 5}
    assert db.model_choices(MODEL, "no such target") == {}


def test_in_model_timings_refuse_bad_costs_keys_and_configs_without_an_ok_record(db):
    db.add_records(start(db), [record(1), record(-3)])
    for bad in ([], [0.0], [math.inf], [math.nan], [-1e-3]):
        with pytest.raises(ValueError, match="add_model_timings: costs must be positive finite seconds"):
            db.add_model_timings(MODEL, WORKLOAD, TARGET, 1, bad)
    for bad_key in ("", "x" * 65, None):
        with pytest.raises(ValueError, match="model_key must be a non-empty string of at most 64"):
            db.add_model_timings(bad_key, WORKLOAD, TARGET, 1, [1e-3])
    for index, workload, target in ((3, WORKLOAD, TARGET), (2, WORKLOAD, TARGET), (1, "relu(N=3)float32", TARGET),
                                    (1, WORKLOAD, OTHER_TARGET)):
        with pytest.raises(TuningDBError, match=f"no ok record of config {index} of {re.escape(repr(workload))}"):
            db.add_model_timings(MODEL, workload, target, index, [1e-3])
    assert db.model_choices(MODEL, TARGET) == {}


def test_in_model_timings_added_at_once_by_many_writers_are_all_kept(db):
    """Writers that find no row and all create it, or all append to it, lose none of the timings."""
    db.add_records(start(db), [record(1)])
    from sqlalchemy import select

    from tuning_db.schema import ModelTimingRow

    barrier = threading.Barrier(8)

    def add(i: int) -> None:
        barrier.wait()
        for j in range(5):
            db.add_model_timings(MODEL, WORKLOAD, TARGET, 1, [1e-3 * (1 + i * 5 + j)])

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with db._reading() as session:
        (costs,) = session.scalars(select(ModelTimingRow.costs)).all()
    assert sorted(costs) == pytest.approx([1e-3 * k for k in range(1, 41)])


def test_in_model_timings_add_to_the_row_another_writer_created(db, monkeypatch):
    from sqlalchemy.orm import Session

    db.add_records(start(db), [record(1)])
    db.add_model_timings(MODEL, WORKLOAD, TARGET, 1, [2e-3])
    real, looks = Session.get, []

    def first_look_misses(self, *args, **kwargs):   # as if the other writer committed just after our look
        looks.append(args)
        return None if len(looks) == 1 else real(self, *args, **kwargs)

    monkeypatch.setattr(Session, "get", first_look_misses)
    assert db.add_model_timings(MODEL, WORKLOAD, TARGET, 1, [4e-3, 3e-3]) == pytest.approx(3e-3)
    assert len(looks) == 2   # the insert hit the key; the row was read again and added to
    monkeypatch.undo()
    db.add_records(start(db), [record(2)])   # the transaction was committed whole
    db.add_model_timings(MODEL, WORKLOAD, TARGET, 2, [2.5e-3])
    assert db.model_choices(MODEL, TARGET) == {WORKLOAD: 2}
