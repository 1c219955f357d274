"""The XGBoost cost model and the ranking metrics: synthetic and real (timed) data."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest

import autotune
from autotune.costmodel import (XGBCostModel, extract, group_spearman, normalise, pair_loss,
                                rankdata, spearman, top_k_recall)
from autotune.costmodel.xgb_model import _split
from autotune.schedules.cpu.matmul import default_schedule, hand_schedule


# ---- metrics ------------------------------------------------------------------------------------

def test_rankdata_averages_ties():
    assert rankdata([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]


def test_spearman_known_values():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ranks (1, 2.5, 2.5, 4) vs (1, 2, 3, 4): 4.5 / sqrt(4.5 * 5)
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / np.sqrt(22.5))
    assert spearman([1, 1, 1], [1, 2, 3]) == 0.0
    assert spearman([1], [1]) == 0.0
    with pytest.raises(ValueError):
        spearman([1, 2], [1, 2, 3])


def test_top_k_recall():
    true = [1, 2, 3, 4, 5]
    assert top_k_recall(true, true, 2) == 1.0
    assert top_k_recall([5, 4, 3, 2, 1], true, 2) == 0.0
    assert top_k_recall([0, 0, 1, 9, 0], true, 2) == 0.5      # finds 4, misses 5
    assert top_k_recall(true, true, 10) == 1.0                  # k clipped to n
    with pytest.raises(ValueError):
        top_k_recall(true, true, 0)


def test_group_spearman_averages_per_group():
    pred = np.array([1, 2, 3, 3, 2, 1.0])
    true = np.array([1, 2, 3, 1, 2, 3.0])
    assert group_spearman(pred, true, ["a"] * 3 + ["b"] * 3) == pytest.approx(0.0)
    assert group_spearman(pred, true, ["a"] * 6) < 0.5


def test_pair_loss_rewards_correct_order_and_margin():
    true, groups = np.array([1.0, 2.0, 3.0]), ["a"] * 3
    assert pair_loss(np.array([0.0, 0.0, 0.0]), true, groups) == pytest.approx(np.log(2))
    assert pair_loss(np.array([0.0, 5.0, 10.0]), true, groups) < 0.01
    assert pair_loss(np.array([10.0, 5.0, 0.0]), true, groups) > 5
    # pairs never cross groups: each group alone is perfectly ordered
    assert pair_loss(np.array([10.0, 20.0, 0.0, 1.0]), np.array([1.0, 2, 1, 2]), list("aabb")) < 0.35


# ---- synthetic data -----------------------------------------------------------------------------

def synthetic(n: int, seed: int, n_features: int = 60):
    """Three workloads whose speeds differ 1000x; within each, speed is a known function of X."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, n_features)).astype(np.float32)
    groups = np.array([f"w{i % 3}" for i in range(n)])
    scale = np.array([10.0 ** (3 * int(g[1])) for g in groups])
    speed = np.exp(2 * X[:, 0] - X[:, 1] + X[:, 2] * X[:, 3]) * scale
    return X, speed * np.exp(rng.normal(0, 0.05, n)), groups


@pytest.mark.parametrize("objective", ["rank", "reg"])
def test_synthetic_heldout_spearman(objective):
    X, y, g = synthetic(400, 0)
    Xt, yt, gt = synthetic(150, 1)
    model = XGBCostModel(objective, seed=0).fit(X, y, g)
    pred = model.predict(Xt)
    assert group_spearman(pred, yt, gt) > 0.8
    assert model.best_iteration < model.num_boost_round    # early stopping on the held-out split


def test_ranking_groups_keep_workloads_apart():
    """Workload b is 1000x faster and only has low x1, workload a only high x1; within each,
    higher x1 is faster. Pooled, "low x1 is fast" wins; ranked per workload, the opposite, which
    is the order the model must give a new workload."""
    rng = np.random.default_rng(0)
    x1 = np.concatenate([rng.uniform(0.5, 1.0, 60), rng.uniform(0.0, 0.5, 60)])
    X = np.column_stack([x1, rng.random(120)]).astype(np.float32)
    y = np.repeat([1.0, 1000.0], 60) * (1 + x1)
    new = np.column_stack([np.linspace(0, 1, 40), rng.random(40)]).astype(np.float32)
    grouped = XGBCostModel("rank", seed=0).fit(X, y, np.repeat(["a", "b"], 60))
    pooled = XGBCostModel("rank", seed=0).fit(X, y, ["one"] * 120)
    assert spearman(grouped.predict(new), new[:, 0]) > 0.7
    assert spearman(pooled.predict(new), new[:, 0]) < 0


def test_labels_normalised_per_workload():
    y = np.array([1.0, 2.0, 1000.0, 4000.0])
    assert normalise(y, np.array(["a", "a", "b", "b"])).tolist() == [0.5, 1.0, 0.25, 1.0]


def test_split_is_deterministic_and_holds_out_a_fifth():
    train, held = _split(100, seed=3)
    assert np.array_equal(train, _split(100, seed=3)[0]) and held.size == 20
    assert not set(train) & set(held) and len(set(train) | set(held)) == 100
    assert _split(49, seed=3)[1].size == 0      # too few rows: no early stopping, no hold-out


def test_same_seed_same_predictions_and_save_load_round_trip(tmp_path):
    X, y, g = synthetic(200, 2)
    a = XGBCostModel("rank", seed=7).fit(X, y, g)
    b = XGBCostModel("rank", seed=7).fit(X, y, g)
    assert np.array_equal(a.predict(X), b.predict(X))
    path = tmp_path / "model.json"
    a.save(path)
    json.loads(path.read_text())                                   # XGBoost's JSON format
    meta = json.loads((tmp_path / "model.json.meta.json").read_text())
    assert meta["objective"] == "rank" and meta["seed"] == 7
    loaded = XGBCostModel.load(path)
    assert np.array_equal(loaded.predict(X), a.predict(X))
    assert loaded.best_iteration == a.best_iteration


