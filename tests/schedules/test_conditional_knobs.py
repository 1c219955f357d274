"""Conditional knobs (a space that is a union of per-algorithm spaces) and knobs added after
records were made (`absent`): no duplicate config is ever legal or proposed, and old records load.
A union past what a mixed-radix index counts numbers its canonical configs only."""
import itertools
import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from autotune.errors import InstantiationError
from autotune.schedules.canonical_index import CanonicalIndex
from autotune.schedules.space import MAX_CONFIGS, ConfigSpace


def declare(cfg):
    cfg.define_knob("algorithm", ["b", "a"], absent="a")
    cfg.define_knob("a_tile", [1, 2, 4], when=("algorithm", ("a",)))
    cfg.define_split("b_tile", 12, 2, policy="factors", when=("algorithm", ("b",)))
    cfg.define_knob("shared", [0, 1])


def space():
    s = ConfigSpace()
    declare(s)
    return s


def legal(s, i):
    try:
        s.get(i)
    except InstantiationError:
        return False
    return True


def test_exactly_one_legal_point_per_distinct_schedule():
    s = space()
    legal_points = [i for i in range(len(s)) if legal(s, i)]
    # algorithm b: 6 splits of 12 x 2 shared; algorithm a: 3 tiles x 2 shared
    assert len(legal_points) == 6 * 2 + 3 * 2
    read = {(s.get(i)["algorithm"].val, s.get(i)["a_tile"].val if s.get(i)["algorithm"].val == "a" else None,
             s.get(i)["b_tile"].size if s.get(i)["algorithm"].val == "b" else None, s.get(i)["shared"].val)
            for i in legal_points}
    assert len(read) == len(legal_points)


def test_duplicate_points_name_the_config_they_duplicate():
    s = space()
    dup = s.knob2point([0, 2, 0, 0])       # algorithm b with a_tile=4, which b never reads
    with pytest.raises(InstantiationError, match=f"duplicates config {s.knob2point([0, 0, 0, 0])}"):
        s.get(dup)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32))
def test_sampling_and_neighbours_stay_canonical(seed):
    s, rng = space(), random.Random(seed)
    i = s.random_index(rng)
    for _ in range(20):
        assert legal(s, i)
        i = s.neighbour(i, rng)


def test_neighbours_reach_every_algorithm():
    s, rng = space(), random.Random(0)
    seen, i = set(), 0
    for _ in range(200):
        i = s.neighbour(i, rng)
        seen.add(s.get(i)["algorithm"].val)
    assert seen == {"a", "b"}


def test_records_older_than_a_knob_load_as_the_value_they_meant():
    s = space()
    old = {"knobs": {"a_tile": 2, "shared": 1}}          # made before `algorithm` and `b_tile` existed
    cfg = s.from_json(old)
    assert (cfg["algorithm"].val, cfg["a_tile"].val, cfg["shared"].val) == ("a", 2, 1)
    assert s.from_json(cfg.to_json()).index == cfg.index


def test_conditions_must_name_an_earlier_choice_knob():
    s = ConfigSpace()
    with pytest.raises(ValueError, match="not an earlier define_knob"):
        s.define_knob("x", [1, 2], when=("algorithm", ("a",)))
    with pytest.raises(ValueError, match="absent="):
        s.define_knob("y", [1, 2], absent=3)


def canonical_points(dims, reads):
    """Every canonical point, by brute force: unread knobs (condition failing) at 0."""
    out = []
    for knob in itertools.product(*(range(d) for d in dims)):
        if all(r is None or knob[r[0]] in r[1] or knob[p] == 0 for p, r in enumerate(reads)):
            out.append(list(knob))
    return out


@st.composite
def conditional_dims(draw):
    """Up to 6 knobs of 1-4 values, each read always or under some values of an earlier knob."""
    dims = draw(st.lists(st.integers(1, 4), min_size=1, max_size=6))
    reads = [None]
    for p in range(1, len(dims)):
        on = draw(st.one_of(st.none(), st.integers(0, p - 1)))
        reads.append(None if on is None else (on, frozenset(draw(st.sets(st.integers(0, dims[on] - 1))))))
    return dims, reads


@settings(max_examples=200, deadline=None)
@given(conditional_dims())
def test_a_canonical_index_numbers_exactly_the_canonical_points(space_dims):
    dims, reads = space_dims
    counted, points = CanonicalIndex(dims, reads), canonical_points(dims, reads)
    assert counted.count() == len(points)
    assert [counted.point(i) for i in range(len(points))] == points       # in order, each once
    assert all(counted.index(p) == i for i, p in enumerate(points))
    assert counted.point(0) == [0] * len(dims)


def big_union():
    """Two algorithms whose knobs together pass 2**63 configs by mixed radix, about 2e12 canonical."""
    s = ConfigSpace()
    s.define_knob("algorithm", ["a", "b"])
    for i in range(40):
        s.define_knob(f"a{i}", [0, 1, 2] if i < 25 else [0], when=("algorithm", ("a",)))
        s.define_knob(f"b{i}", [0, 1], when=("algorithm", ("b",)))
    s.define_knob("shared", [0, 1])
    return s


def test_a_space_past_the_mixed_radix_counts_only_its_canonical_configs():
    s = big_union()
    assert math.prod(s.dims) > MAX_CONFIGS
    assert len(s) == (3 ** 25 + 2 ** 40) * 2
    assert s.get(0).to_json()["knobs"] == {name: 0 if name != "algorithm" else "a" for name in s.knobs}
    rng = random.Random(0)
    for _ in range(200):
        i = s.neighbour(s.random_index(rng), rng)
        cfg = s.get(i)
        assert 0 <= i < len(s) and s.from_json(cfg.to_json()).index == i
    b = s.from_json({"knobs": {**s.get(0).to_json()["knobs"], "algorithm": "b", "b7": 1}})
    assert b["b7"].val == 1 and s.get(b.index).to_json() == b.to_json()
    with pytest.raises(InstantiationError, match="never read duplicates config"):
        s.from_json({"knobs": {**s.get(0).to_json()["knobs"], "b7": 1}})      # algorithm a never reads b7
