"""autotune.load and autotune.ops: exact hit, nearest-shape fallback, default fallback with a
warning, the disk cache across processes, and a tampered cache entry."""
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import autotune
from autotune import ops
from autotune.kernel_cache import DiskCache
from autotune.measure.types import ErrorKind, MeasureResult
from autotune.search.tune import tune


class OneShotMeasurer:
    """Pretends config index `good` is fastest, so tests know what 'tuned' must return."""

    def __init__(self, good):
        self.good = good

    def measure(self, task, indices):
        return [MeasureResult(((1e-4 if i == self.good else 1e-3),), ErrorKind.OK, "", 0.0, time.time()) for i in indices]

    def close(self):
        pass


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    from autotune import runtime

    runtime.clear_caches()
    return tmp_path


def _tuned(db, M, N, K, good_index=5):
    task = autotune.create_task("matmul", M=M, N=N, K=K)
    tune(task, trials=8, tuner="grid", db=db, measurer=OneShotMeasurer(good_index))
    return task


def test_exact_hit(env):
    db = str(env / "t.db")
    task = _tuned(db, 33, 20, 17)
    k = autotune.load("matmul", db=db, M=33, N=20, K=17)
    assert k.provenance == "tuned" and k.config["index"] == 5 and k.gflops_expected > 0
    a, b = np.random.rand(33, 17).astype("float32"), np.random.rand(17, 20).astype("float32")
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)
    out = np.empty((33, 20), "float32")
    assert k(a, b, out=out) is out
    np.testing.assert_allclose(ops.matmul(a, b, db=db), a @ b, rtol=1e-5)
    assert task.workload_key == k.workload_key


def test_a_lookup_closes_the_database_it_opened_and_leaves_one_passed_in_open(env, monkeypatch):
    """Compiling a model looks up every kernel: no lookup may keep a connection open."""
    from tuning_db import TuningDB

    db = str(env / "t.db")
    task = _tuned(db, 33, 20, 17)
    closed = []
    monkeypatch.setattr(TuningDB, "close", lambda self: closed.append(self))
    assert autotune.load("matmul", db=db, M=33, N=20, K=17).provenance == "tuned"
    assert len(closed) == 1
    mine = TuningDB(db, readonly=True)
    autotune.runtime.clear_caches()
    assert autotune.load("matmul", db=mine, M=33, N=20, K=17).provenance == "tuned"
    assert len(closed) == 1 and mine.best(task.workload_key, task.target_key) is not None     # still usable


def test_nearest_shape_fallback_warns_once(env):
    db = str(env / "t.db")
    _tuned(db, 64, 64, 64)
    with pytest.warns(UserWarning, match="nearest shape matmul\\(M=64,N=64,K=64\\)"):
        k = autotune.load("matmul", db=db, M=60, N=62, K=64)
    assert k.provenance == "nearest:matmul(M=64,N=64,K=64)float32"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        autotune.load("matmul", db=db, M=60, N=62, K=64)


def test_default_fallback_warns(env):
    with pytest.warns(UserWarning, match="template's default config"):
        k = autotune.load("dense", db=str(env / "empty.db"), M=7, N=9, K=5)
    assert k.provenance == "default"
    x, w, bias = (np.random.rand(7, 5).astype("float32"), np.random.rand(9, 5).astype("float32"),
                  np.random.rand(9).astype("float32"))
    np.testing.assert_allclose(k(x, w, bias), np.maximum(x @ w.T + bias, 0), rtol=1e-5)


DEEP_CONV = dict(N=1, C=64, H=5, W=5, F=72, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=1)


def test_constant_weights_pick_the_default_their_rules_give(env):
    """Without a record, a conv whose weights outweigh its input runs the GEMM reading them in
    place; told they are constant (a model's, repacked once) it runs the blocked kernel."""
    db = str(env / "empty.db")
    with pytest.warns(UserWarning, match="default config"):
        plain = autotune.load("conv2d_bias_relu", db=db, **DEEP_CONV)
        weights = autotune.load("conv2d_bias_relu", db=db, constant_inputs=[2, 1], **DEEP_CONV)
    assert (plain.config["knobs"]["algorithm"], weights.config["knobs"]["algorithm"]) == ("gemm", "nchwc")
    assert weights.provenance == "default" and weights.task.default_for([1, 2]) != 0 == plain.task.default_index
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s, dtype=np.float32) for s in ((1, 64, 5, 5), (72, 64, 3, 3), (72,)))
    np.testing.assert_allclose(weights(x, w, b), plain(x, w, b), rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match="constant_inputs must be a sequence of input positions"):
        autotune.load("conv2d_bias_relu", db=db, constant_inputs=1, **DEEP_CONV)
    with pytest.raises(ValueError, match=r"constant inputs \[7\] are not input positions"):
        autotune.load("conv2d_bias_relu", db=db, constant_inputs=[7], **DEEP_CONV)


@autotune.template("test_runtime.all_invalid", reference=lambda a, **shape: a)
def _all_invalid(cfg, n, dtype="float32"):
    A = autotune.te.placeholder((n,), dtype, name="A")
    B = autotune.te.compute((n,), lambda i: A[i], name="B")
    cfg.define_knob("width", [3, 5])
    cfg.raise_if(n % cfg["width"].val != 0, "width must divide n")
    return autotune.te.create_schedule(B.op), [A, B]


