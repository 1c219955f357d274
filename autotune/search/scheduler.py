"""Tuning several tasks in one job: share the trial budget where the end-to-end gain is largest.

After one warm-up batch per task, each next batch goes to the task with the highest expected
gain, as in Ansor's gradient task scheduler: weight (how often the task runs per inference) times
the estimated decrease of its best time per batch. The estimate mixes the task's recent
improvement (backward difference over its last batches) with an optimistic term that shrinks with
the trials it already had, so a task that stalls yields its budget but is never starved forever.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..measure.types import MeasureResult
from ..schedules.task import Task
from .tuner import Progress, Tuner, tune_loop

WINDOW = 3  # batches in the backward difference


@dataclass
class TaskState:
    task: Task
    weight: float
    tuner: Tuner
    best: float = math.inf
    best_config: dict | None = None
    trials: int = 0
    errors: int = 0
    curve: list[float] = field(default_factory=list)   # best seconds after each batch
    history: list[tuple[int, MeasureResult]] = field(default_factory=list)

    def expected_gain(self, alpha: float = 0.2) -> float:
        """weight x expected decrease of the best time from one more batch."""
        if not math.isfinite(self.best):
            return math.inf                            # nothing works yet: worth a batch
        recent = 0.0
        if len(self.curve) > WINDOW:
            recent = (self.curve[-1 - WINDOW] - self.curve[-1]) / WINDOW
        optimistic = self.best / (1 + self.trials / 16)
        return self.weight * ((1 - alpha) * recent + alpha * optimistic)


def schedule_tasks(states: list[TaskState], measure: Callable[[Task, list[int]], list[MeasureResult]],
                   trials: int, batch_size: int, record: Callable[[TaskState, list[tuple[int, MeasureResult]]], None],
                   callbacks: Sequence[Callable[[TaskState, Progress], Any]] = (),
                   claim: Callable[[TaskState, list[int]], list[int]] | None = None) -> bool:
    """Run batches until `trials` measurements are spent (or every space is exhausted, or a
    callback raised StopTuning: then True is returned). `claim`, as in tune_loop, keeps the
    configs no other tuner sharing the database has taken."""
    spent = 0

    def run_batch(st: TaskState) -> bool:
        nonlocal spent
        n = min(batch_size, trials - spent)
        res = tune_loop(st.task, st.tuner, measure, n, n, record=lambda pairs: record(st, pairs),
                        callbacks=[lambda p: [cb(st, p) for cb in callbacks]], best_seconds=st.best,
                        claim=None if claim is None else lambda batch: claim(st, batch))
        spent += max(res.trials, 1)
        st.trials += res.trials
        st.errors += res.errors
        st.history.extend(res.history)
        if res.best_seconds < st.best:
            st.best, st.best_config = res.best_seconds, res.best_config
        st.curve.append(st.best)
        return res.interrupted

    for st in states:                                  # warm-up: one batch each
        if spent < trials and st.tuner.has_next() and run_batch(st):
            return True
    while spent < trials:
        open_states = [st for st in states if st.tuner.has_next()]
        if not open_states:
            break
        if run_batch(max(open_states, key=lambda st: st.expected_gain())):
            return True
    return False
