"""The confirmation round: a task's best few configs and its default measured again, interleaved,
on a real SQLite database, with scripted timings so a lucky first measurement is known."""
import time

import pytest

import autotune
from autotune.measure.types import ErrorKind, MeasureResult
from autotune.search.confirm import confirm, finalists
from tuning_db import Record, TuningDB


def ok(seconds):
    return MeasureResult((seconds, seconds * 1.05, seconds * 0.95), ErrorKind.OK, "", 0.1, time.time())


@pytest.fixture
def tuned(tmp_path):
    """A task whose database holds one measurement per config: `lucky` timed fast once, `steady`
    next, the default last (measured first, in a slow phase), two more behind."""
    task = autotune.create_task("matmul", M=33, N=17, K=29)
    default = task.default_index
    others = [i for i in range(1, 40) if i != default and task.is_valid(i)][:4]
    lucky, steady, *rest = others
    db = TuningDB(tmp_path / "c.db")
    run = db.start_run(task.workload_key, task.name, task.params, task.dtype, task.target_key, "xgb", 8, 0)
    measured = {lucky: 1.0e-3, steady: 1.2e-3, default: 1.5e-3, rest[0]: 1.9e-3, rest[1]: 2.0e-3}
    db.add_records(run, [Record(task.workload_key, task.target_key, i, task.config(i).to_json(), ok(s).costs,
                                "ok", "", 0.1, time.time()) for i, s in measured.items()])
    yield task, db, dict(lucky=lucky, steady=steady, default=default)
    db.close()


def test_a_lucky_config_measured_again_loses_to_the_one_that_stays_fast(tuned):
    task, db, c = tuned
    truth = {c["lucky"]: 1.6e-3, c["steady"]: 1.2e-3, c["default"]: 1.3e-3}
    batches = []

    def measure(t, indices):
        assert t is task
        batches.append(list(indices))
        return [ok(truth[i]) for i in indices]

    assert finalists(task, db) == [c["lucky"], c["steady"], c["default"]]
    assert db.best(task.workload_key, task.target_key).config_index == c["lucky"]
    confirm(task, db, measure)
    assert batches[0] == [c["lucky"], c["steady"], c["default"]]
    # until each finalist was in two batches: the lucky one falls back and leaves the others
    assert 2 <= len(batches) <= 4 and all(sum(i in b for b in batches) >= 2 for i in batches[-1])
    best = db.best(task.workload_key, task.target_key)
    assert best.config_index == c["steady"] and best.cost == pytest.approx(1.2e-3)
    costs = {r.config_index: r.cost for r in db.records(task.workload_key, task.target_key)}
    assert costs[c["lucky"]] > costs[c["default"]] > costs[c["steady"]]


def test_failed_measurements_add_nothing_and_one_config_is_not_confirmed(tuned, tmp_path):
    """A finalist that fails when measured again keeps its record; two batches, then the round ends."""
    task, db, c = tuned
    before = {r.config_index: r.costs for r in db.records(task.workload_key, task.target_key)}

    def crash(t, indices):
        return [MeasureResult((), ErrorKind.RUNTIME_ERROR, "segfault", 0.1, time.time()) for _ in indices]

    assert sorted(confirm(task, db, crash)) == sorted([c["lucky"], c["steady"], c["default"]])
    assert {r.config_index: r.costs for r in db.records(task.workload_key, task.target_key)} == before
    lone = autotune.create_task("matmul", M=3, N=5, K=7)
    with TuningDB(tmp_path / "lone.db") as single:
        run = single.start_run(lone.workload_key, lone.name, lone.params, lone.dtype, lone.target_key, "xgb", 1, 0)
        single.add_records(run, [Record(lone.workload_key, lone.target_key, 0, lone.config(0).to_json(),
                                        ok(1e-3).costs, "ok", "", 0.1, time.time())])
        assert confirm(lone, single, crash) == []      # nothing to rank it against: nothing measured


class LuckyOnce:
    """Scripted timings: the second config the search measures is timed fast once (a lucky phase)
    and runs slowest after; every other config runs at its own steady time."""

    def __init__(self):
        self.seen, self.lucky = [], None

    def truth(self, index):
        return 3e-3 if index == self.lucky else 1e-3 * (1 + 0.01 * index)

    def measure(self, task, indices):
        out = []
        for i in indices:
            if i not in self.seen:
                self.seen.append(i)
                if len(self.seen) == 2:
                    self.lucky = i
                    out.append(ok(0.5e-3))
                    continue
            out.append(ok(self.truth(i)))
        return out

    def close(self):
        pass


@pytest.mark.parametrize("confirmed", [True, False])
@pytest.mark.parametrize("entry", ["tune", "tune_tasks"])
def test_tuning_ends_with_the_confirmation_round(entry, confirmed, tmp_path):
    """`tune` and `tune_tasks` serve a config timed in several batches, not one lucky batch;
    confirm=False keeps the search's own best."""
    task = autotune.create_task("matmul", M=33, N=17, K=29)
    m = LuckyOnce()
    db_path = str(tmp_path / "t.db")
    kwargs = dict(trials=6, tuner="grid", db=db_path, measurer=m, batch_size=3, confirm=confirmed)
    result = (autotune.tune(task, **kwargs) if entry == "tune" else autotune.tune_tasks([task], **kwargs)[0])
    searched = m.seen[:6]
    assert result.trials == 6 and m.lucky in searched
    steady = min((i for i in searched if i != m.lucky), key=m.truth)
    with TuningDB(db_path) as db:
        best = db.best(task.workload_key, task.target_key)
        lucky = db.ok_record(task.workload_key, task.target_key, m.lucky)
    if confirmed:
        assert best.config_index == steady and result.best_config == best.config
        assert result.best_seconds == pytest.approx(m.truth(steady))
        assert lucky.cost > best.cost and len(lucky.costs) >= 6       # timed again: fell back
    else:
        assert best.config_index == m.lucky and result.best_seconds == pytest.approx(0.5e-3)
        assert len(lucky.costs) == 3
