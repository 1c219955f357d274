"""conv_transpose2d and conv_transpose3d: several configs vs the numpy scatter reference on odd
shapes (stride 2 with output_padding 1 and groups 2, asymmetric padding, dilation), ONNX
ConvTranspose through onnx's reference evaluator (groups 1; its grouped path is wrong) and
onnxruntime (groups 2), bad input."""
import numpy as np
import pytest

import autotune
from autotune import ops

from .onnx_reference import run_node

CASES = [
    dict(N=1, C=4, H=5, W=7, F=6, KH=3, KW=3, stride=2, padding=1, output_padding=1, dilation=1, groups=2),
    dict(N=2, C=3, H=6, W=5, F=5, KH=2, KW=3, stride=(1, 2), padding=(0, 1, 2, 0), output_padding=(0, 1),
         dilation=(2, 1), groups=1),
    dict(N=1, C=3, H=7, W=9, F=17, KH=3, KW=3, stride=1, padding=1, output_padding=0, dilation=1, groups=1),
]


@pytest.mark.parametrize("params", CASES)
def test_conv_transpose2d_matches_numpy_at_several_configs(check_configs, params):
    check_configs("conv_transpose2d", n_random=3, **params)


SUBPIXEL_CASES = [
    CASES[0],                                                    # 3x3 stride 2: phases of 2 and 1 taps
    dict(N=1, C=5, H=6, W=9, F=7, KH=4, KW=4, stride=2, padding=1, output_padding=0, dilation=1, groups=1),
    dict(N=2, C=6, H=5, W=4, F=3, KH=5, KW=2, stride=(3, 2), padding=(2, 0, 1, 1), output_padding=(2, 1),
         dilation=1, groups=3),
    dict(N=1, C=3, H=4, W=5, F=4, KH=1, KW=1, stride=2, padding=0, output_padding=1, dilation=1, groups=1),
    dict(N=1, C=16, H=6, W=7, F=16, KH=3, KW=3, stride=1, padding=0, output_padding=0, dilation=1, groups=1),
    dict(N=2, C=7, H=11, W=13, F=5, KH=3, KW=3, stride=2, padding=(0, 1, 2, 0), output_padding=(1, 0),
         dilation=1, groups=1),                                  # col2im first: primes, asymmetric padding
]
UPSAMPLING = dict(N=1, C=24, H=15, W=15, F=20, KH=2, KW=2, stride=2, padding=0, output_padding=0, dilation=1,
                  groups=1)                                      # U-Net's 2x2 stride 2: a 1x1 sub-pixel conv


@pytest.mark.parametrize("params", SUBPIXEL_CASES)
def test_every_method_gives_numpys_answer(check_each_value, params):
    """The sub-pixel conv under each conv algorithm that applies (their default knobs), and the
    gather: with kernels a stride does not divide, asymmetric padding, output padding, groups,
    a 1x1 kernel whose phases have no taps, and stride 1."""
    methods = check_each_value(autotune.create_task("conv_transpose2d", **params), "subpixel.algorithm", seed=3)
    assert methods[-1] == "gather" and len(methods) > 1


@pytest.mark.parametrize("params", [UPSAMPLING])
def test_every_method_of_a_2x2_stride_2_upsampling_gives_numpys_answer(check_configs, check_each_value, params):
    """Its sub-pixel conv's algorithms (the 1x1 flat view among them) and the gather have knobs
    that multiply past the 2**63 configs a mixed-radix index counts: create_task raised until the
    space counted only canonical configs. Each method, and random configs across them."""
    methods = check_each_value(autotune.create_task("conv_transpose2d", **params), "subpixel.algorithm", seed=3)
    assert "nchwc_flat" in methods and methods[-1] == "gather"
    check_configs("conv_transpose2d", n_random=3, **params)


def test_col2im_where_the_sub_pixel_conv_would_compute_many_zero_taps():
    """col2im is offered where zero taps would be 40% or more of the sub-pixel conv (3x3 stride 2:
    7 of 16), first with one group; a kernel the stride divides has none, so no col2im; its GEMM
    reads the sub-pixel gemm's knobs, so a config of col2im with other gemm knobs is legal and right."""
    def methods(**changes):
        task = autotune.create_task("conv_transpose2d", **{**SUBPIXEL_CASES[-1], **changes})
        return task, [e.val for e in task.config_space.knobs["subpixel.algorithm"].entities]

    task, ungrouped = methods()
    assert ungrouped[0] == "col2im"
    assert methods(C=8, F=6, groups=2)[1][-2:] == ["col2im", "gather"]
    assert "col2im" not in methods(KH=4, KW=4, padding=1, output_padding=0)[1]
    defaults = task.config(0).to_json()["knobs"]
    tile_f = [e.to_json() for e in task.config_space.knobs["subpixel.gemm_tile_f"].entities]
    config = task.config_space.from_json({"knobs": {**defaults, "subpixel.gemm_tile_f": tile_f[-1],
                                                    "subpixel.gemm_tile_p": [-1, 16]}})
    x = task.make_inputs(np.random.default_rng(5))
    got = np.full(task.arg_specs[-1][0], np.nan, np.float32)
    autotune.build(*task.instantiate(config.index))(*x, got)
    np.testing.assert_allclose(got, task.reference(x)[0], rtol=1e-4, atol=1e-4)


