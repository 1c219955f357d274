"""The database boundary: everything read from a JSONL line or a stored row is validated, with
bounded depth and size. Fuzzed with hypothesis, and each defect found by hand kept out by a test
through the real CLI or API: a bad line gives exit 2 and leaves the database unchanged; a bad
stored row is skipped with a warning by every reader instead of crashing it."""
from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autotune
from autotune import runtime
from autotune.cli import run
from autotune.measure.types import ErrorKind, MeasureResult
from autotune.search.tune import tune
from tuning_db import Record, TuningDB
from tuning_db.boundary import MAX_JSON_BYTES, MAX_JSON_DEPTH, check_params, loads, tolerant_loads

SHAPE = {"M": 33, "N": 20, "K": 17}
GOOD_LINE = {"workload_key": "matmul(M=33,N=20,K=17)float32", "op": "matmul", "params": SHAPE,
             "dtype": "float32", "target_key": "llvm -mcpu=test", "config_index": 0,
             "config": {"index": 0, "knobs": {}}, "costs": [1e-3], "error_kind": "ok", "error_msg": "",
             "build_seconds": 0.1, "timestamp": 1.0}

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                                         max_size=4), max_leaves=20)
huge_ints = st.integers(min_value=-2**80, max_value=2**80)


class Fast:
    def measure(self, task, indices):
        return [MeasureResult((1e-4 * (1 + n),), ErrorKind.OK, "", 0.0, time.time()) for n, _ in enumerate(indices)]

    def close(self):
        pass


def digest(path: Path) -> str:
    """What the database holds, independent of how SQLite laid it out."""
    with sqlite3.connect(path) as raw:
        rows = [raw.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in ("workloads", "runs", "records")]
    raw.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.fixture
def tuned(tmp_path, monkeypatch):
    """A database with 6 records of matmul 33x20x17 (config 0 the best), and a private kernel cache."""
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    runtime.clear_caches()
    path = tmp_path / "t.db"
    tune(autotune.create_task("matmul", **SHAPE), trials=6, tuner="grid", db=str(path), measurer=Fast())
    yield path
    runtime.clear_caches()


# -- bounded JSON ----------------------------------------------------------------------------

@given(st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
def test_loads_of_any_bytes_is_a_value_or_a_value_error(data):
    try:
        loads(data)
    except ValueError:
        pass


@given(st.integers(min_value=MAX_JSON_DEPTH + 1, max_value=100_000), st.sampled_from(["[]", "{}"]))
def test_deep_nesting_is_refused_at_any_depth(levels, brackets):
    opening, closing = brackets
    text = ('{"a":' * levels + "1" + "}" * levels) if opening == "{" else opening * levels + closing * levels
    with pytest.raises(ValueError, match="nests deeper"):
        loads(text)
    assert "nests deeper" in tolerant_loads(text).reason


def test_oversized_json_is_refused_before_parsing():
    with pytest.raises(ValueError, match="over the limit"):
        loads(" " * (MAX_JSON_BYTES + 1))


@given(json_values)
def test_check_params_accepts_only_ints_lists_of_ints_floats_and_words(value):
    params = {"M": value}
    try:
        out = check_params(params)
    except ValueError as e:
        assert "'M'" in str(e)
        return
    m = out["M"]
    assert (type(m) is int or (type(m) is float and not math.isnan(m)) or (type(m) is str and 0 < len(m) <= 64)
            or (type(m) is tuple and all(type(v) is int for v in m)))


@pytest.mark.parametrize("value", [math.nan, True, [1.5], "", "x" * 65, None])
def test_check_params_refuses_what_no_task_parameter_is(value):
    with pytest.raises(ValueError, match=r"params\['eps'\]: expected an integer, a list of integers, a float that"):
        check_params({"eps": value})
    assert check_params({"eps": 1e-05, "M": 4, "shape": [5, 7], "lo": -math.inf, "to": "int32"}) == \
        {"eps": 1e-05, "M": 4, "shape": (5, 7), "lo": -math.inf, "to": "int32"}


@given(config_index=st.one_of(huge_ints, json_values), costs=st.one_of(st.lists(st.floats(), max_size=3), json_values),
       config=json_values, error_kind=st.sampled_from(["ok", "crash", "nope"]))
def test_a_record_of_random_fields_is_valid_or_a_value_error(config_index, costs, config, error_kind):
    try:
        rec = Record("w", "t", config_index, config, costs, error_kind, "", 0.0, 1.0)
    except ValueError:
        return
    assert 0 <= rec.config_index < 2**63 and all(c > 0 and math.isfinite(c) for c in rec.costs)
    if rec.ok:
        assert rec.cost > 0


# -- JSONL import through the CLI ------------------------------------------------------------

def _import(tmp_path: Path, db: Path, content: bytes | str) -> tuple[int, str]:
    path = tmp_path / "in.jsonl"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return run(["db", "import", str(path), "--db", str(db)]), digest(db)


@pytest.mark.parametrize("field, value, match", [
    ("costs", [0.0], "positive finite"),
    ("costs", [-1e-3], "positive finite"),
    ("params", {"M": None, "N": 20, "K": 17}, "params"),
    ("params", {"M": [1.5], "N": 20, "K": 17}, "params"),
    ("config_index", 2**70, "config_index"),
    ("config", json.loads("[" * 15 + "]" * 15), "config"),
])
def test_an_import_of_a_bad_record_exits_2_and_changes_nothing(tuned, tmp_path, capsys, field, value, match):
    before = digest(tuned)
    code, after = _import(tmp_path, tuned, json.dumps({**GOOD_LINE, field: value}) + "\n")
    err = capsys.readouterr().err
    assert code == 2 and after == before
    assert err.count("\n") == 1 and match in err and "line 1" in err


def test_an_import_of_deep_nesting_exits_2(tuned, tmp_path, capsys):
    before = digest(tuned)
    code, after = _import(tmp_path, tuned, "[" * 100000 + "]" * 100000 + "\n")
    assert code == 2 and after == before and "nests deeper" in capsys.readouterr().err


@pytest.mark.parametrize("special", ["/dev/zero", "fifo"])
def test_an_import_of_a_device_or_fifo_exits_2_at_once(tuned, tmp_path, capsys, special):
    import os

    path = special
    if special == "fifo":
        path = str(tmp_path / "fifo")
        os.mkfifo(path)
    t = time.monotonic()
    assert run(["db", "import", path, "--db", str(tuned)]) == 2
    assert time.monotonic() - t < 10 and "not a regular file" in capsys.readouterr().err


def test_an_import_of_an_endless_line_exits_2(tuned, tmp_path, capsys):
    code, _ = _import(tmp_path, tuned, b"\0" * (MAX_JSON_BYTES + 10))
    assert code == 2 and "over the limit" in capsys.readouterr().err


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(
    st.builds(lambda f, v: json.dumps({**GOOD_LINE, f: v}, allow_nan=True),
              st.sampled_from(sorted(GOOD_LINE)), st.one_of(json_values, huge_ints)),
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
    json_values.map(json.dumps)), min_size=1, max_size=4))
