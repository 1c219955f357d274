"""tune: search a task's config space with a named tuner, keeping every result in the database.

Resume: configs already in the database for this workload and target are never measured again
(also those stored under its key from before float parameters were floats, renamed first), and
their results warm-start the tuner. Transfer (on by default): records of other shapes of the same
op warm-start the model-guided tuner's cost models (search/transfer.py).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..legacy_keys import upgrade
from ..measure import MeasureOptions, Measurer
from ..measure.types import ErrorKind, MeasureResult
from ..schedules.task import Task
from .confirm import confirm_results
from .ga import GATuner
from .grid import GridTuner
from .random import RandomTuner
from .scheduler import TaskState, schedule_tasks
from .transfer import load_transfer
from .tuner import Progress, Tuner, TuneResult, gflops, tune_loop
from .xgb import XGBTuner

TUNERS: dict[str, type[Tuner]] = {"xgb": XGBTuner, "ga": GATuner, "random": RandomTuner, "grid": GridTuner}
MAX_TRIALS = 2**31 - 1     # trials and seeds are stored in 64-bit columns; no job needs more
MAX_SEED = 2**63 - 1


def check_tune_args(trials: Any, batch_size: Any, seed: Any) -> None:
    """ValueError/TypeError naming a trial count, batch size or seed that no run can have."""
    for name, value, high in (("trials", trials, MAX_TRIALS), ("batch_size", batch_size, MAX_TRIALS)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"tune: {name} must be an int, got {type(value).__name__}")
        if not 1 <= value <= high:
            raise ValueError(f"tune: {name} must be in [1, {high}], got {value}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED):
        raise ValueError(f"tune: seed must be None or an int in [0, 2**63 - 1], got {seed!r}")


def lease_seconds(options: MeasureOptions, batch_size: int) -> float:
    """How long a claimed batch may take at most: every build and every run at its timeout."""
    return batch_size * (options.build_timeout_s + options.run_timeout_s)


def make_tuner(name: str, task: Task, seed: int | None = None) -> Tuner:
    if name not in TUNERS:
        raise ValueError(f"unknown tuner {name!r}; expected one of {sorted(TUNERS)}")
    return TUNERS[name](task, seed=seed)


@contextmanager
def writable_db(db: Any) -> Iterator[Any]:
    """`db` as a TuningDB to write to: a TuningDB as it is (its owner closes it), a path or URL
    opened here and closed on leaving, so a notebook tuning in a loop holds no connection."""
    from tuning_db import TuningDB

    if isinstance(db, TuningDB):
        yield db
        return
    database = TuningDB(db)
    try:
        yield database
    finally:
        database.close()


def _start_run(database: Any, task: Task, tuner: str, trials: int, seed: int | None) -> int:
    return database.start_run(task.workload_key, task.name, task.params, task.dtype, task.target_key, tuner,
                              trials, seed)


def _store(database: Any, task: Task, run_id: int, pairs: list[tuple[int, MeasureResult]]) -> None:
    """One batch of the run's results, as records in one transaction."""
    from tuning_db import Record

    database.add_records(run_id, [Record(task.workload_key, task.target_key, idx, task.config(idx).to_json(),
                                         tuple(res.costs), res.error_kind.value, res.error_msg, res.build_seconds,
                                         res.timestamp, run_id) for idx, res in pairs])


def _as_result(rec: Any) -> MeasureResult:
    return MeasureResult(tuple(rec.costs), ErrorKind(rec.error_kind), rec.error_msg, rec.build_seconds, rec.timestamp)


def _check_task(task: Any, measurer: Any, cluster: str | None = None) -> None:
    if not isinstance(task, Task):
        raise TypeError(f"tune expects a Task (autotune.create_task), got {type(task).__name__}")
    if measurer is not None and cluster is not None:
        raise ValueError("tune: give a measurer or a cluster, not both")
    if task.target.kind == "cuda" and measurer is None and cluster is None:
        from ..codegen.cuda_device import check_measurable

        check_measurable(task.target)


