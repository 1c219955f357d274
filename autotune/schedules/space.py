"""Config spaces: one object in two modes, as in AutoTVM.

While collecting, a template's `cfg.define_*` calls declare knobs in a `ConfigSpace`; while
instantiating, the same calls are no-ops on a `ConfigEntity`, and `cfg[name]` is the chosen value
with an `apply`. A config is one integer (mixed radix over the knobs, first knob fastest; in a
space whose product of knobs passes 2**63, a count of its canonical configs only:
`canonical_index`) and a JSON dict; `index <-> knob indices` is deterministic. Records store
knob values, not indices, so they stay valid when a template reorders a knob's values or adds a
knob (its `absent` value says what records made before it meant).

A knob may be conditional: `when=("algorithm", ("nchwc",))` means it is read only when knob
`algorithm` takes one of those values. A config whose unread knobs are not at their first value
is a duplicate and is illegal (never measured); sampling and neighbours produce canonical
configs only, so a space that is a union of per-algorithm spaces costs no wasted trials.
"""
from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InstantiationError, ScheduleError
from ..te.expr import IterVar
from .canonical_index import CanonicalIndex
from .schedule import Schedule, Stage


def _extent(axis: IterVar | int) -> int:
    return axis if isinstance(axis, int) else axis.extent


def _stage(s: Schedule, t: Any) -> Stage:
    return t if isinstance(t, Stage) else s[t]


# -- chosen values (what templates apply) --------------------------------------------------------
@dataclass(frozen=True)
class SplitEntity:
    """Factors from outer to inner; the outermost is -1 (whatever remains, with a tail)."""

    size: tuple[int, ...]

    def apply(self, s: Schedule, stage: Any, axis: IterVar) -> list[IterVar]:
        st, out = _stage(s, stage), []
        for f in self.size[:0:-1]:
            axis, inner = st.split(axis, f)
            out.append(inner)
        return [axis, *reversed(out)]

    def to_json(self) -> Any:
        return list(self.size)


@dataclass(frozen=True)
class OtherEntity:
    val: Any

    def to_json(self) -> Any:
        return self.val


@dataclass(frozen=True)
class ReorderEntity:
    perm: tuple[int, ...]

    def apply(self, s: Schedule, stage: Any, axes: Sequence[IterVar]) -> list[IterVar]:
        ordered = [axes[i] for i in self.perm]
        _stage(s, stage).reorder(*ordered)
        return ordered

    def to_json(self) -> Any:
        return list(self.perm)


@dataclass(frozen=True)
class AnnotateEntity:
    anns: tuple[str, ...]

    def apply(self, s: Schedule, stage: Any, axes: Sequence[IterVar]) -> None:
        st = _stage(s, stage)
        for ann, axis in zip(self.anns, axes):
            if ann == "unroll":
                st.unroll(axis)
            elif ann == "vec":
                st.vectorize(axis)
            elif ann == "parallel":
                st.parallel(axis)

    def to_json(self) -> Any:
        return list(self.anns)


# -- knobs (the set of values a name may take) ---------------------------------------------------
@dataclass(frozen=True)
class Knob:
    name: str
    kind: str                 # "split" | "other" | "reorder" | "annotate"
    entities: tuple[Any, ...]
    when: tuple[str, tuple[Any, ...]] | None = None   # (knob, values): read only when that knob takes one
    absent: Any = None        # the JSON value a record without this knob means (None: such records are stale)

    def __len__(self) -> int:
        return len(self.entities)

    def index_of_json(self, value: Any) -> int:
        for i, e in enumerate(self.entities):
            if e.to_json() == value:
                return i
        raise InstantiationError(f"knob {self.name}: {value!r} is not one of its {len(self)} values")