def test_a_space_without_a_valid_config_is_a_clear_error(env):
    with pytest.raises(autotune.errors.InstantiationError, match=r"test_runtime.all_invalid\(n=7\)float32: every "
                       "config of the template's space is invalid"):
        autotune.load("test_runtime.all_invalid", db=str(env / "empty.db"), n=7)
    with pytest.warns(UserWarning, match="default config"):
        assert autotune.load("test_runtime.all_invalid", db=str(env / "empty.db"), n=15).provenance == "default"


def test_disk_cache_serves_a_second_process_without_compiling(env):
    db = str(env / "t.db")
    _tuned(db, 40, 24, 16)
    autotune.load("matmul", db=db, M=40, N=24, K=16)
    code = ("import time, autotune, autotune.runtime as r\n"
            "import autotune.codegen as c\n"
            "calls = []\n"
            "orig = r.compile_for\n"
            "r.compile_for = lambda *a: calls.append(1) or orig(*a)\n"
            f"k = autotune.load('matmul', db={db!r}, M=40, N=24, K=16)\n"
            "print(len(calls))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, AUTOTUNE_CACHE=str(env / "cache")), timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "0"


def test_an_edited_compiler_never_runs_a_cached_kernel(env, monkeypatch):
    """The disk cache's key covers autotune's source: after an edit (an editable install changes
    code without a version bump) the same workload and config compile again."""
    from autotune import kernel_cache, runtime

    db = str(env / "t.db")
    _tuned(db, 40, 24, 16)
    autotune.load("matmul", db=db, M=40, N=24, K=16)
    compiled = []
    monkeypatch.setattr(runtime, "compile_for", lambda *a, _orig=runtime.compile_for: compiled.append(1) or _orig(*a))
    runtime.clear_caches()
    autotune.load("matmul", db=db, M=40, N=24, K=16)
    assert compiled == []                                       # served from the disk cache
    source = kernel_cache.compiler_digest()
    kernel_cache.compiler_digest.cache_clear()
    monkeypatch.setattr(kernel_cache.Path, "read_bytes", lambda p, _orig=kernel_cache.Path.read_bytes:
                        _orig(p) + (b"# edited" if p.name == "llvm.py" else b""))
    assert kernel_cache.compiler_digest() != source
    runtime.clear_caches()
    autotune.load("matmul", db=db, M=40, N=24, K=16)
    assert compiled == [1]
    kernel_cache.compiler_digest.cache_clear()


def test_tampered_cache_entry_is_rebuilt_not_executed(env):
    db = str(env / "t.db")
    _tuned(db, 40, 24, 16)
    autotune.load("matmul", db=db, M=40, N=24, K=16)
    cache = DiskCache()
    objs = list(cache.root.glob("*.o"))
    assert objs
    for o in objs:
        o.write_bytes(b"\x7fELF" + os.urandom(64))          # garbage that would crash if loaded
    from autotune import runtime

    runtime.clear_caches()
    k = autotune.load("matmul", db=db, M=40, N=24, K=16)
    a, b = np.random.rand(40, 16).astype("float32"), np.random.rand(16, 24).astype("float32")
    np.testing.assert_allclose(k(a, b), a @ b, rtol=1e-5)
    assert os.stat(cache.root).st_mode & 0o777 == 0o700


@pytest.mark.parametrize("call, exc, match", [
    (lambda: ops.matmul(np.ones((3, 4), "float32"), np.ones((5, 2), "float32")), ValueError, "a.shape\\[1\\]"),
    (lambda: ops.matmul(np.ones((3, 4), "float32"), np.ones((4, 2), "float64")), TypeError, "share a dtype"),
    (lambda: ops.matmul(np.ones(3, "float32"), np.ones((3, 2), "float32")), ValueError, "argument a must be 2-d"),
    (lambda: ops.dense(np.ones((3, 4), "float32"), np.ones((5, 4), "float32"), np.ones(4, "float32")), ValueError,
     "bias.shape"),
    (lambda: ops.conv2d(np.ones((1, 3, 8, 8), "float32"), np.ones((4, 2, 3, 3), "float32")), ValueError, "channels"),
    (lambda: ops.matmul([[1.0]], np.ones((1, 1), "float32")), TypeError, "numpy array"),
])
def test_ops_reject_bad_input(call, exc, match, env):
    with pytest.raises(exc, match=match):
        call()


def test_load_is_thread_safe(env):
    from concurrent.futures import ThreadPoolExecutor

    db = str(env / "t.db")
    _tuned(db, 24, 20, 12)
    a, b = np.random.rand(24, 12).astype("float32"), np.random.rand(12, 20).astype("float32")

    def work(_):
        k = autotune.load("matmul", db=db, M=24, N=20, K=12)
        return k.config["index"], np.abs(k(a, b) - a @ b).max()

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(32)))
    assert {idx for idx, _ in results} == {5} and max(err for _, err in results) < 1e-4
