"""Bad input to `autotune tune` and `autotune db`, through the real entry point: every one exits 2
with one line on stderr naming what was wrong (never a traceback, a hang, or a tuning run that
fills the database with failures); the API raises ValueError/TypeError naming the parameter."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autotune
from autotune.cli import run
from autotune.codegen.jit import host
from autotune.schedules.task import TEMPLATES, _load_templates, template
from tuning_db import TuningDB

HOST_CPU = host().cpu


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AUTOTUNE_DB", str(tmp_path / "default.db"))
    return tmp_path


def cli(*args: str) -> tuple[int, str]:
    """Exit code and stderr of `autotune ARGS`, in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = run(list(args))
    return code, err.getvalue()


def assert_usage_error(code: int, err: str, message: str = "") -> None:
    assert code == 2, err
    assert err.startswith("autotune: error: ") and err.count("\n") == 1 and len(err.splitlines()) == 1, err
    assert message in err, err


def tune(shape: str, *more: str, db: Path | None = None) -> tuple[int, str]:
    return cli("tune", "matmul", "--shape", shape, *more, *(["--db", str(db)] if db else []))


# -- shape parameters: kinds, sizes, memory ----------------------------------------------------

def test_templates_record_what_each_parameter_accepts():
    _load_templates()
    assert TEMPLATES[("matmul", "llvm")].param_kinds == {"M": "int", "N": "int", "K": "int"}
    assert TEMPLATES[("sum", "llvm")].param_kinds["shape"] == "int_or_tuple"
    assert TEMPLATES[("layer_norm", "llvm")].param_kinds["eps"] == "float"
    assert TEMPLATES[("pad", "llvm")].param_kinds["value"] == "float"


def test_a_tuple_for_an_int_parameter_is_one_line(env):
    assert_usage_error(*tune("M=1:2,N=3,K=4"), "matmul: parameter M must be an int, got tuple (1, 2)")
    with pytest.raises(TypeError, match=r"matmul: parameter K must be an int, got tuple \(4,\)"):
        autotune.create_task("matmul", M=1, N=3, K=[4])


@pytest.mark.parametrize("params, message", [
    ({"M": True, "N": 3, "K": 4}, "parameter M must be an int, got bool True"),
    ({"shape": (5, False)}, r"parameter shape must be an int \(or a tuple of ints\), got tuple \(5, False\)"),
])
def test_a_bool_is_not_an_int(params, message):
    with pytest.raises(TypeError, match=message):
        autotune.create_task("relu" if "shape" in params else "matmul", **params)


@pytest.mark.parametrize("m", [0, -5])
def test_a_size_below_one_names_the_workload(env, m):
    with pytest.raises(ValueError, match=rf"matmul\(M={m},N=3,K=4\)float32: .*positive"):
        autotune.create_task("matmul", M=m, N=3, K=4)
    assert_usage_error(*tune(f"M={m},N=3,K=4"), f"matmul(M={m},N=3,K=4)float32")


@template("testing.cli_hardening.broken", reference=lambda a, **_: a)
def _broken(cfg, n: int, dtype: str = "float32"):
    return None.extent        # a bug in a template: AttributeError in collect mode


def test_a_template_bug_in_collect_mode_is_a_value_error_naming_the_workload():
    with pytest.raises(ValueError, match=r"testing.cli_hardening.broken\(n=3\)float32: the template failed "
                                         r"with AttributeError: 'NoneType' object has no attribute 'extent'"):
        autotune.create_task("testing.cli_hardening.broken", n=3)


@pytest.mark.parametrize("m", [10**12, 10**40])
def test_buffers_larger_than_memory_are_refused_before_tuning(env, m):
    with pytest.raises(ValueError, match=rf"matmul\(M={m},N=3,K=4\)float32: its buffers need .* GiB, more than "
                                         r"this machine's .* GiB of memory"):
        autotune.create_task("matmul", M=m, N=3, K=4)
    db = env / "t.db"
    assert_usage_error(*tune(f"M={m},N=3,K=4", db=db), "more than this machine's")
    assert not db.exists()                     # refused before the database was even opened


