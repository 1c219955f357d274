"""A map over forked processes, for pure-Python work on objects that do not pickle.

Lowering a config is pure Python (1-2 s for a conv kernel), and a tuner lowers a pool of
candidates before each batch to rank them. A template's computation holds closures, so the
task cannot be sent to a worker; a forked child inherits it instead, and only the item and
its result cross the pipe. Where fork is unavailable, in a daemonic process (a pool's worker),
or with one core or one item, the map runs here, in order. A pool that breaks (a child killed)
is not an error either: what it did not return is computed here.
"""
from __future__ import annotations

import multiprocessing
import sys
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from .target import usable_cores

T = TypeVar("T")
R = TypeVar("R")

_job: Callable[[Any], Any] | None = None     # the function, inherited by the children at fork


def _call(item: Any) -> tuple[Any, list[tuple[str, type[Warning]]]]:
    """The job's result and the warnings it raised: a child writes nothing itself (a lock that
    another of the parent's threads held at the fork, a console's, would never be released)."""
    assert _job is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _job(item)
    return result, [(str(w.message), w.category) for w in caught]


def map_forked(fn: Callable[[T], R], items: Sequence[T], workers: int | None = None) -> list[R]:
    """[fn(x) for x in items], spread over up to `workers` (default: the usable cores) forked
    processes; the warnings `fn` raised there are raised here. `fn` must return picklable values
    and must not need threads started before the fork (OpenMP's, LLVM's): it runs in a child
    that has only the calling thread."""
    global _job
    workers = min(workers or usable_cores(), len(items))
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods() \
            or multiprocessing.current_process().daemon:      # a daemonic process may not have children
        return [fn(x) for x in items]
    for stream in (sys.stdout, sys.stderr):   # a child must not flush a copy of buffered output
        stream.flush()
    _job = fn
    results: list[R] = []
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            for result, raised in pool.map(_call, items, chunksize=max(1, len(items) // (4 * workers))):
                results.append(result)
                for message, category in raised:      # as if the job had run here
                    warnings.warn(message, category, stacklevel=2)
    except BrokenProcessPool:
        pass
    finally:
        _job = None
    return results + [fn(x) for x in items[len(results):]]
