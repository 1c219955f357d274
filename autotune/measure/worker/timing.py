"""Timing a kernel inside the runner worker: calibrated repeats of back-to-back calls."""
from __future__ import annotations

import functools
import itertools
import math
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

MAX_NUMBER = 1 << 24
MAX_GROWTH = 8
CLOCK_RESOLUTION_S = time.get_clock_info("perf_counter").resolution
_FLUSH: np.ndarray | None = None


MAX_SHARED_CACHE_BYTES = 64 << 20     # what a cold-weights rotation assumes at most (VMs report the host's)


@functools.cache
def last_level_cache_bytes() -> int:
    """The largest cache sysfs lists for cpu0 (32 MiB when it lists none); read once per process."""
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(base)
    except OSError:
        entries = []
    for entry in entries:
        try:
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            sizes.append(int(text.rstrip("KMG")) * scale)
        except (OSError, ValueError):    # not a cache's directory (uevent, power)
            continue
    return max(sizes, default=32 << 20)


def flush_cache() -> None:
    """Write every line of a buffer twice the last-level cache: the next call starts cold."""
    global _FLUSH
    if _FLUSH is None:
        _FLUSH = np.zeros(2 * last_level_cache_bytes(), dtype=np.uint8)
    _FLUSH += 1


MAX_COLD_COPIES = 64


def cold_copies(input_bytes: int, private_cache_bytes: int) -> int:
    """How many sets of inputs the timed calls take turns over so that their total is twice
    the private caches (a set at least that large needs no copy); at most MAX_COLD_COPIES."""
    if input_bytes <= 0:
        return 1
    return max(1, min(MAX_COLD_COPIES, math.ceil(2 * private_cache_bytes / input_bytes)))


def taking_turns(fns: list[Callable[[], None]]) -> Callable[[], None]:
    """One call of the next function of `fns` per call, round robin."""
    if len(fns) == 1:
        return fns[0]
    turn = itertools.cycle(fns)
    return lambda: next(turn)()


def time_calls(fn: Callable[[], None], number: int, flush: bool) -> float:
    """Seconds of `number` calls; never below the clock's resolution (a cost of 0 is no measurement)."""
    if flush:
        flush_cache()
    clock = time.perf_counter
    t0 = clock()
    for _ in itertools.repeat(None, number):
        fn()
    return max(clock() - t0, CLOCK_RESOLUTION_S)


def measure_costs(fn: Callable[[], None], options: dict[str, Any],
                  timer: Callable[[Callable[[], None], int], float] | None = None) -> list[float]:
    """`repeat` per-call costs. Without a fixed `number`, it grows until one timing lasts
    `min_repeat_ms`, and that timing is the first cost. Each step at least doubles `number`,
    jumping towards the estimate from the last timing but by at most MAX_GROWTH: one fast
    call on a busy machine must not set up seconds-long timings. `timer(fn, number)` gives the
    seconds of `number` calls (default: the host clock, flushing the cache if asked)."""
    min_s = options["min_repeat_ms"] / 1000.0
    if timer is None:
        def timer(f: Callable[[], None], n: int) -> float:
            return time_calls(f, n, options["flush_cache"])
    costs: list[float] = []
    number = options["number"]
    if number is None:
        number = 1
        while True:
            seconds = timer(fn, number)
            if seconds >= min_s or number >= MAX_NUMBER:
                break
            estimate = number * min_s / max(seconds, 1e-9) * 1.1
            number = min(MAX_NUMBER, MAX_GROWTH * number, max(2 * number, math.ceil(estimate)))
        costs.append(seconds / number)
    while len(costs) < options["repeat"]:
        costs.append(timer(fn, number) / number)
    return costs
