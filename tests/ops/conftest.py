"""Shared by the op tests: a private kernel cache and no tuning database (so ops run their
template's default config), `check_configs`, which runs a template's configs against numpy, and
`check_each_value`, which runs every value of one algorithm knob against numpy."""
import math
import warnings

import numpy as np
import pytest

import autotune
from autotune import runtime
from autotune.measure.check_data import tolerance
from autotune.measure.worker.run import compare
from autotune.testing import legal_configs


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AUTOTUNE_DB", str(tmp_path / "absent.db"))
    runtime.clear_caches()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="autotune: no tuned record")
        yield tmp_path


def _check_configs(op, n_random=2, seed=0, exact=False, **params):
    """The default config and `n_random` random ones of op's template give numpy's answer
    (`exact`: bit for bit, for ops that compute nothing); a loop that fails to vectorize fails."""
    task = autotune.create_task(op, **params)
    inputs = task.make_inputs(np.random.default_rng(seed))
    want = task.reference(inputs)
    picks = legal_configs(task, n_random, seed)
    assert picks[:1] == [0], f"{op}: config 0 is not legal at {params}"
    reduction = max(1, math.prod(task.arg_specs[0][0]) // max(1, math.prod(task.arg_specs[-1][0])))
    for index in picks:
        s, args = task.instantiate(index)
        with warnings.catch_warnings():
            warnings.simplefilter("error")                 # a loop that fails to vectorize warns
            f = autotune.build(s, args)
        outs = [np.full(shape, np.nan, dtype) if np.dtype(dtype).kind == "f" else np.full(shape, np.array(-7).astype(dtype))
                for shape, dtype in task.arg_specs[task.num_inputs:]]
        f(*inputs, *outs)
        for got, ref in zip(outs, want):
            rtol, atol = (0.0, 0.0) if exact else tolerance(str(got.dtype), reduction, {})
            wrong = compare("out", got, np.asarray(ref), rtol, atol)
            assert wrong is None, f"{op} config {task.config(index)}: {wrong}"
    return task


@pytest.fixture
def check_configs():
    return _check_configs


def _check_each_value(task, knob, seed=0):
    """Every value of `knob` (an algorithm knob), with the default config's other knobs, gives
    numpy's answer (rtol and atol 1e-4); returns the values."""
    x = task.make_inputs(np.random.default_rng(seed))
    want = task.reference(x)[0]
    values = [e.val for e in task.config_space.knobs[knob].entities]
    defaults = task.config(0).to_json()["knobs"]
    for value in values:
        config = task.config_space.from_json({"knobs": {**defaults, knob: value}})
        got = np.full(want.shape, np.nan, np.float32)
        autotune.build(*task.instantiate(config.index))(*x, got)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=value)
    return values


@pytest.fixture
def check_each_value():
    return _check_each_value
