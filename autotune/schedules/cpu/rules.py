"""The shared vocabulary of CPU default rules: what a template's default config is derived from.

A knob's first value is the default config (what an untuned kernel runs and what the xgb tuner
measures first). Templates put there the value a rule on the shape and the target picks (vector
lanes, cache sizes, cores) and keep the other values in a fixed order that no measurement chose.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...dtype import dtype_info
from ...target import CpuFacts, Target


def cpu_facts(cfg: Any) -> CpuFacts:
    """The facts of the target the config space is for (this machine's CPU when it has none)."""
    target = getattr(cfg, "target", None)
    if target is None or target.kind != "llvm":
        target = Target.parse("llvm")
    return target.cpu


def lanes(cfg: Any, dtype: str) -> int:
    """Elements of `dtype` in one vector register of the target."""
    return cpu_facts(cfg).lanes(dtype_info(dtype).bytes)


def first(chosen: Any, others: Sequence[Any]) -> list[Any]:
    """`chosen` (the rule's pick) followed by the other values in their given order."""
    return [chosen, *[v for v in others if v != chosen]]


def closest(value: float, options: Sequence[int]) -> int:
    """The option nearest to `value` (the smaller one on a tie)."""
    return min(options, key=lambda o: (abs(o - value), o))


def largest_fitting(options: Sequence[int], fits: Any) -> int:
    """The largest option for which `fits(option)` holds, else the smallest option."""
    ok = [o for o in options if fits(o)]
    return max(ok) if ok else min(options)


def split_first(inner: int, extent: int, others: Sequence[int]) -> list[list[int]]:
    """Two-way split candidates [-1, f] with the rule's inner factor first (shrunk to the extent)."""
    return [[-1, f] for f in first(min(inner, extent), [min(o, extent) for o in others])]
