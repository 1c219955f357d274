"""Tuning a whole model: its distinct kernels become tasks, weighted by how often one inference
runs them, tuned under one budget by the gradient task scheduler (`autotune.tune_tasks`).

The tasks are the kernels `compile_model` runs (the graph after its compile-time passes), so what
is tuned is what runs: a kernel reading weights is measured without the weight transforms that
`compile_model` does once at compile time (`Task.set_constant_inputs`). Identical kernels (same
op, parameters and dtype) are one task whose weight is their count. The model's estimated
latency is the weighted sum of the tasks' best times. A time budget stops at the next batch
boundary; everything measured is already in the database, and a second call resumes from it.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..schedules.task import Task, create_task
from ..search.confirm import confirm_results, with_best
from ..search.tuner import Progress, StopTuning, TuneResult
from ..target import Target
from .executor import onnx_frontend, prepare_graph
from .ir import Graph


@dataclass(frozen=True)
class ModelTask:
    """One distinct kernel of a model: its task, how many nodes run it, and their names."""

    task: Task
    weight: int
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class ModelProgress:
    """Passed to `tune_model` callbacks after every batch: the batch's task progress, every
    task's best time so far (inf: none measured yet) and its trials so far."""

    latest: Progress
    tasks: tuple[ModelTask, ...]
    best_seconds: Mapping[str, float]          # by workload key
    trials: Mapping[str, int]                  # by workload key, over the whole job
    elapsed: float

    @property
    def trials_done(self) -> int:
        return sum(self.trials.values())

    @property
    def estimated_seconds(self) -> float | None:
        return estimated_latency(self.tasks, self.best_seconds)


@dataclass(frozen=True)
class ModelTuneResult:
    tasks: tuple[ModelTask, ...]
    results: tuple[TuneResult, ...]
    seconds: float                # wall time of the job
    interrupted: bool             # stopped by the time budget or a callback

    @property
    def estimated_seconds(self) -> float | None:
        return estimated_latency(self.tasks, {r.workload_key: r.best_seconds for r in self.results})

    @property
    def trials(self) -> int:
        return sum(r.trials for r in self.results)


SEARCH_SHARE = 0.85     # of a time budget for the search
CONFIRM_SHARE = 0.92    # up to this share for the confirmation round, the rest for timing inside the model


def estimated_latency(tasks: Sequence[ModelTask], best: Mapping[str, float]) -> float | None:
    """Sum over tasks of weight x best time; None until every task has a measured time."""
    times = [best.get(t.task.workload_key, math.inf) for t in tasks]
    if not all(math.isfinite(s) for s in times):
        return None
    return sum(t.weight * s for t, s in zip(tasks, times))


def model_tasks(graph: Graph, target: str = "llvm", db: Any = None, layout: str = "nchw") -> list[ModelTask]:
    """The model's distinct kernels as tasks, in first-use order, weighted by their node count.
    Inputs that are graph constants at every use are the task's constant inputs: it is measured
    with its weight transforms hoisted, as `compile_model` runs it."""
    prepared, _ = prepare_graph(graph, target, db, layout=layout)
    tasks = []
    for ns in prepared.kernel_uses().values():
        task = create_task(ns[0].op, target=target, dtype=ns[0].dtype, **ns[0].params)
        constant = [set(prepared.constant_positions(n)) for n in ns]
        task.set_constant_inputs(sorted(set.intersection(*constant)))
        tasks.append(ModelTask(task, len(ns), tuple(n.name for n in ns)))
    return tasks


def _as_graph(model: Any, shapes: Mapping[str, tuple[int, ...]] | None) -> Graph:
    return model if isinstance(model, Graph) else onnx_frontend().load(model, shapes=shapes)


