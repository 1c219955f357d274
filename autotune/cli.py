"""The `autotune` command line: tune, list ops, inspect the database, inspect and run models, run the demo.

Bad input (unknown op or parameter, malformed shape, unknown target, a database that is missing,
locked or not a tuning database) exits with code 2 and one line on stderr, never a traceback.
"""
from __future__ import annotations

import json
import re
import sys
import time
from typing import Any

import click
import numpy as np

from . import __version__
from .errors import ArgumentError

EXIT_USAGE = 2


class CLIError(click.ClickException):
    """A user error: one line, exit code 2."""

    exit_code = EXIT_USAGE


_INT = re.compile(r"-?[0-9]+")
_INF = re.compile(r"-?inf")                                      # Clip's absent bounds
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")                    # a mode, a dtype name
_FLOAT = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")   # ASCII digits only, as int text
MAX_DIGITS = 400          # create_task refuses anything past 2**1023 (309 digits) with its own message


def clip(text: str, n: int = 60) -> str:
    """`text` short enough for a one-line message."""
    return text if len(text) <= n else text[:n] + "..."


def parse_shape(text: str) -> dict[str, int | float | str | tuple[int, ...]]:
    """`M=1024,N=512,K=64` -> {"M": 1024, ...}; `axes=0:2` is the tuple (0, 2), `eps=1e-05` the
    float 1e-05, `hi=inf` an infinity, `mode=linear` the str "linear" (nan is no value); bad items
    are named. Whether the op takes that kind there is create_task's check."""
    out: dict[str, int | float | str | tuple[int, ...]] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = (x.strip() for x in item.partition("="))
        parts = [p.strip() for p in value.split(":")]
        one = parts[0] if len(parts) == 1 else ""
        is_float = not _INT.fullmatch(one) and bool(_FLOAT.fullmatch(one) or _INF.fullmatch(one))
        is_word = not is_float and bool(_WORD.fullmatch(one)) and one.lower() != "nan"
        if not sep or not name or not (is_float or is_word or all(_INT.fullmatch(p) for p in parts)):
            raise CLIError(f"malformed --shape item {clip(item)!r}; expected NAME=INT, NAME=FLOAT, NAME=WORD or "
                           "NAME=INT:INT (a tuple), e.g. M=1024,N=1024,K=1024, eps=1e-05 or mode=linear")
        if max(map(len, parts)) > MAX_DIGITS:
            raise CLIError(f"--shape {clip(name)!r}: a value of {max(map(len, parts))} digits; "
                           f"at most {MAX_DIGITS} digits")
        if name in out:
            raise CLIError(f"--shape gives {clip(name)!r} twice")
        out[name] = (float(one) if is_float else one if is_word else int(one) if len(parts) == 1
                     else tuple(map(int, parts)))
    if not out:
        raise CLIError("--shape is empty; expected NAME=VALUE[,NAME=VALUE...]")
    return out


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autotune")
def main() -> None:
    """autotune: schedule-search autotuning of tensor programs (TVM-style) for the CPU."""


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def ops(as_json: bool) -> None:
    """The tunable ops with their shape parameters (NAME=VALUE: may be left out, VALUE is the default)."""
    from .schedules.task import TEMPLATES, _load_templates, param_text

    _load_templates()
    rows: list[dict[str, Any]] = [{"op": t.name, "target": t.target, "params": list(t.shape_params),
             "defaults": {k: param_text(v) for k, v in t.defaults.items()}, "description": t.description}
            for (name, _), t in sorted(TEMPLATES.items()) if not name.startswith("testing.")]
    if as_json:
        return emit_json(rows)
    from rich.console import Console
    from rich.table import Table

    table = Table("op", "target", "shape parameters", "description")
    for r in rows:
        params = [f"{p}={r['defaults'][p]}" if p in r["defaults"] else p for p in r["params"]]
        table.add_row(r["op"], r["target"], ",".join(params), r["description"])
    Console().print(table)


def _best_seconds(fn, repeat: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


@main.command()
@click.option("--size", default=1024, show_default=True, type=click.IntRange(16, 8192), help="M = N = K")
def demo(size: int) -> None:
    """Build the hand-scheduled float32 matmul, check it against numpy and print GFLOP/s."""
    from .build import build
    from .schedules.cpu.matmul import hand_schedule

    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = np.empty((size, size), np.float32)
    t = time.perf_counter()
    s, args = hand_schedule(size, size, size)
    f = build(s, args, name="matmul")
    compile_s = time.perf_counter() - t
    f(a, b, c)
    ref = a @ b
    if not np.allclose(c, ref, rtol=1e-3, atol=1e-3 * np.sqrt(size)):
        raise click.ClickException("the compiled matmul disagrees with numpy")
    flop = 2.0 * size ** 3
    ours = _best_seconds(lambda: f(a, b, c))
    ref_s = _best_seconds(lambda: np.matmul(a, b, out=ref))
    click.echo(f"matmul {size}x{size}x{size} float32 (compiled in {compile_s * 1e3:.0f} ms, checked against numpy)")
    click.echo(f"  autotune hand schedule: {flop / ours / 1e9:8.1f} GFLOP/s")
    click.echo(f"  numpy                 : {flop / ref_s / 1e9:8.1f} GFLOP/s")
    click.echo(f"  ratio to numpy        : {ref_s / ours:8.2f}x")


def _register_subcommands() -> None:
    from .cli_db import db
    from .cli_model import model
    from .cli_tune import tune
    from .cli_tune_model import tune_model
    from .cli_worker import worker

    main.add_command(tune)
    main.add_command(tune_model)
    main.add_command(worker)
    main.add_command(db)
    main.add_command(model)


def run(argv: list[str] | None = None) -> int:
    """Entry point: user errors become one line and exit code 2."""
    from tuning_db import TuningDBError

    _register_subcommands()
    try:
        main.main(args=argv, prog_name="autotune", standalone_mode=False)
        return 0
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.Abort:
        click.echo("autotune: interrupted", err=True)
        return 130
    except click.ClickException as e:   # usage errors too: click's text may run to several lines
        click.echo(f"autotune: error: {_first_line(e.format_message()) or type(e).__name__}", err=True)
        return e.exit_code
    except (ValueError, TypeError, ArgumentError, TuningDBError) as e:
        click.echo(f"autotune: error: {_first_line(str(e)) or type(e).__name__}", err=True)
        return EXIT_USAGE


def _first_line(text: str) -> str:
    """The first non-blank line: the error is one line on stderr whatever the message holds."""
    return next((line for line in text.splitlines() if line.strip()), "")


def entry() -> None:
    sys.exit(run())


if __name__ == "__main__":
    entry()
