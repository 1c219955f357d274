"""Tuning benchmark: matmul float32 tuned with `xgb` and with `random`, several seeds, one run.

Prints, against numpy measured in the same run: best GFLOP/s and its ratio to numpy; the trials
each tuner needed to reach 90% of the best throughput found by any run; the cost model's Spearman
rank correlation and top-k recall on measured configs held out from its training; and the tuner's
own overhead per trial (wall time minus the time spent calling kernels).

    python benchmarks/tune_matmul.py [--size 1024] [--trials 256] [--seeds 3]
"""
from __future__ import annotations

import argparse
from collections import Counter
import os
import platform
import random
import tempfile
import time

import numpy as np

import autotune
from autotune.costmodel import XGBCostModel, spearman, top_k_recall
from autotune.measure import MeasureOptions, Measurer
from autotune.search.feature_cache import config_features
from autotune.search.tune import tune
from timing import seconds


def numpy_seconds(n: int, repeat: int = 10) -> float:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    c = a @ b
    return seconds(lambda: np.matmul(a, b, out=c), repeat)


def trials_to_reach(costs: list[float], target: float, skip: list[bool] | None = None) -> int | None:
    """The trial (1-based) at which the best cost so far first reaches `target`; trials marked
    in `skip` count as trials but their results do not (to leave out the default config)."""
    best = float("inf")
    for i, c in enumerate(costs, 1):
        if not (skip and skip[i - 1]):
            best = min(best, c)
        if best <= target:
            return i
    return None


def model_quality(task, history, seed: int = 0, k: int = 10) -> tuple[float, float]:
    """Spearman and top-k recall of the IR cost model on 30% of the measured configs held out."""
    best: dict[int, float] = {}
    for i, r in history:
        if r.ok:
            best[i] = min(best.get(i, r.cost), r.cost)
    rows = sorted(best.items())
    random.Random(seed).shuffle(rows)
    cut = int(len(rows) * 0.7)
    train, test = rows[:cut], rows[cut:]
    model = XGBCostModel("rank", seed=seed)
    X = np.stack([config_features(task, i) for i, _ in train])
    model.fit(X, np.array([1 / c for _, c in train]), [task.workload_key] * len(train))
    pred = model.predict(np.stack([config_features(task, i) for i, _ in test]))
    true = np.array([1 / c for _, c in test])
    return spearman(pred, true), top_k_recall(pred, true, k)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--trials", type=int, default=256)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--tuners", default="xgb,random")
    args = ap.parse_args()
    n = args.size
    task = autotune.create_task("matmul", M=n, N=n, K=n)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"target {task.target_key}")
    print(f"task {task.workload_key}: {len(task.config_space)} configs; {args.trials} trials x {args.seeds} seeds")
    np_s = numpy_seconds(n)
    runs: dict[tuple[str, int], dict] = {}
    with Measurer(MeasureOptions()) as meas, tempfile.TemporaryDirectory() as tmp:
        for tuner in args.tuners.split(","):
            for seed in range(args.seeds):
                t0 = time.perf_counter()
                res = tune(task, trials=args.trials, tuner=tuner, db=os.path.join(tmp, f"{tuner}{seed}.db"),
                           seed=seed, measurer=meas)
                wall = time.perf_counter() - t0
                kernel = sum(r.run_seconds for _, r in res.history)
                costs = [r.cost for _, r in res.history]
                runs[(tuner, seed)] = {"res": res, "costs": costs, "overhead": (wall - kernel) / res.trials}
                kinds = Counter(r.error_kind.value for _, r in res.history if not r.ok)
                print(f"  {tuner:6s} seed {seed}: best {res.best_gflops:7.1f} GFLOP/s, errors {dict(kinds) or 0}, "
                      f"wall {wall:6.0f} s, overhead {runs[(tuner, seed)]['overhead']:.3f} s/trial", flush=True)
    best_cost = min(min(r["costs"]) for r in runs.values())
    flop = task.flop
    print(f"\nnumpy: {flop / np_s / 1e9:.1f} GFLOP/s; best found: {flop / best_cost / 1e9:.1f} GFLOP/s "
          f"({np_s / best_cost:.2f}x numpy)")
    for tuner in args.tuners.split(","):
        mine = [runs[(tuner, s)] for s in range(args.seeds)]
        reach = [trials_to_reach(r["costs"], best_cost / 0.9) for r in mine]
        searched = [trials_to_reach(r["costs"], best_cost / 0.9, [i == 0 for i, _ in r["res"].history]) for r in mine]
        best = [flop / min(r["costs"]) / 1e9 for r in mine]
        print(f"{tuner:6s}: best GFLOP/s per seed {[round(b, 1) for b in best]} "
              f"(median {np.median(best):.1f}, {np.median(best) * 1e9 / flop * np_s:.2f}x numpy); "
              f"trials to 90% of best {reach} (not counting the default config: {searched}); overhead {np.mean([r['overhead'] for r in mine]):.3f} s/trial")
    history = [p for r in runs.values() for p in r["res"].history]
    rho, recall = model_quality(task, history)
    print(f"cost model on held-out measured configs ({len([1 for _, r in history if r.ok])} ok records, 30% held out): "
          f"Spearman {rho:.3f}, top-10 recall {recall:.2f}")


if __name__ == "__main__":
    main()
