"""The model-guided tuner: XGBoost cost models + simulated annealing + a diverse pick + epsilon-greedy.

Two models are refit after every batch, both ranking within one group per workload:
- a knob model (the config's knob values): cheap enough to score the thousands of points that
  simulated annealing visits, so it proposes a candidate pool;
- an IR model (features of the lowered loop IR plus the knobs): it ranks the pool.
Both mean the same at every shape of a template (another shape's knob values placed in this
space by name), so both are warm-started with records of other shapes of the same op (transfer,
search/transfer.py): with them the first batch is already chosen
by the models, starting from the other shapes' best configs. The batch is picked from the ranked
pool greedily with a penalty for resembling configs already picked (search/diverse.py), and a
fraction `epsilon` of it is random, so the models keep seeing where they are wrong.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..costmodel import XGBCostModel
from ..kernel_cache import DiskCache
from ..measure.types import MeasureResult
from ..schedules.task import Task
from .diverse import diverse_pick
from .feature_cache import config_features, features_of, keep
from .sa import anneal
from .tuner import Tuner

if TYPE_CHECKING:
    from .transfer import TransferSet

MIN_TRAIN = 8  # rows (this task's and transferred) before the models take over from random


class XGBTuner(Tuner):
    """diversity: the weight of diverse_pick's similarity penalty (0: the IR model's top n)."""

    def __init__(self, task: Task, seed: int | None = None, epsilon: float = 0.1, pool_factor: int = 3,
                 diversity: float = 0.5) -> None:
        super().__init__(task, seed)
        self.epsilon, self.pool_factor, self.diversity = epsilon, pool_factor, diversity
        model_seed = 0 if seed is None else seed
        self.knob_model = XGBCostModel("rank", seed=model_seed)
        self.ir_model = XGBCostModel("rank", seed=model_seed)
        self.rows: list[tuple[int, float]] = []            # (config index, throughput) of ok results
        self.transfer: TransferSet | None = None
        self._features: dict[int, np.ndarray] = {}
        self._disk = DiskCache()                # where measured configs' features are kept (feature_cache)
        self._fitted = False

    @property
    def transferred(self) -> int:
        """Records of other workloads the models were warm-started with."""
        return len(self.transfer) if self.transfer is not None else 0

    # -- features ----------------------------------------------------------------------------------
    def knob_features(self, indices: Sequence[int]) -> np.ndarray:
        return np.asarray([self.space.knob_vector(i) for i in indices], dtype=np.float32)

    def ir_features(self, index: int) -> np.ndarray:
        f = self._features.get(index)
        if f is None:
            f = self._features[index] = config_features(self.task, index)
        return f

    def add_transfer(self, rows: TransferSet) -> None:
        """Records of other shapes of this op: the models are refit with them at once."""
        self.transfer = rows
        self._refit()

    # -- learning ------------------------------------------------------------------------------------
    def update(self, indices: Sequence[int], results: Sequence[MeasureResult]) -> None:
        for idx, res in zip(indices, results):
            if res.ok and res.cost > 0:
                self.rows.append((idx, 1.0 / res.cost))
                if (f := self._features.get(idx)) is not None:
                    keep(self.task, idx, f, self._disk)     # a record now: the next process reads them
        self._refit()

    def _refit(self) -> None:
        if len(self.rows) + self.transferred < MIN_TRAIN:
            return
        own = [i for i, _ in self.rows]
        missing = [i for i in dict.fromkeys(own) if i not in self._features]     # a resume's records
        self._features.update((i, f) for i, f in zip(missing, features_of(self.task, missing, self._disk))
                              if f is not None)
        ir = [self.ir_features(i) for i in own]
        knobs = list(self.knob_features(own))
        y = [t for _, t in self.rows]
        groups = [self.task.workload_key] * len(own)
        if self.transfer is not None:
            t = self.transfer
            ir, knobs, y, groups = list(t.ir) + ir, list(t.knobs) + knobs, list(t.throughput) + y, t.groups + groups
        self.ir_model.fit(np.asarray(ir), np.asarray(y), groups)
        self.knob_model.fit(np.asarray(knobs), np.asarray(y), groups)
        self._fitted = True

    # -- proposing -----------------------------------------------------------------------------------
    def next_batch(self, n: int) -> list[int]:
        # the template's default config (what an untuned load runs) is measured first, so
        # tuning never ends with a kernel slower than the default
        out = self.take([self.task.default_index], 1)
        explore = round(n * self.epsilon) if self._fitted else 0
        exploit = n - explore - len(out)
        if self._fitted:
            starts = [i for i, _ in sorted(self.rows, key=lambda r: -r[1])[:16]]
            starts += self.transfer.starts if self.transfer is not None else []
            pool = anneal(self.space, lambda pts: self.knob_model.predict(self.knob_features(pts)),
                          keep=self.pool_factor * exploit, rng=self.rng, exclude=self.visited, starts=starts)
            pool = list(dict.fromkeys(starts + pool))
        else:
            pool = self._sample(self.pool_factor * n)
        out += self._pick(pool, exploit)
        out += self.random_unvisited(n - len(out))
        self.task.prelower(out)         # the batch (what the pool did not lower), on every core before the builder
        return out

    def _pick(self, pool: list[int], n: int) -> list[int]:
        """Up to n of the pool: ranked by the IR model and spread out, or as given before it is fit."""
        pool = [p for p in pool if p not in self.visited and self.is_valid(p)]
        if not pool or self.ir_model.booster is None:     # nothing to rank by: only what is taken is lowered
            return self.take(pool, n)
        self.task.prelower(pool)        # every core lowers the pool; the features read it
        scores = self.ir_model.predict(np.stack([self.ir_features(p) for p in pool]))
        chosen = diverse_pick(scores, [self.space.point2knob(p) for p in pool], n, self.diversity)
        return self.take([pool[i] for i in chosen], n)

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
