"""Measurement in real worker processes: injected faults, real matmul kernels, object code
across processes, worker replacement and cleanup."""
from __future__ import annotations

import math
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from autotune.codegen import compile_object, load_module
from autotune.ir.lower import lower
from autotune.measure import (BuildResult, ErrorKind, LocalBuilder, LocalRunner, MeasureInput,
                              MeasureOptions, MeasureResult, Measurer, measure_batch)
from autotune.schedules.task import create_task
from autotune.testing import FAULT_OP, FAULTS, fault_index, fault_task

EXPECTED = {"ok": ErrorKind.OK, "wrong": ErrorKind.WRONG_RESULT, "crash": ErrorKind.CRASH,
            "hang": ErrorKind.TIMEOUT, "build_error": ErrorKind.BUILD_ERROR,
            "instantiation_error": ErrorKind.INSTANTIATION_ERROR, "runtime_error": ErrorKind.RUNTIME_ERROR}
OPTIONS = MeasureOptions(repeat=3, min_repeat_ms=5, run_timeout_s=3, build_timeout_s=60, build_workers=2)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def measurer():
    with Measurer(OPTIONS) as m:
        yield m


def first_valid(task, count, stride=97):
    out, i = [], 0
    while len(out) < count:
        if task.is_valid(i):
            out.append(i)
        i += stride
    return out


def assert_ok(r: MeasureResult, repeat: int = OPTIONS.repeat) -> None:
    assert r.ok, (r.error_kind, r.error_msg)
    assert len(r.costs) == repeat and all(c >= 0 for c in r.costs)
    assert 0 < r.cost < 1 and r.cost == statistics.median(r.costs)


def test_every_fault_is_recorded_and_the_batch_carries_on(measurer):
    task = fault_task()
    plan = ["ok", "wrong", "crash", "ok", "hang", "build_error", "instantiation_error", "runtime_error", "ok"]
    runner_before = measurer.runner.pid
    results = measurer.measure(task, [fault_index(f) for f in plan])
    kinds = [r.error_kind for r in results]
    assert kinds == [EXPECTED[f] for f in plan]
    for r in (results[0], results[3], results[8]):
        assert_ok(r)
    for r in results:
        assert (r.cost == math.inf) != r.ok and isinstance(r.error_msg, str)
    assert "max abs error 1" in results[1].error_msg and "expected" in results[1].error_msg
    assert "SIGSEGV" in results[2].error_msg
    assert "3 s" in results[4].error_msg
    assert "unroll" in results[5].error_msg
    assert "illegal on purpose" in results[6].error_msg
    assert "shape" in results[7].error_msg
    # crashed and hung workers were replaced; the next batch works
    assert measurer.runner.pid != runner_before and not alive(runner_before)
    again = measurer.measure(task, [fault_index("ok")])
    assert_ok(again[0])


def test_runtime_and_wrong_results_keep_the_worker(measurer):
    task = fault_task(n=5)
    pid = measurer.runner.pid
    results = measurer.measure(task, [fault_index("runtime_error"), fault_index("wrong"), fault_index("ok")])
    assert [r.error_kind for r in results] == [ErrorKind.RUNTIME_ERROR, ErrorKind.WRONG_RESULT, ErrorKind.OK]
    assert measurer.runner.pid == pid


def test_workers_killed_while_idle_cost_no_candidate(measurer):
    for w in (*measurer.builder._workers, measurer.runner._worker):
        w.wait_ready()
    for pid in measurer.pids:
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.1)
    results = measurer.measure(fault_task(), [fault_index("ok")] * 3)
    assert all(r.ok for r in results), [r.error_msg for r in results]


def test_matmul_configs_measure_ok_with_sane_costs(measurer):
    task = create_task("matmul", M=64, N=48, K=40)
    indices = first_valid(task, 4)
    results = measurer.measure(task, indices)
    for r in results:
        assert_ok(r)
        assert r.build_seconds > 0 and r.run_seconds > 0
        assert r.cost > task.flop / 1e13            # not faster than 10 TFLOP/s on a CPU
    dense = create_task("dense", M=17, N=33, K=1024)
    for r in measurer.measure(dense, first_valid(dense, 2)):
        assert_ok(r)


