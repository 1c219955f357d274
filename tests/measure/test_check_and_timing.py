"""The pure parts of measurement, in-process: records as JSON, options, the output check, the
timing calibration and the wire protocol."""
from __future__ import annotations

import json
import math
import os
import threading
import time

import numpy as np
import pytest

from autotune.measure import BuildResult, ErrorKind, MeasureOptions, MeasureResult
from autotune.measure.check_data import tolerance
from autotune.measure.wire import read_frame, write_frame
from autotune.measure.worker.run import compare
from autotune.measure.worker.timing import measure_costs

DEFAULTS = MeasureOptions().to_json()


def test_measure_result_json_round_trip_and_cost():
    r = MeasureResult((3e-3, 1e-3, 2e-3), ErrorKind.OK, "", 0.5, 1700000000.0, 0.25)
    back = MeasureResult.from_json(json.loads(json.dumps(r.to_json())))
    assert back == r and r.cost == 2e-3 and r.ok
    failed = MeasureResult((), ErrorKind.CRASH, "runner worker killed by SIGSEGV", 0.1, 0.0)
    assert failed.cost == math.inf and not failed.ok
    assert MeasureResult.from_json(failed.to_json()).error_kind is ErrorKind.CRASH
    assert ErrorKind("timeout") is ErrorKind.TIMEOUT and ErrorKind.OK.value == "ok"


def test_build_result_json_carries_object_bytes():
    b = BuildResult(7, {"name": "k"}, bytes(range(256)), ErrorKind.OK, "", 0.3)
    assert BuildResult.from_json(json.loads(json.dumps(b.to_json()))) == b
    e = BuildResult(8, None, None, ErrorKind.BUILD_ERROR, "BuildError: x", 0.1)
    assert BuildResult.from_json(e.to_json()) == e


@pytest.mark.parametrize("field, value", [("repeat", 0), ("number", 0), ("run_timeout_s", -1),
                                          ("build_workers", 0), ("warmup", -1), ("atol", -1e-3)])
def test_options_are_validated(field, value):
    with pytest.raises(ValueError, match=field):
        MeasureOptions(**{field: value})


def test_tolerance_by_dtype_and_reduction():
    assert tolerance("float32", 1024, DEFAULTS) == pytest.approx((1e-4, 1e-4 * 32))
    assert tolerance("int32", 1024, DEFAULTS) == (0.0, 0.0)
    assert tolerance("float32", 1, {**DEFAULTS, "rtol": 0.5, "atol": 0.25}) == (0.5, 0.25)


def test_compare_accepts_reordered_float_sums_and_rejects_real_errors():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-1, 1, (33, 1024)).astype(np.float32), rng.uniform(-1, 1, (1024, 17)).astype(np.float32)
    want = a @ b
    got = np.zeros_like(want)
    for k in range(0, 1024, 64):                       # another summation order
        got += a[:, k:k + 64] @ b[k:k + 64]
    rtol, atol = tolerance("float32", 1024, DEFAULTS)
    assert compare("C", got, want, rtol, atol) is None
    got[3, 4] += 0.05
    msg = compare("C", got, want, rtol, atol)
    assert msg is not None and "1 of 561" in msg and "(3, 4)" in msg and "max abs error 0.05" in msg


def test_compare_nan_inf_shape_and_ints():
    want = np.array([1.0, np.inf, np.nan, -2.0], np.float32)
    assert compare("B", want.copy(), want, 1e-4, 1e-4) is None      # equal infs and NaNs match
    got = want.copy()
    got[0] = np.nan
    msg = compare("B", got, want, 1e-4, 1e-4)
    assert msg is not None and "(1 NaN)" in msg
    got = want.copy()
    got[3] = np.inf
    assert "1 of 4" in compare("B", got, want, 1e-4, 1e-4)
    assert "shape" in compare("B", np.zeros(3, np.float32), np.zeros(4, np.float32), 0, 0)
    assert compare("I", np.array([1, 2], np.int32), np.array([1, 2], np.int32), 0, 0) is None
    assert compare("I", np.array([1, 3], np.int32), np.array([1, 2], np.int32), 0, 0) is not None


def test_calibration_makes_each_timing_last_min_repeat_ms():
    calls = 0

    def kernel():
        nonlocal calls
        calls += 1
        end = time.perf_counter() + 20e-6
        while time.perf_counter() < end:
            pass

    options = {**DEFAULTS, "min_repeat_ms": 10.0, "repeat": 4}
    costs = measure_costs(kernel, options)
    assert len(costs) == 4 and all(20e-6 <= c < 2e-3 for c in costs)
    assert calls >= sum(10e-3 / c for c in costs)     # every timing lasted >= 10 ms
    calls = 0
    costs = measure_costs(kernel, {**options, "number": 3, "repeat": 2})
    assert len(costs) == 2 and calls == 6


def test_frames_carry_json_and_bytes():
    r, w = os.pipe()
    try:
        payload = bytes(range(256)) * 1000           # larger than a pipe buffer
        writer = threading.Thread(target=write_frame, args=(w, {"op": "run", "x": [1, 2]}, payload))
        writer.start()
        header, data = read_frame(r)
        writer.join()
        assert header == {"op": "run", "x": [1, 2]} and data == payload
        write_frame(w, {"event": "ready"})
        assert read_frame(r) == ({"event": "ready"}, b"")
        os.close(w)
        w = -1
        with pytest.raises(EOFError):
            read_frame(r)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def _pointer(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("cold, input_elems, copies", [
    ({0, 1}, 1000, 64), ({0, 1}, 300_000, 5), ({0, 1}, 2_000_000, 1),
    ({1}, 300_000, 14), ({1}, 2_000_000, 3)])
def test_cold_inputs_take_turns_over_copies_that_outweigh_the_private_caches(cold, input_elems, copies):
    """Two float32 inputs against 4 MiB of private caches: the sets of the `cold` inputs the calls
    take turns over total at least twice that (at most 64 sets); the others (cold_weights: the
    activations) are the same arrays in every call, as are the outputs; every set holds the
    same values."""
    from autotune.measure.worker.run import _with_cold_inputs
    from autotune.measure.worker.timing import cold_copies

    seen = []

    class Built:
        def bind(self, *arrays):
            return lambda: seen.append(arrays)

    inputs = [np.arange(input_elems, dtype=np.float32), np.ones(input_elems // 2, np.float32)]
    outputs = [np.zeros(3, np.float32)]
    assert cold_copies(sum(inputs[i].nbytes for i in cold), 4 << 20) == copies
    fn = Built().bind(*inputs, *outputs)
    turns = _with_cold_inputs(Built(), fn, inputs, outputs, cold, cache_bytes=4 << 20)
    seen.clear()
    for _ in range(2 * copies):
        turns()
    for i in range(2):
        pointers = [_pointer(arrays[i]) for arrays in seen]
        assert len(set(pointers)) == (copies if i in cold else 1) and pointers[:copies] == pointers[copies:]
    assert all(arrays[2] is outputs[0] for arrays in seen)
    assert all(np.array_equal(a, b) for arrays in seen for a, b in zip(arrays[:2], inputs))
