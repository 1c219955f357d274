"""Generic templates: a user's own te computation tuned without a template (create_task_from_te).

The fused chain relu(x * w + b) written as three computes is one loop nest with no intermediate
buffer; row and column reductions get their schedules; every config gives numpy's answer; a
real `autotune.tune` run measures in worker processes that re-import the defining module."""
import importlib
import os
import random
import sys
import textwrap
import warnings

import numpy as np
import pytest

import autotune
import autotune.te as te
from autotune import create_task_from_te
from autotune.ir.functor import walk
from autotune.ir.nodes import Allocate, For, ForKind, Load, Ramp, Store
from autotune.measure import MeasureOptions
from autotune.schedules.from_te import fingerprint
from autotune.schedules.generic import classify
from autotune.schedules.task import TEMPLATES
from autotune.te.evaluate import evaluate_te

RNG = np.random.default_rng(17)


@pytest.fixture(autouse=True)
def forget_test_templates():
    """Each test registers its own te templates: drop them afterwards."""
    yield
    for key in [k for k in TEMPLATES if k[0].startswith("test.")]:
        del TEMPLATES[key]


def chain(shape, wshape):
    x = te.placeholder(shape, name="x")
    w = te.placeholder(wshape, name="w")
    b = te.placeholder(wshape, name="b")
    lead = len(shape) - len(wshape)
    m = te.compute(shape, lambda *i: x[i] * w[i[lead:]], name="m")
    a = te.compute(shape, lambda *i: m[i] + b[i[lead:]], name="a")
    y = te.compute(shape, lambda *i: te.maximum(a[i], te.const(0.0)), name="y")
    return [x, w, b], y


def run_configs(task, n_random=3, seed=0):
    """Default + random configs: each built, run on the task's inputs and compared with numpy."""
    inputs = task.make_inputs(np.random.default_rng(seed))
    want = task.reference(inputs)
    space = len(task.config_space)
    for index in [0] + random.Random(seed).sample(range(1, space), min(n_random, space - 1)):
        s, args = task.instantiate(index)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            f = autotune.build(s, args)
        outs = [np.full(shape, np.nan, dtype) for shape, dtype in task.arg_specs[task.num_inputs:]]
        f(*inputs, *outs)
        for got, ref in zip(outs, want):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5, err_msg=str(task.config(index)))
    return inputs, want


def structure(func):
    loops, allocs, loads, stores = [], [], [], []
    walk(func.body, lambda n: loops.append(n) if isinstance(n, For) else allocs.append(n) if isinstance(n, Allocate)
         else loads.append(n) if isinstance(n, Load) else stores.append(n) if isinstance(n, Store) else None)
    return loops, allocs, loads, stores


@pytest.mark.parametrize("shape,wshape", [((1 << 12,), (1 << 12,)), ((37, 129), (129,)), ((5, 7, 19), (7, 19))])
def test_fused_chain_is_one_parallel_vector_loop_nest(shape, wshape):
    inputs, y = chain(shape, wshape)
    task = create_task_from_te(y, inputs, name="test.chain")
    assert classify(te.create_schedule(y.op)) == "injective"
    (x, w, b), (want,) = run_configs(task)
    np.testing.assert_allclose(want, np.maximum(x * w + b, 0), rtol=1e-6)
    knobs = {"chunk": 16, "parallel": 1, "tile_inner": [-1, 1, 16]} | ({"fuse_inner": 1} if len(shape) > 1 else {})
    s, args = task.instantiate(task.config_space.from_json({"knobs": knobs}))
    func = autotune.lower(s, args)
    loops, allocs, loads, stores = structure(func)
    assert not allocs, "an intermediate buffer survived the fusion"
    assert {st.buffer.name for st in stores} == {"y"}
    assert {ld.buffer.name for ld in loads} == {"x", "w", "b"}
    assert [lp.kind for lp in loops].count(ForKind.PARALLEL) == 1 and loops[0].kind is ForKind.PARALLEL
    vector = [ld for ld in loads if ld.lanes == 16]
    assert vector and all(isinstance(ld.index, Ramp) and ld.index.stride.value == 1 for ld in vector), \
        "every vector load must be contiguous (no gathers)"