def _resume(task: Task, tuner: str, database: Any, seed: int | None, transfer: bool) -> tuple[Tuner, Any]:
    """A tuner warm-started with the task's records (never re-measured) and, for xgb with
    `transfer`, other shapes' records; and the best record so far (or None)."""
    strategy = make_tuner(tuner, task, seed)
    previous = database.records(task.workload_key, task.target_key)
    strategy.load_history([r.config_index for r in previous], [_as_result(r) for r in previous])
    if transfer and isinstance(strategy, XGBTuner):
        rows = load_transfer(task, database, seed)
        if rows is not None:
            strategy.add_transfer(rows)
    return strategy, database.best(task.workload_key, task.target_key)


def make_measurer(options: MeasureOptions, measurer: Any, cluster: str | None, tasks: Sequence[Task]) -> Any:
    """The caller's measurer, or a new one: on this machine, or on the cluster at `cluster`, once
    it is known to have a node of every task's target (else nothing is started or recorded)."""
    if measurer is not None:
        return measurer
    if cluster is None:
        return Measurer(options)
    try:
        from ..cluster import ClusterMeasurer
    except ModuleNotFoundError as exc:
        raise ValueError(f"measuring on a cluster needs Ray ({exc}); pip install 'autotune[cluster]'") from exc
    meas = ClusterMeasurer(cluster, options)
    try:
        for task in tasks:
            meas.check_target(task)
    except BaseException:
        meas.close()
        raise
    return meas


def _transferred(strategy: Tuner) -> int:
    return strategy.transferred if isinstance(strategy, XGBTuner) else 0


def tune(task: Task, trials: int = 64, tuner: str = "xgb", db: Any = None, early_stopping: int | None = None,
         seed: int | None = None, callbacks: Sequence[Callable[[Progress], Any]] = (),
         measure_option: MeasureOptions | None = None, batch_size: int = 16, measurer: Any = None,
         transfer: bool = True, cluster: str | None = None, confirm: bool = True) -> TuneResult:
    """Tune `task` for up to `trials` new measurements; every result lands in the database.

    transfer: with the xgb tuner, warm-start its cost models with the database's records of other
    shapes of the same op on this target (search/transfer.py); `TuneResult.transferred` counts them.
    cluster: a Ray cluster's address ("ray://head:10001", "head:6379" or "auto") to measure on its
    nodes of the task's target (autotune.cluster); results are recorded as each one finishes.
    confirm: unless the search was interrupted, end with the confirmation round (search/confirm.py):
    the best configs and the default measured again, interleaved; the result's best is then the
    database's best after it."""
    _check_task(task, measurer, cluster)
    check_tune_args(trials, batch_size, seed)
    with writable_db(db) as database:
        upgrade(database)             # records stored under a legacy key become this task's (autotune.legacy_keys)
        strategy, best_prev = _resume(task, tuner, database, seed, transfer)
        own = measurer is None
        options = measure_option or MeasureOptions()
        meas = make_measurer(options, measurer, cluster, [task])
        run_id = _start_run(database, task, tuner, trials, seed)
        lease_s = lease_seconds(options, batch_size)
        status, result, done = "failed", None, [0]
        loop: Callable[..., TuneResult] = tune_loop
        if cluster is not None:
            from ..cluster.loop import stream_loop

            loop = stream_loop

        def record(pairs: list[tuple[int, MeasureResult]]) -> None:
            _store(database, task, run_id, pairs)
            done[0] += len(pairs)

        try:
            result = loop(
                task, strategy, meas if cluster is not None else meas.measure, trials, batch_size, record=record,
                early_stopping=early_stopping, callbacks=callbacks,
                best_seconds=best_prev.cost if best_prev is not None else math.inf,
                best_index=best_prev.config_index if best_prev is not None else None,
                claim=lambda batch: database.claim(run_id, batch, lease_s))
            if confirm and not result.interrupted:
                result = confirm_results([task], [result], [1.0], database, meas.measure)[0]
            status = "interrupted" if result.interrupted else "finished"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            database.finish_run(run_id, done[0], status)
            if own:
                meas.close()
        result.run_id, result.transferred = run_id, _transferred(strategy)
        return result


