"""conv1d as one image row through the conv2d algorithms: every algorithm gives numpy's answer
on awkward geometries (strides, asymmetric padding, dilation, groups, depthwise), records from
before the algorithm knob load as the NCW schedule, and the default rule."""
import pytest

import autotune
from autotune.schedules.cpu.conv import row_algorithms
from autotune.schedules.cpu.rules import VectorTarget
from autotune.topi.conv import conv_geometry

CASES = [
    dict(N=2, C=6, L=37, F=10, K=5, stride=2, padding=(1, 3), dilation=2, groups=2),
    dict(N=1, C=19, L=101, F=37, K=3, stride=1, padding=1, dilation=1, groups=1),
    dict(N=1, C=8, L=45, F=8, K=7, stride=3, padding=3, dilation=1, groups=8),
    dict(N=1, C=1, L=97, F=12, K=10, stride=5, padding=0, dilation=1, groups=1),
]


@pytest.mark.parametrize("params", CASES)
def test_every_algorithm_gives_numpys_answer(check_each_value, params):
    algorithms = check_each_value(autotune.create_task("conv1d", **params), "row.algorithm", seed=4)
    assert algorithms[-1] == "ncw" and len(algorithms) > 1


@pytest.mark.parametrize("params", CASES[:2])
def test_random_configs_match_numpy(check_configs, params):
    check_configs("conv1d", n_random=4, **params)


def test_records_from_before_the_algorithm_knob_load_as_ncw():
    task = autotune.create_task("conv1d", **CASES[1])
    old = {k: v for k, v in task.config(0).to_json()["knobs"].items() if not k.startswith("row.")}
    assert task.config_space.from_json({"knobs": old})["row.algorithm"].val == "ncw"


def test_the_work_is_the_direct_conv_whichever_algorithm():
    task = autotune.create_task("conv1d", **CASES[1])
    assert task.flop == 2 * 37 * 19 * 3 * 101


L2_FLOATS = (512 << 10) // 4      # a 512 KiB L2


def row(C, F, L, K, stride=1, dilation=1, groups=1):
    return conv_geometry("conv1d", C, F, (1, L), (1, K), (1, stride), (0, dilation * (K // 2)), (1, dilation), groups)


@pytest.mark.parametrize("geometry, first", [
    (row(512, 512, 1499, 3, stride=2), "gemm"),     # strided: the blocked conv reads its row through a stride
    (row(33, 65, 1777, 3), "gemm"),                  # 33 channels are no whole vectors of 16
    (row(80, 256, 3000, 3), "nchwc"),                # 80 are 5: blocked
    (row(256, 256, 501, 7), "nchwc"),
])
def test_the_default_rule(geometry, first):
    assert row_algorithms(geometry, 1, VectorTarget(16, 32, L2_FLOATS, 16), True)[0] == first


@pytest.mark.parametrize("geometry, first", [
    (row(64, 104, 2000, 5), "nchwc"),     # one-vector blocks, but one long row: no row tails for the GEMM to save
    (row(96, 152, 1200, 5), "nchwc"),
    (row(256, 360, 500, 1), "gemm"),      # 1x1 on 16 registers: the GEMM (conv2d's rule)
])
def test_the_default_rule_with_16_registers(geometry, first):
    assert row_algorithms(geometry, 1, VectorTarget(8, 16, L2_FLOATS, 8), True)[0] == first
