"""Timing shared by the benchmark scripts (imported as a sibling module: run them as
`python benchmarks/<name>.py`)."""
import time
from typing import Any, Callable

import numpy as np


def seconds(fn: Callable[[], Any], repeat: int) -> float:
    """Median of `repeat` timed calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))
