"""Random search: uniform over the legal, never-measured configs."""
from __future__ import annotations

from .tuner import Tuner


class RandomTuner(Tuner):
    def next_batch(self, n: int) -> list[int]:
        return self.random_unvisited(n)
