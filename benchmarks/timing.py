"""Timing shared by the benchmark scripts (imported as a sibling module: run them as
`python benchmarks/<name>.py`)."""
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def seconds(fn: Callable[[], Any], repeat: int, stat: Callable[[list[float]], Any] = np.median) -> float:
    """`stat` (the median, or e.g. np.min) of `repeat` timed calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(stat(times))


# OpenBLAS's threads keep spinning for a while after a call: MobileNet-V2 stack right after numpy
# matmuls 11.3 ms, after them and 0.3 s of waiting 4.4 ms (4.2 alone). The wait is busy, not a
# sleep: after 0.3 s asleep this machine ran it at 10.8 ms.
SETTLE_S = 0.3


def settle(seconds: float = SETTLE_S) -> None:
    """Wait, keeping this core busy, until other runtimes' threads have stopped spinning."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def repeat_for(fn: Callable[[], Any], span: float = 0.02, least: int = 5, most: int = 1000) -> int:
    """Calls per timing so that one timing spans about `span` seconds of `fn` (between `least`
    and `most`): a median of 5 calls of a 30 us model is one timer interrupt or one steal of
    this VM's vCPU away from a wrong figure."""
    fn()
    t = seconds(fn, 3, np.min)
    return max(least, min(most, math.ceil(span / max(t, 1e-9))))


def interleaved(fns: Sequence[Callable[[], Any]], repeat: int, rounds: int = 3,
                stat: Callable[[list[float]], Any] = np.median) -> list[float]:
    """Seconds per call of each function: the best of `rounds` values of `seconds`, the functions
    taking turns within each round, so a burst of load from other processes on this machine hits
    all of them alike and is mostly filtered out. Each timing starts after `settle`, so no function
    is timed against the still-spinning threads of another's runtime."""
    best = [math.inf] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            settle()
            best[i] = min(best[i], seconds(fn, repeat, stat))
    return best
