"""Ranking-quality metrics for cost models: a tuner needs the order of candidates, not their costs.

Both functions take scores where higher means faster (predicted score, measured throughput).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def rankdata(x: Sequence[float] | np.ndarray) -> np.ndarray:
    """Ranks 1..n of `x`, ties sharing the average of the ranks they span (scipy's "average")."""
    a = np.asarray(x, dtype=np.float64).ravel()
    order = np.argsort(a, kind="stable")
    sorted_a = a[order]
    # start index of each run of equal values, and the run each sorted element belongs to
    starts = np.flatnonzero(np.r_[True, sorted_a[1:] != sorted_a[:-1]])
    ends = np.r_[starts[1:], a.size]
    run_of = np.repeat(np.arange(starts.size), ends - starts)
    avg = (starts + ends + 1) / 2.0           # mean of the 1-based ranks starts+1 .. ends
    ranks = np.empty(a.size, dtype=np.float64)
    ranks[order] = avg[run_of]
    return ranks


def spearman(pred: Sequence[float] | np.ndarray, true: Sequence[float] | np.ndarray) -> float:
    """Spearman rank correlation of `pred` and `true`, in [-1, 1], with average ranks for ties.

    It is the Pearson correlation of the ranks. Constant input (no order to agree with) and
    fewer than two items give 0.0, so a model that cannot separate candidates scores as chance.
    """
    p, t = np.asarray(pred, dtype=np.float64).ravel(), np.asarray(true, dtype=np.float64).ravel()
    if p.shape != t.shape:
        raise ValueError(f"spearman: pred has {p.size} values, true has {t.size}")
    if p.size < 2:
        return 0.0
    rp, rt = rankdata(p), rankdata(t)
    rp -= rp.mean()
    rt -= rt.mean()
    denom = float(np.sqrt((rp * rp).sum() * (rt * rt).sum()))
    return float((rp * rt).sum() / denom) if denom > 0 else 0.0


def top_k_recall(pred: Sequence[float] | np.ndarray, true: Sequence[float] | np.ndarray, k: int) -> float:
    """Fraction of the truly best `k` items that the model also puts in its top `k`, in [0, 1].

    This is what a tuner that measures the model's top-k gets: 1.0 means every truly best
    config would be measured. Ties are broken by position (stable sort), so the result is
    deterministic; k is clipped to the number of items.
    """
    p, t = np.asarray(pred, dtype=np.float64).ravel(), np.asarray(true, dtype=np.float64).ravel()
    if p.shape != t.shape:
        raise ValueError(f"top_k_recall: pred has {p.size} values, true has {t.size}")
    if k <= 0:
        raise ValueError(f"top_k_recall: k must be > 0, got {k}")
    k = min(k, p.size)
    if k == 0:
        return 0.0
    top_pred = set(np.argsort(-p, kind="stable")[:k].tolist())
    top_true = np.argsort(-t, kind="stable")[:k]
    return sum(int(i) in top_pred for i in top_true) / k


def group_spearman(pred: np.ndarray, true: np.ndarray, groups: Sequence[str]) -> float:
    """Mean Spearman over groups (workloads) with at least two rows; 0.0 when there are none."""
    g = np.asarray(groups)
    scores = [spearman(pred[g == key], true[g == key]) for key in dict.fromkeys(g.tolist())
              if int((g == key).sum()) >= 2]
    return float(np.mean(scores)) if scores else 0.0


def pair_loss(pred: np.ndarray, true: np.ndarray, groups: Sequence[str] | np.ndarray, max_rows: int = 512) -> float:
    """Mean logistic loss log(1 + exp(-(p_i - p_j))) over pairs of a group with true_i > true_j.

    The held-out form of XGBoost's rank:pairwise objective: unlike Spearman it moves smoothly
    with the scores, so early stopping on it does not halt at the first lucky plateau of a
    small validation set. Only the first `max_rows` rows of each group are paired (memory).
    """
    g = np.asarray(groups)
    pred, true = np.asarray(pred, dtype=np.float64), np.asarray(true, dtype=np.float64)
    total, count = 0.0, 0
    for key in dict.fromkeys(g.tolist()):
        rows = np.flatnonzero(g == key)[:max_rows]
        p, t = pred[rows], true[rows]
        better = t[:, None] > t[None, :]
        total += float(np.logaddexp(0.0, -(p[:, None] - p[None, :])[better]).sum())
        count += int(better.sum())
    return total / count if count else 0.0
