"""resample: several configs vs numpy on odd shapes (a middle axis, the innermost axis, with
extrapolation); ONNX Resize's tap tables (`resize_table`) vs onnx's reference evaluator for any
mode, coordinate mode, scale, antialias, exclude_outside and roi (hypothesis); bad parameters."""
import math

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import autotune
from autotune.topi.resample import COORDS, resample_reference, resize_table, source_coordinates

from .onnx_reference import run_node

NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


@pytest.mark.parametrize("params", [dict(shape=(2, 5, 7), axis=1, out_extent=11, taps=4),
                                    dict(shape=(3, 13), axis=1, out_extent=5, taps=6),
                                    dict(shape=(7, 3, 2), axis=0, out_extent=9, taps=2, extrapolate=1, fill=-2.5)])
def test_resample_matches_numpy_at_several_configs(check_configs, params):
    """Random tables: indices from -8 to 8 (clamped; a negative first index extrapolates)."""
    check_configs("resample", **params)


@st.composite
def resizes(draw):
    mode = draw(st.sampled_from(["nearest", "linear", "cubic"]))
    attrs = dict(mode=mode, coordinate_transformation_mode=draw(st.sampled_from(COORDS)),
                 nearest_mode=draw(st.sampled_from(NEAREST)), exclude_outside=draw(st.integers(0, 1)),
                 cubic_coeff_a=draw(st.sampled_from([-0.75, -0.5])),
                 antialias=0 if mode == "nearest" else draw(st.integers(0, 1)))
    n_in = draw(st.integers(1, 13))
    scale = draw(st.floats(0.15, 3.5).filter(lambda s: math.floor(s * n_in) >= 1))
    by_sizes = draw(st.booleans())
    roi = sorted(draw(st.lists(st.floats(-0.4, 1.4), min_size=2, max_size=2)))
    return attrs, n_in, scale, by_sizes, roi


@settings(max_examples=80, deadline=None)
@given(resizes())
@example((dict(mode="linear", coordinate_transformation_mode="half_pixel", nearest_mode="floor", exclude_outside=0,
               cubic_coeff_a=-0.75, antialias=0), 5, 1.3999999999999997, False, [0.0, 1.0]))
def test_resize_tables_follow_onnx(case):
    """Axis 1 of a (2, n, 3) tensor by scales (the scale need not be a size ratio) or by sizes.
    The output size is floor(scale * n) in double precision of the float32 scale, as onnx's
    reference takes it: float32 arithmetic rounds 1.4f * 5 up to 7, onnx's size is 6.
    Left out: a source coordinate a rounding error off a whole pixel (6 + 1e-15), where onnx's
    reference picks its neighbours from x + 2, rounded to 8.0, and reads pixel 5 for 6."""
    attrs, n_in, scale, by_sizes, roi = case
    x = np.random.default_rng(n_in).standard_normal((2, n_in, 3)).astype(np.float32)
    n_out = math.floor(float(np.float32(scale)) * n_in) if not by_sizes else max(1, round(scale * n_in))
    scale = n_out / n_in if by_sizes else float(np.float32(scale))
    roi_in = np.array([0, roi[0], 0, 1, roi[1], 1], np.float32)
    source = source_coordinates(n_in, n_out, scale, attrs["coordinate_transformation_mode"], (roi_in[1], roi_in[4]))
    assume(not np.any((source != np.round(source)) & (np.abs(source - np.round(source)) < 1e-9)))
    extra = (roi_in, None, np.array([2, n_out, 3], np.int64)) if by_sizes else \
        (roi_in, np.array([1, scale, 1], np.float32))
    (want,) = run_node("Resize", [x], extra=extra, opset=19, extrapolation_value=-3.0, **attrs)
    indices, weights = resize_table(n_in, n_out, scale, attrs["mode"], attrs["coordinate_transformation_mode"],
                                    attrs["nearest_mode"], attrs["cubic_coeff_a"], bool(attrs["exclude_outside"]),
                                    bool(attrs["antialias"]), (roi_in[1], roi_in[4]))
    got = resample_reference(x, indices, weights, 1, attrs["coordinate_transformation_mode"] == "tf_crop_and_resize",
                             -3.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_large_antialiased_downscale_is_refused_by_name():
    with pytest.raises(ValueError, match=r"cubic antialiased downscale by 20x reads 80 taps per output, more than 64"):
        resize_table(200, 10, 0.05, "cubic", antialias=True)


@pytest.mark.parametrize("params, error, message", [
    (dict(shape=(3, 4), axis=2, out_extent=5, taps=2), ValueError, r"resample: parameter axis must be in \[0, 2\)"),
    (dict(shape=(3, 4), axis=1, out_extent=5, taps=65), ValueError, "resample: parameter taps must be at most 64"),
    (dict(shape=(3, 4), axis=1, out_extent=0, taps=2), ValueError, "resample: parameter out_extent must be positive"),
    (dict(shape=(3, 4), axis=1, out_extent=5, taps=2, dtype="int32"), TypeError, "resample: x must be a float tensor"),
])
def test_bad_parameters_are_named(params, error, message):
    with pytest.raises(error, match=message):
        autotune.create_task("resample", **params)