def _factorizations(n: int, parts: int) -> list[tuple[int, ...]]:
    """All ways to write n as an ordered product of `parts` factors."""
    if parts == 1:
        return [(n,)]
    out: list[tuple[int, ...]] = []
    for d in range(1, n + 1):
        if n % d == 0:
            out.extend((d, *rest) for rest in _factorizations(n // d, parts - 1))
    return out


def split_candidates(extent: int, num_outputs: int, policy: str, candidate: Sequence[Sequence[int]] | None,
                     max_factor: int | None) -> list[tuple[int, ...]]:
    """The inner factor tuples of a split (outermost left as -1); illegal ones never appear."""
    if policy == "factors":
        inner = [f[1:] for f in _factorizations(extent, num_outputs)]
    elif policy == "power2":
        pows = [2 ** i for i in range(int(math.log2(extent)) + 1)]
        inner = [c for c in itertools.product(pows, repeat=num_outputs - 1) if math.prod(c) <= extent]
    elif policy == "candidate":
        if not candidate:
            raise ValueError("define_split with policy='candidate' needs candidate=[...]")
        inner = [tuple(c[1:]) if len(c) == num_outputs else tuple(c) for c in candidate]
        bad = [c for c in inner if len(c) != num_outputs - 1]
        if bad:
            raise ValueError(f"define_split candidates must have {num_outputs} (or {num_outputs - 1}) factors, "
                             f"got {bad[0]}")
        # factors past the extent shrink to it (a small shape still gets its widest tile)
        inner = [tuple(min(f, extent) for f in c) for c in inner if all(f > 0 for f in c)]
        inner = [c for c in inner if math.prod(c) <= extent] or [(1,) * (num_outputs - 1)]
    else:
        raise ValueError(f"define_split: unknown policy {policy!r}; expected factors, power2 or candidate")
    if max_factor is not None:
        inner = [c for c in inner if all(f <= max_factor for f in c)]
    seen, out = set(), []
    for c in inner:
        if c not in seen:
            seen.add(c)
            out.append((-1, *c))
    if not out:
        raise ValueError(f"define_split: no legal split of extent {extent} under policy {policy!r}")
    return out


Condition = tuple[str, Sequence[Any]]
MAX_CONFIGS = 2 ** 63 - 1      # a record's config index is a signed 64-bit integer (tuning_db)


class ConfigSpace:
    """Collect mode: `define_*` declares knobs; `cfg[name]` is the knob's first value.
    `target` is what the task compiles for: templates derive their defaults from it.
    `constant_inputs`: the input positions that never change where the kernel runs (a model's
    weights), which default rules may weigh (`rules.constant_input`); only `Task.default_for`
    defines a space with them, and takes nothing from it but its first config."""

    def __init__(self, target: Any = None, constant_inputs: tuple[int, ...] = ()) -> None:
        self.target = target
        self.constant_inputs = constant_inputs
        self.knobs: dict[str, Knob] = {}
        self.constraints_broken: str | None = None
        self.flop: float | None = None
        # (knobs counted, mixed-radix size, the canonical index where that passes MAX_CONFIGS)
        self._layout: tuple[int, int, CanonicalIndex | None] | None = None

    # -- declaring knobs -------------------------------------------------------------------------
    def _add(self, name: str, kind: str, entities: Sequence[Any], when: Condition | None = None,
             absent: Any = None) -> None:
        if name in self.knobs:
            raise ValueError(f"knob {name!r} is defined twice")
        if not entities:
            raise ValueError(f"knob {name!r} has no values")
        cond = None
        if when is not None:
            on, values = when
            if on not in self.knobs or self.knobs[on].kind != "other":
                raise ValueError(f"knob {name!r}: its condition names {on!r}, which is not an earlier define_knob")
            cond = (on, tuple(values))
        self.knobs[name] = Knob(name, kind, tuple(entities), cond, absent)
        if (size := self._size()) > MAX_CONFIGS:
            del self.knobs[name]
            raise ValueError(f"knob {name!r} takes the config space to {size:.3g} canonical configs, more "
                             f"than the {MAX_CONFIGS + 1:.3g} a record's index can count")

    def define_split(self, name: str, axis: IterVar | int, num_outputs: int = 2, policy: str = "factors",
                     candidate: Sequence[Sequence[int]] | None = None, max_factor: int | None = None,
                     when: Condition | None = None) -> None:
        if not 2 <= num_outputs <= 4:
            raise ValueError(f"define_split {name!r}: num_outputs must be 2..4, got {num_outputs}")
        sizes = split_candidates(_extent(axis), num_outputs, policy, candidate, max_factor)
        self._add(name, "split", [SplitEntity(s) for s in sizes], when)

    def define_knob(self, name: str, choices: Sequence[Any], when: Condition | None = None,
                    absent: Any = None) -> None:
        """A knob over `choices`; `absent` is the choice records made before it existed meant."""
        if absent is not None and absent not in choices:
            raise ValueError(f"knob {name!r}: absent={absent!r} is not one of its choices")
        self._add(name, "other", [OtherEntity(c) for c in choices], when, absent)

    def define_reorder(self, name: str, axes: Sequence[IterVar], policy: str = "all",
                       candidate: Sequence[Sequence[int]] | None = None) -> None:
        n = len(axes)
        if policy == "all":
            perms = list(itertools.permutations(range(n)))
        elif policy == "candidate" and candidate:
            perms = [tuple(p) for p in candidate if sorted(p) == list(range(n))]
        else:
            raise ValueError(f"define_reorder {name!r}: policy must be 'all' or 'candidate' with candidate=")
        self._add(name, "reorder", [ReorderEntity(p) for p in perms])

    def define_annotate(self, name: str, axes: Sequence[IterVar], policy: str) -> None:
        options = {"try_unroll": ("none", "unroll"), "try_vec": ("none", "vec"),
                   "try_unroll_vec": ("none", "unroll", "vec")}.get(policy)
        if options is None:
            raise ValueError(f"define_annotate {name!r}: unknown policy {policy!r}")
        combos = itertools.product(options, repeat=len(axes))
        self._add(name, "annotate", [AnnotateEntity(c) for c in combos])

    def raise_if(self, cond: bool, msg: str) -> None:
        """Templates state constraints here; an entity raises InstantiationError when one breaks."""

    def add_flop(self, flop: float) -> None:
        """The task's work, where the computation a config builds is not the one it stands for (a
        Winograd conv multiplies less than the conv it computes): GFLOP/s compare across configs."""
        self.flop = float(flop)

    def __getitem__(self, name: str) -> Any:
        return self.knobs[name].entities[0]

    # -- the space as a whole ------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._size()

    def _size(self) -> int:
        _, dense, counted = self._current_layout()
        return dense if counted is None else counted.count()

    @property
    def dims(self) -> list[int]:
        return [len(k) for k in self.knobs.values()]

    def _canonical_index(self) -> CanonicalIndex | None:
        """The index over canonical configs, for a space whose mixed radix passes MAX_CONFIGS."""
        return self._current_layout()[2]

    def _current_layout(self) -> tuple[int, int, CanonicalIndex | None]:
        """How indices count this space, made once per set of knobs (they only grow while a
        template defines them): indices are decoded for every candidate a tuner ranks."""
        if self._layout is None or self._layout[0] != len(self.knobs):
            dims = self.dims
            dense, counted = math.prod(dims), None
            if dense > MAX_CONFIGS:
                names = list(self.knobs)
                reads = [None if k.when is None else
                         (names.index(k.when[0]),
                          frozenset(i for i, e in enumerate(self.knobs[k.when[0]].entities) if e.val in k.when[1]))
                         for k in self.knobs.values()]
                counted = CanonicalIndex(dims, reads)
            self._layout = (len(self.knobs), dense, counted)
        return self._layout

    def point2knob(self, index: int) -> list[int]:
        if not 0 <= index < len(self):
            raise InstantiationError(f"config index {index} is outside the space of {len(self)} configs")
        counted = self._canonical_index()
        if counted is not None:
            return counted.point(index)
        out = []
        for d in self.dims:
            out.append(index % d)
            index //= d
        return out

    def knob2point(self, knob: Sequence[int]) -> int:
        counted = self._canonical_index()
        if counted is not None:
            try:
                return counted.index(knob)
            except ValueError:      # a knob its choices never read is set
                raise InstantiationError("a config that sets knobs its choices never read duplicates config "
                                         f"{counted.index(self.canonical(knob))}") from None
        index, scale = 0, 1
        for k, d in zip(knob, self.dims):
            index += k * scale
            scale *= d
        return index

    def _unread(self, knob: Sequence[int]) -> list[int]:
        """Positions of the conditional knobs this point does not read (their condition fails)."""
        names = list(self.knobs)
        out = []
        for pos, k in enumerate(self.knobs.values()):
            if k.when is not None:
                on, values = k.when
                if self.knobs[on].entities[knob[names.index(on)]].val not in values:
                    out.append(pos)
        return out

    def canonical(self, knob: Sequence[int]) -> list[int]:
        """The point with every unread knob at its first value (the one config it duplicates)."""
        out = list(knob)
        for pos in self._unread(out):
            out[pos] = 0
        return out

    def get(self, index: int) -> ConfigEntity:
        knob = self.point2knob(index)
        if self.canonical(knob) != knob:
            raise InstantiationError(f"config {index} sets knobs its choices never read; it duplicates config "
                                     f"{self.knob2point(self.canonical(knob))}")
        return ConfigEntity(self, index, {name: k.entities[i] for (name, k), i in zip(self.knobs.items(), knob)})

    def from_json(self, d: Any) -> ConfigEntity:
        """The entity of a JSON config ({"index": i, "knobs": {...}}), checked knob by knob."""
        if not isinstance(d, dict) or not isinstance(d.get("knobs"), dict):
            raise InstantiationError(f"a config must be a JSON object with 'knobs', got {d!r}")
        knobs = dict(d["knobs"])
        for name, k in self.knobs.items():      # a record older than a knob it reads: the value it meant
            read = k.when is None or knobs.get(k.when[0]) in k.when[1]
            if name not in knobs and k.absent is not None and read:
                knobs[name] = k.absent
        names = list(self.knobs)
        for pos, k in enumerate(self.knobs.values()):   # an unread knob the record lacks: canonical
            if k.name not in knobs and k.when is not None and knobs.get(k.when[0], k.absent) not in k.when[1]:
                knobs[names[pos]] = k.entities[0].to_json()
        missing = set(self.knobs) - set(knobs)
        if missing or set(knobs) - set(self.knobs):
            raise InstantiationError(f"config knobs {sorted(knobs)} do not match the space's {sorted(self.knobs)}")
        index = self.knob2point([k.index_of_json(knobs[n]) for n, k in self.knobs.items()])
        return self.get(index)

    def random_index(self, rng: random.Random) -> int:
        """A uniformly drawn canonical config."""
        return self.knob2point(self.canonical([rng.randrange(d) for d in self.dims]))

    def neighbour(self, index: int, rng: random.Random) -> int:
        """A config differing in one knob it reads (the random walk step of SA and GA mutation).
        Changing a condition's knob draws the knobs it newly reads at random."""
        knob = self.point2knob(index)
        unread = set(self._unread(knob))
        movable = [i for i, d in enumerate(self.dims) if d > 1 and i not in unread]
        if not movable:
            return index
        i = rng.choice(movable)
        knob[i] = rng.choice([v for v in range(self.dims[i]) if v != knob[i]])
        for pos in unread - set(self._unread(knob)):
            knob[pos] = rng.randrange(self.dims[pos])
        return self.knob2point(self.canonical(knob))

    def knob_vector(self, index: int) -> list[float]:
        """The config as numbers for the cost model: split factors as log2, numeric knobs as
        values, other knobs as their position in this space's list."""
        out: list[float] = []
        for k, i in zip(self.knobs.values(), self.point2knob(index)):
            out.extend(_knob_numbers(k, i))
        return out

    def aligned_knob_vector(self, knobs: dict[str, Any]) -> list[float]:
        """The knob vector, in this space's layout, of a config of any shape of the template
        (its JSON knob values). Spaces of one template differ by shape in their knobs, and in the
        order of a knob's values (the rules list the default first), so values are looked up by
        name and value; a knob this space lacks, or a value it cannot place, is NaN (missing)."""
        out: list[float] = []
        for name, k in self.knobs.items():
            v = knobs.get(name)
            if k.kind == "split":               # factors mean the same whether or not this shape offers them
                out.extend(_log2_factors(v, len(k.entities[0].size)))
                continue
            values = [e.to_json() for e in k.entities]
            if v in values:
                out.extend(_knob_numbers(k, values.index(v)))
            elif k.kind == "other" and isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append(float(v))        # a number this shape does not offer means the same
            else:
                out.append(math.nan)
        return out

    def __repr__(self) -> str:
        body = ", ".join(f"{n}: {len(k)}" for n, k in self.knobs.items())
        return f"ConfigSpace(len={len(self)}, {{{body}}})"


def _knob_numbers(k: Knob, i: int) -> list[float]:
    """The knob vector's numbers of value i of knob k (see ConfigSpace.knob_vector)."""
    e = k.entities[i]
    if k.kind == "split":
        return _log2_factors(e.to_json(), len(e.size))
    if k.kind == "other" and isinstance(e.val, (int, float)) and not isinstance(e.val, bool):
        return [float(e.val)]
    return [float(i)]


def _log2_factors(v: Any, parts: int) -> list[float]:
    """log2 of a split's inner factors from its JSON value; NaN for a split of another shape."""
    if isinstance(v, list) and len(v) == parts and all(isinstance(f, int) and f > 0 for f in v[1:]):
        return [math.log2(f) for f in v[1:]]
    return [math.nan] * (parts - 1)


class ConfigEntity:
    """Apply mode: one point of a space. `define_*` are no-ops; `cfg[name]` is the chosen value."""

    def __init__(self, space: ConfigSpace, index: int, values: dict[str, Any]) -> None:
        self.space, self.index, self._values = space, index, values
        self.target = space.target

    def define_split(self, *args: Any, **kwargs: Any) -> None: pass
    def define_knob(self, *args: Any, **kwargs: Any) -> None: pass
    def define_reorder(self, *args: Any, **kwargs: Any) -> None: pass
    def define_annotate(self, *args: Any, **kwargs: Any) -> None: pass
    def add_flop(self, flop: float) -> None: pass

    def raise_if(self, cond: bool, msg: str) -> None:
        if cond:
            raise InstantiationError(f"config {self.index}: {msg}")

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise InstantiationError(f"config has no knob {name!r}") from None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "knobs": {n: v.to_json() for n, v in self._values.items()}}

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __repr__(self) -> str:
        return f"ConfigEntity({self.index}, {self.to_json()['knobs']})"


# What a template may raise for a config that is illegal for its shape (never measured).
INSTANTIATION_ERRORS: tuple[type[Exception], ...] = (InstantiationError, ScheduleError)


class KnobScope:
    """A config (space or entity) seen with a prefix on every knob name: one template body
    defines and reads its knobs once per stage it schedules (each product of a GEMM chain), and
    the stages' knobs stay distinct. Everything else (`target`, ...) is the config's own. A
    condition names a knob of the scope, or with `outer_conditions` one of the config's own (a
    variant of an algorithm, its knobs read under the config's algorithm knob)."""

    def __init__(self, cfg: Any, prefix: str, outer_conditions: bool = False) -> None:
        self.cfg, self.prefix, self.outer_conditions = cfg, prefix, outer_conditions

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cfg, name)

    def _when(self, when: Condition | None) -> Condition | None:
        if when is None or self.outer_conditions:
            return when
        return self.prefix + when[0], when[1]

    def define_split(self, name: str, *args: Any, when: Condition | None = None, **kwargs: Any) -> None:
        self.cfg.define_split(self.prefix + name, *args, when=self._when(when), **kwargs)

    def define_knob(self, name: str, *args: Any, when: Condition | None = None, **kwargs: Any) -> None:
        self.cfg.define_knob(self.prefix + name, *args, when=self._when(when), **kwargs)

    def __getitem__(self, name: str) -> Any:
        return self.cfg[self.prefix + name]