def test_astronomical_ints_are_refused_not_crashed_on():
    with pytest.raises(ValueError, match=r"relu\(shape=.*\)float32: its buffers need about 10\*\*\d+ GiB"):
        autotune.create_task("relu", shape=(2**1022,) * 20)   # product past a float
    with pytest.raises(ValueError, match=r"matmul: parameter M must be below 2\*\*1023 in magnitude"):
        autotune.create_task("matmul", M=10**400, N=3, K=4)   # could not even be counted in float flop
    assert_usage_error(*tune("M=" + "9" * 350 + ",N=3,K=4"), "parameter M must be below 2**1023")
    assert_usage_error(*tune("M=" + "9" * 5000 + ",N=3,K=4"), "a value of 5000 digits; at most 400")


@pytest.mark.parametrize("shape, message", [
    ("M=4,M=5,N=3,K=4", "--shape gives 'M' twice"),
    ("M=\u0661,N=3,K=4", "malformed --shape item"),        # a digit to str.isdigit, not to us
    ("M=\u00b2,N=3,K=4", "malformed --shape item"),        # isdigit() but int() fails
    ("M=1:,N=3", "malformed --shape item"),
])
def test_shape_text_is_checked(shape, message):
    assert_usage_error(*tune(shape), message)


@pytest.mark.parametrize("op, shape, message", [
    ("matmul", "M=1.5,N=3,K=4", "matmul: parameter M must be an int, got float 1.5"),
    ("matmul", "M=4e3,N=3,K=4", "matmul: parameter M must be an int, got float 4000.0"),
    ("layer_norm", "M=4,N=8,eps=1:-5", r"layer_norm: parameter eps must be a float, got tuple (1, -5)"),
    ("layer_norm", "M=4,N=8,eps=1e999", "layer_norm: eps must be finite and >= 0, got inf"),
    ("layer_norm", "M=4,N=8,eps=nan", "malformed --shape item 'eps=nan'"),
    ("layer_norm", "M=4,N=8,eps=1.5:2", "malformed --shape item 'eps=1.5:2'"),
])
def test_a_float_where_the_op_takes_another_kind_is_one_line(env, op, shape, message):
    assert_usage_error(*cli("tune", op, "--shape", shape, "--db", str(env / "t.db")), message)


def test_float_parameters_on_the_command_line_key_the_database(env):
    db = env / "t.db"
    code, err = cli("tune", "layer_norm", "--shape", "M=4,N=8,eps=1e-06", "--trials", "1", "--tuner", "grid",
                    "--db", str(db))
    assert code == 0, err
    assert [w.key for w in TuningDB(db, readonly=True).workloads()] == ["layer_norm(M=4,N=8,eps=1e-06)float32"]


# -- numbers SQLite must store -----------------------------------------------------------------

@pytest.mark.parametrize("option, value, message", [
    ("--trials", str(2**66), "'--trials': 73786976294838206464 is not in the range 1<=x<=2147483647"),
    ("--trials", "0", "'--trials'"),
    ("--seed", str(2**76), "'--seed': 75557863725914323419136 is not in the range 0<=x<=9223372036854775807"),
    ("--seed", "-1", "'--seed'"),
    ("--early-stopping", str(2**40), "'--early-stopping'"),
])
def test_trials_and_seed_are_bounded(option, value, message):
    assert_usage_error(*tune("M=4,N=3,K=4", option, value), message)


@pytest.mark.parametrize("option, value", [("--trials", str(2**31 - 1)), ("--seed", str(2**63 - 1)), ("--seed", "0")])
def test_the_bounds_themselves_are_accepted(option, value):
    # M=0 fails later, in create_task: the option itself was accepted
    assert_usage_error(*tune("M=0,N=3,K=4", option, value), "positive")


def test_overflowing_trials_through_the_console_entry_point(env):
    p = subprocess.run([sys.executable, "-m", "autotune.cli", "tune", "matmul", "--shape", "M=4,N=3,K=4",
                        "--trials", str(2**66), "--db", str(env / "t.db")], capture_output=True, text=True,
                       timeout=120)
    assert_usage_error(p.returncode, p.stderr, "is not in the range 1<=x<=2147483647")
    assert not (env / "t.db").exists()


# -- targets -----------------------------------------------------------------------------------

