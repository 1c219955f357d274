"""Tuners with a deterministic fake measurer (no hardware): legality, no repeats, determinism,
resume from the database, early stopping, and the model-guided tuner's sample efficiency."""
import math
import time

import pytest

import autotune
from autotune.measure.types import ErrorKind, MeasureResult
from autotune.search import TUNERS, make_tuner
from autotune.search.tune import tune


class FakeMeasurer:
    """Cost is a smooth function of the matmul knobs, with one region that 'crashes'."""

    def __init__(self):
        self.measured = []

    def measure(self, task, indices):
        out = []
        for idx in indices:
            self.measured.append(idx)
            cfg = task.config(idx).to_json()["knobs"]
            bn, rows, kf = cfg["tile_x"][-1], cfg["tile_y"][-1], cfg["tile_k"][-1]
            if bn == 96 and rows == 8:
                out.append(MeasureResult((), ErrorKind.CRASH, "simulated crash", 0.01, time.time()))
                continue
            cost = 1e-3 * (1 + abs(math.log2(bn) - 5) + abs(rows - 6) / 2 + abs(math.log2(kf) - 2) / 2
                           + (0 if cfg["pack_b"] else 1.5) + (0 if cfg["parallel"] == "fused" else 0.7)
                           + (0 if cfg["unroll_rows"] else 0.3) + 0.05 * cfg["tile_y"][1])
            out.append(MeasureResult((cost,) * 3, ErrorKind.OK, "", 0.01, time.time()))
        return out

    def close(self):
        pass


@pytest.fixture
def task():
    return autotune.create_task("matmul", M=96, N=96, K=96)


def optimum(task):
    fm = FakeMeasurer()
    return min(r.cost for r in fm.measure(task, range(len(task.config_space))))


@pytest.mark.parametrize("name", sorted(TUNERS))
def test_tuners_propose_new_legal_configs_only(task, name, tmp_path):
    fm = FakeMeasurer()
    res = tune(task, trials=48, tuner=name, db=str(tmp_path / "t.db"), seed=1, measurer=fm, batch_size=8,
               confirm=False)
    assert res.trials == 48 == len(fm.measured) == len(set(fm.measured))
    assert all(0 <= i < len(task.config_space) for i in fm.measured)
    assert res.best_config is not None and res.best_seconds > 0 and res.best_gflops > 0


def test_xgb_measures_the_default_config_first(task, tmp_path):
    """So a tuned kernel is never slower than what an untuned load runs (the default, index 0)."""
    fm = FakeMeasurer()
    tune(task, trials=8, tuner="xgb", db=str(tmp_path / "t.db"), seed=5, measurer=fm, batch_size=8)
    assert fm.measured[0] == 0


class FirstOnly:
    """Records what is measured, every config at one cost."""

    def __init__(self):
        self.measured = []

    def measure(self, task, indices):
        self.measured += indices
        return [MeasureResult((1e-3,), ErrorKind.OK, "", 0.01, time.time()) for _ in indices]

    def close(self):
        pass


def test_with_constant_weights_xgb_measures_their_default_first(tmp_path):
    """A model's conv (weights constant) starts from the config an untuned model runs."""
    conv = autotune.create_task("conv2d_bias_relu", N=1, C=64, H=5, W=5, F=72, KH=3, KW=3, stride=1,
                                padding=1, dilation=1, groups=1)
    conv.set_constant_inputs([1, 2])
    fm = FirstOnly()
    tune(conv, trials=2, tuner="xgb", db=str(tmp_path / "t.db"), seed=5, measurer=fm, batch_size=2)
    assert fm.measured[0] == conv.default_index != 0
    assert conv.config(fm.measured[0])["algorithm"].val == "nchwc"


@pytest.mark.parametrize("name", ["random", "ga", "xgb"])
def test_same_seed_same_search(task, name, tmp_path):
    runs = []
    for k in range(2):
        fm = FakeMeasurer()
        tune(task, trials=40, tuner=name, db=str(tmp_path / f"{k}.db"), seed=3, measurer=fm, batch_size=8)
        runs.append(fm.measured)
    assert runs[0] == runs[1]


def test_resume_never_remeasures_and_keeps_the_best(task, tmp_path):
    db = str(tmp_path / "resume.db")
    first = FakeMeasurer()
    r1 = tune(task, trials=32, tuner="xgb", db=db, seed=0, measurer=first, batch_size=8, confirm=False)
    second = FakeMeasurer()
    r2 = tune(task, trials=32, tuner="xgb", db=db, seed=0, measurer=second, batch_size=8, confirm=False)
    assert not set(first.measured) & set(second.measured)
    assert r2.best_seconds <= r1.best_seconds