def test_ndcg_objective_trains():
    X, y, g = synthetic(200, 4)
    Xt, yt, gt = synthetic(90, 5)
    model = XGBCostModel("rank:ndcg", seed=0).fit(X, y, g)
    assert group_spearman(model.predict(Xt), yt, gt) > 0.3


def test_fit_rejects_bad_input():
    X, y, g = synthetic(20, 6)
    with pytest.raises(AssertionError):
        XGBCostModel().fit(X, np.where(np.arange(20) == 3, 0.0, y), g)
    with pytest.raises(AssertionError):
        XGBCostModel().fit(X, np.where(np.arange(20) == 3, np.inf, y), g)
    with pytest.raises(ValueError):
        XGBCostModel().fit(X, y[:10], g)
    with pytest.raises(ValueError):
        XGBCostModel(objective="binary:logistic")
    with pytest.raises(RuntimeError):
        XGBCostModel().predict(X)


# ---- real data: timed matmul schedules ----------------------------------------------------------

GRID = [(bn, r, kf) for bn in (8, 16, 32, 64) for r in (1, 2, 4, 8, 16) for kf in (1, 2, 4, 8)
        if r * kf <= 32]


def _run(fn, args, inner: int, budget: float = 2e-3) -> float:
    """Seconds per call over up to `inner` calls, stopping early past `budget` seconds."""
    done, t = 0, time.perf_counter()
    while done < inner:
        fn(*args)
        done += 1
        if time.perf_counter() - t > budget:
            break
    return (time.perf_counter() - t) / done


def _time_all(items: list[dict], passes: int = 3) -> None:
    """Interleaved passes, each the median of 3 runs; a config's time is its best pass.

    On a shared machine interference only ever slows a run down (often by a whole scheduler
    time slice for parallel kernels), so the best pass is the least disturbed estimate.
    """
    for item in items:
        item["fn"](*item["args"])
        item["inner"] = max(1, int(5e-4 / _run(item["fn"], item["args"], 1)))
        item["passes"] = []
    for _ in range(passes):
        for item in items:
            runs = [_run(item["fn"], item["args"], item["inner"]) for _ in range(3)]
            item["passes"].append(float(np.median(runs)))


def _real_dataset(seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    items = []
    for size in (128, 256):
        configs: list = [GRID[i] for i in rng.choice(len(GRID), 18, replace=False)] + [None, None]
        for cfg in configs:
            if cfg is None:
                s, args = default_schedule(size, size, size)
            else:
                s, args = hand_schedule(size, size, size, bn=cfg[0], rows=cfg[1], kfactor=cfg[2])
            arrays = (np.random.rand(size, size).astype("float32"),
                      np.random.rand(size, size).astype("float32"), np.zeros((size, size), "float32"))
            items.append({"workload": f"matmul_{size}", "flops": 2.0 * size ** 3, "cfg": cfg,
                          "features": extract(autotune.lower(s, args)),
                          "fn": autotune.build(s, args), "args": arrays})
    _time_all(items)
    return items


def _out_of_fold(X: np.ndarray, thr: np.ndarray, groups: np.ndarray, folds: int = 4) -> np.ndarray:
    """Each config's score from a model trained on the other folds (each workload spread evenly)."""
    rng = np.random.default_rng(1)
    fold = np.empty(thr.size, dtype=int)
    for key in dict.fromkeys(groups.tolist()):
        rows = rng.permutation(np.flatnonzero(groups == key))
        fold[rows] = np.arange(rows.size) % folds
    pred = np.empty(thr.size)
    for f in range(folds):
        train = fold != f
        model = XGBCostModel("rank", seed=0).fit(X[train], thr[train], groups[train])
        pred[~train] = model.predict(X[~train])
    return pred


def _decisive_pairs_ordered(pred: np.ndarray, thr: np.ndarray, groups: np.ndarray,
                            ratio: float = 1.5) -> tuple[float, int]:
    """Fraction of same-workload pairs at least `ratio` apart in speed that `pred` orders right.

    Timing noise on a shared machine reorders near-ties but not a 1.5x gap, so this measures the
    model, not the machine's load. Chance is 0.5.
    """
    right = total = 0
    for i in range(thr.size):
        for j in range(thr.size):
            if groups[i] == groups[j] and thr[i] >= ratio * thr[j]:
                total += 1
                right += int(pred[i] > pred[j])
    return right / total, total


def test_real_matmul_timings_rank_out_of_fold(monkeypatch):
    # Timed on one thread: on a shared 2-core machine a parallel kernel waits a whole scheduler
    # time slice for a descheduled thread (every call ~30 ms), which buries the schedule's effect.
    # Scored out of fold over all 40 configs, within each workload (the order the tuner uses):
    # a held-out 5 per workload, pooled across workloads, scored 0.26-0.54 from run to run.
    monkeypatch.setenv("AUTOTUNE_NUM_THREADS", "1")
    items = _real_dataset()
    X = np.stack([it["features"] for it in items])
    thr = np.array([it["flops"] / min(it["passes"]) for it in items])
    groups = np.array([it["workload"] for it in items])
    pred = _out_of_fold(X, thr, groups)
    per_workload = group_spearman(pred, thr, groups)
    ordered, pairs = _decisive_pairs_ordered(pred, thr, groups)
    print(f"\nreal matmul, 4-fold: per-workload Spearman {per_workload:.3f}, "
          f"{ordered:.2f} of {pairs} pairs 1.5x apart ordered")
    assert pairs >= 50
    assert per_workload > 0.6
    assert ordered > 0.8
