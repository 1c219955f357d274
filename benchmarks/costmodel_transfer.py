"""Transfer benchmark: what records of other shapes of an op save when a new shape is tuned.

Tunes the op's training shapes (xgb, `--trials` each) into one fresh database; then tunes each
held-out shape (odd sizes: every split has a tail) twice with the same seed, once warm-started
from that database and once cold, each run in its own database. Prints, per held-out shape, the
trials each run needed to reach 90% of the best throughput either run found (the issue's target:
within 16 with transfer; every config of both runs is timed once more at the end, together,
and keeps its best time), and the IR cost model's Spearman and top-10 recall on the shape's
measured configs when trained on the other shapes only, on the shape's first batch only, and on
both. Prints; asserts nothing. Kernels run on `AUTOTUNE_NUM_THREADS` threads (default here: 1,
which times far more steadily on a shared machine).

    python benchmarks/costmodel_transfer.py [--op matmul] [--trials 48] [--held-trials 32] [--seed 0]
                                            [--train-db PATH]   (kept; shapes it holds are not re-tuned)
"""
from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

import numpy as np

import autotune
from autotune.costmodel import XGBCostModel, spearman, top_k_recall
from autotune.measure import MeasureOptions, Measurer
from autotune.search.feature_cache import config_features
from autotune.search.transfer import load_transfer
from autotune.search.tune import tune
from tuning_db import TuningDB

SHAPES = {   # op: (training shapes: some with tails, as a database would hold; held-out shapes: odd)
    "matmul": ([dict(M=128, N=128, K=128), dict(M=200, N=136, K=176), dict(M=256, N=256, K=256),
                dict(M=144, N=288, K=104), dict(M=360, N=120, K=240)],
               [dict(M=199, N=257, K=173), dict(M=321, N=143, K=229), dict(M=97, N=389, K=131)]),
    "dense": ([dict(M=128, N=256, K=128), dict(M=200, N=136, K=176), dict(M=192, N=192, K=320),
               dict(M=360, N=120, K=240)],
              [dict(M=199, N=257, K=173), dict(M=321, N=143, K=229)]),
}
FIRST_BATCH = 16


def trials_to(curve: list[float | None], target_cost: float, skip_first: bool = False) -> int | None:
    """1-based trial at which the best cost so far reaches `target_cost` (None: never); costs
    are None for failed trials; `skip_first` leaves out the first (the default config)."""
    best = float("inf")
    for n, cost in enumerate(curve, 1):
        if cost is not None and not (skip_first and n == 1):
            best = min(best, cost)
        if best <= target_cost:
            return n
    return None


def remeasure(task, runs: dict, meas: Measurer) -> dict[int, float]:
    """Each config's best time over its tuning measurement and one more, taken for all configs of
    both runs together in a shuffled order: the two runs met different loads, and interference
    only ever slows a kernel down."""
    costs: dict[int, float] = {}
    for res in runs.values():
        for i, r in res.history:
            if r.ok:
                costs[i] = min(costs.get(i, r.cost), r.cost)
    order = list(costs)
    random.Random(0).shuffle(order)
    for i, r in zip(order, meas.measure(task, order)):
        if r.ok:
            costs[i] = min(costs[i], r.cost)
    return costs


def copy_db(src: str, dst: str, tmp: str) -> None:
    path = os.path.join(tmp, "copy.jsonl")
    with TuningDB(src) as a:
        a.export_jsonl(path)
    with TuningDB(dst) as b:
        b.import_jsonl(path)


def quality(task, rows_train: list, transfer, rows_eval: list) -> dict[str, tuple[float, float]]:
    """(Spearman, top-10 recall) on rows_eval of models trained on: the other shapes only, the
    first batch only, both. Rows are (config index, seconds)."""
    X_eval = np.stack([config_features(task, i) for i, _ in rows_eval])
    true = np.array([1 / c for _, c in rows_eval])
    own_X = np.stack([config_features(task, i) for i, _ in rows_train])
    own_y = np.array([1 / c for _, c in rows_train])
    own_g = [task.workload_key] * len(rows_train)
    sets = {"other shapes only": (transfer.ir, transfer.throughput, transfer.groups),
            f"first {len(rows_train)} of this shape": (own_X, own_y, own_g),
            "both": (np.concatenate([transfer.ir, own_X]), np.concatenate([transfer.throughput, own_y]),
                     transfer.groups + own_g)}
    out = {}
    for name, (X, y, g) in sets.items():
        pred = XGBCostModel("rank", seed=0).fit(X, y, g).predict(X_eval)
        out[name] = (spearman(pred, true), top_k_recall(pred, true, 10))
    return out


