"""Measuring a CUDA candidate inside the runner worker.

The worker is a fresh interpreter (`subprocess`, never a fork of a process holding CUDA state)
and owns the GPU context. A candidate's cubin is loaded, run once on the task's inputs and
checked against the numpy reference, warmed up, then timed with CUDA events around `number`
back-to-back launches (`repeat` times; the CPU cache flush option does not apply). A CUDA error
(illegal address, launch failure) leaves the context unusable, so the reply asks the parent to
replace the worker.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..types import ErrorKind
from ..wire import first_line
from .run import run_candidate, run_reply


def event_timer(drv: Any) -> Callable[[Callable[[], None], int], float]:
    """Seconds of `number` launches measured on the GPU's clock (CUDA events)."""

    def timer(fn: Callable[[], None], number: int) -> float:
        start, end = drv.Event(), drv.Event()
        start.record()
        for _ in range(number):
            fn()
        end.record()
        end.synchronize()
        return start.time_till(end) / 1000.0
    return timer


def handle_cuda_run(req: dict[str, Any], cubin: bytes,
                    event: Callable[[dict[str, Any]], None]) -> tuple[dict[str, Any], bytes]:
    """One CUDA candidate: the CPU runner's protocol and replies, on the GPU's clock."""
    from ...codegen.cuda_device import driver
    from ...codegen.cuda_module import CudaFunction

    try:
        drv = driver()
    except Exception as exc:  # noqa: BLE001  (any driver failure means no GPU here: reported, not raised)
        return run_reply(ErrorKind.RUNTIME_ERROR, f"no GPU in the runner worker: {first_line(exc)}"), b""
    return run_candidate(req, event, lambda: CudaFunction(req["signature"], cubin),
                         timer=event_timer(drv), fatal=drv.Error)