def tune_tasks(tasks: Sequence[Task], weights: Sequence[float] | None = None, trials: int = 256,
               tuner: str | Sequence[str] = "xgb", db: Any = None, seed: int | None = None,
               callbacks: Sequence[Callable[[Progress], Any]] = (), measure_option: MeasureOptions | None = None,
               batch_size: int = 16, measurer: Any = None, transfer: bool = True,
               cluster: str | None = None, confirm: bool = True) -> list[TuneResult]:
    """Tune several tasks under one budget of `trials` measurements (Ansor's gradient task
    scheduler, `search.scheduler`): after a batch each, the next batch goes where the weighted
    best time is expected to drop most. `weights` (default 1 each) say how often each task runs,
    e.g. per inference of a model; `tuner` is one name or one per task. Every result lands in the
    database, a second call resumes, and configs another tuner sharing the database has measured
    or claimed are skipped. Callbacks get each task's cumulative Progress after every batch.
    transfer, cluster, confirm: as in `tune` (on a cluster, batch by batch; the confirmation
    rounds go to the tasks of most weighted best time first)."""
    tasks = list(tasks)
    if not tasks:
        raise ValueError("tune_tasks: no tasks given")
    weights = [1.0] * len(tasks) if weights is None else list(weights)
    tuners = [tuner] * len(tasks) if isinstance(tuner, str) else list(tuner)
    if len(weights) != len(tasks) or len(tuners) != len(tasks):
        raise ValueError(f"tune_tasks: {len(tasks)} tasks but {len(weights)} weights and {len(tuners)} tuners")
    for task, w in zip(tasks, weights):
        _check_task(task, measurer, cluster)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w <= 0:
            raise ValueError(f"tune_tasks: the weight of {task.workload_key} must be a positive finite number, "
                             f"got {w!r}")
    check_tune_args(trials, batch_size, seed)
    with writable_db(db) as database:
        upgrade(database)             # as in tune: records under legacy keys are resumed
        options = measure_option or MeasureOptions()
        own = measurer is None
        meas = make_measurer(options, measurer, cluster, tasks)
        states, runs = [], {}
        for task, w, name in zip(tasks, weights, tuners):
            strategy, best_prev = _resume(task, name, database, seed, transfer)
            st = TaskState(task, float(w), strategy)
            if best_prev is not None:
                st.best, st.best_config = best_prev.cost, best_prev.config
            runs[id(st)] = _start_run(database, task, name, trials, seed)
            states.append(st)
        lease_s = lease_seconds(options, batch_size)

        def record(st: TaskState, pairs: list[tuple[int, MeasureResult]]) -> None:
            _store(database, st.task, runs[id(st)], pairs)

        def report(st: TaskState, p: Progress) -> None:
            best = min(st.best, p.best_seconds)
            total = Progress(st.task, st.trials + p.trials_done, trials, best, gflops(st.task, best),
                             st.errors + p.errors, p.batch)
            for cb in callbacks:
                cb(total)

        status, interrupted = "failed", False
        try:
            interrupted = schedule_tasks(states, meas.measure, trials, batch_size, record, callbacks=[report],
                                         claim=lambda st, batch: database.claim(runs[id(st)], batch, lease_s))
            results = [TuneResult(st.task.workload_key, st.task.target_key, st.best_config, st.best,
                                  gflops(st.task, st.best), st.trials, st.history, runs[id(st)],
                                  interrupted=interrupted, transferred=_transferred(st.tuner)) for st in states]
            if confirm and not interrupted:
                results = confirm_results(tasks, results, weights, database, meas.measure)
            status = "interrupted" if interrupted else "finished"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            for st in states:
                database.finish_run(runs[id(st)], st.trials, status)
            if own:
                meas.close()
        return results
