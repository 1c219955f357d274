"""Grouped convs in the blocked NCHW[x]c layout: blocks that divide each group's filters, and
whole vectors that zero-pad each group's last block where no such block fills a vector (100
filters a group: 7 blocks of 16 lanes, not 10 of 10). Configs against numpy on odd shapes (a
tail in every block and tile, strides, the bias + relu epilogue, the 1x1 one-row view), the
default rule on two targets, and the conv block of a padded group sized to that group."""
import numpy as np
import pytest

import autotune
from autotune.ir.lower import lower
from autotune.ir.nodes import Allocate
from autotune.schedules.cpu import conv2d_nchwc as nchwc
from autotune.schedules.space import ConfigSpace
from autotune.target import Target
from autotune.te.traversal import walk
from autotune.topi.conv import conv_geometry

from .test_conv2d_nchwc import AVX2, AVX512, rule_caches, run_config, with_knobs  # noqa: F401 (a fixture)

PADDED = [   # (op, params, knobs): filters per group that oc_bn does not divide, a vector or more of them
    ("conv2d_grouped", dict(N=1, C=6, H=9, W=11, F=54, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=3),
     dict(nchwc_oc_bn=16, nchwc_ic_bn=2, nchwc_reg_n=4, nchwc_oh_bn=2)),          # 18 = 16 + 2 a group
    ("conv2d_grouped", dict(N=2, C=6, H=9, W=11, F=54, KH=3, KW=3, stride=2, padding=1, dilation=1, groups=3),
     dict(nchwc_oc_bn=16, nchwc_ic_bn=1, nchwc_reg_n=4, nchwc_oh_bn=2)),
    ("conv2d_bias_relu", dict(N=1, C=20, H=7, W=13, F=36, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=2),
     dict(nchwc_oc_bn=16, nchwc_ic_bn=4, nchwc_reg_n=6, nchwc_oh_bn=2, nchwc_block_rows=4)),
    ("conv2d_grouped", dict(N=1, C=30, H=5, W=7, F=300, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=3),
     dict(nchwc_oc_bn=32, nchwc_ic_bn=8, nchwc_reg_n=7, nchwc_oh_bn=1)),          # 100 = 3 x 32 + 4
]


@pytest.mark.parametrize("op, params, knobs", PADDED, ids=[f"{p['F']}-in-{p['groups']}" for _, p, _ in PADDED])
def test_padded_groups_match_numpy(op, params, knobs):
    task = autotune.create_task(op, **params)
    inputs = task.make_inputs(np.random.default_rng(11))
    index = with_knobs(task, algorithm="nchwc", **knobs)
    np.testing.assert_allclose(run_config(task, index, inputs), task.reference(inputs)[0], rtol=1e-4, atol=1e-4)


def test_the_conv_block_of_a_padded_group_holds_that_groups_blocks():
    """30 -> 300 in 3 groups, blocks of 32: 4 blocks a group (128 lanes for 100 filters), one
    row of 7 columns a block; not the whole output (a region over the tail's split)."""
    task = autotune.create_task("conv2d_grouped", N=1, C=30, H=5, W=7, F=300, KH=3, KW=3, stride=1, padding=1,
                                dilation=1, groups=3)
    s, args = task.instantiate(with_knobs(task, algorithm="nchwc", nchwc_oc_bn=32, nchwc_oh_bn=1,
                                          nchwc_block_rows=0))
    shapes = {}
    walk(lower(s, args).body, lambda n: shapes.update({n.buffer.name: n.buffer.shape})
         if isinstance(n, Allocate) else None)
    assert shapes["conv"] == (1, 4, 1, 7, 32)


ZEN4 = "llvm -mcpu=znver4 -features=avx2,avx512f,fma -cores=2"     # AVX-512 on 256-bit units


def oc_blocks(target, C, F, groups, H=17, K=3):
    space = ConfigSpace(Target.from_key(target))
    space.define_knob("algorithm", ["nchwc"])
    g = conv_geometry("conv2d", C, F, (H, H), (K, K), 1, K // 2, 1, groups)
    nchwc.define_knobs(space, g, 1, "float32", when=("algorithm", ("nchwc",)))
    return [e.val for e in space.knobs["nchwc_oc_bn"].entities]


@pytest.mark.usefixtures("rule_caches")
@pytest.mark.parametrize("target, C, F, groups, want", [
    (AVX512, 40, 320, 4, 16),    # 80 filters a group: whole vectors divide them
    (AVX512, 30, 300, 3, 16),    # 100: 7 padded vectors, not 10 blocks of 10 lanes (a 16-lane vector each)
    (ZEN4, 30, 300, 3, 16),      # 14 half-vector operations against 20
    (AVX2, 30, 300, 3, 8),       # 13 padded vectors, not 20 blocks of 5 lanes
    (AVX512, 48, 96, 4, 12),     # 24: 2 blocks of 12 lanes, as many vectors as 2 padded ones
    (ZEN4, 48, 96, 4, 8),        # 3 blocks of 8 lanes, one half-vector each, against 4 halves
    (AVX512, 360, 360, 9, 16),   # 40: 3 padded vectors against 4 of 10 lanes
    (ZEN4, 360, 360, 9, 8),      # 5 half-vectors against 6 padded
    (AVX512, 696, 696, 3, 8),    # 232: 15 padded vectors would be fewer, but a group's weights pass half the L2
    (ZEN4, 1008, 1008, 6, 8),    # 168: 21 half-vectors against 24 for 12 blocks of 14 lanes
    (AVX2, 48, 96, 4, 8),
])
def test_grouped_blocks_take_the_fewest_vector_operations(target, C, F, groups, want):
    offered = oc_blocks(target, C, F, groups, H=14 if C == 1008 else 17)
    assert offered[0] == want
    lanes = 8 if target == AVX2 else 16
    assert all(((F // groups) % v == 0 and v <= lanes) or v % lanes == 0 for v in offered)


@pytest.mark.usefixtures("rule_caches")
def test_a_one_row_image_gets_no_padded_groups():
    """Its group's conv block would be the whole row several times over."""
    assert oc_blocks(AVX512, 200, 400, 4, H=1, K=1) == [10, 1, 2, 4, 5]
    assert oc_blocks(AVX512, 200, 400, 4, H=20, K=1)[0] == 16
