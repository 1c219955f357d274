"""Config indices that count only canonical configs, for spaces too large to count every point.

A space's index is mixed radix over all its knobs (`ConfigSpace`), so its size is the product of
every knob's values, read or not. A template that unites several algorithms' spaces under an
"algorithm" knob multiplies them, though a config reads one: conv_transpose2d's sub-pixel conv
with its gather passed the 2**63 configs a record's index holds. Such a space numbers only its
canonical configs (every unread knob at its first value) instead: in knob order, first knob most
significant, each knob's digit counting the canonical completions of the knobs after it. Its
size is then the sum over algorithms of their products. Index 0 is still every knob's first
value (the default); spaces that fit the mixed radix keep it, so no stored index changes.
"""
from __future__ import annotations

from collections.abc import Sequence


class CanonicalIndex:
    """Index <-> knob positions over the canonical points of a space whose knob `p` has `dims[p]`
    values and is read only when knob `reads[p][0]` is at one of the positions `reads[p][1]`
    (`reads[p]` None: always read). Conditions name earlier knobs."""

    def __init__(self, dims: Sequence[int], reads: Sequence[tuple[int, frozenset[int]] | None]) -> None:
        self.dims, self.reads = list(dims), list(reads)
        self.conditions = sorted({r[0] for r in reads if r is not None})
        self._counts: dict[tuple[int, tuple[int, ...]], int] = {}

    def _choices(self, p: int, state: dict[int, int]) -> range:
        read = self.reads[p]
        return range(self.dims[p]) if read is None or state[read[0]] in read[1] else range(1)

    def count(self, p: int = 0, state: dict[int, int] | None = None) -> int:
        """Canonical completions of knobs p.. given the condition knobs' positions in `state`."""
        state = state or {}
        if p == len(self.dims):
            return 1
        key = (p, tuple(state[c] for c in self.conditions if c < p))
        if key not in self._counts:
            choices = self._choices(p, state)
            if p in self.conditions:
                self._counts[key] = sum(self.count(p + 1, {**state, p: v}) for v in choices)
            else:
                self._counts[key] = len(choices) * self.count(p + 1, state)
        return self._counts[key]

    def index(self, knob: Sequence[int]) -> int:
        """The index of a canonical point (ValueError for one that sets an unread knob)."""
        index, state = 0, dict[int, int]()
        for p, k in enumerate(knob):
            if k not in self._choices(p, state):
                raise ValueError(f"knob {p} at {k} is not canonical")
            if p in self.conditions:
                index += sum(self.count(p + 1, {**state, p: v}) for v in range(k))
                state[p] = k
            else:
                index += k * self.count(p + 1, state)
        return index

    def point(self, index: int) -> list[int]:
        """The canonical point at `index` (0 <= index < count())."""
        knob: list[int] = []
        state: dict[int, int] = {}
        for p in range(len(self.dims)):
            if p in self.conditions:
                for v in self._choices(p, state):
                    c = self.count(p + 1, {**state, p: v})
                    if index < c:
                        break
                    index -= c
                state[p] = v
            else:
                c = self.count(p + 1, state)
                v, index = divmod(index, c)
            knob.append(v)
        return knob
