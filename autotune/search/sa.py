"""Simulated annealing over a cost model: the optimizer that picks the model-based tuner's batches.

Parallel chains random-walk the config space (one knob changed per step), accept worse points
with a probability that shrinks as the temperature falls, and keep the best-scoring points seen
that are not excluded (already measured or known illegal).
"""
from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Sequence

import numpy as np

from ..schedules.space import ConfigSpace


def anneal(space: ConfigSpace, score: Callable[[Sequence[int]], np.ndarray], keep: int, rng: random.Random,
           exclude: set[int], starts: Sequence[int] = (), chains: int = 64, steps: int = 80,
           temperature: tuple[float, float] = (1.0, 0.0)) -> list[int]:
    """The `keep` highest-scoring points found (best first), none of them in `exclude`."""
    points = list(starts)[:chains]
    points += [space.random_index(rng) for _ in range(chains - len(points))]
    scores = np.asarray(score(points), dtype=np.float64)
    best: list[tuple[float, int]] = []
    in_best: set[int] = set()

    def offer(pts: Sequence[int], scs: np.ndarray) -> None:
        for p, sc in zip(pts, scs):
            if p in exclude or p in in_best:
                continue
            if len(best) < keep:
                heapq.heappush(best, (float(sc), p))
                in_best.add(p)
            elif sc > best[0][0]:
                _, old = heapq.heapreplace(best, (float(sc), p))
                in_best.discard(old)
                in_best.add(p)

    offer(points, scores)
    t0, t1 = temperature
    spread = float(np.ptp(scores)) or 1.0
    for step in range(steps):
        temp = (t0 + (t1 - t0) * step / max(steps - 1, 1)) * spread
        proposal = [space.neighbour(p, rng) for p in points]
        new_scores = np.asarray(score(proposal), dtype=np.float64)
        for i, (old, new) in enumerate(zip(scores, new_scores)):
            if new >= old or (temp > 0 and rng.random() < math.exp((new - old) / temp)):
                points[i], scores[i] = proposal[i], new
        offer(proposal, new_scores)
    return [p for _, p in sorted(best, reverse=True)]
