"""The blocked NCHW[x]c conv algorithm and the algorithm knob of the conv2d templates: configs of
each algorithm against numpy (odd shapes: a tail in every block and tile; stride, padding,
dilation, 1x1, groups; with and without the bias + relu / batch-norm epilogues), the default
rules on two targets, and tuning records made before the algorithm knob existed."""
import random

import numpy as np
import pytest

import autotune
from autotune.measure.check_data import tolerance
from autotune.schedules.cpu import conv2d_nchwc as nchwc
from autotune.schedules.space import ConfigSpace
from autotune.target import Target
from autotune.topi.conv import conv2d_nchw_reference, conv_geometry


def configs_of(task, algorithm, extra, seed=0):
    """The default config of `algorithm` (its knobs at their first values) and up to `extra`
    seeded random legal ones that choose it."""
    space = task.config_space
    names = list(space.knobs)
    first = [0] * len(names)
    first[names.index("algorithm")] = [e.val for e in space.knobs["algorithm"].entities].index(algorithm)
    out, rng = [space.knob2point(first)], random.Random(seed)
    for _ in range(500):
        if len(out) > extra:
            break
        i = space.random_index(rng)
        if i not in out and space.get(i)["algorithm"].val == algorithm and task.is_valid(i):
            out.append(i)
    return out


def run_config(task, index, inputs):
    s, args = task.instantiate(index)
    out = np.full(task.arg_specs[-1][0], np.nan, "float32")
    autotune.build(s, args)(*inputs, out)
    return out


CASES = [   # (op, params); each offers nchwc and nchw, some also gemm and winograd
    ("conv2d", dict(N=1, C=19, H=9, W=13, F=37, KH=3, KW=3, stride=1, padding=1)),
    ("conv2d", dict(N=2, C=5, H=11, W=17, F=18, KH=3, KW=3, stride=2, padding=1)),
    ("conv2d", dict(N=1, C=37, H=9, W=11, F=19, KH=1, KW=1, stride=2, padding=0)),
    ("conv2d_grouped", dict(N=1, C=7, H=10, W=13, F=21, KH=3, KW=2, stride=(2, 1), padding=(1, 0, 2, 1),
                            dilation=(1, 2), groups=1)),
    ("conv2d_grouped", dict(N=1, C=6, H=9, W=11, F=18, KH=3, KW=3, stride=1, padding=2, dilation=2, groups=2)),
    ("conv2d_grouped", dict(N=1, C=19, H=13, W=11, F=19, KH=3, KW=3, stride=2, padding=1, dilation=1, groups=19)),
    ("conv2d_bias_relu", dict(N=1, C=19, H=9, W=13, F=37, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=1)),
    ("conv2d_bias_relu", dict(N=1, C=12, H=8, W=9, F=24, KH=3, KW=3, stride=2, padding=(0, 1, 1, 1), dilation=1,
                              groups=3)),
    ("conv2d_bn", dict(N=1, C=9, H=7, W=11, F=33, KH=1, KW=3, stride=1, padding=(0, 1), dilation=1, groups=1)),
    # one pixel wide with a stride: the repack keeps every stride-th pixel (padding read as zero)
    ("conv2d_grouped", dict(N=1, C=11, H=13, W=14, F=21, KH=1, KW=1, stride=(2, 3), padding=1, dilation=1,
                            groups=1)),
    ("conv2d_grouped", dict(N=1, C=10, H=11, W=9, F=17, KH=1, KW=3, stride=(3, 2), padding=(1, 1, 0, 0),
                            dilation=1, groups=1)),
    # 1x1, stride 1, no padding: also over the image as one row ("nchwc_flat"), two images
    ("conv2d_bias_relu", dict(N=2, C=19, H=5, W=9, F=37, KH=1, KW=1, stride=1, padding=0, dilation=1, groups=1)),
]


def offered(op, params):
    return [e.val for e in autotune.create_task(op, **params).config_space.knobs["algorithm"].entities]


# every algorithm a case offers; gemm and winograd have their own tests of many configs
OFFERED = [(op, params, name) for op, params in CASES for name in offered(op, params)]


@pytest.mark.parametrize("op, params, algorithm", OFFERED,
                         ids=[f"{name}-{op}-{CASES.index((op, params))}" for op, params, name in OFFERED])
