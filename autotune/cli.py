"""The `autotune` command line."""
from __future__ import annotations

import sys
import time

import click
import numpy as np

from . import __version__


def _best_seconds(fn, repeat: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autotune")
def main() -> None:
    """autotune: schedule-search autotuning of tensor programs (TVM-style) for CPU and CUDA."""


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
        click.echo("error: the compiled matmul disagrees with numpy", err=True)
        sys.exit(1)
    flop = 2.0 * size ** 3
    ours = _best_seconds(lambda: f(a, b, c))
    ref_s = _best_seconds(lambda: np.matmul(a, b, out=ref))
    click.echo(f"matmul {size}x{size}x{size} float32 (compiled in {compile_s * 1e3:.0f} ms, checked against numpy)")
    click.echo(f"  autotune hand schedule: {flop / ours / 1e9:8.1f} GFLOP/s")
    click.echo(f"  numpy                 : {flop / ref_s / 1e9:8.1f} GFLOP/s")
    click.echo(f"  ratio to numpy        : {ref_s / ours:8.2f}x")


if __name__ == "__main__":
    main()
