"""The learned cost model: gradient-boosted trees that rank candidate schedules by speed.

Labels are throughputs normalised per workload (throughput / best throughput of that
workload), so one model serves many shapes. The default objective is pairwise ranking with one
query group per workload: a tuner only needs the order of candidates, and XGBoost >= 2 ranks
badly without groups (AutoTVM passed none). Early stopping watches a held-out split, never the
training data: its pairwise logistic loss for ranking (Spearman on a small split is too coarse
and stopped after a handful of rounds), its RMSE for regression. Only XGBoost's stable API
(`xgb.train` on a `DMatrix`) is used; models persist as XGBoost JSON plus a JSON sidecar.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xgboost as xgb

from .metrics import pair_loss

OBJECTIVES = {"rank": "rank:pairwise", "reg": "reg:squarederror"}
_ALSO_ACCEPTED = ("rank:pairwise", "rank:ndcg", "reg:squarederror")
_NDCG_GRADES = 16   # rank:ndcg wants integer relevance (< 32 with exponential gain)
_FORMAT = "autotune.costmodel.xgb/1"
_MIN_ROWS_FOR_EARLY_STOP = 50
_HOLDOUT = 0.2
_PATIENCE = 20

DEFAULT_PARAMS: dict[str, Any] = {
    "max_depth": 3,            # as AutoTVM; on our matmul timings 3 ranked as well as 4-6, faster
    "eta": 0.2,
    "max_bin": 32,             # features are logs with few distinct values; more bins only cost time
    "min_child_weight": 1.0,
    "subsample": 1.0,          # no row sampling: keeps fits reproducible and small sets whole
    "colsample_bytree": 1.0,
    "lambda": 1.0,
    "gamma": 1e-4,
    "tree_method": "hist",
    "nthread": 1,              # small data: threads only add sync cost (3x slower on a busy 2-core box)
    # rank:pairwise only: pairs drawn over the whole group (XGBoost's default "topk" only pairs
    # the top documents and ranked the rest poorly in our tests; rank:ndcg keeps its defaults,
    # with which it learns nothing under "mean")
    "lambdarank_pair_method": "mean",
    "lambdarank_num_pair_per_sample": 32,
}
_PAIRWISE_ONLY = ("lambdarank_pair_method", "lambdarank_num_pair_per_sample")


class XGBCostModel:
    """Predicts a score per candidate (higher = faster) from feature rows.

    objective: "rank" (pairwise ranking within each workload) or "reg" (squared error on the
    normalised throughput). seed fixes the split and XGBoost's own randomness; with a fixed
    `nthread` the same data and seed give the same model. params override DEFAULT_PARAMS.
    """

    def __init__(self, objective: str = "rank", seed: int = 0, num_boost_round: int = 200,
                 params: dict[str, Any] | None = None) -> None:
        if objective not in OBJECTIVES and objective not in _ALSO_ACCEPTED:
            raise ValueError(f"objective must be one of {sorted(OBJECTIVES) + list(_ALSO_ACCEPTED)}, "
                             f"got {objective!r}")
        if num_boost_round < 1:
            raise ValueError(f"num_boost_round must be >= 1, got {num_boost_round}")
        self.objective = objective
        self.seed = int(seed)
        self.num_boost_round = int(num_boost_round)
        self.params = dict(params or {})
        self.booster: xgb.Booster | None = None
        self.best_iteration: int | None = None
        self.num_features: int | None = None

    @property
    def xgb_objective(self) -> str:
        return OBJECTIVES.get(self.objective, self.objective)

    @property
    def is_rank(self) -> bool:
        return self.xgb_objective.startswith("rank:")

    def _train_params(self) -> dict[str, Any]:
        p = {**DEFAULT_PARAMS, **self.params, "objective": self.xgb_objective, "seed": self.seed,
             "disable_default_eval_metric": 1}
        if self.xgb_objective != "rank:pairwise":
            for key in _PAIRWISE_ONLY:
                if key not in self.params:
                    p.pop(key, None)
        return p

    def fit(self, X: np.ndarray, throughput: np.ndarray, groups: Sequence[str]) -> XGBCostModel:
        """Train on successful measurements: X rows, their throughput (> 0), their workload keys."""
        X, y, g = _check_rows(X, throughput, groups)
        labels = normalise(y, g)
        train, held = _split(len(y), self.seed)
        dtrain = self._dmatrix(X[train], labels[train], g[train])
        kwargs: dict[str, Any] = {}
        if held.size and any(np.sum(g[held] == k) >= 2 for k in set(g[held].tolist())):
            dheld = self._dmatrix(X[held], labels[held], g[held])
            kwargs = {"evals": [(dheld, "held")], "custom_metric": self._heldout_metric(g[held]),
                      "early_stopping_rounds": _PATIENCE}
        self.booster = xgb.train(self._train_params(), dtrain, num_boost_round=self.num_boost_round,
                                 verbose_eval=False, **kwargs)
        self.best_iteration = (self.booster.best_iteration if kwargs
                               else self.num_boost_round - 1)
        self.num_features = X.shape[1]
        return self

    def _heldout_metric(self, held_groups: np.ndarray) -> Any:
        """The early-stopping criterion (lower is better) on the held-out DMatrix."""
        if not self.is_rank:
            return lambda pred, d: ("rmse", float(np.sqrt(np.mean((pred - d.get_label()) ** 2))))
        sorted_groups = np.sort(held_groups, kind="stable")     # the DMatrix's row order
        return lambda pred, d: ("pair_loss", pair_loss(pred, d.get_label(), sorted_groups))

    def _dmatrix(self, X: np.ndarray, labels: np.ndarray, g: np.ndarray) -> xgb.DMatrix:
        if not self.is_rank:
            return xgb.DMatrix(X, label=labels, nthread=self._nthread())
        order = np.argsort(g, kind="stable")        # query groups must be contiguous
        if self.xgb_objective == "rank:ndcg":
            labels = np.floor(labels * _NDCG_GRADES)
        d = xgb.DMatrix(X[order], label=labels[order], nthread=self._nthread())
        _, sizes = np.unique(g[order], return_counts=True)
        d.set_group(sizes)
        return d

    def _nthread(self) -> int:
        return int(self._train_params().get("nthread", 1))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Scores for rows of X (higher = faster); comparable within one workload."""
        if self.booster is None:
            raise RuntimeError("XGBCostModel.predict before fit or load")
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.num_features:
            raise ValueError(f"predict expects rows of {self.num_features} features, got shape {X.shape}")
        d = xgb.DMatrix(X, nthread=self._nthread())
        assert self.best_iteration is not None   # set with the booster (fit or load)
        return self.booster.predict(d, iteration_range=(0, int(self.best_iteration) + 1))

    def save(self, path: str | Path) -> None:
        """Write the booster as XGBoost JSON at `path` and our fields at `path` + ".meta.json"."""
        if self.booster is None:
            raise RuntimeError("XGBCostModel.save before fit")
        path = Path(path)
        path.write_bytes(bytes(self.booster.save_raw("json")))
        meta = {"format": _FORMAT, "objective": self.objective, "seed": self.seed,
                "num_boost_round": self.num_boost_round, "params": self.params,
                "best_iteration": self.best_iteration, "num_features": self.num_features}
        _meta_path(path).write_text(json.dumps(meta, indent=1, sort_keys=True))

    @classmethod
    def load(cls, path: str | Path) -> XGBCostModel:
        """Read a model written by `save`."""
        path = Path(path)
        meta = json.loads(_meta_path(path).read_text())
        if meta.get("format") != _FORMAT:
            raise ValueError(f"{_meta_path(path)}: expected format {_FORMAT!r}, got {meta.get('format')!r}")
        model = cls(meta["objective"], meta["seed"], meta["num_boost_round"], meta["params"])
        model.booster = xgb.Booster()
        model.booster.load_model(bytearray(path.read_bytes()))
        model.best_iteration = meta["best_iteration"]
        model.num_features = meta["num_features"]
        return model


