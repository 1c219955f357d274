"""The confirmation round after a task's search: its best few configs and the template's default
measured again, interleaved, before the database's best is trusted.

While tuning, each config is timed once: `repeat` timings within a few hundred ms, all in one
phase of a machine whose speed drifts (a shared VM's kernel medians move 20-30% for seconds at a
time). The lowest of many such measurements is then mostly the luckiest phase: on ResNet-18 a
30-minute tune picked configs that ran slower in the model than the defaults they replaced (the
stem 1.84 ms against 1.50, layer4.1.conv1 1.64 against 1.35). Timed again in later batches, next
to each other, each finalist's record gains timings from other phases, and its cost, the median
of all of them, moves to what the config runs at (`TuningDB.add_timings`).

`tune` and `tune_tasks` end with this round (`confirm=False` skips it), so the best config
`autotune.load` serves is one timed in several batches, not one lucky batch; `tune_model` runs
it under its own time budget.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..measure.types import MeasureResult
from ..schedules.task import Task
from .tuner import TuneResult, gflops

FINALISTS = 2       # the best configs measured again, besides the default
ROUNDS = 2          # later batches a finalist is measured in before its cost is trusted
MAX_ROUNDS = 4      # batches per task at most: a finalist that falls back lets in one not yet confirmed


def finalists(task: Task, database: Any, count: int = FINALISTS) -> list[int]:
    """The `count` configs of lowest cost so far and the template's default (when it has an ok
    record): the configs whose order decides what runs."""
    best: dict[int, float] = {}
    for rec in database.records(task.workload_key, task.target_key, ok_only=True):
        if rec.cost is not None:
            best[rec.config_index] = min(rec.cost, best.get(rec.config_index, rec.cost))
    picks = sorted(best, key=lambda i: (best[i], i))[:count]
    default = task.default_index
    return picks + [default] if default in best and default not in picks else picks


def confirm(task: Task, database: Any, measure: Callable[[Task, list[int]], list[MeasureResult]],
            count: int = FINALISTS, rounds: int = ROUNDS) -> list[int]:
    """Batches of the finalists (picked again before each, in a rotated order), their ok timings
    added to their records, until every finalist was in `rounds` of them or after MAX_ROUNDS.
    A finalist whose cost rises falls out and the next config comes in, measured until it too
    is confirmed. Returns the configs measured again."""
    batches: dict[int, int] = {}
    for r in range(max(rounds, MAX_ROUNDS)):
        picks = finalists(task, database, count)
        if len(picks) < 2 or all(batches.get(i, 0) >= rounds for i in picks):   # one config: nothing to rank
            break
        order = picks[r % len(picks):] + picks[:r % len(picks)]
        for index, result in zip(order, measure(task, order)):
            if result.ok and result.costs:
                database.add_timings(task.workload_key, task.target_key, index, result.costs)
            batches[index] = batches.get(index, 0) + 1
    return list(batches)


def with_best(result: TuneResult, task: Task, rec: Any) -> TuneResult:
    """`result` reporting `rec` (a Record, or None: unchanged) as its task's best."""
    if rec is None or rec.cost is None:
        return result
    return replace(result, best_config=rec.config, best_seconds=rec.cost, best_gflops=gflops(task, rec.cost))


def confirm_results(tasks: Sequence[Task], results: Sequence[TuneResult], weights: Sequence[float], database: Any,
                    measure: Callable[[Task, list[int]], list[MeasureResult]],
                    stop: Callable[[], bool] = lambda: False) -> list[TuneResult]:
    """`results` (one per task) after each task's confirmation round, the tasks of most weighted
    best time first, until `stop()`; a confirmed task's best read back from the database."""
    out = list(results)
    for i in sorted(range(len(tasks)), key=lambda i: -weights[i] * results[i].best_seconds):
        if stop():
            break
        if confirm(tasks[i], database, measure):
            out[i] = with_best(out[i], tasks[i], database.best(tasks[i].workload_key, tasks[i].target_key))
    return out
