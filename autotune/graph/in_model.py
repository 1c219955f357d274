"""Which config of each kernel a tuned model runs, decided by timings taken inside the model.

A kernel timed alone and the same kernel inside the model differ, and not by one factor for
every config: the caches hold what the neighbouring kernels left, not what the kernel's own last
call did. On ResNet-18 a layer1 Winograd conv+bn+add+relu whose tuned config ran 0.77 ms alone
against its default's 0.89 ran 1.13 ms in the model against 0.83; the maxpool after the stem ran
0.10 ms alone and 0.18 in the model. So after tuning, each task's finalists
(`search.confirm.finalists`: its best configs alone and its default) are timed where they will
run. The model is compiled once per finalist rank, variant k running every task's k-th
finalist; whole runs of the variants interleave (drift hits every variant alike), each kernel
node timed in place (`CompiledModel.step_times`), a task's time per call the mean over its
nodes. The timings go to the database under the model's key (`TuningDB.add_model_timings`), and
`compile_model` runs, per kernel, the config fastest inside that model (`in_model_choices`):
what the model runs is what was measured running in it. Other models and `autotune.load` still
get the best record alone.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..runtime import readable_db
from ..target import Target
from .ir import Graph

RUNS = 5       # whole runs of a variant per round
ROUNDS = 12    # rounds over the variants, each in a rotated order


def in_model_choices(db: Any, model_key: str, target: str) -> dict[str, dict[str, Any]]:
    """The config of each workload timed fastest inside the model of `model_key`, as its record
    stores it (a config's index moves when a template gains a knob; its knobs do not): none
    when the database does not exist or has no timings taken inside this model."""
    with readable_db(db) as database:
        if database is None:
            return {}
        target_key = Target.parse(target).key
        records = ((key, database.ok_record(key, target_key, index))
                   for key, index in database.model_choices(model_key, target_key).items())
        return {key: rec.config for key, rec in records if rec is not None}


def time_finalists(graph: Graph, tasks: Sequence[Any], db: Any, target: str = "llvm", layout: str = "nchw",
                   deadline: float | None = None, rounds: int = ROUNDS) -> dict[str, int]:
    """Time the finalists of each of `tasks` (ModelTasks of `graph`) inside the model and store
    the timings in `db` (a TuningDB or what opens one for writing); returns the configs the
    model now runs, by workload key, of the tasks that had more than one finalist. Stops
    compiling or timing once time.monotonic() passes `deadline`; what was timed by then is kept."""
    from ..search.tune import writable_db

    with writable_db(db) as database:
        return _time_finalists(graph, tasks, database, target, layout, deadline, rounds)


def _time_finalists(graph: Graph, tasks: Sequence[Any], database: Any, target: str, layout: str,
                    deadline: float | None, rounds: int) -> dict[str, int]:
    from ..search.confirm import finalists
    from .executor import CompiledModel
    from .profile import random_feeds

    picks = {t.task.workload_key: finalists(t.task, database) for t in tasks}
    picks = {key: configs for key, configs in picks.items() if len(configs) > 1}
    if not picks:
        return {}
    variants: list[tuple[dict[str, int], Any]] = []
    for k in range(max(len(c) for c in picks.values())):
        if _past(deadline):
            break
        pinned = {key: configs[k % len(configs)] for key, configs in picks.items()}
        variants.append((pinned, CompiledModel(graph, db=database, target=target, layout=layout, pinned=pinned)))
    if len(variants) < 2:
        return {}
    feeds = random_feeds(variants[0][1])
    samples: dict[tuple[str, int], list[float]] = {}
    for r in range(rounds):
        if _past(deadline):
            break
        for pinned, m in variants[r % len(variants):] + variants[:r % len(variants)]:
            for key, per_call in _task_times(m, m.step_times(feeds, RUNS)[0]).items():
                if key in pinned:
                    samples.setdefault((key, pinned[key]), []).extend(per_call)
    model_key, target_key = variants[0][1].model_key, Target.parse(target).key
    for (key, config), costs in samples.items():
        database.add_model_timings(model_key, key, target_key, config, costs)
    return {key: index for key, index in database.model_choices(model_key, target_key).items() if key in picks}


def _task_times(m: Any, per_step: Mapping[int, list[float]]) -> dict[str, list[float]]:
    """Each workload's seconds per call in each run: the mean over the nodes that run it."""
    nodes: dict[str, list[int]] = {}
    for i, kernel in m.kernels.items():
        nodes.setdefault(kernel.task.workload_key, []).append(i)
    return {key: [sum(run) / len(ids) for run in zip(*(per_step[i] for i in ids))] for key, ids in nodes.items()}


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline
