"""Grid search: every config in index order (exhaustive on small spaces)."""
from __future__ import annotations

from .tuner import Tuner


class GridTuner(Tuner):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._next = 0

    def next_batch(self, n: int) -> list[int]:
        out: list[int] = []
        size = len(self.space)
        while len(out) < n and self._next < size:
            out.extend(self.take([self._next], 1))
            self._next += 1
        return out
