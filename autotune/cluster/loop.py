"""The tune loop for a cluster: the same steps as `search.tuner.tune_loop`, pipelined.

On one machine a batch is measured while the tuner waits. On a cluster that would leave every
runner idle while the slowest candidate of a batch finishes and the tuner proposes the next, so
here the tuner keeps up to two batches (or three candidates per device, if more) in flight: each
result is recorded in the database as it arrives, and the tuner learns and proposes again after
every `batch_size` results.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..measure.types import MeasureResult
from ..schedules.task import Task
from ..search.tuner import Progress, Tracker, Tuner, TuneResult
from .actors import DEPTH
from .measurer import ClusterMeasurer
from .nodes import devices, target_resource

Pairs = list[tuple[int, MeasureResult]]


def _propose(task: Task, tuner: Tuner, measurer: ClusterMeasurer, window: int, left: int, batch_size: int,
             claim: Callable[[list[int]], list[int]] | None) -> int:
    """Submit whole batches (as tune_loop proposes them) while one more fits in the window and
    trials are `left`; how many candidates were submitted."""
    submitted = 0
    while submitted < left and tuner.has_next():
        size = min(batch_size, left - submitted)
        if measurer.pending + size > window:
            break
        batch = tuner.next_batch(size)
        if not batch:
            break
        if claim is not None:
            batch = claim(batch)
        measurer.submit(task, batch)
        submitted += len(batch)
    return submitted


def stream_loop(task: Task, tuner: Tuner, measurer: ClusterMeasurer, trials: int, batch_size: int,
                record: Callable[[Pairs], None], early_stopping: int | None = None,
                callbacks: Sequence[Callable[[Progress], Any]] = (), best_seconds: float = math.inf,
                best_index: int | None = None, claim: Callable[[list[int]], list[int]] | None = None) -> TuneResult:
    """Propose -> claim -> submit, and as results arrive: record -> track best; every batch_size
    results: update -> callbacks -> early stop. Same arguments and result as tune_loop."""
    window = max(2 * batch_size, (DEPTH + 1) * devices(target_resource(task.target_key)))
    track = Tracker(task, trials, best_seconds, best_index)
    unlearned: Pairs = []
    submitted, stopped, interrupted = 0, False, False
    while not (stopped or interrupted):
        submitted += _propose(task, tuner, measurer, window, trials - submitted, batch_size, claim)
        if not measurer.pending:
            break
        pairs = [(i, r) for _, i, r in measurer.wait()]
        record(pairs)
        track.add(pairs)
        unlearned.extend(pairs)
        if len(unlearned) < batch_size and measurer.pending:
            continue
        tuner.update([i for i, _ in unlearned], [r for _, r in unlearned])
        interrupted = not track.notify(callbacks, unlearned)
        unlearned = []
        stopped = not interrupted and early_stopping is not None and track.since_best >= early_stopping
    measurer.cancel()
    return track.result(stopped, interrupted)
