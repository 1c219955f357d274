"""The bounds on what stored bytes may become in this process: JSON of bounded size and depth,
and the shapes of the values every stored record carries.

Everything read back from a database row, a JSONL line or a kernel-cache file passes through
here before it is used, so a poisoned file gives a ValueError naming what was wrong, never a
RecursionError, a MemoryError or a ZeroDivisionError in a reader. This module imports nothing
but the standard library: the kernel cache uses it without loading SQLAlchemy.
"""
from __future__ import annotations

import json
import math
import warnings
from typing import Any

MAX_JSON_BYTES = 1 << 20      # one record, line or cache entry; real ones are a few KiB
MAX_JSON_DEPTH = 16           # configs nest 3 deep ({"knobs": {"tile": [...]}})
MAX_INT = (1 << 63) - 1       # what a 64-bit integer column holds


class Unreadable:
    """What a JSON column holds when its stored text is not bounded JSON (see `tolerant_loads`)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"<unreadable JSON: {self.reason}>"


def is_number(value: Any) -> bool:
    """An int or float that is not a bool (JSON true/false must not pass for 1/0)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_int(value: Any) -> bool:
    """An int (not a bool) that fits a 64-bit signed column."""
    return isinstance(value, int) and not isinstance(value, bool) and -MAX_INT <= value <= MAX_INT


def depth(value: Any) -> int:
    """How deeply lists and dicts nest in `value` (a scalar is 0); iterative, so never recursion-bound."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        if level > MAX_JSON_DEPTH:
            return level
        stack.extend((child, level + 1) for child in children)
    return deepest


def loads(text: str | bytes, what: str = "JSON") -> Any:
    """Parse `text` as JSON of at most MAX_JSON_BYTES and MAX_JSON_DEPTH; ValueError otherwise.
    (NaN and infinity parse, as Python's json does: the field checks name where they are not allowed.)"""
    if len(text) > MAX_JSON_BYTES:
        raise ValueError(f"{what} is {len(text)} bytes, over the limit of {MAX_JSON_BYTES}")
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} is not valid JSON ({e.msg} at column {e.colno})") from None
    except (UnicodeDecodeError, ValueError) as e:   # bytes that are not UTF-8; a too-long integer literal
        raise ValueError(f"{what} is not valid JSON ({e})") from None
    if depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    return value


def check_json(value: Any, what: str) -> None:
    """ValueError unless `value` is plain JSON within the depth bound, with finite numbers only."""
    if depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} is not plain JSON (no NaN or infinity, no objects): {e}") from None
    if len(text) > MAX_JSON_BYTES:
        raise ValueError(f"{what} is {len(text)} bytes as JSON, over the limit of {MAX_JSON_BYTES}")


def warn_skipped(source: str, what: str, error: ValueError) -> None:
    """One warning per bad stored item: readers go on with the items that are valid."""
    warnings.warn(f"tuning_db: skipping {what} of {source}: {error}", stacklevel=3)


def tolerant_loads(text: str | bytes) -> Any:
    """The database's JSON column reader: never raises, so one bad row cannot fail a whole query;
    the row's validation then finds the `Unreadable` and skips that row."""
    try:
        return loads(text)
    except ValueError as e:
        return Unreadable(str(e))


MAX_WORD = 64                 # a str parameter is a word: a mode or a dtype name


def check_params(params: Any, what: str = "params") -> dict[str, int | float | str | tuple[int, ...]]:
    """A task's parameters: names to 64-bit ints, lists of them (tuples in Python), floats other
    than NaN (Clip's absent bound is an infinity; JSON writes it as Python's json does, Infinity),
    or short strings (a mode, a dtype name)."""
    if not isinstance(params, dict):
        raise ValueError(f"{what}: expected a JSON object, got {_kind(params)}")
    out: dict[str, int | float | str | tuple[int, ...]] = {}
    for name, value in params.items():
        word = isinstance(value, str) and 0 < len(value) <= MAX_WORD
        if is_int(value) or (isinstance(value, float) and not math.isnan(value)) or word:
            out[name] = value
        elif isinstance(value, (list, tuple)) and all(is_int(v) for v in value):
            out[name] = tuple(value)
        else:
            raise ValueError(f"{what}[{name!r}]: expected an integer, a list of integers, a float that is not "
                             f"NaN or a string of 1 to {MAX_WORD} characters, got {short_repr(value)}")
    return out


def check_costs(costs: Any, ok: bool) -> tuple[float, ...]:
    """Seconds per call: positive and finite (a zero cost would be an infinitely fast kernel)."""
    if not isinstance(costs, (list, tuple)) or not all(is_number(c) and math.isfinite(c) and c > 0 for c in costs):
        raise ValueError(f"field 'costs': expected a list of positive finite seconds, got {short_repr(costs)}")
    if ok and not costs:
        raise ValueError("field 'costs': an ok record needs at least one timing, got []")
    return tuple(float(c) for c in costs)


def _kind(value: Any) -> str:
    return repr(value) if isinstance(value, Unreadable) else type(value).__name__


def short_repr(value: Any, limit: int = 80) -> str:
    """repr cut to `limit` characters, for error messages about values of any size."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
