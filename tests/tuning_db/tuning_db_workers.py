"""Child-process bodies for the tuning_db concurrency tests (spawned, so they must be importable),
and the workload, targets, runs and records the database tests share."""
from __future__ import annotations

import time

from tuning_db import Record, TuningDB

WORKLOAD = "matmul(M=7,N=11,K=13)float32"
TARGET = "llvm -mcpu=test -features=avx2,fma -cores=2"
OTHER_TARGET = "cuda -arch=sm_90"
PARAMS = {"M": 7, "N": 11, "K": 13}
MODEL, OTHER_MODEL = "a1b2" * 16, "c3d4" * 16   # 64 characters, like a hash of a model's graph


def start(db: TuningDB, workload: str = WORKLOAD, target: str = TARGET, op: str = "matmul",
          params: dict | None = None) -> int:
    """A new run of WORKLOAD (or `workload`) on TARGET: what the records of a test belong to."""
    return db.start_run(workload, op, PARAMS if params is None else params, "float32", target, "random", 64, 1)


def record(index: int, cost: float | None = None, timestamp: float | None = None, workload: str = WORKLOAD,
           target: str = TARGET) -> Record:
    """An ok record with cost `cost` (default from the index), or a build error when cost is None and index < 0."""
    ok = cost is not None or index >= 0
    seconds = cost if cost is not None else 1e-3 * (1 + index % 97)
    return Record(workload, target, abs(index), {"index": abs(index), "knobs": {"tile": [abs(index) % 8, 4]}},
                  (seconds, seconds * 1.1, seconds * 0.9) if ok else (), "ok" if ok else "build_error",
                  "" if ok else "LLVM said no", 0.01, time.time() if timestamp is None else timestamp)


def write_batches(path: str, offset: int, batches: int, size: int, barrier) -> None:
    """Open (maybe creating) the database at the same moment as a sibling, start a run of the same
    new workload and add `batches` batches of `size` records with indices offset, offset+1, ..."""
    barrier.wait()
    db = TuningDB(path)
    run_id = db.start_run(WORKLOAD, "matmul", {"M": 7, "N": 11, "K": 13}, "float32", TARGET, "random", 999, offset)
    for b in range(batches):
        db.add_records(run_id, [record(offset + b * size + j) for j in range(size)])
    db.finish_run(run_id, batches * size)
    db.close()


def write_until_killed(path: str, size: int, sleep_s: float) -> None:
    """Add batches of `size` records with consecutive indices until the parent kills us."""
    db = TuningDB(path)
    run_id = db.start_run(WORKLOAD, "matmul", {"M": 7, "N": 11, "K": 13}, "float32", TARGET, "random", 10**6, 0)
    batch = 0
    while True:
        db.add_records(run_id, [record(batch * size + j) for j in range(size)])
        batch += 1
        time.sleep(sleep_s)


class SlowFakeMeasurer:
    """Every config is ok, at a cost from its index; `delay_s` per config stands in for measuring."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def measure(self, task, indices):
        from autotune.measure.types import ErrorKind, MeasureResult

        time.sleep(self.delay_s * len(indices))
        return [MeasureResult((1e-4 * (1 + i % 13),), ErrorKind.OK, "", 0.0, time.time()) for i in indices]

    def close(self) -> None:
        pass


def tune_concurrently(path: str, seed: int, trials: int, barrier) -> None:
    """One of several grid tuners started together on the same task and database: without claims
    they would all walk the same configs in the same order."""
    import autotune
    from autotune.search.tune import tune

    task = autotune.create_task("matmul", M=33, N=20, K=17)
    barrier.wait()
    tune(task, trials=trials, tuner="grid", db=path, seed=seed, batch_size=4, measurer=SlowFakeMeasurer(0.02))


SMALL = {"M": 7, "N": 5, "K": 3}   # a matmul whose whole space (324 configs) a fleet measures in seconds
SHAPES = [SMALL, {"M": 12, "N": 10, "K": 9}, {"M": 33, "N": 20, "K": 17}]


def short_lease_options(batch_size: int, lease_s: float):
    """Measure options under which tune's claims last `lease_s` (the fake measurers ignore the rest)."""
    from autotune.measure.types import MeasureOptions

    per_config = lease_s / batch_size / 2
    return MeasureOptions(build_timeout_s=per_config, run_timeout_s=per_config)


def tune_shapes(url: str, seed: int, shapes: list[int], trials: int, barrier) -> None:
    """A grid tuner on each of SHAPES[i] for i in `shapes`, in turn: siblings started together walk the
    same configs in the same order, so every batch is contended."""
    import autotune
    from autotune.search.tune import tune

    tasks = [autotune.create_task("matmul", **SHAPES[i]) for i in shapes]
    barrier.wait()
    for task in tasks:
        tune(task, trials=trials, tuner="grid", db=url, seed=seed, batch_size=4, measurer=SlowFakeMeasurer(0.005))


def tune_stuck(url: str, lease_s: float) -> None:
    """A tuner that claims its first batch and then measures for far longer than its lease (it is killed)."""
    import autotune
    from autotune.search.tune import tune

    task = autotune.create_task("matmul", **SMALL)
    tune(task, trials=4, tuner="grid", db=url, batch_size=4, measurer=SlowFakeMeasurer(600),
         measure_option=short_lease_options(4, lease_s))


def tune_until_all_measured(url: str, seed: int, lease_s: float) -> None:
    """Tune SMALL again and again until every config of it has a record: configs claimed by a tuner
    that died are taken once its leases expire."""
    import autotune
    from autotune.search.tune import tune

    task = autotune.create_task("matmul", **SMALL)
    db = TuningDB(url)
    size = len(task.config_space)
    while len(db.measured_indices(task.workload_key, task.target_key)) < size:
        result = tune(task, trials=size, tuner="grid", db=db, seed=seed, batch_size=4,
                      measurer=SlowFakeMeasurer(0.002), measure_option=short_lease_options(4, lease_s))
        if not result.history:
            time.sleep(0.2)   # what is left is claimed: wait for those leases to be released or expire
    db.close()
