"""`autotune db ...`: inspect, export, import and compact the tuning database."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import click

from .cli import CLIError, emit_json, parse_shape
from .dtype import dtype_info
from .target import Target

_DB_OPTION = click.option("--db", default=None,
                          help="Tuning database: a SQLite file, or a URL such as postgresql://user@host/db "
                          "(shared by many machines); default $AUTOTUNE_DB or ./tuning.db")
_JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _open(db: str | None, readonly: bool = True) -> Any:
    from tuning_db import TuningDB

    return TuningDB(db, readonly=readonly)


def _workloads(database: Any, op: str | None = None) -> list[tuple[str, Any]]:
    """(stored key, summary under its current key) per workload: a database written before float
    parameters were floats shows, and is asked by, the keys a writer will rename it to."""
    from .legacy_keys import current_summaries

    return current_summaries(database.workloads(op=op))


def _table(*columns: str) -> Any:
    from rich.table import Table

    return Table(*columns)


def _print(table: Any) -> None:
    from rich.console import Console

    Console(width=200).print(table)


MEMORY_BOUND_FLOP_PER_BYTE = 2.0    # below this many flops per byte of arguments, report GB/s


def _hardware(target_key: str) -> str:
    """The CPU or GPU a target key names, for a table column (`db show` prints the whole key)."""
    try:
        return str(replace(Target.from_key(target_key), features=None, cores=None))
    except ValueError:      # not a key autotune wrote: shown as it is
        return target_key


def _rate(summary: Any, task: Any | None) -> tuple[float, str] | None:
    """(rate, unit) of the best time: GFLOP/s for compute-bound ops, GB/s of the arguments read
    and written for memory-bound ones (elementwise, movement, normalization)."""
    if summary.best_cost is None or task is None:
        return None
    nbytes = sum(math.prod(shape) * dtype_info(dtype).bytes for shape, dtype in task.arg_specs)
    if task.flop >= MEMORY_BOUND_FLOP_PER_BYTE * nbytes:
        return task.flop / summary.best_cost / 1e9, "GFLOP/s"
    return nbytes / summary.best_cost / 1e9, "GB/s"


def _task_of(w: Any) -> Any:
    import autotune

    try:
        return autotune.create_task(w.op, dtype=w.dtype, **w.params)
    except (ValueError, TypeError):
        return None


@click.group()
def db() -> None:
    """Inspect and maintain the tuning database."""


@db.command()
@click.option("--op", default=None, help="Only workloads of this op.")
@_DB_OPTION
@_JSON_OPTION
def workloads(op: str | None, db: str | None, as_json: bool) -> None:
    """One row per tuned workload and target."""
    rows = [w for _, w in _workloads(_open(db), op)]
    rates = [_rate(r, _task_of(r)) for r in rows]
    if as_json:
        return emit_json([{**r.__dict__, "best_rate": rate[0] if rate else None, "rate_unit": rate[1] if rate else None}
                          for r, rate in zip(rows, rates)])
    table = _table("workload", "target", "trials", "errors", "best ms", "best", "when")
    import datetime as dt

    for r, rate in zip(rows, rates):
        when = dt.datetime.fromtimestamp(r.last_timestamp).strftime("%Y-%m-%d %H:%M") if r.last_timestamp else "-"
        best = "-" if r.best_cost is None else f"{r.best_cost * 1e3:.3f}"
        table.add_row(r.key, _hardware(r.target_key), str(r.trials), str(r.errors), best,
                      f"{rate[0]:.1f} {rate[1]}" if rate else "-", when)
    _print(table)


def _show(database: Any, workload_key: str, source: str | None, as_json: bool) -> None:
    stored, summary = next(((k, w) for k, w in _workloads(database) if w.key == workload_key), (None, None))
    if summary is None:
        raise CLIError(f"no workload {workload_key!r} in the database; see `autotune db workloads`")
    best = database.best(stored, summary.target_key)
    if best is None:
        raise CLIError(f"workload {workload_key} has no successful measurement yet")
    task = _task_of(summary)
    if task is None:
        raise CLIError(f"workload {workload_key} is not a shape this version's {summary.op} template accepts")
    func = task.lower(best.config)
    out = {"workload": workload_key, "target": summary.target_key, "config": best.config,
           "costs_ms": [c * 1e3 for c in best.costs], "best_ms": best.cost * 1e3,
           "gflops": task.flop / best.cost / 1e9, "trials": summary.trials, "ir": str(func)}
    if source:
        from .codegen import build_module

        out["source"] = build_module(func).get_source(source)
    if as_json:
        return emit_json(out)
    click.echo(f"workload : {workload_key}\ntarget   : {summary.target_key}")
    click.echo(f"config   : {best.config['knobs']}")
    click.echo(f"best     : {out['best_ms']:.4f} ms ({out['gflops']:.1f} GFLOP/s); repeats (ms): "
               + ", ".join(f"{c:.4f}" for c in out["costs_ms"]))
    click.echo(f"\n{out['ir']}")
    if source:
        click.echo(f"\n{out['source']}")


@db.command()
@click.argument("op")
@click.option("--shape", required=True, help="NAME=VALUE[,NAME=VALUE...]: an int, a float or INT:INT (a tuple)")
@click.option("--dtype", default="float32", show_default=True)
@click.option("--source", type=click.Choice(["ll", "asm"]), default=None, help="Also print the generated code.")
@_DB_OPTION
@_JSON_OPTION
def best(op: str, shape: str, dtype: str, source: str | None, db: str | None, as_json: bool) -> None:
    """The best config of OP at --shape, its measurements and its loop IR."""
    import autotune

    params: dict[str, Any] = parse_shape(shape)   # create_task checks each parameter's kind
    task = autotune.create_task(op, dtype=dtype, **params)
    _show(_open(db), task.workload_key, source, as_json)


@db.command()
@click.argument("workload_key")
@click.option("--source", type=click.Choice(["ll", "asm"]), default=None, help="Also print the generated code.")
@_DB_OPTION
@_JSON_OPTION
def show(workload_key: str, source: str | None, db: str | None, as_json: bool) -> None:
    """The best config of WORKLOAD_KEY, its measurements and its loop IR."""
    _show(_open(db), workload_key, source, as_json)


@db.command()
@click.argument("workload_key")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Write the curve as a PNG.")
@_DB_OPTION
@_JSON_OPTION
def history(workload_key: str, plot: str | None, db: str | None, as_json: bool) -> None:
    """The tuning curve of WORKLOAD_KEY: best time so far after each trial."""
    database = _open(db)
    records = database.records(next((k for k, w in _workloads(database) if w.key == workload_key), workload_key))
    if not records:
        raise CLIError(f"no records for workload {workload_key!r}; see `autotune db workloads`")
    curve, best_cost = [], math.inf
    for i, r in enumerate(records, 1):
        if r.ok and r.cost < best_cost:
            best_cost = r.cost
        curve.append({"trial": i, "cost_ms": r.cost * 1e3 if r.ok else None, "error": None if r.ok else r.error_kind,
                      "best_ms": best_cost * 1e3 if math.isfinite(best_cost) else None})
    if plot:
        _plot(curve, workload_key, plot)
    if as_json:
        return emit_json(curve)
    table = _table("trial", "ms", "best so far (ms)")
    for row in curve:
        table.add_row(str(row["trial"]), row["error"] or f"{row['cost_ms']:.4f}",
                      "-" if row["best_ms"] is None else f"{row['best_ms']:.4f}")
    _print(table)
    if plot:
        click.echo(f"plot written to {plot}")


def _plot(curve: list[dict], title: str, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CLIError("--plot needs matplotlib: pip install 'autotune[plot]'") from None
    xs = [r["trial"] for r in curve if r["best_ms"] is not None]
    ys = [r["best_ms"] for r in curve if r["best_ms"] is not None]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.step(xs, ys, where="post")
    ax.set(xlabel="trial", ylabel="best time so far (ms)", title=title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@db.command("export")
@click.argument("path", type=click.Path(dir_okay=False))
@_DB_OPTION
def export_(path: str, db: str | None) -> None:
    """Write every record as one JSON object per line."""
    click.echo(f"exported {_open(db).export_jsonl(path)} records to {path}")


@db.command("import")
@click.argument("path", type=click.Path(dir_okay=False))
@_DB_OPTION
def import_(path: str, db: str | None) -> None:
    """Validate and add the records of a JSONL export (all or nothing)."""
    from .legacy_keys import upgrade

    database = _open(db, readonly=False)
    count = database.import_jsonl(path)
    upgrade(database)             # an export of an older version brings its legacy keys
    click.echo(f"imported {count} records from {path}")


@db.command()
@click.option("--top-k", default=10, show_default=True, type=click.IntRange(1, 2**63 - 1))
@_DB_OPTION
def compact(top_k: int, db: str | None) -> None:
    """Keep the top-k records per workload (and every run's summary); delete the rest."""
    click.echo(f"deleted {_open(db, readonly=False).compact(top_k)} records")