@pytest.mark.parametrize("target, message", [
    ("llvm -mcpu=notacpu", f"-mcpu=notacpu is not this machine's CPU ({HOST_CPU}); autotune compiles for "
                           "the host CPU only"),
    ("llvm -O3", "unknown option '-O3'"),
    ("llvm -mcpu", "unknown option '-mcpu'"),
    ("cuda -arch=sm_90 -foo", "unknown option '-foo'"),
    ("cuda -arch=90", "-arch must look like sm_80"),
    ("", "unknown target ''"),
])
def test_target_options_are_checked(target, message):
    assert_usage_error(*tune("M=4,N=3,K=4", "--target", target), message)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        autotune.create_task("matmul", target=target, M=4, N=3, K=4)


def test_the_host_cpu_is_a_valid_llvm_option():
    plain = autotune.create_task("matmul", M=4, N=3, K=4)
    named = autotune.create_task("matmul", target=f"llvm -mcpu={HOST_CPU}", M=4, N=3, K=4)
    assert named.target_key == plain.target_key
    assert autotune.create_task("matmul", target="cuda -arch=sm_90", M=4, N=3, K=4).target_key == "cuda -arch=sm_90"


# -- plans -------------------------------------------------------------------------------------

GOOD_TASK = {"op": "matmul", "shape": {"M": 4, "N": 3, "K": 4}}


@pytest.mark.parametrize("plan, message", [
    ({"trials": -5, "tasks": [GOOD_TASK]}, '"trials" must be an integer in [1, 2147483647], got -5'),
    ({"trials": 2**66, "tasks": [GOOD_TASK]}, '"trials" must be an integer'),
    ({"trials": 4.0, "tasks": [GOOD_TASK]}, '"trials" must be an integer'),
    ({"trials": True, "tasks": [GOOD_TASK]}, '"trials" must be an integer'),
    ({"tasks": [GOOD_TASK], "tuner": "xgb"}, "unknown key \"tuner\""),
    ({"tasks": [{**GOOD_TASK, "weight": 0}]}, 'task 0: "weight" must be a positive finite number, got 0'),
    ({"tasks": [{**GOOD_TASK, "weight": -1.5}]}, '"weight" must be a positive finite number'),
    ({"tasks": [{**GOOD_TASK, "weight": "3"}]}, '"weight" must be a positive finite number, got "3"'),
    ({"tasks": [GOOD_TASK, {**GOOD_TASK, "weight": 10**400}]}, 'task 1: "weight" must be a positive finite'),
    ({"tasks": [{**GOOD_TASK, "tuner": "annealing"}]}, '"tuner" must be one of'),
    ({"tasks": [{**GOOD_TASK, "shape": [4, 3, 4]}]}, '"shape" must be an object'),
    ({"tasks": [{**GOOD_TASK, "target": 7}]}, '"target" must be a string, got 7'),
    ({"tasks": [{**GOOD_TASK, "dtype": None}]}, '"dtype" must be a string, got null'),
    ({"tasks": [{**GOOD_TASK, "op": ["matmul"]}]}, '"op" must be an op name'),
    ({"tasks": [{**GOOD_TASK, "wieght": 2}]}, 'task 0: unknown key "wieght"'),
    ({"tasks": ["matmul"]}, "task 0 must be an object"),
    ({"tasks": [GOOD_TASK, {**GOOD_TASK, "shape": {"M": 1.5, "N": 3, "K": 4}}]},
     "task 1: matmul: parameter M must be an int, got float 1.5"),
    ({"tasks": [{**GOOD_TASK, "shape": {"M": 10**12, "N": 3, "K": 4}}]}, "task 0: matmul(M=1000000000000"),
])
def test_every_plan_field_is_checked_before_tuning(env, plan, message):
    path = env / "plan.json"
    path.write_text(json.dumps(plan))
    db = env / "t.db"
    assert_usage_error(*cli("tune", "--plan", str(path), "--db", str(db)), message)
    assert not db.exists()


@pytest.mark.parametrize("content, message", [
    ("[" * 100_000, "nested too deeply"),
    (" " * (5 * 2**20) + "{}", "larger than 4 MiB"),
    ('{"tasks": [], "trials": 1' + "0" * 5000 + "}", "digits"),
    (b"\xff\xfe{}", "not UTF-8 text"),
])
def test_a_plan_file_that_cannot_be_a_plan(env, content, message):
    path = env / "plan.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert_usage_error(*cli("tune", "--plan", str(path)), message)


def test_a_plan_that_is_a_directory(env):
    assert_usage_error(*cli("tune", "--plan", str(env)), "is not a regular file")


