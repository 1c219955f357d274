"""The cost model: features of lowered loop IR, a gradient-boosted ranker over them, metrics.

Reads the lowered loop IR only (`autotune.ir.nodes` and the expression nodes it shares from
`autotune.te.expr`), plus the target's vector width and cores (`autotune.target.CpuFacts`, a leaf);
schedules, tensors and operations are never imported here.
"""
from .features import FEATURE_LEN, MAX_BUFFERS, MAX_KNOBS, MAX_LOOPS, extract, feature_names, with_knobs
from .metrics import group_spearman, pair_loss, rankdata, spearman, top_k_recall
from .xgb_model import XGBCostModel, normalise

__all__ = [
    "FEATURE_LEN",
    "MAX_BUFFERS",
    "MAX_KNOBS",
    "MAX_LOOPS",
    "XGBCostModel",
    "extract",
    "feature_names",
    "group_spearman",
    "normalise",
    "pair_loss",
    "rankdata",
    "spearman",
    "top_k_recall",
    "with_knobs",
]
