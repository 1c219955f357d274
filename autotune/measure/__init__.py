"""Measurement: build candidates in worker processes, check and time them in another.

    with Measurer(MeasureOptions(repeat=3)) as m:
        results = m.measure(task, [0, 17, 42])      # MeasureResult per index, in order

`measure_batch` makes the batch's check data, then builds the whole batch, and only then runs
it, so neither the reference computation (whose BLAS threads spin on after it) nor a compile
shares the CPU with a timing. Failures are results (an ErrorKind and a message), never exceptions.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .types import BuildResult, ErrorKind, MeasureInput, MeasureOptions, MeasureResult

if TYPE_CHECKING:
    from ..schedules.task import Task
    from .builder import LocalBuilder
    from .runner import LocalRunner

__all__ = ["BuildResult", "ErrorKind", "LocalBuilder", "LocalRunner", "MeasureInput", "MeasureOptions",
           "MeasureResult", "Measurer", "measure_batch"]
# Worker processes import autotune.measure.worker, and with it this package: the parent-side
# pools load on first use, so a worker never imports them (nor the task and template machinery).
_LAZY = {"LocalBuilder": ".builder", "LocalRunner": ".runner"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def measure_batch(inputs: list[MeasureInput], builder: LocalBuilder, runner: LocalRunner) -> list[MeasureResult]:
    """Check data, then build all, then run all: one MeasureResult per input, in order."""
    inputs = list(inputs)
    runner.prepare(inputs)
    return runner.run(inputs, builder.build(inputs))


class Measurer:
    """One builder and one runner with the same options; `close()` (or `with`) stops their
    workers. Workers left running at interpreter exit are killed then too."""

    def __init__(self, options: MeasureOptions | None = None) -> None:
        from .builder import LocalBuilder
        from .runner import LocalRunner

        self.options = options or MeasureOptions()
        self.builder = LocalBuilder(self.options)
        try:
            self.runner = LocalRunner(self.options)
        except BaseException:
            self.builder.close()
            raise

    def measure(self, task: Task, indices: Iterable[int]) -> list[MeasureResult]:
        return measure_batch([MeasureInput(task, int(i)) for i in indices], self.builder, self.runner)

    def measure_inputs(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
        return measure_batch(inputs, self.builder, self.runner)

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids (builders, then the runner)."""
        return [*self.builder.pids, self.runner.pid]

    def close(self) -> None:
        self.builder.close()
        self.runner.close()

    def __enter__(self) -> Measurer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
