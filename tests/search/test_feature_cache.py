"""The IR features of configs are lowered once: kept in memory for the process and on disk for
the next one (keyed by autotune's source digest), so a resumed tune or a transfer does not lower
its records again, and an edited template never reuses old features."""
import numpy as np
import pytest

import autotune
from autotune import kernel_cache
from autotune.kernel_cache import MemoryCache
from autotune.search import feature_cache
from autotune.search.tune import _resume, tune
from tuning_db import TuningDB


@pytest.fixture
def lowered(monkeypatch, tmp_path):
    """The config indices featurized by lowering, in a private disk cache and an empty memory."""
    calls = []
    real = feature_cache.config_features
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(feature_cache, "config_features", lambda t, i: calls.append(i) or real(t, i))
    new_process(monkeypatch)
    return calls


def new_process(monkeypatch):
    monkeypatch.setattr(feature_cache, "_memory", MemoryCache(feature_cache.KEPT_IN_MEMORY))


def test_features_come_from_memory_then_disk_and_never_from_an_edited_source(lowered, monkeypatch):
    task = autotune.create_task("matmul", M=37, N=53, K=29)
    want = [feature_cache.config_features(task, i) for i in (0, 5, 9)]
    lowered.clear()
    got = feature_cache.features_of(task, [0, 5, 9])
    assert lowered == [0, 5, 9] and all(np.array_equal(g, w) for g, w in zip(got, want))
    assert feature_cache.features_of(task, [9, 0]) and lowered == [0, 5, 9]          # memory
    new_process(monkeypatch)
    again = feature_cache.features_of(autotune.create_task("matmul", M=37, N=53, K=29), [0, 5, 9])
    assert lowered == [0, 5, 9] and all(np.array_equal(g, w) for g, w in zip(again, want))   # disk
    new_process(monkeypatch)
    monkeypatch.setattr(kernel_cache, "compiler_digest", lambda: "an edited autotune")
    feature_cache.features_of(task, [5])
    assert lowered == [0, 5, 9, 5]


def test_a_corrupt_disk_entry_is_lowered_again(lowered, monkeypatch, tmp_path):
    task = autotune.create_task("matmul", M=37, N=53, K=29)
    want = feature_cache.features_of(task, [3])[0]
    for entry in (tmp_path / "cache").rglob("*.o"):
        entry.write_bytes(b"\0" * len(entry.read_bytes()))
    new_process(monkeypatch)
    got = feature_cache.features_of(task, [3])[0]
    assert lowered == [3, 3] and np.array_equal(got, want)


def test_a_resumed_tune_does_not_lower_its_records_again(lowered, monkeypatch, tmp_path, index_cost):
    db = str(tmp_path / "t.db")
    task = autotune.create_task("matmul", M=37, N=53, K=29)
    tune(task, trials=24, db=db, seed=0, measurer=index_cost, batch_size=12)
    with TuningDB(db) as database:
        new_process(monkeypatch)
        _resume(autotune.create_task("matmul", M=37, N=53, K=29), "xgb", database, 0, False)
        first = len(lowered)
        new_process(monkeypatch)
        tuner, _ = _resume(autotune.create_task("matmul", M=37, N=53, K=29), "xgb", database, 0, False)
    assert len(lowered) == first and tuner._fitted and len(tuner.rows) == 24


def test_features_of_a_task_with_constant_inputs_are_kept_apart(lowered, monkeypatch):
    """A blocked conv with its weights constant is featurized without its weight repacking (hoisted
    out, as it is measured): another kernel than the plain task's config, kept under its own key."""
    def conv(constant=()):
        task = autotune.create_task("conv2d_grouped", N=1, C=16, H=15, W=15, F=32, KH=3, KW=3, stride=1,
                                    padding=1, dilation=1, groups=1)
        task.set_constant_inputs(constant)
        return task

    plain, hoisted = conv(), conv((1,))
    index = next(i for i in range(len(plain.config_space))
                 if plain.config(i)["algorithm"].val == "nchwc" and plain.is_valid(i))
    want = [feature_cache.config_features(t, index) for t in (plain, hoisted)]
    assert not np.array_equal(*want)
    lowered.clear()
    got = [feature_cache.features_of(t, [index])[0] for t in (plain, hoisted)]
    new_process(monkeypatch)
    again = [feature_cache.features_of(t, [index])[0] for t in (conv(), conv((1,)))]
    assert lowered == [index, index]                                    # each lowered once, then read from disk
    assert all(np.array_equal(g, w) for g, w in zip(got + again, want + want))


def test_a_tune_keeps_its_records_features_for_the_next_process(lowered, monkeypatch, tmp_path, index_cost):
    """What the tuner featurized to rank a pool, for the configs it measured, is on disk when the
    next process transfers or resumes from those records: nothing is lowered for them again."""
    db = str(tmp_path / "t.db")
    tune(autotune.create_task("matmul", M=37, N=53, K=29), trials=24, db=db, seed=0, measurer=index_cost,
         batch_size=8)
    with TuningDB(db) as database:
        records = database.records(autotune.create_task("matmul", M=37, N=53, K=29).workload_key)
    task = autotune.create_task("matmul", M=37, N=53, K=29)
    indices = [task.config_space.from_json(r.config).index for r in records]
    new_process(monkeypatch)
    lowered.clear()
    got = feature_cache.features_of(task, indices)
    assert len(indices) == 24 and lowered == []
    assert all(np.array_equal(g, feature_cache.config_features(task, i)) for g, i in zip(got, indices))
