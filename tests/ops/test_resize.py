"""resize: several configs vs numpy on odd shapes for every mode and coordinate mode, every
combination vs onnx's reference evaluator on a one-node Resize (sizes, and scales that give the
same output shape), resizing a single middle axis and a 1-d tensor, and bad input."""
import itertools

import numpy as np
import pytest

import autotune
from autotune import ops

from .onnx_reference import run_node

COORDS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
COMBOS = [("nearest", c, n) for c in COORDS for n in NEAREST] + [("linear", c, "round_prefer_floor") for c in COORDS]


@pytest.mark.parametrize("mode, coord, nearest", [("nearest", "half_pixel", "round_prefer_floor"),
                                                  ("nearest", "asymmetric", "ceil"),
                                                  ("linear", "align_corners", "round_prefer_floor"),
                                                  ("linear", "pytorch_half_pixel", "round_prefer_floor")])
def test_resize_matches_numpy_at_several_configs(check_configs, mode, coord, nearest):
    check_configs("resize", shape=(2, 3, 5, 7), out_shape=(2, 3, 11, 37), mode=mode, coord=coord, nearest=nearest)


@pytest.mark.parametrize("mode, coord, nearest", COMBOS)
def test_resize_follows_onnx_for_sizes(mode, coord, nearest):
    """Up in one axis, down in the other, and to a single pixel (where the coordinate modes
    have their special cases)."""
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 7)).astype(np.float32)
    for out in ((1, 2, 11, 4), (1, 2, 1, 3)):
        (want,) = run_node("Resize", [x], extra=(None, None, np.array(out, np.int64)), mode=mode,
                           coordinate_transformation_mode=coord, nearest_mode=nearest)
        np.testing.assert_allclose(ops.resize(x, out, mode, coord, nearest), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode, coord", list(itertools.product(["nearest", "linear"], COORDS)))
def test_resize_follows_onnx_for_scales_of_the_same_shape(mode, coord):
    x = np.random.default_rng(2).standard_normal((1, 3, 6, 4)).astype(np.float32)
    scales = np.array([1.0, 1.0, 0.5, 2.5], np.float32)
    (want,) = run_node("Resize", [x], extra=(None, scales), mode=mode, coordinate_transformation_mode=coord)
    np.testing.assert_allclose(ops.resize(x, (1, 3, 3, 10), mode, coord), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode, antialias, exclude_outside", [("cubic", False, False), ("cubic", True, True),
                                                               ("linear", True, False), ("linear", True, True)])
def test_resize_tables_follow_onnx(mode, antialias, exclude_outside):
    """Cubic, antialias and exclude_outside: one resample kernel per resized axis. Against
    onnxruntime: 7 -> 17 puts output 8 at source 3 + 4e-16, where onnx's reference evaluator
    reads pixel 2 (its neighbours come from x + 2, rounded to 5.0)."""
    x = np.random.default_rng(4).standard_normal((1, 2, 13, 7)).astype(np.float32)
    empty = np.zeros(0, np.float32)
    for out in ((1, 2, 5, 17), (1, 2, 29, 3)):
        (want,) = run_node("Resize", [x], extra=(empty, empty, np.array(out, np.int64)), mode=mode,
                           antialias=int(antialias), exclude_outside=int(exclude_outside), cubic_coeff_a=-0.5,
                           runtime="onnxruntime")
        got = ops.resize(x, out, mode, cubic_a=-0.5, antialias=antialias, exclude_outside=exclude_outside)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_any_axis_any_rank():
    x = np.random.default_rng(3).standard_normal((3, 4, 5)).astype(np.float32)
    (want,) = run_node("Resize", [x], extra=(None, None, np.array([3, 9, 5], np.int64)), mode="linear")
    np.testing.assert_allclose(ops.resize(x, (3, 9, 5), "linear"), want, rtol=1e-6, atol=1e-6)
    v = np.arange(7, dtype=np.int32)
    assert ops.resize(v, (14,), coord="asymmetric", nearest="floor").tolist() == np.repeat(v, 2).tolist()


@pytest.mark.parametrize("mode, coord", [("linear", "half_pixel"), ("linear", "asymmetric"),
                                         ("linear", "pytorch_half_pixel"), ("nearest", "half_pixel")])
def test_an_integer_upscale_reads_its_source_columns_as_spans(mode, coord):
    """At a 2x upscale a vector of output columns reads source columns one scalar plus constants
    apart: the default kernel loads them as spans and shuffles, no per-lane loads (a gather of
    16 loads per vector ran the 2x linear resize at 0.64x onnxruntime), its edge clamps split off
    the interior by loop partition; rows of 58 leave a masked tail, and the result is numpy's."""
    x = np.random.default_rng(5).standard_normal((1, 3, 13, 29)).astype(np.float32)
    task = autotune.create_task("resize", shape=x.shape, out_shape=(1, 3, 26, 58), mode=mode, coord=coord)
    f = autotune.build(*task.instantiate(task.config(task.default_index)))
    assert "extractelement" not in f.get_source("ll-raw")
    out = np.empty((1, 3, 26, 58), np.float32)
    f(x, out)
    np.testing.assert_allclose(out, task.reference([x])[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((np.ones((2, 3), np.float32), (4,)), {}, ValueError, r"resize: argument out_shape must be 2 positive ints"),
    ((np.ones((2, 3), np.float32), (4, 0)), {}, ValueError, r"resize: argument out_shape must be 2 positive ints"),
    ((np.ones((2, 3), np.float32), (4, 6)), {"mode": "area"}, ValueError, "resize: argument mode must be one of"),
    ((np.ones((2, 3), np.float32), (4, 6)), {"coord": "tf_crop_and_resize"}, ValueError,
     "resize: argument coord must be one of"),
    ((np.ones((2, 3), np.int32), (4, 6)), {"mode": "linear"}, TypeError, "resize: argument x must be float32"),
    ((np.ones((2, 3), np.int32), (4, 6)), {"mode": "cubic"}, TypeError, "resize: argument x must be float32"),
    ((np.ones((2, 3), np.float32), (4, 6)), {"antialias": True}, ValueError,
     "resize: argument antialias applies to modes linear and cubic"),
    ((np.ones((200, 3), np.float32), (10, 3)), {"mode": "cubic", "antialias": True}, ValueError,
     "resize: a cubic antialiased downscale by 20x reads 80 taps"),
])
def test_bad_input_names_the_argument(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        ops.resize(*args, **kwargs)
