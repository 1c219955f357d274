"""`autotune tune`: one task with a live progress bar, or a plan of tasks sharing one budget.

Ctrl-C stops after the current batch; everything measured so far is already in the database.
"""
from __future__ import annotations

import json
import math
import os
import signal
import stat
import time
from pathlib import Path
from typing import Any

import click
import numpy as np

from .cli import CLIError, clip, emit_json, parse_shape

MAX_TRIALS = 2**31 - 1          # what the tuning database stores (and far past any real budget)
MAX_SEED = 2**63 - 1            # SQLite's INTEGER is 64-bit
MAX_PLAN_BYTES = 4 * 2**20
TUNERS = ("xgb", "ga", "random", "grid")
PLAN_KEYS = ("tasks", "trials")
CLUSTER_OPTION = click.option(
    "--cluster", default=None, metavar="ADDRESS",
    help="Measure on a Ray cluster (ray://HOST:10001, HOST:6379 or auto), on its nodes of the target.")
TASK_KEYS = ("op", "shape", "weight", "tuner", "target", "dtype")


class StopOnInterrupt:
    """SIGINT sets a flag; a callback raises StopTuning at the next batch boundary."""

    def __init__(self) -> None:
        self.requested = False

    def __enter__(self) -> StopOnInterrupt:
        self._old = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, *_: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc: Any) -> None:
        signal.signal(signal.SIGINT, self._old)

    def check(self, *_: Any) -> None:
        from .search.tuner import StopTuning

        if self.requested:
            raise StopTuning()


def _numpy_seconds(task: Any) -> float:
    inputs = task.make_inputs(np.random.default_rng(0))
    task.reference(inputs)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        task.reference(inputs)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _progress_bar(trials: int, label: str):
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(),
                    TextColumn("best {task.fields[best]:>8.1f} GFLOP/s  errors {task.fields[errors]}"),
                    TimeRemainingColumn(), console=Console(stderr=True), transient=False)


def _tune_one(op: str, shape: str, dtype: str, target: str, trials: int, tuner: str, db: str | None,
              early_stopping: int | None, seed: int | None, as_json: bool, transfer: bool, cluster: str | None,
              confirm: bool) -> None:
    import autotune
    from tuning_db import TuningDB

    task = autotune.create_task(op, target=target, dtype=dtype, **parse_shape(shape))
    if task.target.kind == "cuda" and cluster is None:        # before the progress bar: no GPU is one line, not a bar
        from autotune.codegen.cuda_device import check_measurable

        check_measurable(task.target)
    database = TuningDB(db)
    with StopOnInterrupt() as stop, _progress_bar(trials, f"tune {task.workload_key}") as bar:
        bar_task = bar.add_task("tune", total=trials, best=0.0, errors=0)

        def show(p: Any) -> None:
            bar.update(bar_task, completed=p.trials_done, best=p.best_gflops, errors=p.errors)

        result = autotune.tune(task, trials=trials, tuner=tuner, db=database, early_stopping=early_stopping,
                               seed=seed, callbacks=[show, stop.check], transfer=transfer, cluster=cluster,
                               confirm=confirm)
    summary = {"workload": task.workload_key, "target": task.target_key, "trials": result.trials,
               "errors": result.errors, "best_config": result.best_config, "stopped_early": result.stopped_early,
               "interrupted": stop.requested, "db": str(database.url), "transferred": result.transferred}
    if math.isfinite(result.best_seconds):
        np_s = _numpy_seconds(task)
        summary.update(best_ms=result.best_seconds * 1e3, best_gflops=result.best_gflops,
                       numpy_ms=np_s * 1e3, ratio_to_numpy=np_s / result.best_seconds)
    if as_json:
        return emit_json(summary)
    if stop.requested:
        click.echo("interrupted: stopped after the current batch; every measurement so far is stored")
    if not math.isfinite(result.best_seconds):
        click.echo(f"no valid config found in {result.trials} trials ({result.errors} errors)")
        return
    assert result.best_config is not None   # a finite best time comes with its config
    click.echo(f"best config : {json.dumps(result.best_config['knobs'])}")
    click.echo(f"best        : {summary['best_ms']:.3f} ms, {result.best_gflops:.1f} GFLOP/s "
               f"({summary['ratio_to_numpy']:.2f}x numpy at {summary['numpy_ms']:.3f} ms)")
    click.echo(f"stored in   : {database.url} under {task.workload_key}")
    if result.transferred:
        click.echo(f"warm start  : the cost models began with {result.transferred} records of other {op} shapes")


