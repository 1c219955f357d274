"""Tuning measures the kernel a model runs: a task told which inputs are constants (a model's
weights) is lowered without its weight transforms, and each candidate's prologue makes them once,
untimed, in the runner worker, before its output is checked against the task's reference."""
from __future__ import annotations

import os
import sys

import pytest

from autotune.frontend import onnx as onnx_frontend
from autotune.graph.tuning import model_tasks
from autotune.measure import MeasureOptions, Measurer
from autotune.measure.builder import candidate_ir
from autotune.measure.check_data import CheckDataStore
from autotune.measure.types import ErrorKind
from autotune.measure.wire import pack_bundle, unpack_bundle
from autotune.measure.worker.build import handle_build
from autotune.measure.worker.run import handle_run, hoisted_constants
from autotune.schedules.task import create_task
from autotune.testing import legal_configs

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "graph"))
from test_hoist import conv_model  # noqa: E402

OPTIONS = MeasureOptions(repeat=2, min_repeat_ms=1)
ODD = dict(N=1, C=13, H=11, W=9, F=19, KH=3, KW=3, stride=1, padding=1)


def _params(func):
    return [p.name for p in func.params]


def test_a_models_conv_tasks_take_their_weights_as_constants():
    """conv+bn+relu folds the bn into a constant weight and bias: both are the task's constants,
    and an nchwc config of it is lowered reading the blocked weight, not the raw one."""
    (conv,) = [t.task for t in model_tasks(onnx_frontend.load(conv_model(bn=True))) if "conv" in t.task.name]
    assert conv.constant_inputs == (1, 2)
    (index,) = legal_configs(conv, 0, where={"algorithm": ["nchwc"]})
    assert "kernel_vec" in _params(conv.lower(index)) and "W" not in _params(conv.lower(index))
    plan = conv.hoist_plan(index)
    assert plan is not None and plan.prologue_inputs == (1,)


@pytest.mark.parametrize("algorithm", ["nchwc", "winograd", "gemm", "nchw"])
def test_hoisted_candidates_are_checked_against_the_reference(algorithm):
    """Every algorithm, on a shape where every split has a tail: split or not, each candidate
    computes the conv (the runner compares it with numpy) and gets a time."""
    task = create_task("conv2d", **ODD)
    task.set_constant_inputs([1])
    configs = legal_configs(task, 5, where={"algorithm": [algorithm]})
    if algorithm == "nchwc":
        assert all(task.hoist_plan(i) is not None for i in configs)
    with Measurer(OPTIONS) as m:
        results = m.measure(task, configs)
    assert [(r.error_kind, r.error_msg) for r in results] == [(ErrorKind.OK, "")] * len(configs)
    assert all(r.costs and min(r.costs) > 0 for r in results)


def _run(task, index, payload, store):
    built, obj = handle_build({"target": task.target_key}, payload, lambda e: None)
    assert built["error_kind"] == "ok", built
    check = store.get(task, OPTIONS.to_json()).to_json()
    return built, obj, lambda signature: handle_run(
        {"signature": signature, "check": check, "options": OPTIONS.to_json(), "num_threads": 1}, obj,
        lambda e: None)[0]


def test_the_runner_feeds_the_kernel_what_the_prologue_made():
    """The input map travels with the build: fed the raw weight where it expects the blocked one
    (a wrong map), the candidate fails with an error instead of being timed."""
    task = create_task("conv2d", **ODD)
    task.set_constant_inputs([1])
    (index,) = legal_configs(task, 0, where={"algorithm": ["nchwc"]})
    meta, parts = unpack_bundle(candidate_ir(task, index))
    assert meta["sources"] == [["input", 0], ["hoisted", 0]] and len(parts) == 2
    store = CheckDataStore()
    try:
        built, _, run = _run(task, index, candidate_ir(task, index), store)
        assert built["signature"]["hoisted"]["prologue_inputs"] == [1]
        assert run(built["signature"])["error_kind"] == "ok"
        wrong = {**built["signature"], "hoisted": {**built["signature"]["hoisted"], "sources": [["input", 0], ["input", 1]]}}
        reply = run(wrong)
        assert reply["error_kind"] == "runtime_error" and "kernel_vec" in reply["error_msg"], reply
    finally:
        store.close()


def test_bundles_that_do_not_add_up_are_refused():
    whole = pack_bundle({"a": 1}, [b"xy", b"z"])
    assert unpack_bundle(whole) == ({"a": 1}, [b"xy", b"z"])
    assert unpack_bundle(b'{"format": "autotune.loop_ir"}') is None
    with pytest.raises(ValueError, match="does not match its length"):
        unpack_bundle(whole[:-1])


def test_constant_inputs_must_be_input_positions():
    task = create_task("conv2d", **ODD)
    with pytest.raises(ValueError, match=r"constant inputs \[2\] are not input positions"):
        task.set_constant_inputs([2])
    task.set_constant_inputs([1])
    assert task.constant_inputs == (1,)
    assert task.num_inputs == 2


def test_cold_weights_rotate_what_the_prologue_made_and_the_constants_the_kernel_reads():
    """conv+bias+relu with weight and bias constant: the blocked weight (made) and the bias (read
    as is) are the kernel's constants, the activations are not; measured so, every candidate of
    an odd shape is still checked and timed."""
    assert hoisted_constants([["input", 0], ["hoisted", 0], ["input", 2]], {1, 2}) == {1, 2}
    assert hoisted_constants([["input", 0], ["hoisted", 0], ["input", 2]], {1}) == {1}
    task = create_task("conv2d_bias_relu", **ODD, dilation=1, groups=1)
    task.set_constant_inputs([1, 2])
    configs = legal_configs(task, 3, where={"algorithm": ["nchwc", "gemm"]})
    with Measurer(MeasureOptions(repeat=2, min_repeat_ms=1, cold_weights=True)) as m:
        results = m.measure(task, configs)
    assert [(r.error_kind, r.error_msg) for r in results] == [(ErrorKind.OK, "")] * len(configs)
