"""The elementwise ops ONNX models need (erf, leaky_relu, elu, hard_sigmoid, hard_swish, clip,
floor, ceil, round, sign, softplus, sin, cos, logical_not, cast, equal/less/greater/less_equal/greater_equal,
expand): several configs of each template vs numpy on odd
shapes, each op vs onnx's reference evaluator, float parameters that are infinities and word
parameters through keys, the database and the command line, and bad input."""
import math
import time

import numpy as np
import pytest

import autotune
from autotune import ops
from autotune.cli import parse_shape
from autotune.measure.types import ErrorKind, MeasureResult
from autotune.search.tune import tune
from tuning_db import TuningDB

from .onnx_reference import run_node

RNG = np.random.default_rng(14)
SHAPE = (3, 5, 37)


def rand(*shape, dtype="float32", scale=3.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


@pytest.mark.parametrize("op, params", [
    ("erf", {}), ("hard_swish", {}), ("leaky_relu", {"alpha": 0.1}), ("elu", {"alpha": 0.7}),
    ("hard_sigmoid", {"alpha": 0.3, "beta": 0.4}), ("clip", {"lo": -0.25, "hi": math.inf}),
    ("clip", {"lo": 0.5, "hi": -0.5}), ("expand", {"out_shape": (2, 3, 7, 37)}), ("floor", {}), ("ceil", {}),
    ("round", {}), ("sign", {}), ("softplus", {}), ("sin", {}), ("cos", {}),
])
def test_unary_templates_match_numpy_at_several_configs(check_configs, op, params):
    shape = (3, 1, 37) if op == "expand" else SHAPE
    check_configs(op, shape=shape, **params)


@pytest.mark.parametrize("op, dtype, params", [
    ("equal", "int32", {"a_shape": (5, 1, 37), "b_shape": (3, 1)}), ("less", "float32", {"a_shape": (37,),
                                                                                         "b_shape": (5, 37)}),
    ("greater", "int64", {"a_shape": (5, 37), "b_shape": (5, 37)}), ("logical_not", "bool", {"shape": SHAPE}),
    ("cast", "float32", {"shape": SHAPE, "to": "int64"}), ("cast", "int32", {"shape": SHAPE, "to": "bool"}),
    ("cast", "bool", {"shape": SHAPE, "to": "float32"}), ("clip", "int32", {"shape": SHAPE, "lo": -3.0, "hi": 4.0}),
    ("equal", "bool", {"a_shape": (5, 37), "b_shape": (37,)}),
    # unsigned and 16-bit integers: the random inputs in [-8, 8] wrap to values above 2**63 (uint64),
    # so a signed compare, shift or extension would disagree with numpy
    ("less", "uint64", {"a_shape": (5, 37), "b_shape": (37,)}), ("greater", "uint32", {"a_shape": (5, 37),
                                                                                        "b_shape": (5, 1)}),
    ("maximum", "uint16", {"a_shape": (5, 37), "b_shape": (37,)}), ("sub", "uint32", {"a_shape": (37,),
                                                                                     "b_shape": (5, 37)}),
    ("mul", "int16", {"a_shape": (5, 37), "b_shape": (5, 37)}), ("cast", "uint64", {"shape": SHAPE, "to": "float32"}),
    # integer division truncates toward zero (C, ONNX); a zero divisor (inputs in [-8, 8]) gives 0, never a trap
    ("div", "int32", {"a_shape": (5, 37), "b_shape": (37,)}), ("div", "int8", {"a_shape": (5, 37), "b_shape": (5, 1)}),
    ("div", "uint16", {"a_shape": (5, 37), "b_shape": (5, 37)}),
    ("less_equal", "int32", {"a_shape": (5, 37), "b_shape": (37,)}),
    ("greater_equal", "uint8", {"a_shape": (5, 1, 37), "b_shape": (3, 1)}), ("sign", "int16", {"shape": SHAPE}),
])
def test_templates_with_other_dtypes_match_numpy_exactly(check_configs, op, dtype, params):
    check_configs(op, dtype=dtype, exact=True, **params)


ONNX_UNARY = [
    ("Erf", {}, ops.erf, {}), ("HardSwish", {}, ops.hard_swish, {}),
    ("LeakyRelu", {"alpha": 0.2}, ops.leaky_relu, {"alpha": 0.2}), ("Elu", {"alpha": 0.5}, ops.elu, {"alpha": 0.5}),
    ("HardSigmoid", {"alpha": 0.25, "beta": 0.6}, ops.hard_sigmoid, {"alpha": 0.25, "beta": 0.6}),
    ("LeakyRelu", {}, ops.leaky_relu, {}), ("Elu", {}, ops.elu, {}), ("HardSigmoid", {}, ops.hard_sigmoid, {}),
    ("Floor", {}, ops.floor, {}), ("Ceil", {}, ops.ceil, {}), ("Sign", {}, ops.sign, {}),
    ("Softplus", {}, ops.softplus, {}), ("Sin", {}, ops.sin, {}), ("Cos", {}, ops.cos, {}),
]


@pytest.mark.parametrize("onnx_op, attrs, fn, kwargs", ONNX_UNARY)
def test_activations_follow_onnx(onnx_op, attrs, fn, kwargs):
    """The ops' defaults are ONNX's attribute defaults."""
    x = rand(5, 37)
    (want,) = run_node(onnx_op, [x], **attrs)
    np.testing.assert_allclose(fn(x, **kwargs), want, rtol=2e-6, atol=2e-6)


def test_round_takes_halves_to_even_and_softplus_never_overflows():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.49999997, 1e7 + 0.5, np.nan, -np.inf, 3.7],
                 np.float32)
    (want,) = run_node("Round", [x])
    np.testing.assert_array_equal(ops.round(x), want)
    big = np.array([-200.0, -30.0, 0.0, 30.0, 100.0, 1e30], np.float32)
    np.testing.assert_allclose(ops.softplus(big), np.logaddexp(big, np.float32(0)), rtol=1e-6)