@pytest.mark.parametrize("what", ["--plan", "--db"])
def test_a_fifo_is_refused_not_waited_on(env, what):
    """Through the real entry point in a subprocess: a regression would hang, and the timeout says so."""
    fifo = env / "fifo"
    os.mkfifo(fifo)
    args = ["tune", "--plan", str(fifo)] if what == "--plan" else ["db", "workloads", "--db", str(fifo)]
    p = subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True, text=True, timeout=120)
    assert_usage_error(p.returncode, p.stderr, "is not a regular file")


def test_a_plan_records_each_task_s_own_tuner(env):
    plan = env / "plan.json"
    plan.write_text(json.dumps({"trials": 2, "tasks": [{**GOOD_TASK, "tuner": "grid"},
                                                       {"op": "relu", "shape": {"shape": 5}, "weight": 0.5}]}))
    db = env / "t.db"
    code, err = cli("tune", "--plan", str(plan), "--tuner", "random", "--db", str(db), "--json")
    assert code == 0, err
    assert [(r.workload_key, r.tuner, r.trials_asked) for r in TuningDB(db, readonly=True).runs()] == [
        ("matmul(M=4,N=3,K=4)float32", "grid", 2), ("relu(shape=5)float32", "random", 2)]


# -- fuzzing the argument parsing --------------------------------------------------------------

_HUGE = st.one_of(st.integers(-(10**500), 10**500), st.sampled_from([10**12, 10**40, 2**63, 10**308, 10**309]))
_INTS = st.integers(0, 4).flatmap(lambda r: _HUGE if r == 0 else st.integers(-3, 5000))   # mostly plausible sizes
_PIECE = st.builds(lambda name, values: f"{name}={':'.join(map(str, values))}",
                   st.sampled_from(["M", "N", "K", "shape", "axes", "keepdims", "Q", "", " M ", "é", "M\u2028"]),
                   st.lists(_INTS, min_size=1, max_size=3))
_SHAPES = st.one_of(
    st.text(max_size=30),
    st.lists(st.one_of(_PIECE, st.text(max_size=8)), min_size=1, max_size=5).map(",".join),
    st.builds(lambda m, n, k: f"M={m},N={n},K={k}", _INTS, _INTS, _INTS),            # matmul's names
    st.builds(lambda dims, axes: f"shape={':'.join(map(str, dims))},axes={axes},keepdims=0",   # sum's
              st.lists(_INTS, min_size=1, max_size=3), _INTS))
_NUMBERS = st.one_of(st.text(max_size=8), st.integers(-(2**80), 2**80).map(str),
                     st.sampled_from(["1", "0", str(2**31 - 1), str(2**31), str(2**63 - 1), str(2**63)]))
_TARGETS = st.one_of(st.text(max_size=16), st.text(max_size=10).map(lambda t: f"llvm {t}"), st.sampled_from(
    ["llvm", f"llvm -mcpu={HOST_CPU}", "llvm -mcpu=notacpu", "llvm  -O3", "cuda -arch=sm_90", "cuda -arch=80",
     "cuda -name=x -arch=sm_80 -z"]))
_FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def exits_0_or_2(env, op: str = "matmul", shape: str = "M=4,N=3,K=5", trials: str = "1", seed: str = "0",
                 target: str = "llvm") -> None:
    """Anything that parses would tune; the database path is a directory, so every run stops at
    opening it (exit 2) instead of measuring, and the fuzz stays fast."""
    code, err = cli("tune", op, f"--shape={shape}", f"--trials={trials}", f"--seed={seed}", f"--target={target}",
                    f"--db={env}")
    assert code in (0, 2)
    if code == 2:
        assert_usage_error(code, err)


@_FUZZ
@given(op=st.sampled_from(["matmul", "sum", "relu", "layer_norm", "gemm"]), shape=_SHAPES)
def test_fuzzed_shapes_exit_0_or_2_with_one_line(env, op, shape):
    exits_0_or_2(env, op=op, shape=shape)


@_FUZZ
@given(trials=_NUMBERS, seed=_NUMBERS)
def test_fuzzed_trials_and_seeds_exit_0_or_2_with_one_line(env, trials, seed):
    exits_0_or_2(env, trials=trials, seed=seed)


@_FUZZ
@given(target=_TARGETS)
def test_fuzzed_targets_exit_0_or_2_with_one_line(env, target):
    exits_0_or_2(env, target=target)