def tune_model(model: Any, trials: int = 1000, db: Any = None, target: str = "llvm",
               shapes: Mapping[str, tuple[int, ...]] | None = None, time_budget: float | None = None,
               tuner: str = "xgb", seed: int | None = None, transfer: bool = True,
               callbacks: Sequence[Callable[[ModelProgress], Any]] = (), measure_option: Any = None,
               batch_size: int | None = None, measurer: Any = None, cluster: str | None = None,
               layout: str = "nchw") -> ModelTuneResult:
    """Tune every kernel of `model` (a Graph, an ONNX path, ModelProto or bytes) under one budget
    of `trials` measurements and, with `time_budget`, of that many seconds of wall time (checked
    after each batch). Every result lands in the database `db`; `compile_model` then runs the
    tuned kernels, and a second call resumes. `cluster`: measure on a Ray cluster, as `tune`.
    `layout`: the activation layout `compile_model` will run the model with ("nchw", "nchwc").
    `measure_option` defaults to MeasureOptions(cold_weights=True): each kernel is timed with
    its weights out of cache and its activations hot, as it runs in the model (ResNet-18's
    layer3 Winograd kernels, their U 4x the weights, ran 0.48 ms hot, 0.82 in the model).
    cold_inputs=True times the activations cold too (the BERT layer tuned so ran slower).

    A first round measures one config of every task (the xgb tuner's first is the template's
    default), so the model's estimate exists after a trial per task, however short the budget;
    then batches of `batch_size` (default: at most 16, and small enough that a round over all
    tasks takes at most half the trials) go where the scheduler expects the most gain. Then a
    confirmation round (`search.confirm`) measures each task's best few configs and its default
    again, the tasks of most weighted time first; last, those finalists are timed inside the
    model, which then runs the fastest there (`graph.in_model`; on the CPU, and not when
    measuring on a cluster, whose machines are not this one). With a time budget the search
    stops at SEARCH_SHARE of it, the confirmation at CONFIRM_SHARE and the timing in the model
    at the budget. A Ctrl-C skips both."""
    if time_budget is not None and (isinstance(time_budget, bool) or not isinstance(time_budget, (int, float))
                                    or not time_budget > 0):
        raise ValueError(f"tune_model: time_budget must be a positive number of seconds, got {time_budget!r}")
    from ..measure.types import MeasureOptions
    from ..search.tune import check_tune_args, make_measurer, tune_tasks, writable_db

    check_tune_args(trials, batch_size or 1, seed)
    graph = _as_graph(model, shapes)
    tasks = tuple(model_tasks(graph, target, db, layout))
    if not tasks:
        raise ValueError(f"tune_model: graph {graph.name!r} has no kernel to tune (every node is a view)")
    start = time.monotonic()
    out_of_time = [False]
    best: dict[str, float] = {}
    done: dict[str, int] = {}
    before: dict[str, int] = {}               # each task's trials in the phases already run

    def report(p: Progress) -> None:
        key = p.task.workload_key
        best[key], done[key] = p.best_seconds, before.get(key, 0) + p.trials_done
        progress = ModelProgress(p, tasks, dict(best), dict(done), time.monotonic() - start)
        for cb in callbacks:
            cb(progress)
        if time_budget is not None and progress.elapsed >= SEARCH_SHARE * time_budget:
            out_of_time[0] = True
            raise StopTuning()

    with writable_db(db) as database:   # one connection for every phase
        options = measure_option or MeasureOptions(cold_weights=True)
        meas = make_measurer(options, measurer, cluster, [t.task for t in tasks])   # one for both phases

        def phase(budget: int, size: int) -> list[TuneResult]:
            return tune_tasks([t.task for t in tasks], [float(t.weight) for t in tasks], budget, tuner, db=database,
                              seed=seed, callbacks=[report], measure_option=options, batch_size=size,
                              measurer=meas, transfer=transfer, confirm=False)   # confirmed below, in the budget

        try:
            results = phase(min(trials, len(tasks)), 1)
            if trials > len(tasks) and not any(r.interrupted for r in results):
                before.update((r.workload_key, r.trials) for r in results)
                size = batch_size or max(1, min(16, trials // (2 * len(tasks))))
                results = [_joined(a, b) for a, b in zip(results, phase(trials - len(tasks), size))]
            if out_of_time[0] or not any(r.interrupted for r in results):
                confirm_by, end = ((None, None) if time_budget is None
                                   else (start + CONFIRM_SHARE * time_budget, start + time_budget))
                results = confirm_results([t.task for t in tasks], results, [t.weight for t in tasks], database,
                                          meas.measure, lambda: time.monotonic() >= (confirm_by or math.inf))
                if cluster is None and Target.parse(target).kind == "llvm":
                    results = _timed_in_model(graph, tasks, results, database, target, layout, end)
        finally:
            if measurer is None:
                meas.close()
        return ModelTuneResult(tasks, tuple(results), time.monotonic() - start, any(r.interrupted for r in results))


def _timed_in_model(graph: Graph, tasks: Sequence[ModelTask], results: list[TuneResult], database: Any, target: str,
                    layout: str, deadline: float | None) -> list[TuneResult]:
    """The results after each task's finalists were timed inside the model: a task's best is
    then the config the model runs, with its cost alone (`graph.in_model`)."""
    from .in_model import time_finalists

    chosen = time_finalists(graph, tasks, database, target, layout, deadline)
    task_of = {t.task.workload_key: t.task for t in tasks}
    out = []
    for r in results:
        task = task_of[r.workload_key]
        chosen_rec = database.ok_record(r.workload_key, task.target_key, chosen[r.workload_key]) \
            if r.workload_key in chosen else None
        out.append(with_best(r, task, chosen_rec))
    return out


def _joined(first: TuneResult, then: TuneResult) -> TuneResult:
    """One task's result over both phases (the second resumed the first: its best includes it)."""
    return replace(then, trials=first.trials + then.trials, history=first.history + then.history,
                   interrupted=first.interrupted or then.interrupted)