def test_fuzzed_imports_exit_0_or_2_and_bad_ones_change_nothing(tuned, tmp_path, lines):
    before = digest(tuned)
    code, after = _import(tmp_path, tuned, "\n".join(line.replace("\n", " ") for line in lines) + "\n")
    assert code in (0, 2)
    if code == 2:
        assert after == before


# -- poisoned rows: every reader skips them --------------------------------------------------

POISON = [
    ("UPDATE records SET costs = '[0.0]', cost = 0.0 WHERE config_index = 1", "record"),
    ("UPDATE records SET config = ? WHERE config_index = 1", "record"),
    ("UPDATE records SET costs = ?, cost = 1e-9 WHERE config_index = 1", "record"),
    ("UPDATE records SET config_index = 'x' WHERE config_index = 1", "record"),
    ("UPDATE workloads SET params = '{\"M\": null, \"N\": 20, \"K\": 17}' WHERE op = 'matmul'", "workload"),
    ("UPDATE workloads SET params = ?", "workload"),
]


def _poison(path: Path, sql: str) -> None:
    with sqlite3.connect(path) as raw:
        raw.execute(sql, ("[" * 100000 + "]" * 100000,) if "?" in sql else ())
    raw.close()


@pytest.mark.parametrize("sql, what", POISON)
def test_every_reader_skips_a_poisoned_row_with_a_warning(tuned, tmp_path, capsys, sql, what):
    _poison(tuned, sql)
    db = str(tuned)
    shape = ",".join(f"{k}={v}" for k, v in SHAPE.items())
    key = "matmul(M=33,N=20,K=17)float32"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k = autotune.load("matmul", db=db, **SHAPE)
        a, b = np.ones((33, 17), np.float32), np.ones((17, 20), np.float32)
        np.testing.assert_allclose(k(a, b), a @ b)
        runtime.clear_caches()
        autotune.load("matmul", db=db, M=31, N=20, K=17)          # the nearest-shape path reads every workload
        codes = [run(["db", "workloads", "--db", db]), run(["db", "workloads", "--json", "--db", db]),
                 run(["db", "history", key, "--db", db]),
                 run(["db", "export", str(tmp_path / "out.jsonl"), "--db", db]),
                 run(["tune", "matmul", "--shape", shape, "--trials", "1", "--tuner", "random", "--db", db, "--json"])]
        if what == "record":
            codes += [run(["db", "best", "matmul", "--shape", shape, "--db", db]), run(["db", "show", key, "--db", db])]
    assert codes == [0] * len(codes), capsys.readouterr().err
    assert any(f"skipping {what}" in str(w.message) for w in caught)
    assert "Traceback" not in capsys.readouterr().err