def test_row_reduction_with_pointwise_producers_and_consumers():
    """rms-norm written by hand: y = x * rsqrt(mean(x^2) + eps), over the last axis."""
    M, N = 9, 37
    x = te.placeholder((M, N), name="x")
    sq = te.compute((M, N), lambda i, j: x[i, j] * x[i, j], name="sq")
    k = te.reduce_axis((0, N), name="k")
    ss = te.compute((M,), lambda i: te.sum(sq[i, k], axis=k), name="ss")
    inv = te.compute((M,), lambda i: te.rsqrt(ss[i] / float(N) + 1e-5), name="inv")
    y = te.compute((M, N), lambda i, j: x[i, j] * inv[i], name="y")
    task = create_task_from_te(y, [x], name="test.rms")
    assert classify(te.create_schedule(y.op)) == "row"
    (xa,), (want,) = run_configs(task, n_random=4)
    np.testing.assert_allclose(want, xa / np.sqrt((xa.astype(np.float64) ** 2).mean(1, keepdims=True) + 1e-5),
                               rtol=1e-5)
    threaded = {**task.config(0).to_json()["knobs"], "parallel": 1}    # 9 rows: the default runs on one core
    s, args = task.instantiate({"knobs": threaded})
    loops, allocs, _, _ = structure(autotune.lower(s, args))
    assert loops[0].kind is ForKind.PARALLEL and loops[0].extent == M
    assert [a.buffer.name for a in allocs] == ["ss"] and allocs[0].buffer.shape == (1,)


def test_column_reduction():
    """Column means scaled: y[j] = sum_i x[i, j] / M (a reduction that keeps the inner axis)."""
    M, N = 11, 45
    x = te.placeholder((M, N), name="x")
    k = te.reduce_axis((0, M), name="k")
    s_ = te.compute((N,), lambda j: te.sum(x[k, j], axis=k), name="colsum")
    y = te.compute((N,), lambda j: s_[j] * (1.0 / M), name="y")
    task = create_task_from_te(y, [x], name="test.colmean")
    assert classify(te.create_schedule(y.op)) == "column"
    (xa,), (want,) = run_configs(task, n_random=4)
    np.testing.assert_allclose(want, xa.mean(0), rtol=1e-5, atol=1e-6)


def test_column_statistic_broadcast_back_and_a_transposed_view():
    """y = x - mean over rows (a column statistic computed once), and a row sum of a transposed
    view, which reads x by columns once the transpose is inlined."""
    M, N = 13, 37
    x = te.placeholder((M, N), name="x")
    k = te.reduce_axis((0, M), name="k")
    total = te.compute((N,), lambda j: te.sum(x[k, j], axis=k), name="colsum")
    y = te.compute((M, N), lambda i, j: x[i, j] - total[j] * (1.0 / M), name="y")
    task = create_task_from_te(y, [x], name="test.center")
    (xa,), (want,) = run_configs(task, n_random=4)
    np.testing.assert_allclose(want, xa - xa.mean(0), rtol=1e-5, atol=1e-6)
    t = te.compute((N, M), lambda j, i: x[i, j] * 2.0, name="t")
    r = te.reduce_axis((0, M), name="r")
    z = te.compute((N,), lambda j: te.sum(t[j, r], axis=r), name="z")
    assert classify(te.create_schedule(z.op)) == "column"
    task = create_task_from_te(z, [x], name="test.tsum")
    (xa,), (want,) = run_configs(task, n_random=4)
    np.testing.assert_allclose(want, 2 * xa.sum(0), rtol=1e-5, atol=1e-5)


def test_several_injective_outputs_and_int_arithmetic():
    x = te.placeholder((6, 21), "int32", name="x")
    y = te.compute((6, 21), lambda i, j: x[i, j] * 3 + j, name="y")
    z = te.compute((21, 6), lambda j, i: y[i, j] % 5, name="z")
    task = create_task_from_te([y, z], [x], name="test.two")
    assert any(k.startswith("out1.") for k in task.config_space.knobs)
    inputs = task.make_inputs(RNG)
    want = task.reference(inputs)
    np.testing.assert_array_equal(want[1], ((inputs[0] * 3 + np.arange(21)) % 5).T)
    for index in random.Random(1).sample(range(len(task.config_space)), 3):
        s, args = task.instantiate(index)
        outs = [np.zeros((6, 21), np.int32), np.zeros((21, 6), np.int32)]
        autotune.build(s, args)(*inputs, *outs)
        np.testing.assert_array_equal(outs[0], want[0])
        np.testing.assert_array_equal(outs[1], want[1])


def test_evaluate_te_selects_and_reductions():
    x = te.placeholder((4, 9), name="x")
    p = te.compute((4, 11), lambda i, j: te.if_then_else(te.all(j >= 1, j < 10), x[i, j - 1], te.const(-1.0)), name="p")
    k = te.reduce_axis((0, 11), name="k")
    mx = te.compute((4,), lambda i: te.max(p[i, k], axis=k, where=k > 2), name="mx")
    xa = RNG.standard_normal((4, 9)).astype(np.float32)
    pa, ma = evaluate_te([p, mx], [x], [xa])
    np.testing.assert_array_equal(pa, np.pad(xa, ((0, 0), (1, 1)), constant_values=-1))
    np.testing.assert_array_equal(ma, pa[:, 3:].max(1))


