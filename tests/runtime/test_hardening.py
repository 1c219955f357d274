"""Regression tests for defects found by trying to break the runtime and the kernel cache: the
nearest shape for tuple parameters, cache entries swapped between keys, a shared cache
directory, parameters of the wrong kind, and a call that would allocate before checking."""
import json
import os
import shutil
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import autotune
from autotune import ops, runtime
from autotune.cli import run
from autotune.kernel_cache import DiskCache
from autotune.measure.types import ErrorKind, MeasureResult
from autotune.search.tune import tune


class FirstIsFastest:
    """A measurer under which the first config measured is the fastest (no hardware needed)."""

    def measure(self, task, indices):
        return [MeasureResult((1e-4 * (1 + n),), ErrorKind.OK, "", 0.0, time.time()) for n, _ in enumerate(indices)]

    def close(self):
        pass


pytestmark = pytest.mark.filterwarnings("ignore:autotune. no tuned record")


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("AUTOTUNE_DB", str(tmp_path / "none.db"))
    runtime.clear_caches()
    yield tmp_path
    runtime.clear_caches()


def test_nearest_shape_of_a_tuple_parameter_through_the_cli(env):
    db = str(env / "t.db")
    assert run(["tune", "relu", "--shape", "shape=64:64", "--trials", "4", "--db", db]) == 0
    x = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    with pytest.warns(UserWarning, match="nearest shape relu\\(shape=64:64\\)"):
        y = ops.relu(x, db=db)
    np.testing.assert_array_equal(y, np.maximum(x, 0))


@pytest.mark.parametrize("op, tuned, wanted, call", [
    ("add", {"a_shape": (64, 64), "b_shape": (64, 64)}, {"a_shape": (32, 33), "b_shape": (32, 33)},
     lambda x, db: (ops.add(x, x, db=db), x + x)),
    ("layer_norm", {"M": 64, "N": 64, "eps": 1e-5}, {"M": 32, "N": 33, "eps": 1e-5},
     lambda x, db: (ops.layer_norm(x, np.ones(33, np.float32), np.zeros(33, np.float32), db=db),
                    (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5))),
])
def test_nearest_shape_for_every_parameter_kind(env, op, tuned, wanted, call):
    db = str(env / "t.db")
    tune(autotune.create_task(op, **tuned), trials=4, tuner="grid", db=db, measurer=FirstIsFastest())
    x = np.random.default_rng(1).standard_normal((32, 33)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, expected = call(x, db)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert any("nearest shape" in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert autotune.load(op, db=db, **wanted).provenance.startswith("nearest:")


def test_float_parameters_only_break_ties_between_nearest_shapes():
    assert runtime._distance({"M": 64, "eps": 1e-5}, {"M": 64, "eps": 1e-6}) == (0.0, 1)
    assert runtime._distance({"M": 64, "eps": 1e-5}, {"M": 32, "eps": 1e-5})[1] == 0
    assert runtime._distance({"M": 64, "eps": 1e-5}, {"M": 64, "eps": (1, -5)})[0] == np.inf   # kinds differ


def test_a_config_tuned_at_another_eps_is_the_nearest(env):
    """The borrowed config is compiled with the caller's eps: only the schedule is borrowed."""
    db = str(env / "t.db")
    for eps in (1e-5, 1e-3):
        tune(autotune.create_task("layer_norm", M=64, N=64, eps=eps), trials=2, tuner="grid", db=db,
             measurer=FirstIsFastest())
    assert autotune.load("layer_norm", db=db, M=64, N=65, eps=1e-5).provenance == \
        "nearest:layer_norm(M=64,N=64,eps=1e-05)float32"      # sizes alike: the equal eps wins the tie
    x = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32)
    with pytest.warns(UserWarning, match=r"nearest shape layer_norm\(M=64,N=64,eps="):
        y = ops.layer_norm(x, np.ones(64, np.float32), np.zeros(64, np.float32), eps=0.5, db=db)
    np.testing.assert_allclose(y, (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 0.5),
                               rtol=1e-4, atol=1e-5)


def test_a_float_for_an_int_parameter_never_finds_the_int_kernel(env):
    autotune.load("relu", shape=5)
    with pytest.raises(TypeError, match=r"relu: parameter shape must be an int \(or a tuple of ints\), got float 5.0"):
        autotune.load("relu", shape=5.0)
    assert autotune.load("layer_norm", M=4, N=8, eps=np.float64(1e-5)).workload_key == \
        "layer_norm(M=4,N=8,eps=1e-05)float32"


def test_shapes_of_another_rank_are_not_nearest(env):
    db = str(env / "t.db")
    tune(autotune.create_task("relu", shape=(64, 64)), trials=2, tuner="grid", db=db, measurer=FirstIsFastest())
    with pytest.warns(UserWarning, match="default config"):
        assert autotune.load("relu", db=db, shape=(7, 8, 9)).provenance == "default"


def test_a_cache_entry_copied_over_another_key_is_not_executed(env):
    a = np.ones((64, 64), np.float32)
    np.testing.assert_array_equal(ops.matmul(a, a), a @ a)
    ops.add(a, a)
    cache = DiskCache()
    by_name = {}
    for meta in cache.root.glob("*.json"):
        signature = json.loads(meta.read_text())["signature"]
        if isinstance(signature.get("name"), str):
            by_name[signature["name"]] = meta.with_suffix("")
    mm, add = by_name["matmul"], by_name["add"]
    for suffix in (".o", ".json"):
        shutil.copyfile(f"{add}{suffix}", f"{mm}{suffix}")
    code = ("import numpy as np, autotune\n"
            "a = np.ones((64, 64), np.float32)\n"
            "print(float(autotune.ops.matmul(a, a)[0, 0]))\n")
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, AUTOTUNE_CACHE=str(cache.root)))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "64.0"