def _read_plan(path: str) -> str:
    """The plan's text. Only a regular file of at most MAX_PLAN_BYTES: a FIFO would block the
    read, a device might never end. Opened non-blocking and checked on the open file (no race)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise CLIError(f"plan {path} is not a regular file")
        with open(fd, "rb") as f:
            data = f.read(MAX_PLAN_BYTES + 1)
    except OSError as e:
        raise CLIError(f"cannot read plan {path}: {e.strerror or e}") from None
    if len(data) > MAX_PLAN_BYTES:
        raise CLIError(f"plan {path} is larger than {MAX_PLAN_BYTES // 2**20} MiB; a plan lists tasks, not data")
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        raise CLIError(f"plan {path} is not UTF-8 text: {e.reason} at byte {e.start}") from None


def _load_plan(path: str) -> dict:
    """The plan, every field checked up front: a bad one is named before any tuning starts."""
    text = _read_plan(path)
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as e:
        raise CLIError(f"plan {path} is not valid JSON: {e.msg} at line {e.lineno}") from None
    except RecursionError:
        raise CLIError(f"plan {path} is nested too deeply to be a plan") from None
    except ValueError as e:      # an integer of more than 4300 digits
        raise CLIError(f"plan {path}: {e}") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("tasks"), list) or not plan["tasks"]:
        raise CLIError(f'plan {path} needs {{"tasks": [{{"op": ..., "shape": {{...}}, "weight": N}}, ...]}}')
    _check_keys(plan, PLAN_KEYS, f"plan {path}")
    if "trials" in plan and not _int_in(plan["trials"], 1, MAX_TRIALS):
        raise CLIError(f'plan {path}: "trials" must be an integer in [1, {MAX_TRIALS}], got {_show(plan["trials"])}')
    for i, spec in enumerate(plan["tasks"]):
        _check_task(spec, f"plan {path}: task {i}")
    return plan


def _plan_task(spec: dict, where: str) -> Any:
    """The task of one checked plan entry; its errors name the entry."""
    import autotune

    try:
        return autotune.create_task(spec["op"], target=spec.get("target", "llvm"),
                                    dtype=spec.get("dtype", "float32"), **spec["shape"])
    except (ValueError, TypeError) as e:
        raise CLIError(f"{where}: {e}") from None


def _check_task(spec: Any, where: str) -> None:
    if not isinstance(spec, dict):
        raise CLIError(f'{where} must be an object {{"op": ..., "shape": {{...}}}}, got {_show(spec)}')
    _check_keys(spec, TASK_KEYS, where)
    if not isinstance(spec.get("op"), str):
        raise CLIError(f'{where}: "op" must be an op name (a string), got {_show(spec.get("op"))}')
    if not isinstance(spec.get("shape"), dict):
        raise CLIError(f'{where}: "shape" must be an object like {{"M": 64}}, got {_show(spec.get("shape"))}')
    for key in ("target", "dtype"):
        if key in spec and not isinstance(spec[key], str):
            raise CLIError(f'{where}: "{key}" must be a string, got {_show(spec[key])}')
    if "tuner" in spec and spec["tuner"] not in TUNERS:
        raise CLIError(f'{where}: "tuner" must be one of {list(TUNERS)}, got {_show(spec["tuner"])}')
    if "weight" in spec and not _positive_finite(spec["weight"]):
        raise CLIError(f'{where}: "weight" must be a positive finite number, got {_show(spec["weight"])}')


def _check_keys(obj: dict, known: tuple[str, ...], where: str) -> None:
    unknown = [k for k in obj if k not in known]
    if unknown:
        raise CLIError(f"{where}: unknown key {_show(unknown[0])}; expected some of {list(known)}")


def _int_in(x: Any, lo: int, hi: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi


def _positive_finite(x: Any) -> bool:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(x) and x > 0
    except OverflowError:        # an int past the range of a float
        return False


def _show(value: Any) -> str:
    """A JSON value as the plan wrote it, clipped to fit a one-line message."""
    return clip(json.dumps(value))


def _tune_plan(path: str, trials: int, tuner: str, db: str | None, seed: int | None, as_json: bool,
               transfer: bool, cluster: str | None, confirm: bool) -> None:
    import autotune
    from tuning_db import TuningDB

    plan = _load_plan(path)
    trials = plan.get("trials", trials)
    # every task is made (and so checked) before the database is opened or any run started
    tasks = [_plan_task(spec, f"plan {path}: task {i}") for i, spec in enumerate(plan["tasks"])]
    database = TuningDB(db)
    with StopOnInterrupt() as stop, _progress_bar(trials, f"tune plan {Path(path).name}") as bar:
        bar_task = bar.add_task("plan", total=trials, best=0.0, errors=0)
        progress: dict[str, Any] = {}

        def show(p: Any) -> None:
            progress[p.task.workload_key] = p
            bar.update(bar_task, completed=sum(q.trials_done for q in progress.values()), best=p.best_gflops,
                       errors=sum(q.errors for q in progress.values()))
            stop.check()

        results = autotune.tune_tasks(tasks, [float(spec.get("weight", 1)) for spec in plan["tasks"]], trials,
                                      [spec.get("tuner", tuner) for spec in plan["tasks"]], db=database, seed=seed,
                                      callbacks=[show], transfer=transfer, cluster=cluster, confirm=confirm)
    rows: list[dict[str, Any]] = [
            {"workload": r.workload_key, "weight": float(spec.get("weight", 1)), "trials": r.trials,
             "errors": r.errors, "best_ms": r.best_seconds * 1e3 if math.isfinite(r.best_seconds) else None,
             "best_gflops": r.best_gflops if math.isfinite(r.best_seconds) else None}
            for r, spec in zip(results, plan["tasks"])]
    if as_json:
        return emit_json(rows)
    from rich.console import Console
    from rich.table import Table

    table = Table("workload", "weight", "trials", "errors", "best ms", "GFLOP/s")
    for r in rows:
        table.add_row(r["workload"], f"{r['weight']:g}", str(r["trials"]), str(r["errors"]),
                      "-" if r["best_ms"] is None else f"{r['best_ms']:.3f}",
                      "-" if r["best_gflops"] is None else f"{r['best_gflops']:.1f}")
    Console().print(table)


@click.command()
@click.argument("op", required=False)
@click.option("--shape", help="NAME=VALUE[,NAME=VALUE...], e.g. M=1024,N=1024,K=1024 or eps=1e-05 (INT:INT a tuple)")
@click.option("--plan", "plan", type=click.Path(), help="JSON file of tasks tuned in one job (shares --trials).")
@click.option("--dtype", default="float32", show_default=True)
@click.option("--target", default="llvm", show_default=True,
              help="llvm (this CPU), cuda (this machine's GPU) or 'cuda -arch=sm_90' (compile for an arch).")
@click.option("--trials", default=64, show_default=True, type=click.IntRange(1, MAX_TRIALS))
@click.option("--tuner", default="xgb", show_default=True, type=click.Choice(TUNERS))
@click.option("--db", default=None,
              help="Tuning database: a SQLite file, or a URL such as postgresql://user@host/db "
                   "(shared by many machines); default $AUTOTUNE_DB or ./tuning.db")
@click.option("--early-stopping", type=click.IntRange(1, MAX_TRIALS), default=None,
              help="Stop after N trials without improvement.")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=None)
@click.option("--transfer/--no-transfer", default=True, show_default=True,
              help="xgb: warm-start the cost models with the database's records of other shapes of the op.")
@click.option("--confirm/--no-confirm", default=True, show_default=True,
              help="Measure the best configs and the default again, interleaved, before trusting the best.")
@CLUSTER_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
def tune(op: str | None, shape: str | None, plan: str | None, dtype: str, target: str, trials: int, tuner: str,
         db: str | None, early_stopping: int | None, seed: int | None, transfer: bool, confirm: bool,
         cluster: str | None, as_json: bool) -> None:
    """Tune OP at --shape (or every task of --plan), storing every measurement in the database."""
    if plan is not None:
        if op is not None or shape is not None:
            raise CLIError("give either OP --shape ... or --plan FILE, not both")
        return _tune_plan(plan, trials, tuner, db, seed, as_json, transfer, cluster, confirm)
    if op is None or shape is None:
        raise CLIError("tune needs OP and --shape (or --plan FILE)")
    _tune_one(op, shape, dtype, target, trials, tuner, db, early_stopping, seed, as_json, transfer, cluster, confirm)