@pytest.mark.parametrize("bounds", [(-0.5, 0.75), (None, 0.75), (-0.5, None), (None, None), (1.0, -1.0)])
def test_clip_follows_onnx_with_absent_bounds(bounds):
    x = rand(4, 37)
    extra = tuple(None if b is None else np.array(b, np.float32) for b in bounds)
    (want,) = run_node("Clip", [x], extra=extra, opset=13)
    lo, hi = (-math.inf if bounds[0] is None else bounds[0]), (math.inf if bounds[1] is None else bounds[1])
    np.testing.assert_array_equal(ops.clip(x, lo, hi), want)


def test_comparisons_not_and_cast_follow_onnx():
    a, b = np.round(rand(5, 1, 37)), np.round(rand(3, 1))
    for onnx_op, fn in (("Equal", ops.equal), ("Less", ops.less), ("Greater", ops.greater),
                        ("LessOrEqual", ops.less_equal), ("GreaterOrEqual", ops.greater_equal)):
        (want,) = run_node(onnx_op, [a, b])
        got = fn(a, b)
        assert got.dtype == np.bool_ and got.shape == want.shape and np.array_equal(got, want), onnx_op
    mask = RNG.integers(0, 2, (7, 33)).astype(bool)
    np.testing.assert_array_equal(ops.logical_not(mask), run_node("Not", [mask])[0])
    x = rand(6, 35)
    for to, code in (("int32", 6), ("int64", 7), ("bool", 9), ("float64", 11)):
        (want,) = run_node("Cast", [x], to=code)
        got = ops.cast(x, to)
        assert got.dtype == want.dtype and np.array_equal(got, want), to


def test_expand_follows_onnx():
    x = rand(3, 1, 5)
    (want,) = run_node("Expand", [x], extra=(np.array([2, 3, 7, 5], np.int64),))
    np.testing.assert_array_equal(ops.expand(x, (2, 3, 7, 5)), want)


class FirstIsFastest:
    """A measurer under which the first config measured is the fastest (no hardware needed)."""

    def measure(self, task, indices):
        return [MeasureResult((1e-4 * (1 + n),), ErrorKind.OK, "", 0.0, time.time()) for n, _ in enumerate(indices)]

    def close(self):
        pass


