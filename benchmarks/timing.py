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


def interleaved(fns: Sequence[Callable[[], Any]], repeat: int, rounds: int = 3,
                stat: Callable[[list[float]], Any] = np.median) -> list[float]:
    """Seconds per call of each function: the best of `rounds` values of `seconds`, the functions
    taking turns within each round, so a burst of load from other processes on this machine hits
    all of them alike and is mostly filtered out."""
    best = [math.inf] * len(fns)
    for _ in range(rounds):
        best = [min(b, seconds(fn, repeat, stat)) for b, fn in zip(best, fns)]
    return best
