"""The tuner interface and the one tune loop.

Tuners only propose: `next_batch(n)` returns config indices never measured before and legal for
the shape; `update(indices, results)` tells them what the measurements said. `tune` is the loop:
propose -> measure -> record (one database transaction per batch) -> track best -> update ->
callbacks -> early stop. Resuming against the same database never re-measures a config.
"""
from __future__ import annotations

import abc
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..measure.types import MeasureResult
from ..schedules.task import Task


class StopTuning(Exception):
    """Raised by a callback to end the tuning after the current batch (e.g. on Ctrl-C)."""


class Tuner(abc.ABC):
    """Base of the search strategies; subclasses implement `next_batch` (and maybe `update`)."""

    def __init__(self, task: Task, seed: int | None = None) -> None:
        self.task = task
        self.space = task.config_space
        self.rng = random.Random(seed)
        self.seed = seed
        self.visited: set[int] = set()     # measured or found illegal: never proposed again
        self._valid: dict[int, bool] = {}

    @abc.abstractmethod
    def next_batch(self, n: int) -> list[int]:
        """Up to n new config indices to measure next."""

    def update(self, indices: Sequence[int], results: Sequence[MeasureResult]) -> None:  # noqa: B027  (optional hook)
        """Learn from measurements (the default tuner learns nothing)."""

    def load_history(self, indices: Sequence[int], results: Sequence[MeasureResult]) -> None:
        """Warm start from earlier records of this task (resume)."""
        self.visited.update(indices)
        self.update(indices, results)

    def has_next(self) -> bool:
        return len(self.visited) < len(self.space)

    def is_valid(self, index: int) -> bool:
        """Whether the template accepts this config for the shape (cached; illegal ones are skipped)."""
        ok = self._valid.get(index)
        if ok is None:
            ok = self._valid[index] = self.task.is_valid(index)
            if not ok:
                self.visited.add(index)
        return ok

    def take(self, candidates: Iterable[int], n: int) -> list[int]:
        """The first `n` unvisited, legal candidates, marked visited."""
        out: list[int] = []
        for idx in candidates:
            if len(out) == n:
                break
            if idx in self.visited or idx in out or not self.is_valid(idx):
                continue
            out.append(idx)
        self.visited.update(out)
        return out

    def random_unvisited(self, n: int, max_tries: int = 0) -> list[int]:
        """Up to n random legal configs never proposed before."""
        size = len(self.space)
        if size - len(self.visited) <= 4 * n:      # nearly exhausted: enumerate what is left
            rest = [i for i in range(size) if i not in self.visited]
            self.rng.shuffle(rest)
            return self.take(rest, n)
        tries = max_tries or 50 * n
        return self.take((self.space.random_index(self.rng) for _ in range(tries)), n)


@dataclass
class TuneResult:
    """What a tuning job found: the best config (JSON), its time and the whole history."""

    workload_key: str
    target: str
    best_config: dict | None
    best_seconds: float
    best_gflops: float
    trials: int
    history: list[tuple[int, MeasureResult]] = field(default_factory=list)
    run_id: int | None = None
    stopped_early: bool = False     # no improvement for `early_stopping` trials
    interrupted: bool = False       # a callback raised StopTuning (e.g. Ctrl-C)
    transferred: int = 0            # records of other shapes that warm-started the cost models

    @property
    def errors(self) -> int:
        return sum(not r.ok for _, r in self.history)


@dataclass(frozen=True)
class Progress:
    """Passed to callbacks after every batch."""

    task: Task
    trials_done: int
    trials_asked: int
    best_seconds: float
    best_gflops: float
    errors: int
    batch: list[tuple[int, MeasureResult]]


def gflops(task: Task, seconds: float) -> float:
    return task.flop / seconds / 1e9 if seconds > 0 and math.isfinite(seconds) else 0.0


@dataclass
class Tracker:
    """What a tune loop has measured: its history, the best so far and the trials since it
    improved (shared by tune_loop and the cluster's pipelined loop)."""

    task: Task
    trials: int
    best_seconds: float = math.inf
    best_index: int | None = None
    history: list[tuple[int, MeasureResult]] = field(default_factory=list)
    since_best: int = 0

    def add(self, pairs: list[tuple[int, MeasureResult]]) -> None:
        self.history.extend(pairs)
        for idx, res in pairs:
            self.since_best += 1
            if res.ok and res.cost < self.best_seconds:
                self.best_seconds, self.best_index, self.since_best = res.cost, idx, 0

    def notify(self, callbacks: Sequence[Callable[[Progress], Any]], pairs: list[tuple[int, MeasureResult]]) -> bool:
        """Tell the callbacks; False when one raised StopTuning."""
        errors = sum(not r.ok for _, r in self.history)
        progress = Progress(self.task, len(self.history), self.trials, self.best_seconds,
                            gflops(self.task, self.best_seconds), errors, pairs)
        try:
            for cb in callbacks:
                cb(progress)
        except StopTuning:
            return False
        return True

    def result(self, stopped: bool, interrupted: bool) -> TuneResult:
        task, best = self.task, self.best_seconds
        best_config = None if self.best_index is None else task.config(self.best_index).to_json()
        return TuneResult(task.workload_key, task.target_key, best_config, best, gflops(task, best),
                          len(self.history), self.history, stopped_early=stopped, interrupted=interrupted)


def tune_loop(task: Task, tuner: Tuner, measure: Callable[[Task, list[int]], list[MeasureResult]],
              trials: int, batch_size: int, record: Callable[[list[tuple[int, MeasureResult]]], None],
              early_stopping: int | None = None, callbacks: Sequence[Callable[[Progress], Any]] = (),
              best_seconds: float = math.inf, best_index: int | None = None,
              claim: Callable[[list[int]], list[int]] | None = None) -> TuneResult:
    """Propose -> claim -> measure -> record -> track best -> update -> callbacks -> early stop.

    `claim` (when tuners share a database) keeps the proposed configs no other tuner has measured
    or is measuring; a batch whose every config is taken is skipped and the tuner proposes again.
    """
    track = Tracker(task, trials, best_seconds, best_index)
    stopped, interrupted = False, False
    while len(track.history) < trials and tuner.has_next():
        batch = tuner.next_batch(min(batch_size, trials - len(track.history)))
        if not batch:
            break
        if claim is not None:
            batch = claim(batch)
            if not batch:
                continue
        results = measure(task, batch)
        pairs = list(zip(batch, results))
        record(pairs)
        track.add(pairs)
        tuner.update(batch, results)
        if not track.notify(callbacks, pairs):
            interrupted = True
            break
        if early_stopping is not None and track.since_best >= early_stopping:
            stopped = True
            break
    return track.result(stopped, interrupted)