def test_infinite_and_word_parameters_key_store_and_load(tmp_path):
    """clip's absent bound is an infinity and cast's `to` a word: both name a workload, survive the
    database and its JSONL export, and find their tuned kernel; another `to` is never nearest."""
    db = str(tmp_path / "t.db")
    clip = autotune.create_task("clip", shape=(7, 64), lo=0.0, hi=math.inf)
    cast = autotune.create_task("cast", shape=(7, 9), to="int32")
    assert clip.workload_key == "clip(shape=7:64,lo=0.0,hi=inf)float32"
    assert cast.workload_key == "cast(shape=7:9,to=int32)float32"
    for task in (clip, cast):
        tune(task, trials=2, tuner="grid", db=db, measurer=FirstIsFastest())
    assert autotune.load("clip", db=db, shape=(7, 64), lo=0.0, hi=math.inf).provenance == "tuned"
    assert autotune.load("clip", db=db, shape=(9, 64), lo=0.0, hi=math.inf).provenance == f"nearest:{clip.workload_key}"
    assert autotune.load("cast", db=db, shape=(7, 9), to="int32").provenance == "tuned"
    assert autotune.load("cast", db=db, shape=(7, 9), to="int64").provenance == "default"
    with TuningDB(db) as src:
        assert src.export_jsonl(tmp_path / "t.jsonl") == 4
    with TuningDB(tmp_path / "copy.db") as dst:
        assert dst.import_jsonl(tmp_path / "t.jsonl") == 4
        params = {w.key: w.params for w in dst.workloads()}
    assert params[clip.workload_key] == {"shape": (7, 64), "lo": 0.0, "hi": math.inf}
    assert params[cast.workload_key] == {"shape": (7, 9), "to": "int32"}


def test_the_command_line_reads_infinities_and_words():
    assert parse_shape("shape=7:9,lo=-inf,hi=inf,to=int32") == {"shape": (7, 9), "lo": -math.inf, "hi": math.inf,
                                                               "to": "int32"}


BAD = [
    (lambda: ops.leaky_relu(rand(3), alpha=math.inf), ValueError, "leaky_relu: argument alpha must be finite"),
    (lambda: ops.elu(rand(3), alpha="1"), TypeError, "elu: argument alpha must be a float"),
    (lambda: ops.clip(rand(3), lo=math.nan), ValueError, "clip: argument lo must be a number, not NaN"),
    (lambda: ops.clip(np.arange(3), lo=0.5), ValueError, "clip: argument lo must be a whole number for int64"),
    (lambda: ops.hard_sigmoid(np.arange(3)), TypeError, "hard_sigmoid: argument x must be float32 or float64"),
    (lambda: ops.logical_not(rand(3)), TypeError, "logical_not: argument x must be a bool array, got float32"),
    (lambda: ops.less(rand(3) > 0, rand(3) > 0), TypeError, "less: argument a must be a number array, got bool"),
    (lambda: ops.equal(rand(3), np.arange(3)), TypeError, "equal: arguments a, b must share a dtype"),
    (lambda: ops.cast(rand(3), "complex64"), TypeError, "cast: argument to must be a dtype kernels support"),
    (lambda: ops.expand(rand(3, 2), (4, 3, 5)), ValueError, r"expand: x of shape \(3, 2\) does not broadcast"),
    (lambda: autotune.create_task("cast", shape=3, to="int 32"), ValueError, "cast: parameter to must be a word"),
    (lambda: autotune.create_task("cast", shape=3, to="half"), ValueError, "cast: parameter to: unknown dtype"),
    (lambda: autotune.create_task("clip", shape=3, lo=math.nan), ValueError,
     "clip: parameter lo must be a float that is not NaN"),
]


@pytest.mark.parametrize("call, error, message", BAD)
def test_bad_input_names_the_op_and_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_empty_and_zero_d_arrays():
    assert ops.equal(np.empty((0, 3), np.float32), np.float32(1.0) * np.ones(3, np.float32)).dtype == np.bool_
    assert ops.cast(np.array(2.7, np.float32), "int32") == 2
    assert ops.expand(np.ones(3, np.float32), (0, 3)).shape == (0, 3)