def test_a_dilated_transposed_conv_is_a_gather_and_old_records_load_as_one():
    dilated = autotune.create_task("conv_transpose2d", **CASES[1])
    assert [e.val for e in dilated.config_space.knobs["subpixel.algorithm"].entities] == ["gather"]
    task = autotune.create_task("conv_transpose2d", **CASES[0])
    assert task.config(0)["subpixel.algorithm"].val != "gather"
    old = {k: v for k, v in task.config(0).to_json()["knobs"].items() if not k.startswith("subpixel.")}
    assert task.config_space.from_json({"knobs": old})["subpixel.algorithm"].val == "gather"


def test_the_task_counts_the_scatters_work_not_the_skipped_taps():
    task = autotune.create_task("conv_transpose2d", **CASES[0])
    assert task.flop == 2 * 1 * 4 * 5 * 7 * 3 * 3 * 3


@pytest.mark.parametrize("params, runtime", [(CASES[0], "onnxruntime"), (CASES[1], "reference"),
                                             (dict(CASES[1], groups=1, stride=3, output_padding=2, padding=0),
                                              "reference")])
def test_conv_transpose2d_follows_onnx(params, runtime):
    rng = np.random.default_rng(7)
    p = params
    x = rng.standard_normal((p["N"], p["C"], p["H"], p["W"])).astype(np.float32)
    w = rng.standard_normal((p["C"], p["F"] // p["groups"], p["KH"], p["KW"])).astype(np.float32)

    def pair(v):
        return list(v) if isinstance(v, tuple) else [v, v]

    pads = pair(p["padding"]) * 2 if not (isinstance(p["padding"], tuple) and len(p["padding"]) == 4) \
        else list(p["padding"])
    (want,) = run_node("ConvTranspose", [x, w], runtime=runtime, strides=pair(p["stride"]), pads=pads,
                       output_padding=pair(p["output_padding"]), dilations=pair(p["dilation"]), group=p["groups"])
    got = ops.conv_transpose2d(x, w, p["stride"], p["padding"], p["output_padding"], p["dilation"], p["groups"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


X, W = np.ones((1, 4, 5, 5), np.float32), np.ones((4, 3, 3, 3), np.float32)


@pytest.mark.parametrize("call, error, message", [
    (lambda: ops.conv_transpose2d(X, np.ones((3, 3, 3, 3), np.float32)), ValueError,
     "conv_transpose2d: argument w must have 4 input channels first"),
    (lambda: ops.conv_transpose2d(X, W, stride=2, output_padding=2), ValueError,
     "conv_transpose2d: output_padding must be smaller than the stride or the dilation"),
    (lambda: ops.conv_transpose2d(X, W, groups=3), ValueError, "conv_transpose2d: groups must be a positive int "
                                                               "dividing the in channels"),
    (lambda: ops.conv_transpose2d(X, W, padding=4), ValueError, "conv_transpose2d: the padding 4 leaves an empty"),
    (lambda: ops.conv_transpose2d(X, W, stride=(1, 2, 3)), TypeError, "conv_transpose2d: stride must be an int or"),
    (lambda: ops.conv_transpose2d(X.astype(np.int32), W.astype(np.int32)), TypeError,
     "conv_transpose2d: argument x must be float32 or float64"),
])
def test_bad_input_names_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


CASES_3D = [
    dict(N=1, C=4, D=3, H=5, W=7, F=6, KD=2, KH=3, KW=3, stride=2, padding=1, output_padding=1, dilation=1, groups=2),
    dict(N=2, C=3, D=4, H=3, W=19, F=5, KD=3, KH=2, KW=3, stride=(1, 2, 1), padding=(0, 1, 2, 1, 0, 0),
         output_padding=(0, 1, 0), dilation=(2, 1, 1), groups=1),
]


@pytest.mark.parametrize("params", CASES_3D)
def test_conv_transpose3d_matches_numpy_at_several_configs(check_configs, params):
    check_configs("conv_transpose3d", n_random=3, **params)


def test_conv_transpose3d_counts_the_scatters_work():
    assert autotune.create_task("conv_transpose3d", **CASES_3D[0]).flop == 2 * 1 * 4 * 3 * 5 * 7 * 3 * 2 * 3 * 3


@pytest.mark.parametrize("params, runtime", [(CASES_3D[0], "onnxruntime"), (CASES_3D[1], "reference")])
def test_conv_transpose3d_follows_onnx(params, runtime):
    rng = np.random.default_rng(8)
    p = params
    x = rng.standard_normal((p["N"], p["C"], p["D"], p["H"], p["W"])).astype(np.float32)
    w = rng.standard_normal((p["C"], p["F"] // p["groups"], p["KD"], p["KH"], p["KW"])).astype(np.float32)

    def triple(v):
        return list(v) if isinstance(v, tuple) else [v] * 3

    pads = list(p["padding"]) if isinstance(p["padding"], tuple) else [p["padding"]] * 6
    (want,) = run_node("ConvTranspose", [x, w], runtime=runtime, strides=triple(p["stride"]), pads=pads,
                       output_padding=triple(p["output_padding"]), dilations=triple(p["dilation"]), group=p["groups"])
    got = ops.conv_transpose3d(x, w, p["stride"], p["padding"], p["output_padding"], p["dilation"], p["groups"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv_transpose3d_bad_input_names_the_argument():
    x, w = np.ones((1, 4, 3, 5, 5), np.float32), np.ones((4, 3, 3, 3, 3), np.float32)
    with pytest.raises(ValueError, match="conv_transpose3d: argument w must have 4 input channels first"):
        ops.conv_transpose3d(x, w[:3])
    with pytest.raises(TypeError, match="conv_transpose3d: stride must be an int or a tuple of 3 ints"):
        ops.conv_transpose3d(x, w, stride=(1, 2))
    with pytest.raises(ValueError, match="conv_transpose3d: argument x"):
        ops.conv_transpose3d(x[0], w)
