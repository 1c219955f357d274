"""Choosing a batch that is both good and spread out: a cost model's top candidates tend to be
one config and its one-knob neighbours, and measuring sixteen of those teaches little when the
model is wrong about that region (TVM's diversity filter and submodular pick serve the same end).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def diverse_pick(scores: Sequence[float] | np.ndarray, knobs: Sequence[Sequence[int]] | np.ndarray, n: int,
                 weight: float) -> list[int]:
    """Positions of `n` candidates, picked greedily by rank score minus `weight` times the
    similarity to the most similar candidate already picked.

    The rank score runs from 1 (the model's best) to 0 (its worst), so `weight` reads as "how many
    rank places a near-duplicate must beat": similarity is the share of knobs with equal values
    (1 for the same config). weight 0 is the plain top n.
    """
    s = np.asarray(scores, dtype=np.float64)
    k = np.asarray(knobs)
    m = s.size
    if m == 0 or n <= 0:
        return []
    rank = np.empty(m)
    rank[np.argsort(-s, kind="stable")] = 1.0 - np.arange(m) / max(m - 1, 1)
    similarity = np.zeros(m)
    taken = np.zeros(m, dtype=bool)
    picked: list[int] = []
    for _ in range(min(n, m)):
        value = np.where(taken, -np.inf, rank - weight * similarity)
        i = int(np.argmax(value))
        picked.append(i)
        taken[i] = True
        similarity = np.maximum(similarity, (k == k[i]).mean(axis=1) if k.ndim == 2 and k.shape[1] else 0.0)
    return picked