def normalise(throughput: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """throughput / best throughput of the same workload: 1.0 for each workload's best."""
    out = np.empty_like(throughput, dtype=np.float64)
    for key in set(groups.tolist()):
        mask = groups == key
        out[mask] = throughput[mask] / throughput[mask].max()
    return out


def _check_rows(X: np.ndarray, throughput: np.ndarray, groups: Sequence[str]) -> tuple:
    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(throughput, dtype=np.float64).ravel()
    g = np.asarray([str(k) for k in groups])
    if X.ndim != 2 or X.shape[0] != y.size or g.size != y.size:
        raise ValueError(f"fit expects X of shape (n, features), n throughputs and n groups; got "
                         f"X {X.shape}, {y.size} throughputs, {g.size} groups")
    if y.size == 0:
        raise ValueError("fit needs at least one successful measurement")
    # failed measurements are filtered by the caller; a non-finite or zero target is a bug there
    assert np.all(np.isfinite(y)) and np.all(y > 0), "throughput must be finite and > 0"
    return X, y, g


def _split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic train / held-out row indices; no hold-out below 50 rows."""
    idx = np.arange(n)
    if n < _MIN_ROWS_FOR_EARLY_STOP:
        return idx, idx[:0]
    perm = np.random.default_rng(seed).permutation(n)
    n_held = round(n * _HOLDOUT)
    return np.sort(perm[n_held:]), np.sort(perm[:n_held])


def _meta_path(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")