def test_fingerprint_follows_the_computation():
    (x, w, b), y = chain((8, 5), (5,))
    (x2, w2, b2), y2 = chain((8, 5), (5,))
    assert fingerprint([y], [x, w, b]) == fingerprint([y2], [x2, w2, b2])
    assert fingerprint([y], [x, w, b]) != fingerprint([y], [x, b, w])
    (x3, w3, b3), y3 = chain((8, 6), (6,))
    assert fingerprint([y3], [x3, w3, b3]) != fingerprint([y], [x, w, b])
    task = create_task_from_te(y, [x, w, b], name="test.fp")
    with pytest.raises(ValueError, match="fingerprint"):
        autotune.create_task("test.fp", fingerprint=task.params["fingerprint"] + 1)


def test_bad_computations_are_refused_with_a_reason():
    (x, w, b), y = chain((8, 5), (5,))
    with pytest.raises(ValueError, match=r"placeholder\(s\) \['b'\]"):
        create_task_from_te(y, [x, w], name="test.bad")
    with pytest.raises(TypeError, match=r"inputs\[2\]"):
        create_task_from_te(y, [x, w, y], name="test.bad")
    with pytest.raises(ValueError, match="already the name of a registered op"):
        create_task_from_te(y, [x, w, b], name="relu")
    A = te.placeholder((8, 6), name="A")
    B = te.placeholder((6, 5), name="B")
    k = te.reduce_axis((0, 6), name="k")
    C = te.compute((8, 5), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    with pytest.raises(ValueError, match="write a template"):
        create_task_from_te(C, [A, B], name="test.matmul")


MODULE = '''
"""A user's module: the te definition and the task at module level."""
import autotune.te as te
from autotune import create_task_from_te

x = te.placeholder((67, 33), name="x")
w = te.placeholder((33,), name="w")
b = te.placeholder((33,), name="b")
m = te.compute(x.shape, lambda i, j: x[i, j] * w[j], name="m")
a = te.compute(x.shape, lambda i, j: m[i, j] + b[j], name="a")
y = te.compute(x.shape, lambda i, j: te.maximum(a[i, j], te.const(0.0)), name="y")
TASK = create_task_from_te(y, [x, w, b], name="{name}")
'''


def test_tune_measures_a_te_task_in_worker_processes(tmp_path, monkeypatch):
    pkg = tmp_path / "userdefs"
    pkg.mkdir()
    (pkg / "fused_chain_e2e.py").write_text(textwrap.dedent(MODULE.format(name="test.e2e_chain")))
    monkeypatch.syspath_prepend(str(pkg))
    path = os.pathsep.join(p for p in (str(pkg), os.environ.get("PYTHONPATH", "")) if p)
    monkeypatch.setenv("PYTHONPATH", path)              # the worker processes import it by name
    module = importlib.import_module("fused_chain_e2e")
    try:
        task = module.TASK
        db = str(tmp_path / "tune.db")
        options = MeasureOptions(repeat=2, min_repeat_ms=1, build_workers=1)
        result = autotune.tune(task, trials=8, tuner="random", db=db, seed=0, measure_option=options)
        assert result.best_config is not None and np.isfinite(result.best_seconds) and not result.errors
        kernel = autotune.load("test.e2e_chain", db=db, **task.params)
        assert kernel.provenance == "tuned"
        xa, wa, ba = (RNG.standard_normal(s).astype(np.float32) for s in ((67, 33), (33,), (33,)))
        np.testing.assert_allclose(kernel(xa, wa, ba), np.maximum(xa * wa + ba, 0), rtol=1e-6, atol=1e-6)
    finally:
        sys.modules.pop("fused_chain_e2e", None)


SCRIPT = '''
"""A user's script, helpers from a module beside it, tuning with no __main__ guard."""
import sys

import autotune
from autotune.measure import MeasureOptions
from sibling_shapes import COLS, ROWS          # a module next to the script, not installed

import autotune.te as te

x = te.placeholder((ROWS, COLS), name="x")
y = te.compute(x.shape, lambda i, j: te.exp(x[i, j]) * 2.0, name="y")
TASK = autotune.create_task_from_te(y, [x], name="test.script_chain")
options = MeasureOptions(repeat=2, min_repeat_ms=1, build_workers=1)
result = autotune.tune(TASK, trials=4, tuner="random", db=sys.argv[1], seed=0, measure_option=options)
kinds = sorted({r.error_kind.value for _, r in result.history if not r.ok})
print("ok" if result.best_config is not None and not kinds else f"errors {kinds}")
'''


def test_a_script_run_as_main_tunes_with_modules_beside_it(tmp_path):
    """Workers never re-run the user's script: tuning at its top level, with no __main__ guard,
    measures once per candidate (a worker that re-ran it would start tuning itself)."""
    import subprocess

    project = tmp_path / "project"            # not the working directory, which workers import from anyway
    project.mkdir()
    (project / "sibling_shapes.py").write_text("ROWS, COLS = 9, 37\n")
    script = project / "tune_mine.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "t.db")], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "ok", done.stdout + done.stderr[-2000:]
