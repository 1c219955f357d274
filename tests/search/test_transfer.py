"""Transfer: records of other shapes of the same op warm-start the xgb tuner's cost models; and
the diverse batch pick. Measured with a deterministic fake whose cost depends on the knobs only,
so what is fast at one shape is fast at the next (as on real hardware, roughly)."""
import json
import math
import os
import random
import subprocess
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest

import autotune
from autotune.costmodel import MAX_KNOBS
from autotune.kernel_cache import MemoryCache
from autotune.measure.types import ErrorKind, MeasureResult
from autotune.search import feature_cache, transfer as transfer_module
from autotune.search.diverse import diverse_pick
from autotune.search.feature_cache import config_features
from autotune.search.transfer import UNLIKE, _pick, load_transfer, shape_distance
from autotune.search.tune import _resume, tune, tune_tasks
from tuning_db import TuningDB


class KnobCost:
    """Seconds from the matmul knobs: best at tile_x 32, 6 rows, tile_k 4, packed, fused."""

    def __init__(self):
        self.batches = []

    def measure(self, task, indices):
        self.batches.append(list(indices))
        return [MeasureResult((self.cost(task, i),) * 3, ErrorKind.OK, "", 0.01, time.time()) for i in indices]

    @staticmethod
    def cost(task, index):
        k = task.config(index).to_json()["knobs"]
        return 1e-3 * (1 + abs(math.log2(k["tile_x"][-1]) - 5) + abs(k["tile_y"][-1] - 6) / 2
                       + abs(math.log2(k["tile_k"][-1]) - 2) / 2 + (0 if k["pack_b"] else 1.5)
                       + (0 if k["parallel"] == "fused" else 0.7) + (0 if k["unroll_rows"] else 0.3))

    def close(self):
        pass


SHAPE_A = dict(M=96, N=96, K=96)
SHAPE_B = dict(M=80, N=112, K=72)


@pytest.fixture(scope="module")
def db_with_a(tmp_path_factory):
    """A database holding 32 fake-measured configs of matmul at shape A."""
    path = str(tmp_path_factory.mktemp("transfer") / "a.db")
    tune(autotune.create_task("matmul", **SHAPE_A), trials=32, db=path, seed=0, measurer=KnobCost(), batch_size=16)
    return path


def first_batch(db, seed, transfer):
    fake = KnobCost()
    res = tune(autotune.create_task("matmul", **SHAPE_B), trials=8, db=db, seed=seed, measurer=fake,
               batch_size=8, transfer=transfer)
    return res, fake.batches[0]


def test_transfer_pretrains_the_models_and_ranks_the_first_batch(db_with_a, tmp_path):
    task_b = autotune.create_task("matmul", **SHAPE_B)
    cost = [], []
    for seed in range(2):
        for k, transfer in enumerate((True, False)):
            db = str(tmp_path / f"b{seed}{transfer}.db")
            with TuningDB(db_with_a) as src, TuningDB(db) as dst:     # a fresh copy of A's records each time
                dst.import_jsonl(_export(src, tmp_path))
            res, batch = first_batch(db, seed, transfer)
            assert res.transferred == (32 if transfer else 0)
            assert batch[0] == 0                                   # the default config still comes first
            cost[k].append(np.mean([KnobCost.cost(task_b, i) for i in batch[1:]]))
    # pre-trained on A, the models pick far better configs of B than a random first batch
    assert sum(cost[0]) < 0.7 * sum(cost[1]), cost


def _export(db, tmp_path):
    path = tmp_path / "a.jsonl"
    db.export_jsonl(path)
    return path


def test_resume_builds_the_tuner_from_other_shapes_only_when_asked(db_with_a):
    task_b = autotune.create_task("matmul", **SHAPE_B)
    with TuningDB(db_with_a) as db:
        tuner, _ = _resume(task_b, "xgb", db, 0, transfer=True)
        assert tuner.transferred == 32 and tuner.ir_model.booster is not None
        assert set(tuner.transfer.groups) == {autotune.create_task("matmul", **SHAPE_A).workload_key}
        assert tuner.transfer.starts and all(task_b.is_valid(i) for i in tuner.transfer.starts)
        cold, _ = _resume(task_b, "xgb", db, 0, transfer=False)
        assert cold.transferred == 0 and cold.ir_model.booster is None
        # the task's own records are not transferred, nor are other ops'
        assert load_transfer(autotune.create_task("matmul", **SHAPE_A), db, 0) is None
        assert load_transfer(autotune.create_task("dense", **SHAPE_B), db, 0) is None


def test_tune_tasks_passes_transfer_through(db_with_a, tmp_path):
    task_b = autotune.create_task("matmul", **SHAPE_B)
    for transfer in (True, False):
        db = str(tmp_path / f"plan{transfer}.db")
        with TuningDB(db_with_a) as src, TuningDB(db) as dst:
            dst.import_jsonl(_export(src, tmp_path))
        [res] = tune_tasks([task_b], trials=8, db=db, seed=0, measurer=KnobCost(), batch_size=8, transfer=transfer)
        assert res.transferred == (32 if transfer else 0)


# ---- diverse pick --------------------------------------------------------------------------------

def _pool():
    """Six near-copies of one config with the best scores, then six distinct ones."""
    knobs = [[0, 0, 0, 0, 0, i] for i in range(6)] + [[i, i, i, i, i, 9] for i in range(1, 7)]
    scores = [10.0 - i * 0.1 for i in range(6)] + [5.0 - i * 0.1 for i in range(6)]
    return np.array(scores), np.array(knobs)


def _mean_distance(knobs):
    k = np.asarray(knobs)
    return np.mean([(a != b).mean() for i, a in enumerate(k) for b in k[i + 1:]])


def test_diverse_pick_spreads_the_batch():
    scores, knobs = _pool()
    plain = diverse_pick(scores, knobs, 6, weight=0.0)
    assert plain == [0, 1, 2, 3, 4, 5]                     # weight 0: the top six by score
    spread = diverse_pick(scores, knobs, 6, weight=0.5)
    assert len(set(spread)) == 6 and spread[0] == 0        # no repeats; the best is always first
    assert _mean_distance(knobs[spread]) > _mean_distance(knobs[plain]) + 0.3
    assert set(spread) & {0, 1, 2, 3, 4, 5} != set(spread)     # it left the cluster
    assert sorted(diverse_pick(scores, knobs, 40, weight=0.5)) == list(range(12))   # n past the pool: all
    assert diverse_pick([], np.zeros((0, 3)), 4, 0.5) == []


def test_cli_transfer_flag(db_with_a, tmp_path):
    """`autotune tune` through its entry point (real measurement, two trials) reports the warm start."""
    for flag, expected in (("--transfer", 32), ("--no-transfer", 0)):
        db = str(tmp_path / f"cli{flag}.db")
        with TuningDB(db_with_a) as src, TuningDB(db) as dst:
            dst.import_jsonl(_export(src, tmp_path))
        shape = ",".join(f"{k}={v}" for k, v in SHAPE_B.items())
        p = subprocess.run([sys.executable, "-m", "autotune.cli", "tune", "matmul", "--shape", shape, "--trials", "2",
                            "--db", db, "--seed", "0", "--json", flag], capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, AUTOTUNE_NUM_THREADS="2"))
        assert p.returncode == 0, p.stderr
        summary = json.loads(p.stdout)
        assert summary["transferred"] == expected and summary["trials"] == 2


def test_each_workload_gives_its_best_and_a_sample_of_the_rest():
    records = [SimpleNamespace(config={"knobs": {"x": i % 15}}, cost=1.0 + i) for i in range(20)]   # 5 repeats
    picked = _pick(records, 6, random.Random(0))
    assert len(picked) == 6 and len({r.config["knobs"]["x"] for r in picked}) == 6
    assert [r.cost for r in picked[:3]] == [1.0, 2.0, 3.0]          # the best half of the quota
    assert all(r.cost > 3.0 for r in picked[3:]) and picked != _pick(records, 6, random.Random(1))


def test_shape_distance_counts_size_ratios_and_unlike_parameters():
    a = dict(M=128, N=768, K=768, layout="NK")
    assert shape_distance(a, a) == 0
    assert shape_distance(a, dict(a, M=256)) < shape_distance(a, dict(a, M=512)) < shape_distance(a, dict(a, M=2048))
    assert shape_distance(a, dict(a, layout="KN")) == UNLIKE
    assert shape_distance(dict(s=(1, 2)), dict(s=(1, 4))) > 0 and shape_distance(dict(s=True), dict(s=False)) == UNLIKE


@pytest.fixture(scope="module")
def db_near_and_far(db_with_a, tmp_path_factory):
    """Shape A's records and those of a far shape (C), whose key sorts first."""
    path = str(tmp_path_factory.mktemp("transfer") / "ac.db")
    with TuningDB(db_with_a) as src, TuningDB(path) as dst:
        dst.import_jsonl(_export(src, tmp_path_factory.mktemp("export")))
    far = dict(M=1024, N=16, K=1024)
    tune(autotune.create_task("matmul", **far), trials=16, db=path, seed=0, measurer=KnobCost(), batch_size=16)
    return path, *(autotune.create_task("matmul", **shape).workload_key for shape in (SHAPE_A, far))


