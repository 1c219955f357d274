"""Lowering a pool of configs in forked processes (`autotune.forked`, `Task.prelower`): the same
kernels and the same refusals as lowering here, results in order, and a broken pool is no error."""
import os
import re

import pytest

from autotune.errors import InstantiationError
from autotune.forked import map_forked
from autotune.schedules.task import create_task


def test_map_forked_runs_in_children_and_keeps_the_order():
    parent = os.getpid()
    out = map_forked(lambda x: (x * x, os.getpid()), list(range(11)), workers=2)
    assert [v for v, _ in out] == [x * x for x in range(11)]
    assert all(pid != parent for _, pid in out)
    assert map_forked(lambda x: os.getpid(), [1], workers=4) == [parent]      # one item: here


def test_map_forked_computes_here_what_a_broken_pool_did_not_return():
    parent = os.getpid()

    def dies_in_a_child(x):
        if os.getpid() != parent and x == 5:
            os._exit(3)
        return x + 1

    assert map_forked(dies_in_a_child, list(range(9)), workers=2) == list(range(1, 10))


def _conv():
    return create_task("conv2d", N=1, C=5, H=9, W=11, F=7, KH=3, KW=3, stride=1, padding=1)


def test_prelower_gives_the_kernels_and_refusals_of_lowering_here():
    forked, here = _conv(), _conv()
    indices = list(range(0, len(forked.config_space), max(1, len(forked.config_space) // 12)))[:12]
    forked.prelower(indices)
    assert all(i in forked._lowered for i in indices)
    refused = 0
    for i in indices:
        try:
            expected = str(here.lower(i))
        except InstantiationError as e:
            refused += 1
            with pytest.raises(InstantiationError, match=re.escape(str(e))):
                forked.lower(i)
            continue
        assert str(forked.lower(i)) == expected
    assert 0 < refused < len(indices)


def test_map_forked_runs_here_in_a_daemonic_process():
    """A multiprocessing pool's worker may not have children: the map runs in it instead."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        pids = pool.apply(_pids_of_a_map)
    assert len(set(pids)) == 1


def _pids_of_a_map():
    return map_forked(lambda x: os.getpid(), list(range(4)), workers=2)


def test_warnings_raised_in_a_child_are_raised_here():
    import warnings

    def warns(x):
        warnings.warn(f"item {x} in {os.getpid()}", UserWarning, stacklevel=1)
        return x

    with pytest.warns(UserWarning) as caught:
        assert map_forked(warns, [1, 2, 3], workers=2) == [1, 2, 3]
    assert sorted(str(w.message).split(" in ")[0] for w in caught) == ["item 1", "item 2", "item 3"]
    assert all(str(w.message).split(" in ")[1] != str(os.getpid()) for w in caught)


def test_validity_runs_the_template_only_and_agrees_with_lowering():
    """is_valid answers from instantiation (milliseconds) without lowering (up to seconds for a
    conv): the tuner checks many configs it never measures. Its answer is lowering's."""
    checked, lowered = _conv(), _conv()
    indices = list(range(0, len(checked.config_space), max(1, len(checked.config_space) // 16)))[:16]
    verdicts = [checked.is_valid(i) for i in indices]
    assert not checked._lowered                        # nothing was lowered to answer
    expected = []
    for i in indices:
        try:
            lowered.lower(i)
            expected.append(True)
        except InstantiationError:
            expected.append(False)
    assert verdicts == expected and True in verdicts and False in verdicts
    assert [lowered.is_valid(i) for i in indices] == expected      # from the lowered cache too


def test_before_its_model_is_fit_xgb_lowers_only_the_configs_it_proposes():
    """The first batch is the pool's first legal configs (nothing ranks them yet): lowering the
    whole pool for features nobody reads cost a conv's first batch twice its proposals' lowering."""
    from autotune.search.xgb import XGBTuner

    task = _conv()
    tuner = XGBTuner(task, seed=3)
    batch = tuner.next_batch(6)
    assert len(batch) == 6 == len(set(batch))
    assert sorted(task._lowered) == sorted(batch)
    assert all(task.is_valid(i) for i in batch)