def test_configs_of_each_algorithm_match_numpy(op, params, algorithm):
    task = autotune.create_task(op, **params)
    inputs = task.make_inputs(np.random.default_rng(3))
    x, w = inputs[:2]
    conv = conv2d_nchw_reference(x.astype(np.float64), w.astype(np.float64), params["stride"], params["padding"],
                                 params.get("dilation", 1), params.get("groups", 1))
    if op != "conv2d" and op != "conv2d_grouped":
        conv = conv + inputs[2][None, :, None, None]
    want = np.maximum(conv, 0) if op == "conv2d_bias_relu" else conv
    rtol, atol = tolerance("float32", task.reduction, {})
    for index in configs_of(task, algorithm, extra=2 if algorithm in ("nchwc", "nchw", "nchwc_flat") else 0):
        got = run_config(task, index, inputs)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"{op} {task.config(index)}")


def with_knobs(task, **knobs):
    """The default config with some knobs set."""
    record = task.config(0).to_json()
    return task.config_space.from_json({"knobs": {**record["knobs"], **knobs}}).index


@pytest.mark.parametrize("knobs", [
    dict(nchwc_oc_bn=16, nchwc_ic_bn=8, nchwc_reg_n=4, nchwc_oh_bn=2),    # 37 = 2 x 16 + 5, 19 = 2 x 8 + 3, ...
    dict(nchwc_oc_bn=32, nchwc_ic_bn=4, nchwc_reg_n=6, nchwc_oh_bn=4, nchwc_unroll_kw=0),
    # ic blocks outside the tiles: 9 rows = 4 + 4 + 1 per block, 2-row tiles; 3-row blocks of 2 + 1
    dict(nchwc_oc_bn=16, nchwc_ic_bn=8, nchwc_reg_n=4, nchwc_oh_bn=2, nchwc_block_rows=4, nchwc_prefetch=1024),
    dict(nchwc_oc_bn=32, nchwc_ic_bn=4, nchwc_reg_n=6, nchwc_oh_bn=2, nchwc_block_rows=3, nchwc_unroll_kw=0),
])
def test_a_tail_in_every_block_and_tile(knobs):
    """F, C, OW, OH not multiples of oc_bn, ic_bn, reg_n, oh_bn, block_rows: zero channel tails,
    partial tiles and blocks."""
    task = autotune.create_task("conv2d_bias_relu", N=1, C=19, H=9, W=13, F=37, KH=3, KW=3, stride=1, padding=1,
                                dilation=1, groups=1)
    inputs = task.make_inputs(np.random.default_rng(5))
    index = with_knobs(task, algorithm="nchwc", **knobs)
    np.testing.assert_allclose(run_config(task, index, inputs), task.reference(inputs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("knobs", [
    {"flat.nchwc_oc_bn": 16, "flat.nchwc_ic_bn": 8, "flat.nchwc_reg_n": 4},    # 45 pixels = 11 x 4 + 1
    {"flat.nchwc_oc_bn": 32, "flat.nchwc_ic_bn": 4, "flat.nchwc_reg_n": 7, "flat.nchwc_block_rows": 1},
])
def test_a_1x1_conv_over_its_image_as_one_row_with_a_tail_in_every_block_and_tile(knobs):
    """Tiles across the row ends of a 5 x 9 image, zero channel tails, the bias + relu epilogue
    read back at each pixel's row and column."""
    task = autotune.create_task("conv2d_bias_relu", N=2, C=19, H=5, W=9, F=37, KH=1, KW=1, stride=1, padding=0,
                                dilation=1, groups=1)
    inputs = task.make_inputs(np.random.default_rng(7))
    index = with_knobs(task, algorithm="nchwc_flat", **knobs)
    np.testing.assert_allclose(run_config(task, index, inputs), task.reference(inputs)[0], rtol=1e-4, atol=1e-4)


def test_the_flat_view_refuses_a_blocked_layout():
    """The one-row view reads X as NCHW and writes NCHW: a blocked input or output is an error,
    not a kernel that indexes the conv's one row as rows."""
    from autotune import te
    from autotune.schedules.cpu import conv2d_nchwc_flat

    task = autotune.create_task("conv2d", N=1, C=16, H=5, W=9, F=16, KH=1, KW=1, stride=1, padding=0)
    cfg = task.config(with_knobs(task, algorithm="nchwc_flat"))
    g = conv_geometry("conv2d", 16, 16, (5, 9), (1, 1), 1, 0, 1, 1)
    X = te.placeholder((1, 2, 5, 9, 8), "float32", name="X")
    Wt = te.placeholder((16, 16, 1, 1), "float32", name="W")
    with pytest.raises(ValueError, match="one-row view"):
        conv2d_nchwc_flat.build(cfg, X, Wt, g, None, ())


def test_the_flat_repack_reads_x_at_the_pixel_index():
    """The view's divide and remainder by W recombine: X is read at a linear index."""
    from autotune.ir.functor import walk
    from autotune.ir.lower import lower
    from autotune.ir.nodes import Load
    from autotune.te.expr import Binary, BinOp

    task = autotune.create_task("conv2d", N=1, C=19, H=5, W=9, F=37, KH=1, KW=1, stride=1, padding=0)
    s, args = task.instantiate(with_knobs(task, algorithm="nchwc_flat"))
    loads, divisions = [], []
    walk(lower(s, args).body, lambda n: loads.append(n) if isinstance(n, Load) and n.buffer.name == "X" else None)
    for load in loads:
        walk(load.index, lambda n: divisions.append(n) if isinstance(n, Binary) and n.op in (
            BinOp.FLOORDIV, BinOp.FLOORMOD) else None)
    assert loads and not divisions, divisions


@pytest.mark.parametrize("C, F, H, groups, want, K", [
    (64, 64, 28, 1, ["winograd", "nchwc", "gemm", "nchw"], 3),   # 3x3 stride 1: 2.4x fewer multiplies
    (64, 64, 14, 1, ["gemm", "nchwc", "nchw", "winograd"], 3),   # 16 tiles of 4x4: too few to feed on U
    (512, 512, 7, 1, ["gemm", "nchwc", "nchw", "winograd"], 3),  # 1.4x fewer only; weights >> input
    (32, 64, 14, 4, ["nchwc", "nchw", "gemm"], 3),        # 16 filters per group: a full channel vector
    (32, 32, 14, 8, ["nchw", "gemm"], 3),                 # 4 filters per group: too narrow for nchwc
    (128, 128, 56, 32, ["nchw", "gemm"], 3),      # ResNeXt: a GEMM per group, narrower than its tile, last
    (240, 240, 28, 3, ["gemm", "nchwc", "nchw", "nchwc_flat"], 1),   # grouped 1x1: a GEMM per group as laid out
    (960, 960, 7, 3, ["nchwc", "nchw", "nchwc_flat", "gemm"], 1),    # ... but 49 pixels pad the GEMM's panels
    (144, 144, 14, 144, ["nchw", "nchwc"], 3),    # depthwise 3x3: the transposes would cost more than the conv
    (144, 144, 14, 144, ["nchwc", "nchw"], 7),  # depthwise 7x7: 49 multiply-adds per output pay for them
])
def test_algorithms_offered_and_the_default_first(C, F, H, groups, want, K):
    params = dict(N=1, C=C, H=H, W=H, F=F, KH=K, KW=K, stride=1, padding=K // 2, dilation=1, groups=groups)
    assert offered("conv2d_grouped", params) == want
    assert autotune.create_task("conv2d_grouped", **params).config(0)["algorithm"].val == want[0]


@pytest.mark.parametrize("op, extra", [("conv2d_grouped", dict(dilation=1, groups=1)), ("conv2d_bias_relu", dict(dilation=1, groups=1))])
@pytest.mark.parametrize("C, F, H", [(64, 64, 14), (512, 512, 7), (32, 48, 9)])
def test_the_work_is_the_direct_convs_whichever_algorithm_leads(op, extra, C, F, H):
    """GFLOP/s compare across algorithms: a Winograd default multiplies less but does the same conv."""
    task = autotune.create_task(op, N=2, C=C, H=H, W=H, F=F, KH=3, KW=3, stride=1, padding=1, **extra)
    epilogue = 2 * 2 * F * H * H if op == "conv2d_bias_relu" else 0   # + bias, max
    assert task.flop == 2 * 2 * F * H * H * C * 9 + epilogue


@pytest.mark.parametrize("stride, algorithms", [(2, ["nchw", "nchwc"]), (4, ["nchw", "nchwc"]), (5, ["nchwc", "nchw"])])
def test_a_strided_depthwise_conv_is_nchw_by_default_while_its_loads_are_shuffled_spans(stride, algorithms):
    """With a stride of at most 4, NCHW's vectors along the width are spans and shuffles; above,
    they would be gathers, and the blocked layout (also offered at stride 2) comes first."""
    task = autotune.create_task("conv2d_grouped", N=1, C=96, H=28, W=28, F=96, KH=3, KW=3, stride=stride,
                                padding=1, dilation=1, groups=96)
    assert [e.val for e in task.config_space.knobs["algorithm"].entities] == algorithms
    assert "nchwc_ic_bn" not in task.config_space.knobs       # no channel reduction


@pytest.mark.parametrize("C, F, H, KH, stride, first", [
    (144, 24, 29, 1, 1, "gemm"), (37, 37, 29, 1, 1, "gemm"),   # a 1x1 conv with few channels on one side is a GEMM
    (24, 144, 29, 1, 1, "gemm"), (256, 256, 14, 1, 1, "gemm"),   # widening too; and on a small image
    (1024, 256, 14, 1, 1, "nchwc"), (512, 512, 13, 1, 1, "nchwc"),   # deep on both sides, a small image: blocked
    (512, 512, 29, 1, 1, "gemm"), (2048, 512, 16, 1, 1, "gemm"),   # deep, 256 pixels or more: a GEMM
    (144, 24, 29, 3, 1, "winograd"),                                 # 3x3
    (144, 24, 29, 1, 2, "gemm"), (75, 357, 29, 1, 2, "gemm"),     # strided, the blocked transposes a big share
    (160, 320, 29, 1, 2, "nchwc"), (256, 512, 29, 1, 2, "nchwc"),     # strided, deep: a small share
])
def test_a_pointwise_conv_defaults_to_gemm_with_few_channels_on_one_side_or_many_pixels(C, F, H, KH, stride, first):
    task = autotune.create_task("conv2d", N=1, C=C, H=H, W=H, F=F, KH=KH, KW=KH, stride=stride, padding=0,
                                target=Target.from_key(AVX512))
    task.set_constant_inputs((1,))          # a model's weights: no weight repack per call either way
    assert task.config(task.default_index)["algorithm"].val == first


@pytest.mark.parametrize("H, first", [(7, "nchwc"), (14, "gemm"), (28, "gemm")])
def test_a_pointwise_conv_stays_blocked_where_the_gemms_pixel_panels_would_pad_much(H, first):
    """49 pixels fill 4 one-vector panels of 16 with 15 padded columns (23%); 196 fill 13 (6%)."""
    task = autotune.create_task("conv2d", N=1, C=160, H=H, W=H, F=960, KH=1, KW=1, stride=1, padding=0,
                                target=Target.from_key(AVX512))
    task.set_constant_inputs((1,))          # a model's weights: no weight repack per call either way
    assert task.config(task.default_index)["algorithm"].val == first


# The rules read the host's caches; their tests pin the caches the examples were worked out on
# (48 KiB of L1d, 2 MiB of L2 per core), so that they hold on any machine.
RULE_CACHES = {1: 48 * 1024, 2: 2 * 1024 * 1024}


@pytest.fixture
def rule_caches(monkeypatch):
    monkeypatch.setattr("autotune.target._host_caches", lambda: dict(RULE_CACHES))


def first_values(target_key, C, F, OW, KH=3, groups=1):
    g = conv_geometry("conv2d", C, F, (OW, OW), (KH, KH), 1, KH // 2, 1, groups)
    space = ConfigSpace(Target.from_key(target_key))
    space.define_knob("algorithm", ["nchwc"])
    nchwc.define_knobs(space, g, 1, "float32", when=("algorithm", ("nchwc",)))
    return {name: k.entities[0].val for name, k in space.knobs.items() if name != "algorithm"}


AVX512 = "llvm -mcpu=x -features=avx2,avx512f,fma -cores=2"
AVX2 = "llvm -mcpu=x -features=avx2,fma -cores=2"


@pytest.mark.parametrize("C, F, H, KH, stride, avx2, avx512", [
    (1024, 256, 14, 1, 1, "gemm", "nchwc"),     # 1x1: 16 registers hold a two-vector tile of 6 positions
    (300, 700, 25, 1, 2, "gemm", "nchwc"),      # ... strided too
    (389, 181, 41, 3, 2, "gemm", "nchwc"),      # 181 filters: one-vector blocks, a broadcast per multiply-add
    (100, 150, 60, 3, 2, "gemm", "nchwc"),
    (256, 256, 28, 3, 2, "nchwc", "nchwc"),     # 3x3, two-vector blocks: level, so blocked
    (512, 2048, 7, 1, 1, "nchwc_flat", "nchwc"),    # 49 pixels pad the GEMM's panels: blocked
    (9, 31, 213, 7, 2, "nchwc", "nchwc"),       # im2col gathers 49 taps of 9 channels for 31 filters each
])
def test_with_16_registers_the_gemm_leads_1x1_convs_and_those_of_one_vector_blocks(C, F, H, KH, stride, avx2,
                                                                                      avx512):
    for key, first in ((AVX2, avx2), (AVX512, avx512)):
        task = autotune.create_task("conv2d", N=1, C=C, H=H, W=H, F=F, KH=KH, KW=KH, stride=stride,
                                    padding=KH // 2, target=Target.from_key(key))
        task.set_constant_inputs((1,))
        assert task.config(task.default_index)["algorithm"].val == first, key


@pytest.mark.parametrize("C, F, avx2, avx512", [
    (512, 2048, "nchwc_flat", "nchwc"),     # AVX2: one-vector 2 x 7 tiles per image, two-vector 6-pixel tiles flat
    (2048, 512, "nchwc_flat", "nchwc"),     # AVX2: 4 + 3 columns per row, 8 x 6 + 1 pixels flat
    (2048, 1000, "nchwc", "nchwc"),         # 1000 filters: one-vector blocks of 7-column rows either way
])
def test_a_1x1_conv_runs_over_its_image_as_one_row_where_its_rows_leave_tails(C, F, avx2, avx512):
    for key, first in ((AVX2, avx2), (AVX512, avx512)):
        task = autotune.create_task("conv2d", N=1, C=C, H=7, W=7, F=F, KH=1, KW=1, stride=1, padding=0,
                                    target=Target.from_key(key))
        task.set_constant_inputs((1,))
        assert task.config(task.default_index)["algorithm"].val == first, key


@pytest.mark.usefixtures("rule_caches")
@pytest.mark.parametrize("target, C, F, OW, KH, want", [
    # 64 filters >= 4 x 16 lanes: two vectors of channels; 14 of 56 columns: 28 accumulators, 2 weight
    # vectors and a broadcast in 32 registers
    (AVX512, 64, 64, 56, 3, dict(nchwc_oc_bn=32, nchwc_reg_n=14, nchwc_oh_bn=1)),
    # 7 columns: two rows of 7 fill the same budget
    (AVX512, 512, 512, 7, 3, dict(nchwc_oc_bn=32, nchwc_reg_n=7, nchwc_oh_bn=2)),
    # 48 filters < 4 x 16: one vector; 30 accumulators allow 28 columns (a divisor of 56)
    (AVX512, 48, 48, 56, 3, dict(nchwc_oc_bn=16, nchwc_reg_n=28, nchwc_oh_bn=1)),
    # 17 columns, no divisor within 14: not 14 columns and a tail tile of 3 (6 accumulators), but 7 x 2
    (AVX512, 192, 192, 17, 3, dict(nchwc_oc_bn=32, nchwc_reg_n=7, nchwc_oh_bn=2)),
    (AVX512, 192, 192, 17, 5, dict(nchwc_reg_n=7, nchwc_oh_bn=2)),
    # 34 columns are two tiles of 14 and a tail: the tail a smaller share, the rule's tile kept
    (AVX512, 128, 128, 34, 5, dict(nchwc_reg_n=14, nchwc_oh_bn=1)),
    # AVX2, 16 registers: oc 16 = two ymm vectors leave (16 - 3) / 2 = 6 positions; 6 does not divide 56, 4 does
    (AVX2, 64, 64, 56, 3, dict(nchwc_oc_bn=16, nchwc_reg_n=4, nchwc_oh_bn=1)),
    # 7 columns, 16 registers: two rows of 7 one-vector positions, not 2 x 2 positions of two vectors...
    (AVX2, 512, 512, 7, 3, dict(nchwc_oc_bn=8, nchwc_reg_n=7, nchwc_oh_bn=2, nchwc_block_rows=7)),
    # ... unless each 8-channel block would re-read from L3 an input (4096 x 9 x 9 floats) that
    # overflows half the L2: blocks of two vectors, 4 columns a tile (half the re-reads)
    (AVX2, 4096, 512, 7, 3, dict(nchwc_oc_bn=16, nchwc_reg_n=4, nchwc_oh_bn=1, nchwc_block_rows=7)),
    # F capped: 5 filters are one block of 8, 12 one of 16 (a power of two, its tail zero); fewer input
    # channels than a vector: blocks of 1
    (AVX512, 3, 5, 9, 3, dict(nchwc_oc_bn=8, nchwc_ic_bn=1)), (AVX512, 32, 12, 56, 3, dict(nchwc_oc_bn=16)),
    (AVX512, 12, 48, 56, 3, dict(nchwc_ic_bn=1)), (AVX2, 12, 48, 56, 3, dict(nchwc_ic_bn=12)),
    # a 3x3 row of one input channel is 3 x 28 = 84 multiply-adds, but its taps share input columns, and 28
    # accumulators, 2 weight vectors and 14 shared inputs overflow 32 registers: a loop over kw
    (AVX512, 1, 64, 56, 3, dict(nchwc_ic_bn=1, nchwc_unroll_kw=0)),
    # 4 columns x 2 rows: 16 accumulators, 2 weight vectors and 8 shared inputs fit, so unrolled
    (AVX512, 1, 64, 4, 3, dict(nchwc_reg_n=4, nchwc_oh_bn=2, nchwc_unroll_kw=1)),
    # 16 input channels per block: 3 x 16 x 28 = 1344 multiply-adds, a loop
    (AVX512, 64, 64, 56, 3, dict(nchwc_ic_bn=16, nchwc_unroll_kw=0)),
    # an RGB 7x7 stem in blocks of one channel: 14 columns x 2 vectors, 2 weight vectors and 14 shared
    # inputs overflow 32 registers
    (AVX512, 3, 64, 112, 7, dict(nchwc_ic_bn=1, nchwc_reg_n=14, nchwc_unroll_kw=0)),
])
def test_default_rules(target, C, F, OW, KH, want):
    got = first_values(target, C, F, OW, KH)
    assert {k: got[k] for k in want} == want


@pytest.mark.usefixtures("rule_caches")
def test_a_depthwise_conv_keeps_its_wide_tile_with_a_tail():
    """71 channels at 85 columns (no divisor in 8..15): 14 columns and a tail of one ran best."""
    got = first_values(AVX512, 71, 71, 85, 7, groups=71)
    assert (got["nchwc_reg_n"], got["nchwc_oh_bn"]) == (14, 1)


@pytest.mark.usefixtures("rule_caches")
def test_a_depthwise_conv_blocks_one_vector_of_channels():
    """768 channels >= 4 x 16 lanes, yet one vector: a depthwise conv broadcasts no input that a
    second weight vector would share, where a dense conv of as many filters takes two."""
    assert first_values(AVX512, 768, 768, 7, 7, groups=768)["nchwc_oc_bn"] == 16
    assert first_values(AVX512, 768, 768, 7, 7)["nchwc_oc_bn"] == 32


@pytest.mark.usefixtures("rule_caches")
@pytest.mark.parametrize("C, F, OW, KH, want", [
    # 256 x 9 x 32 weights per output block overflow the L1: 7 rows x 14 x 32 accumulators fit its half
    (256, 256, 14, 3, 7),
    (64, 64, 56, 3, 2),             # 2 rows of 56 (3 would not divide 56)
    (512, 512, 7, 3, 7),            # 2-row tiles: the block's tail tile is the 7-row image's own
    (512, 512, 21, 3, 0),           # 7-row blocks of 2-row tiles would each end in a tail tile, and
                                    # the whole 21-row image overflows half the L1
    (3, 64, 112, 7, 0),             # an RGB 7x7 stem's 3 x 49 x 32 weights fit half the L1
])
def test_block_rows_rule(C, F, OW, KH, want):
    assert first_values(AVX512, C, F, OW, KH)["nchwc_block_rows"] == want


@pytest.mark.usefixtures("rule_caches")
@pytest.mark.parametrize("C, want", [(80, 16), (144, 32), (75, 16), (200, 32)])
def test_ic_block_pads_the_channels_by_at_most_an_eighth(C, want):
    """A 1x1 kernel fits blocks of 64: 80 channels in blocks of 64 would compute 128, 16 divide
    them; 144 in blocks of 32 compute 160 (a ninth more), 75 in blocks of 16 80, 200 in blocks of
    32 224 (64 would compute 256)."""
    assert first_values(AVX512, C, 256, 28, KH=1)["nchwc_ic_bn"] == want


@pytest.mark.usefixtures("rule_caches")
def test_ic_block_fits_half_the_l1_and_prefers_a_divisor():
    got = first_values(AVX512, 256, 256, 14)
    block = got["nchwc_ic_bn"] * 9 * got["nchwc_oc_bn"] * 4
    assert 256 % got["nchwc_ic_bn"] == 0
    assert block <= Target.from_key(AVX512).cpu.l1d_bytes // 2 < 2 * block


OLD_RECORD = {"index": 5, "knobs": {"tile_f": [-1, 8], "tile_y": [-1, 2], "tile_x": [-1, 16], "tile_rc": [-1, 4],
                                    "reduce_order": "kernel_outer", "unroll_kw": 0, "pad": "inline"}}


def test_a_conv2d_record_from_before_the_algorithm_knob_loads_as_nchw():
    task = autotune.create_task("conv2d", N=1, C=16, H=20, W=20, F=32, KH=3, KW=3, stride=1, padding=1)
    cfg = task.config_space.from_json(OLD_RECORD)
    assert cfg["algorithm"].val == "nchw"
    assert {k: cfg[k].to_json() for k in OLD_RECORD["knobs"]} == OLD_RECORD["knobs"]
    assert cfg["parallel"].val == "fused"           # what "conv2d" ran before it had the knob
    assert task.is_valid(cfg.index)
    inputs = task.make_inputs(np.random.default_rng(0))
    np.testing.assert_allclose(run_config(task, cfg.index, inputs), task.reference(inputs)[0], rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("H, stride, tile_x, tile_y", [
    (112, 2, 14, 4),    # a strided depthwise conv's tile follows its output, as at stride 1 (the rows below)
    (14, 2, 7, 7),
    (28, 2, 14, 7),
    (24, 2, 12, 4),     # 12 columns, none of the candidates divides them: one vector, the whole row
    (36, 2, 9, 6),
    (60, 2, 15, 5),     # 30 columns: two even tiles of 15; 30 rows: 5
    (7, 1, 7, 7),       # 7 rows, no candidate but 1 divides them: the whole plane (at most 8 rows)
    (8, 1, 8, 8),
    (28, 1, 14, 4),     # 28 columns: 16 would leave a tail of 12, 14 divides them; 4 rows divide 28
    (14, 1, 14, 7),     # 14 rows: 4 would leave a tail of 2, and 2 leave one filter's tile two accumulators
    (18, 1, 9, 6),      # 18 columns: two even tiles of 9; 18 rows: 6, the fewest from 4 to 8 that divide them
    (37, 1, 16, 4),     # 37 (a prime): no candidate divides the columns, so the nearest to 16; 4 rows and a tail
])
def test_a_depthwise_tile_has_no_tail_where_a_candidate_divides_whatever_the_stride(H, stride, tile_x, tile_y):
    task = autotune.create_task("conv2d_grouped", N=1, C=32, H=H, W=H, F=32, KH=3, KW=3, stride=stride, padding=1,
                                dilation=1, groups=32, target=Target.from_key(AVX512))
    cfg = task.config(0)
    assert cfg["algorithm"].val == "nchw"
    assert (cfg["tile_x"].size[-1], cfg["tile_y"].size[-1]) == (tile_x, tile_y)


@pytest.mark.parametrize("K, H, stride, tile_y", [
    (5, 37, 1, 8),      # 37 rows: 4, 5, 6 and 7 leave tails of 1 or 2 rows, 8 one of 5
    (7, 29, 1, 5),      # tail 4
    (7, 26, 1, 7),      # 2 divides 26, none from 4 to 8 does: tail 5, not 2-row tiles
    (7, 83, 1, 4),      # tail 3
    (3, 37, 1, 4),      # a 3x3 window: 4 rows and a tail of 1
    (7, 57, 2, 4),      # 29 rows at stride 2: 4 and a tail of 1
])
def test_a_tall_depthwise_window_avoids_short_tail_tiles(K, H, stride, tile_y):
    task = autotune.create_task("conv2d_grouped", N=1, C=96, H=H, W=H, F=96, KH=K, KW=K, stride=stride,
                                padding=K // 2, dilation=1, groups=96, target=Target.from_key(AVX512))
    assert task.config(0)["tile_y"].size[-1] == tile_y
    assert {e.size[-1] for e in task.config_space.knobs["tile_y"].entities} >= {4, 5, 6, 7, 8}   # for the tuner


@pytest.mark.parametrize("K, H, pad", [
    (5, 56, "inline"),  # 5 rows, 3 shared by the next row's at stride 2
    (7, 57, "phases"),  # 29 output rows (a prime): 4 and a tail
    (3, 56, "inline"),  # 3 rows, 1 shared
])
def test_a_strided_depthwise_window_takes_several_rows_unrolled(K, H, pad):
    task = autotune.create_task("conv2d_grouped", N=1, C=144, H=H, W=H, F=144, KH=K, KW=K, stride=2, padding=K // 2,
                                dilation=1, groups=144, target=Target.from_key(AVX512))
    knobs = task.config(0).to_json()["knobs"]       # NCHW's knobs, whichever algorithm leads (7x7: "nchwc")
    assert (knobs["tile_y"][-1], knobs["unroll_window"], knobs["pad"]) == (4, 1, pad)
    assert knobs["algorithm"] == ("nchwc" if K == 7 else "nchw")


@pytest.mark.parametrize("C, K, stride, parallel", [
    (96, 7, 1, "outer"),    # ConvNeXt's 7x7: the row tiles serial, their padded first and last peeled
    (64, 5, 1, "outer"),
    (144, 3, 1, "fused"),   # a 3x3 window: one padding row at each edge
    (96, 3, 2, "outer"),    # strided, any window
    (4, 7, 1, "fused"),     # 4 channels: too few tasks for 2 cores without the row tiles
])
def test_a_tall_depthwise_window_runs_its_row_tiles_serially(C, K, stride, parallel):
    task = autotune.create_task("conv2d_grouped", N=1, C=C, H=56, W=56, F=C, KH=K, KW=K, stride=stride,
                                padding=K // 2, dilation=1, groups=C, target=Target.from_key(AVX512))
    knobs = task.config(0).to_json()["knobs"]       # NCHW's knobs, whichever algorithm leads (7x7: "nchwc")
    assert knobs["parallel"] == parallel
    assert knobs["algorithm"] == ("nchwc" if K == 7 else "nchw")


@pytest.mark.parametrize("op, params, knobs", [
    # depthwise 5x5, 4-row tiles over 11 rows and 8-column tiles over 13 columns: tails both ways
    ("conv2d_grouped", dict(N=1, C=7, H=11, W=13, F=7, KH=5, KW=5, stride=1, padding=2, dilation=1, groups=7),
     dict(tile_y=[-1, 4], tile_x=[-1, 8])),
    # strided, dilated, with the bias + relu epilogue, the padding copied at root, the kernel loops
    # outside the channels and 2 channels per tile (6 = 2 x 2 + 2)
    ("conv2d_bias_relu", dict(N=1, C=6, H=12, W=9, F=6, KH=3, KW=2, stride=(2, 1), padding=(1, 0, 2, 1),
                              dilation=(1, 2), groups=6),
     dict(tile_y=[-1, 2], tile_f=[-1, 2], pad="root", reduce_order="kernel_outer", unroll_kw=0)),
])
def test_an_unrolled_window_computes_the_conv(op, params, knobs):
    task = autotune.create_task(op, **params)
    inputs = task.make_inputs(np.random.default_rng(7))
    index = with_knobs(task, algorithm="nchw", unroll_window=1, **knobs)
    assert task.config_space.get(index)["unroll_window"].val == 1
    np.testing.assert_allclose(run_config(task, index, inputs), task.reference(inputs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("C, F, H, stride, groups, unrolled", [
    (144, 144, 56, 1, 144, 1),      # depthwise, 4-row tiles: rows share input rows
    (96, 96, 56, 1, 96, 1),         # 7x7 taps x 4 rows = 196 multiply-adds
    (96, 96, 112, 2, 96, 1),        # strided: 4-row tiles, rows 2 apart share one input row of 3
    (3, 32, 224, 2, 1, 0),          # 16 filters per tile already share each load
])
def test_the_window_is_unrolled_for_depthwise_tiles_of_several_rows(C, F, H, stride, groups, unrolled):
    K = 7 if H == 56 and C == 96 else 3
    task = autotune.create_task("conv2d_grouped", N=1, C=C, H=H, W=H, F=F, KH=K, KW=K, stride=stride, padding=K // 2,
                                dilation=1, groups=groups)
    record = task.config(0).to_json()["knobs"]
    if record["algorithm"] != "nchw":
        record = task.config(with_knobs(task, algorithm="nchw")).to_json()["knobs"]
    assert record["unroll_window"] == unrolled


def test_a_window_unrolled_past_its_bound_is_an_invalid_config():
    task = autotune.create_task("conv2d_grouped", N=1, C=32, H=28, W=28, F=32, KH=7, KW=7, stride=1, padding=3,
                                dilation=1, groups=32)
    assert [e.val for e in task.config_space.knobs["unroll_window"].entities] == [1, 0]
    assert task.is_valid(with_knobs(task, algorithm="nchw", unroll_window=1, tile_y=[-1, 4], tile_f=[-1, 1]))
    assert not task.is_valid(with_knobs(task, algorithm="nchw", unroll_window=1, tile_y=[-1, 4], tile_f=[-1, 4]))
    dense = autotune.create_task("conv2d_grouped", N=1, C=32, H=28, W=28, F=32, KH=7, KW=7, stride=1, padding=3,
                                 dilation=1, groups=1)
    assert [e.val for e in dense.config_space.knobs["unroll_window"].entities] == [0]
