"""Genetic search: a population of measured configs bred by crossover of knobs and mutation."""
from __future__ import annotations

from collections.abc import Sequence

from ..measure.types import MeasureResult
from .tuner import Tuner


class GATuner(Tuner):
    """Fitness is measured throughput; parents are drawn in proportion to it (elitist)."""

    def __init__(self, *args, pop_size: int = 32, elite: int = 4, mutation_prob: float = 0.2, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pop_size, self.elite, self.mutation_prob = pop_size, elite, mutation_prob
        self.scores: dict[int, float] = {}

    def update(self, indices: Sequence[int], results: Sequence[MeasureResult]) -> None:
        for idx, res in zip(indices, results):
            self.scores[idx] = 1.0 / res.cost if res.ok else 0.0

    def _parents(self) -> list[tuple[int, float]]:
        ranked = sorted(self.scores.items(), key=lambda kv: -kv[1])[: self.pop_size]
        return [kv for kv in ranked if kv[1] > 0]

    def _child(self, parents: list[tuple[int, float]]) -> int:
        weights = [w for _, w in parents]
        a, b = self.rng.choices([p for p, _ in parents], weights=weights, k=2)
        ka, kb = self.space.point2knob(a), self.space.point2knob(b)
        child = [x if self.rng.random() < 0.5 else y for x, y in zip(ka, kb)]
        for i, d in enumerate(self.space.dims):
            if d > 1 and self.rng.random() < self.mutation_prob:
                child[i] = self.rng.randrange(d)
        return self.space.knob2point(self.space.canonical(child))

    def next_batch(self, n: int) -> list[int]:
        parents = self._parents()
        if len(parents) < 2:
            return self.random_unvisited(n)
        out = self.take((self._child(parents) for _ in range(30 * n)), n)
        if len(out) < n:
            out += self.random_unvisited(n - len(out))
        return out
