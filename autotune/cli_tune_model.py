"""`autotune tune-model MODEL`: tune every kernel of an ONNX model under one budget.

A live table shows each task (its weight, trials, best time) and the model's estimated latency
as it falls. Ctrl-C stops after the current batch and keeps every measurement; running the same
command again resumes. `--time-budget 30m` stops by wall time the same way.
"""
from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Mapping
from typing import Any

import click

from .cli import CLIError, clip, emit_json
from .cli_model import LAYOUT_OPTION, load_graph, parse_shapes
from .cli_tune import CLUSTER_OPTION, MAX_SEED, MAX_TRIALS, TUNERS, StopOnInterrupt

_BUDGET = re.compile(r"([0-9]+(?:\.[0-9]*)?)\s*([smh]?)")
_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_budget(text: str | None) -> float | None:
    """`90`, `90s`, `30m`, `1.5h` -> seconds; None when not given."""
    if text is None:
        return None
    m = _BUDGET.fullmatch(text.strip())
    if m is None or float(m.group(1)) <= 0:
        raise CLIError(f"--time-budget {clip(text)!r}: expected a positive duration such as 90s, 30m or 2h")
    return float(m.group(1)) * _UNIT_SECONDS[m.group(2)]


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None or not math.isfinite(seconds) else f"{seconds * 1e3:.3f}"


def _table(tasks: Any, best: Mapping[str, float], done: Mapping[str, int], caption: str) -> Any:
    from rich.table import Table

    table = Table("task", "weight", "trials", "best ms", "x weight ms", caption=caption)
    for t in tasks:
        key = t.task.workload_key
        s = best.get(key, math.inf)
        table.add_row(clip(key, 100), str(t.weight), str(done.get(key, 0)), _ms(s), _ms(t.weight * s))
    return table


def _caption(estimate: float | None, trials: int, budget: int, elapsed: float) -> str:
    est = "not yet (a task has no measured time)" if estimate is None else f"{estimate * 1e3:.3f} ms"
    return f"estimated latency {est}; {trials}/{budget} trials; {elapsed:.0f} s"


@click.command("tune-model")
@click.argument("model_path", metavar="MODEL")
@click.option("--shapes", multiple=True, help="Bind an input's unknown dims: NAME=1x3x224x224 (repeatable).")
@click.option("--trials", default=1000, show_default=True, type=click.IntRange(1, MAX_TRIALS),
              help="Measurements shared by all the model's tasks.")
@click.option("--time-budget", default=None, help="Also stop after this wall time: 90s, 30m, 2h.")
@click.option("--db", default=None, help="Tuning database (path or URL); default $AUTOTUNE_DB or ./tuning.db")
@click.option("--target", default="llvm", show_default=True)
@click.option("--tuner", default="xgb", show_default=True, type=click.Choice(TUNERS))
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=None)
@click.option("--transfer/--no-transfer", default=True, show_default=True,
              help="xgb: warm-start each task's cost models with other shapes' records.")
@CLUSTER_OPTION
@LAYOUT_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary (no live table).")
def tune_model(model_path: str, shapes: tuple[str, ...], trials: int, time_budget: str | None, db: str | None,
               target: str, tuner: str, seed: int | None, transfer: bool, cluster: str | None, layout: str,
               as_json: bool) -> None:
    """Tune every kernel of MODEL (ONNX) under one budget; compile_model then runs them tuned."""
    from tuning_db import TuningDB

    from .graph.tuning import tune_model as run_tuning

    budget = parse_budget(time_budget)
    graph = load_graph(model_path, parse_shapes(shapes))
    database = TuningDB(db)
    with StopOnInterrupt() as stop, _live(as_json) as live:
        def show(p: Any) -> None:
            if live is not None:
                live.update(_table(p.tasks, p.best_seconds, p.trials, _caption(p.estimated_seconds, p.trials_done,
                                                                                trials, p.elapsed)))
            stop.check()

        result = run_tuning(graph, trials=trials, db=database, target=target, time_budget=budget, tuner=tuner,
                            seed=seed, transfer=transfer, callbacks=[show], cluster=cluster, layout=layout)
    best = {r.workload_key: r.best_seconds for r in result.results}
    done = {r.workload_key: r.trials for r in result.results}
    estimate = result.estimated_seconds
    summary = {"model": model_path, "db": str(database.url), "tasks": [
        {"workload": t.task.workload_key, "weight": t.weight, "nodes": list(t.nodes), "trials": r.trials,
         "errors": r.errors, "best_ms": r.best_seconds * 1e3 if math.isfinite(r.best_seconds) else None}
        for t, r in zip(result.tasks, result.results)],
        "trials": result.trials, "seconds": result.seconds, "interrupted": result.interrupted,
        "estimated_latency_ms": None if estimate is None else estimate * 1e3}
    if as_json:
        return emit_json(summary)
    from rich.console import Console

    caption = _caption(estimate, result.trials, trials, result.seconds)
    Console(width=160).print(_table(result.tasks, best, done, caption))
    if result.interrupted:
        click.echo("stopped after the current batch; every measurement is stored: run the same command to resume")
    click.echo(f"stored in {database.url}; `autotune model run {model_path}` now uses the tuned kernels")


def _live(as_json: bool) -> Any:
    """A live table on stderr, or nothing with --json."""
    if as_json:
        return contextlib.nullcontext()
    from rich.console import Console
    from rich.live import Live

    return Live(console=Console(stderr=True, width=160), refresh_per_second=4, transient=True)