def test_transfer_takes_the_nearest_shapes_first(db_near_and_far, monkeypatch):
    path, near, far = db_near_and_far
    assert far < near                               # database order alone would take the far shape first
    monkeypatch.setattr(transfer_module, "MAX_RECORDS", transfer_module.MIN_PER_WORKLOAD)     # room for one workload
    with TuningDB(path) as db:
        rows = load_transfer(autotune.create_task("matmul", **SHAPE_B), db, seed=0)
    assert rows is not None and rows.workloads == 1 and set(rows.groups) == {near}


def test_transferred_features_are_lowered_once_per_process(db_near_and_far, monkeypatch, tmp_path):
    lowered = []
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(feature_cache, "_memory", MemoryCache(feature_cache.KEPT_IN_MEMORY))
    monkeypatch.setattr(feature_cache, "config_features", lambda t, i: lowered.append(i) or config_features(t, i))
    with TuningDB(db_near_and_far[0]) as db:
        first = load_transfer(autotune.create_task("matmul", **SHAPE_B), db, seed=0)
        assert first is not None and len(lowered) == len(first) > 0
        again = load_transfer(autotune.create_task("matmul", M=64, N=64, K=200), db, seed=0)   # another new shape
    assert again is not None and len(lowered) == len(first)          # the same records, nothing lowered again
    assert again.groups == first.groups and np.array_equal(again.ir, first.ir)


def _conv(**shape):
    return autotune.create_task("conv2d_grouped", **dict(dict(N=1, C=16, H=15, W=15, F=16, KH=3, KW=3, stride=1,
                                                              padding=1, dilation=1, groups=1), **shape))


def test_records_of_other_knob_layouts_are_placed_by_knob_name_and_value(tmp_path, index_cost):
    """A stride-2 conv's space has no Winograd knobs and lists its knobs in another order; its
    records still train the models, each knob where the new shape's space has it."""
    db = str(tmp_path / "conv.db")
    sources = [_conv(), _conv(F=32, stride=2)]
    assert len({len(t.config_space.knob_vector(0)) for t in sources}) == 2
    for t in sources:
        tune(t, trials=8, db=db, seed=0, measurer=index_cost, batch_size=8)
    task = _conv(H=13, W=13)
    with TuningDB(db) as database:
        rows = load_transfer(task, database, seed=0)
        want = [task.config_space.aligned_knob_vector(r.config["knobs"])
                for t in sources for r in database.records(t.workload_key, task.target_key, ok_only=True)]
    assert rows is not None and rows.workloads == 2 and len(rows) == len(want) == 16
    assert sorted(map(_key, rows.knobs)) == sorted(map(_key, want))
    knob_features = [v[:MAX_KNOBS] + [0.0] * (MAX_KNOBS - len(v[:MAX_KNOBS])) for v in want]   # the IR rows' tail
    assert sorted(map(_key, rows.ir[:, -MAX_KNOBS:])) == sorted(map(_key, knob_features))


def _key(vector):
    return repr([round(float(x), 4) for x in vector])


def test_records_are_featurized_with_the_new_tasks_constant_inputs(tmp_path, index_cost, monkeypatch):
    """A model's conv layer is tuned with its weights constant (their transforms hoisted out of the
    kernel, as `compile_model` runs it); in the next process the records of that layer are
    featurized the same way for another, so a transferred row and a candidate of the same config
    mean the same kernel."""
    db = str(tmp_path / "conv.db")
    source = _conv(F=24)
    source.set_constant_inputs((1,))
    tune(source, trials=12, db=db, seed=0, measurer=index_cost, batch_size=12)
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))                     # the next process
    monkeypatch.setattr(feature_cache, "_memory", MemoryCache(feature_cache.KEPT_IN_MEMORY))
    task = _conv(H=13, W=13)
    task.set_constant_inputs((1,))
    plain = _conv(F=24)
    with TuningDB(db) as database:
        rows = load_transfer(task, database, seed=0)
        indices = [source.config_space.from_json(r.config).index
                   for r in database.records(source.workload_key, task.target_key, ok_only=True)]
    assert rows is not None and len(rows) == len(indices) == 12
    hoisted = {_key(config_features(source, i)[:-MAX_KNOBS]) for i in indices}
    assert {_key(f[:-MAX_KNOBS]) for f in rows.ir} == hoisted
    assert hoisted != {_key(config_features(plain, i)[:-MAX_KNOBS]) for i in indices}