def test_object_code_compiled_in_a_worker_loads_here():
    task = create_task("matmul", M=31, N=29, K=23)
    index = first_valid(task, 1)[0]
    with LocalBuilder(MeasureOptions(build_workers=1)) as builder:
        (built,) = builder.build([MeasureInput(task, index)])
    assert built.ok and built.obj and built.signature["params"][2]["shape"] == [31, 29]
    restored = BuildResult.from_json(built.to_json())     # as JSON, e.g. through a file
    f = load_module(restored.signature, restored.obj)
    a, b = task.make_inputs(np.random.default_rng(0))
    c = np.empty((31, 29), np.float32)
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_object_code_compiled_here_runs_in_the_runner():
    task = create_task("matmul", M=16, N=24, K=8)
    index = first_valid(task, 1)[0]
    signature, obj = compile_object(lower(*task.instantiate(index)))
    built = BuildResult(index, signature, obj, ErrorKind.OK, "", 0.0)
    with LocalRunner(MeasureOptions(repeat=2, min_repeat_ms=1)) as runner:
        (r,) = runner.run([MeasureInput(task, index)], [built])
    assert_ok(r, repeat=2)


def test_damaged_object_code_is_refused_before_llvm_sees_it():
    task = create_task("matmul", M=16, N=24, K=8)
    signature, obj = compile_object(lower(*task.instantiate(first_valid(task, 1)[0])))
    with pytest.raises(ValueError, match="damaged"):
        load_module(signature, obj[:-8])
    with pytest.raises(ValueError, match="version"):
        load_module({**signature, "version": 0}, obj)
    with pytest.raises(ValueError, match="compiled for"):
        load_module({**signature, "target": "llvm -mcpu=other"}, obj)


def test_build_timeout_and_build_crash_replace_the_worker():
    """A stopped worker cannot answer: deterministic timeouts and crashes mid-build."""
    task = fault_task()
    with LocalBuilder(MeasureOptions(build_workers=1, build_timeout_s=0.3)) as builder:
        builder._workers[0].wait_ready()
        pid = builder.pids[0]
        os.kill(pid, signal.SIGSTOP)
        (r,) = builder.build([MeasureInput(task, 0)])
        assert r.error_kind is ErrorKind.TIMEOUT and "0.3 s" in r.error_msg and r.obj is None
        assert builder.pids[0] != pid and not alive(pid)
        builder._workers[0].wait_ready()
        pid = builder.pids[0]
        os.kill(pid, signal.SIGSTOP)

        def segfault_mid_build():
            os.kill(pid, signal.SIGSEGV)
            os.kill(pid, signal.SIGCONT)

        threading.Timer(0.1, segfault_mid_build).start()
        (r,) = builder.build([MeasureInput(task, 0)])
        assert r.error_kind is ErrorKind.CRASH and "SIGSEGV" in r.error_msg and "config 0" in r.error_msg
        assert builder.pids[0] != pid
        (r,) = builder.build([MeasureInput(task, 0)])
        assert r.ok


def test_build_workers_are_recycled():
    task = fault_task()
    with LocalBuilder(MeasureOptions(build_workers=1, max_builds_per_worker=2)) as builder:
        first = builder.pids[0]
        results = builder.build([MeasureInput(task, 0)] * 3)
        assert all(r.ok for r in results) and builder.pids[0] != first and not alive(first)


def test_close_leaves_no_workers():
    m = Measurer(MeasureOptions(build_workers=2))
    pids = m.pids
    assert len(pids) == 3 and all(alive(p) for p in pids)
    m.close()
    assert not any(alive(p) for p in pids)
    m.close()                                         # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        m.measure(fault_task(), [0])


def test_workers_die_with_an_unclosed_measurer_at_exit():
    script = ("from autotune.measure import Measurer, MeasureOptions\n"
              "m = Measurer(MeasureOptions(build_workers=1))\n"
              "print(*m.pids)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    pids = [int(p) for p in out.stdout.split()]
    deadline = time.monotonic() + 5
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)


def test_flush_cache_and_fixed_number():
    task = fault_task(n=3)
    options = MeasureOptions(number=2, repeat=2, flush_cache=True, warmup=3, build_workers=1)
    with Measurer(options) as m:
        (r,) = m.measure(task, [0])
    assert_ok(r, repeat=2)


def test_measure_batch_keeps_input_order_across_tasks(measurer):
    faults, mm = fault_task(n=11), create_task("matmul", M=8, N=8, K=8)
    inputs = [MeasureInput(faults, fault_index("build_error")), MeasureInput(mm, first_valid(mm, 1)[0]),
              MeasureInput(faults, fault_index("ok")), MeasureInput(faults, fault_index("instantiation_error"))]
    kinds = [r.error_kind for r in measure_batch(inputs, measurer.builder, measurer.runner)]
    assert kinds == [ErrorKind.BUILD_ERROR, ErrorKind.OK, ErrorKind.OK, ErrorKind.INSTANTIATION_ERROR]