def test_early_stopping(task, tmp_path):
    fm = FakeMeasurer()
    res = tune(task, trials=400, tuner="grid", db=str(tmp_path / "e.db"), measurer=fm, early_stopping=16,
               batch_size=8)
    assert res.stopped_early and res.trials < 400


def test_grid_covers_a_small_space_exactly_once(tmp_path):
    t = autotune.create_task("batch_matmul", batch=2, M=5, N=9, K=3)
    fm = FakeMeasurerBM()
    res = tune(t, trials=10_000, tuner="grid", db=str(tmp_path / "g.db"), measurer=fm, batch_size=16, confirm=False)
    assert sorted(fm.measured) == [i for i in range(len(t.config_space)) if t.is_valid(i)]
    assert res.trials == len(fm.measured)


class FakeMeasurerBM(FakeMeasurer):
    def measure(self, task, indices):
        self.measured.extend(indices)
        return [MeasureResult((1e-3 * (1 + i % 7),), ErrorKind.OK, "", 0.0, time.time()) for i in indices]


def test_xgb_reaches_near_optimum_with_fewer_trials_than_random(task, tmp_path):
    best = optimum(task)

    def trials_to(name, seed):
        fm = FakeMeasurer()
        res = tune(task, trials=160, tuner=name, db=str(tmp_path / f"{name}{seed}.db"), seed=seed,
                   measurer=fm, batch_size=16)
        costs = [r.cost for _, r in res.history]
        running = [min(costs[: i + 1]) for i in range(len(costs))]
        hit = [i for i, c in enumerate(running) if c <= best * 1.1]
        return hit[0] + 1 if hit else 10_000

    xgb = sum(trials_to("xgb", s) for s in range(2))
    rnd = sum(trials_to("random", s) for s in range(2))
    assert xgb < rnd


def test_bad_arguments_are_named(task, tmp_path):
    with pytest.raises(ValueError, match="unknown tuner 'annealing'"):
        make_tuner("annealing", task)
    with pytest.raises(TypeError, match="expects a Task"):
        tune("matmul", db=str(tmp_path / "x.db"))
    with pytest.raises(ValueError, match="trials"):
        tune(task, trials=0, db=str(tmp_path / "x.db"), measurer=FakeMeasurer())


class KnobCostMeasurer:
    """A CUDA task measured without a GPU: cost falls with the knob values' indices' sum."""

    def measure(self, task, indices):
        out = []
        for idx in indices:
            cost = 1e-4 * (1 + sum(task.config_space.point2knob(idx)))
            out.append(MeasureResult((cost,) * 3, ErrorKind.OK, "", 0.01, time.time()))
        return out

    def close(self):
        pass


@pytest.mark.parametrize("op,params", [("matmul", dict(M=256, N=256, K=64)), ("softmax", dict(M=64, N=1000))])
def test_model_tuner_on_cuda_tasks(op, params, tmp_path):
    # features of GPU loop IR (bound loops, shared buffers, vthreads, cross-thread reductions)
    task = autotune.create_task(op, target="cuda -arch=sm_90", **params)
    res = tune(task, trials=24, tuner="xgb", db=str(tmp_path / "t.db"), seed=0, batch_size=8,
               measurer=KnobCostMeasurer())
    assert res.trials == 24 and res.best_config is not None
    assert res.target == "cuda -arch=sm_90"


def test_a_database_tune_opens_is_closed_and_one_passed_in_is_left_open(task, tmp_path, monkeypatch):
    """A notebook tuning in a loop from a path must not pile up connections; a TuningDB the
    caller opened stays usable after tune and tune_tasks return."""
    from autotune.search.tune import tune_tasks
    from tuning_db import TuningDB

    closed = []
    monkeypatch.setattr(TuningDB, "close", lambda self: closed.append(self))
    path = str(tmp_path / "c.db")
    tune(task, trials=4, tuner="random", db=path, seed=0, measurer=FakeMeasurer(), batch_size=4)
    tune_tasks([task], trials=4, tuner="random", db=path, seed=0, measurer=FakeMeasurer(), batch_size=4)
    assert len(closed) == 2
    mine = TuningDB(path)
    tune(task, trials=4, tuner="random", db=mine, seed=0, measurer=FakeMeasurer(), batch_size=4)
    tune_tasks([task], trials=4, tuner="random", db=mine, seed=0, measurer=FakeMeasurer(), batch_size=4)
    assert len(closed) == 2 and len(mine.records(task.workload_key, task.target_key)) == 16