def test_deeply_nested_cache_metadata_is_rebuilt(env):
    a = np.ones((8, 8), np.float32)
    ops.relu(a)
    cache = DiskCache()
    for meta in cache.root.glob("*.json"):
        meta.write_text("[" * 100000 + "]" * 100000)
    runtime.clear_caches()
    np.testing.assert_array_equal(ops.relu(-a), np.zeros_like(a))


def test_a_shared_cache_directory_keeps_its_mode_and_gets_a_private_subdirectory(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    monkeypatch.setenv("AUTOTUNE_CACHE", str(shared))
    runtime.clear_caches()
    ops.relu(np.ones(5, np.float32))
    assert os.stat(shared).st_mode & 0o7777 == 0o1777
    private = shared / f"autotune-{os.getuid()}"
    assert os.stat(private).st_mode & 0o777 == 0o700 and list(private.glob("*.o"))
    runtime.clear_caches()


def test_a_foreign_subdirectory_disables_the_cache_with_a_warning(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    (shared / f"autotune-{os.getuid()}").mkdir(parents=True, mode=0o755)
    os.chmod(shared, 0o1777)
    os.chmod(shared / f"autotune-{os.getuid()}", 0o755)
    monkeypatch.setenv("AUTOTUNE_CACHE", str(shared))
    runtime.clear_caches()
    with pytest.warns(UserWarning, match="kernel cache disabled"):
        np.testing.assert_array_equal(ops.relu(-np.ones(5, np.float32)), np.zeros(5, np.float32))
    assert not list(shared.rglob("*.o"))
    runtime.clear_caches()


@pytest.mark.parametrize("value", [64.0, True, "64", None, [1.5]])
def test_load_refuses_a_parameter_of_the_wrong_kind_whatever_is_cached(env, value):
    autotune.load("matmul", M=64, N=64, K=64)                  # the M=64 kernel is now resolved and cached
    with pytest.raises(TypeError, match="parameter M must be an int"):   # not the M=64 kernel
        autotune.load("matmul", M=value, N=64, K=64)


def test_a_call_checks_input_shapes_before_allocating_outputs(env, monkeypatch):
    k = autotune.load("matmul", M=16, N=12, K=8)
    monkeypatch.setattr(np, "empty", lambda *a, **kw: pytest.fail("allocated before checking the inputs"))
    with pytest.raises(ValueError, match="input 1: expected shape \\(8, 12\\), got \\(8, 13\\)"):
        k(np.ones((16, 8), np.float32), np.ones((8, 13), np.float32))
