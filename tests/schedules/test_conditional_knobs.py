"""Conditional knobs (a space that is a union of per-algorithm spaces) and knobs added after
records were made (`absent`): no duplicate config is ever legal or proposed, and old records load."""
import random

import pytest
from hypothesis import given, settings, strategies as st

from autotune.errors import InstantiationError
from autotune.schedules.space import ConfigSpace


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