def train_shape(task, db_path: str, meas: Measurer, args: argparse.Namespace) -> None:
    """Tune one training shape cold (unless the database holds its trials already)."""
    with TuningDB(db_path) as db:
        have = len(db.records(task.workload_key, task.target_key))
    if have < args.trials:
        tune(task, trials=args.trials - have, db=db_path, seed=args.seed, measurer=meas, transfer=False)
    with TuningDB(db_path) as db:
        best = db.best(task.workload_key, task.target_key)
    print(f"  trained {task.workload_key}: best {task.flop / best.cost / 1e9:.1f} GFLOP/s", flush=True)


def held_out(op: str, shape: dict, train_db: str, tmp: str, meas: Measurer, args: argparse.Namespace) -> dict:
    task = autotune.create_task(op, **shape)
    runs, wall = {}, {}
    for transfer in (True, False):
        db = os.path.join(tmp, f"{task.workload_key}-{transfer}.db")
        if transfer:
            copy_db(train_db, db, tmp)
        t0 = time.perf_counter()
        runs[transfer] = tune(task, trials=args.held_trials, db=db, seed=args.seed, measurer=meas, transfer=transfer)
        wall[transfer] = time.perf_counter() - t0
        print(f"  {task.workload_key} {'transfer' if transfer else 'cold'}: best {runs[transfer].best_gflops:.1f} "
              f"GFLOP/s, {wall[transfer]:.0f} s", flush=True)
    costs = remeasure(task, runs, meas)
    with TuningDB(train_db) as db:
        t0 = time.perf_counter()
        transfer_rows = load_transfer(task, db, args.seed)
        load_s = time.perf_counter() - t0
    cold = runs[False].history
    first = [(i, costs[i]) for i, r in cold[:FIRST_BATCH] if i in costs]
    rest = [(i, c) for i, c in costs.items() if i not in dict(first)]
    curves = {t: [costs.get(i) for i, _ in res.history] for t, res in runs.items()}
    return {"task": task, "curves": curves, "wall": wall, "best": min(costs.values()), "load_s": load_s,
            "transfer": transfer_rows,
            "quality": quality(task, first, transfer_rows, rest) if transfer_rows and len(rest) > 10 else {}}


def report(out: dict) -> None:
    task, best = out["task"], out["best"]
    print(f"\n{task.workload_key}: best {task.flop / best / 1e9:.1f} GFLOP/s over both runs; warm start "
          f"{len(out['transfer'] or [])} records of {out['transfer'].workloads if out['transfer'] else 0} shapes "
          f"in {out['load_s']:.1f} s")
    for transfer, curve in out["curves"].items():
        reach = trials_to(curve, best / 0.9)
        searched = trials_to(curve, best / 0.9, skip_first=True)
        found = min(c for c in curve if c is not None)
        print(f"  {'transfer' if transfer else 'cold    '}: trials to 90% of best {reach} (not counting the "
              f"default config: {searched}); its best {task.flop / found / 1e9:.1f} GFLOP/s; default "
              f"{task.flop / curve[0] / 1e9 if curve[0] else 0:.1f}; wall {out['wall'][transfer]:.0f} s")
    for name, (rho, rec) in out["quality"].items():
        print(f"  IR model trained on {name:24s}: Spearman {rho:6.3f}, top-10 recall {rec:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--op", default="matmul", choices=sorted(SHAPES))
    ap.add_argument("--trials", type=int, default=48, help="per training shape")
    ap.add_argument("--held-trials", type=int, default=32, help="per held-out shape and run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-db", default=None, help="keep the training records here (and reuse them)")
    args = ap.parse_args()
    os.environ.setdefault("AUTOTUNE_NUM_THREADS", "1")     # before the measuring workers start
    train, held = SHAPES[args.op]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; AUTOTUNE_NUM_THREADS="
          f"{os.environ['AUTOTUNE_NUM_THREADS']}; {args.op}: {len(train)} training shapes x {args.trials} trials, "
          f"{len(held)} held-out shapes x 2 runs x {args.held_trials} trials")
    t_start = time.perf_counter()
    options = MeasureOptions(repeat=3, min_repeat_ms=20)
    with Measurer(options) as meas, tempfile.TemporaryDirectory() as tmp:
        train_db = args.train_db or os.path.join(tmp, "train.db")
        for shape in train:
            train_shape(autotune.create_task(args.op, **shape), train_db, meas, args)
        results = [held_out(args.op, shape, train_db, tmp, meas, args) for shape in held]
    for out in results:
        report(out)
    hits = {t: sum(1 for o in results if (trials_to(o["curves"][t], o["best"] / 0.9) or 10**9) <= 16)
            for t in (True, False)}
    print(f"\nheld-out shapes at 90% of best within 16 trials: transfer {hits[True]}/{len(results)}, "
          f"cold {hits[False]}/{len(results)}; total {time.perf_counter() - t_start:.0f} s, "
          f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
