"""The model-guided tuner: XGBoost cost models + simulated annealing + epsilon-greedy exploration.

Two models are refit after every batch, both with a ranking objective:
- a knob model (the config's knob values): cheap enough to score the thousands of points that
  simulated annealing visits, so it proposes a candidate pool;
- an IR model (features of the lowered loop IR plus the knobs): it ranks the pool, and because
  loop-IR features mean the same thing at every shape, it is warm-started with records of other
  shapes of the same op (transfer) and is useful before this task has any measurement.
A fraction `epsilon` of every batch is random, so the models keep seeing where they are wrong.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..costmodel import XGBCostModel, extract
from ..measure.types import MeasureResult
from ..schedules.task import Task
from .sa import anneal
from .tuner import Tuner

MIN_TRAIN = 8  # measured configs before the task's own models take over from random/transfer


def config_features(task: Task, index: int) -> np.ndarray:
    """The IR model's features of one config: its lowered loop IR plus its knob vector."""
    return extract(task.lower(index), task.config_space.knob_vector(index))


class XGBTuner(Tuner):
    def __init__(self, task: Task, seed: int | None = None, epsilon: float = 0.1, pool_factor: int = 3) -> None:
        super().__init__(task, seed)
        self.epsilon, self.pool_factor = epsilon, pool_factor
        model_seed = 0 if seed is None else seed
        self.knob_model = XGBCostModel("rank", seed=model_seed)
        self.ir_model = XGBCostModel("rank", seed=model_seed)
        self.rows: list[tuple[int, float]] = []            # (config index, throughput) of ok results
        self.transfer: tuple[np.ndarray, np.ndarray, list[str]] | None = None
        self._features: dict[int, np.ndarray] = {}
        self._fitted = False

    # -- features ----------------------------------------------------------------------------------
    def knob_features(self, indices: Sequence[int]) -> np.ndarray:
        return np.asarray([self.space.knob_vector(i) for i in indices], dtype=np.float32)

    def ir_features(self, index: int) -> np.ndarray:
        f = self._features.get(index)
        if f is None:
            f = self._features[index] = config_features(self.task, index)
        return f

    def add_transfer(self, features: np.ndarray, throughput: np.ndarray, groups: list[str]) -> None:
        """Records of other shapes of this op (their IR features), to warm-start the IR model."""
        if len(features):
            self.transfer = (features, throughput, groups)
            self._refit()

    # -- learning ------------------------------------------------------------------------------------
    def update(self, indices: Sequence[int], results: Sequence[MeasureResult]) -> None:
        for idx, res in zip(indices, results):
            if res.ok and res.cost > 0:
                self.rows.append((idx, 1.0 / res.cost))
        self._refit()

    def _refit(self) -> None:
        own_x = [self.ir_features(i) for i, _ in self.rows]
        own_y = [t for _, t in self.rows]
        groups = [self.task.workload_key] * len(own_y)
        x, y = own_x, own_y
        if self.transfer is not None:
            tx, ty, tg = self.transfer
            x, y, groups = list(tx) + own_x, list(ty) + own_y, list(tg) + groups
        if len(y) >= MIN_TRAIN:
            self.ir_model.fit(np.asarray(x), np.asarray(y), groups)
        if len(self.rows) >= MIN_TRAIN:
            self.knob_model.fit(self.knob_features([i for i, _ in self.rows]), np.asarray(own_y),
                                [self.task.workload_key] * len(own_y))
            self._fitted = True

    # -- proposing -----------------------------------------------------------------------------------
    def _rank_by_ir(self, pool: list[int], n: int) -> list[int]:
        pool = [p for p in pool if p not in self.visited and self.is_valid(p)]
        if not pool or self.ir_model.booster is None:
            return self.take(pool, n)
        scores = self.ir_model.predict(np.stack([self.ir_features(p) for p in pool]))
        return self.take([pool[i] for i in np.argsort(-scores, kind="stable")], n)

    def next_batch(self, n: int) -> list[int]:
        # the template's default config (index 0, what an untuned load runs) is measured first,
        # so tuning never ends with a kernel slower than the default
        default = self.take([0], 1) if not self._fitted else []
        explore = round(n * self.epsilon) if self._fitted else 0
        exploit = n - explore - len(default)
        if self._fitted:
            best_seen = [i for i, _ in sorted(self.rows, key=lambda r: -r[1])[:16]]
            pool = anneal(self.space, lambda pts: self.knob_model.predict(self.knob_features(pts)),
                          keep=self.pool_factor * exploit, rng=self.rng, exclude=self.visited, starts=best_seen)
        else:
            pool = self._sample(self.pool_factor * n)
        out = default + self._rank_by_ir(pool, exploit)
        return out + self.random_unvisited(n - len(out))

    def _sample(self, k: int) -> list[int]:
        """k random unvisited indices, not yet marked visited (a pool to rank)."""
        seen: set[int] = set()
        for _ in range(20 * k):
            if len(seen) == k:
                break
            i = self.space.random_index(self.rng)
            if i not in self.visited:
                seen.add(i)
        return sorted(seen)
