"""conv2d as an implicit GEMM (`autotune.schedules.cpu.conv2d_gemm`) against numpy: odd shapes
(every tile has a tail), strides, 1x1 with and without stride, padding, dilation and groups,
the plain conv and a bias + relu epilogue; several legal configs of each, built through a
template registered here (the conv dispatcher is not on this branch)."""
import warnings
from typing import Any

import numpy as np
import pytest

import autotune
from autotune import te
from autotune.measure.check_data import tolerance
from autotune.measure.worker.run import compare
from autotune.schedules.cpu import conv2d_gemm
from autotune.schedules.space import ConfigSpace
from autotune.target import Target
from autotune.testing import legal_configs
from autotune.topi.conv import conv2d_nchw_reference, conv_geometry

OP = "test_conv2d_gemm"


def _reference(x, w, *bias, stride, padding, dilation, groups, **_):
    y = conv2d_nchw_reference(x, w, stride, padding, dilation, groups)
    return np.maximum(y + bias[0][None, :, None, None], 0) if bias else y


@autotune.template(OP, reference=_reference, description="test only: conv2d NCHW through conv2d_gemm")
def conv2d_gemm_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any,
                         padding: Any, dilation: Any, groups: int, bias_relu: int, dtype: str = "float32"):
    """The algorithm's knobs under a one-value `algorithm` knob, as the dispatcher declares them."""
    g = conv_geometry(OP, C, F, (H, W), (KH, KW), stride, padding, dilation, groups)
    cfg.define_knob("algorithm", ["gemm"])
    conv2d_gemm.define_knobs(cfg, g, N, dtype, ("algorithm", ("gemm",)))
    X = te.placeholder((N, C, H, W), dtype, name="X")
    Wt = te.placeholder((F, C // groups, KH, KW), dtype, name="W")
    bias = te.placeholder((F,), dtype, name="bias")
    extra = [bias] if bias_relu else []

    def epilogue(v, i):
        return te.maximum(v + bias[i[1]], te.const(0, dtype))

    s, out = conv2d_gemm.build(cfg, X, Wt, g, epilogue if bias_relu else None, extra)
    return s, [X, Wt, *extra, out]


SHAPES = {   # N, C, H, W, F, KH, KW, stride, padding, dilation, groups
    "3x3 pad 1": (1, 5, 9, 11, 7, 3, 3, 1, 1, 1, 1),
    "strided, uneven padding": (2, 6, 13, 10, 9, 3, 2, (2, 3), (1, 0, 2, 1), 1, 1),
    "1x1": (1, 13, 7, 9, 11, 1, 1, 1, 0, 1, 1),
    "1x1 stride 2": (1, 13, 9, 11, 10, 1, 1, 2, 0, 1, 1),
    "dilated": (1, 4, 15, 13, 5, 3, 3, 1, 2, 2, 1),
    "grouped, strided, dilated": (1, 6, 11, 9, 9, 3, 3, 2, 1, (1, 2), 3),
    "grouped 1x1": (2, 8, 7, 5, 12, 1, 1, 1, 0, 1, 2),
    "deep, few pixels": (1, 37, 5, 5, 43, 3, 3, 1, 1, 1, 1),
}
NAMES = ("N", "C", "H", "W", "F", "KH", "KW", "stride", "padding", "dilation", "groups")


def _task(shape, bias_relu=0):
    return autotune.create_task(OP, **dict(zip(NAMES, shape)), bias_relu=bias_relu)


def _check(task, configs):
    inputs = task.make_inputs(np.random.default_rng(1))
    want = task.reference(inputs)[0]
    p = task.params
    rtol, atol = tolerance("float32", p["C"] // p["groups"] * p["KH"] * p["KW"], {})
    for index in configs:
        with warnings.catch_warnings():
            warnings.simplefilter("error")                 # a loop that fails to vectorize warns
            f = autotune.build(*task.instantiate(index))
        got = np.full(want.shape, np.nan, "float32")
        f(*inputs, got)
        wrong = compare("out", got, want, rtol, atol)
        assert wrong is None, f"{task.config(index)}: {wrong}"


@pytest.mark.parametrize("name", SHAPES)
def test_conv(name):
    task = _task(SHAPES[name])
    _check(task, legal_configs(task, 3))


@pytest.mark.parametrize("name", SHAPES)
def test_conv_bias_relu(name):
    task = _task(SHAPES[name], bias_relu=1)
    _check(task, legal_configs(task, 1, seed=1))


@pytest.mark.parametrize("name", ["3x3 pad 1", "grouped, strided, dilated", "1x1", "grouped 1x1"])
def test_every_loop_order_and_column_source(name):
    task = _task(SHAPES[name], bias_relu=1)
    default = task.config(0).to_json()["knobs"]
    cols = [e.val for e in task.config_space.knobs["gemm_col"].entities]
    picks = [task.config_space.from_json({"knobs": {**default, "gemm_col": col, "gemm_order": order}}).index
             for col in cols for order in ("panels", "filters")]
    _check(task, picks)


def test_1x1_stride_1_may_read_x_in_place_others_pack_panels():
    task = _task(SHAPES["1x1"])
    direct = task.config_space.from_json({"knobs": {**task.config(0).to_json()["knobs"], "gemm_col": "direct"}})
    assert "allocate col" not in str(task.lower(direct)) and "allocate col" in str(task.lower(0))
    assert [e.val for e in _task(SHAPES["1x1 stride 2"]).config_space.knobs["gemm_col"].entities] == ["packed"]


def test_the_epilogue_runs_on_the_register_tile():
    text = str(_task(SHAPES["3x3 pad 1"], bias_relu=1).lower(0))
    assert "allocate gemm" in text and " in local" in text.split("allocate gemm")[1].splitlines()[0]


def test_depthwise_is_left_to_other_algorithms():
    def geometry(C, F, groups):
        return conv_geometry("g", C, F, (8, 8), (3, 3), 1, 1, 1, groups)

    assert not conv2d_gemm.APPLIES(geometry(8, 8, 8)) and not conv2d_gemm.APPLIES(geometry(8, 16, 8))
    assert conv2d_gemm.APPLIES(geometry(8, 16, 4)) and conv2d_gemm.APPLIES(geometry(8, 16, 1))


def _first_values(C, F, H, l1d_bytes, monkeypatch, groups=1):
    """The rule's panel width and filter tile of a 1x1 conv at H x H on an AVX-512 target with
    this L1 (and a 2 MiB L2)."""
    monkeypatch.setattr("autotune.target._host_caches", lambda: {1: l1d_bytes, 2: 2 * 1024 * 1024})
    space = ConfigSpace(Target.from_key("llvm -mcpu=x -features=avx2,avx512f,fma -cores=2"))
    space.define_knob("algorithm", ["gemm"])
    conv2d_gemm.define_knobs(space, conv_geometry(OP, C, F, (H, H), (1, 1), 1, 0, 1, groups), 1, "float32",
                             ("algorithm", ("gemm",)))
    (_, bn), (_, m, r) = (space.knobs[k].entities[0].size for k in ("gemm_tile_p", "gemm_tile_f"))
    return {"gemm_tile_p": bn, "gemm_tile_f": r, "gemm_block_f": m * r}


@pytest.mark.parametrize("H, panel", [
    (56, 32), (28, 32),      # 3136 and 784 pixels: panels of two vectors, full or nearly (2% padded)
    (14, 16),                # 196: 224 columns in panels of 32 (12.5% padding), 208 in panels of 16
    (7, 32),                 # 49: 64 columns either way, so the wider panel
])
def test_pixel_panels_are_narrower_where_that_pads_much_less(H, panel, monkeypatch):
    assert _first_values(64, 96, H, 48 * 1024, monkeypatch)["gemm_tile_p"] == panel


@pytest.mark.parametrize("C, l1d_bytes, rows", [
    (1024, 32 * 1024, 8),    # rows of W 4 KiB apart share one set of an 8-way L1: 8 of them
    (1024, 48 * 1024, 12),   # a 12-way L1 takes 12
    (256, 32 * 1024, 16),    # 1 KiB apart: four sets, four rows each
])
def test_filter_rows_read_in_place_never_overfill_an_l1_set(C, l1d_bytes, rows, monkeypatch):
    assert _first_values(C, 256, 14, l1d_bytes, monkeypatch)["gemm_tile_f"] == rows


@pytest.mark.parametrize("C, F, groups, rows", [
    (256, 256, 4, 8),      # 64 filters per group: 8 rows, not 12 (a tile past the group's end)
    (200, 400, 4, 4),      # 100 per group
    (136, 136, 2, 4),      # 68 per group
    (256, 256, 1, 12),     # one group: the tail tile is the last of all filters, 12 rows kept
])
def test_grouped_filter_tiles_divide_the_group(C, F, groups, rows, monkeypatch):
    got = _first_values(C, F, 28, 48 * 1024, monkeypatch, groups)
    assert got["gemm_tile_f"] == rows
    assert groups == 1 or (F // groups) % got["gemm_block_f"] == 0
