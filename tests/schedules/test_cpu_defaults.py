"""CPU defaults come from rules on the shape and the target (issue 13): every CPU op's default
config is legal on this machine and on foreign targets, and the rules follow the target's vector
width and cores (targets from record keys of other machines: no code is compiled for them)."""
import re
from pathlib import Path

import pytest

import autotune
from autotune.schedules.cpu import MODULE_OF_OP
from autotune.schedules.cpu.elementwise import BINARY, UNARY
from autotune.schedules.cpu.reduction import REDUCTIONS
from autotune.target import Target

AVX2 = Target.from_key("llvm -mcpu=haswell -features=avx,avx2,fma -cores=2")
AVX512 = Target.from_key("llvm -mcpu=skylake-avx512 -features=avx,avx2,avx512f,fma -cores=2")
AVX512_16 = Target.from_key("llvm -mcpu=skylake-avx512 -features=avx,avx2,avx512f,fma -cores=16")
ONE_CORE = Target.from_key("llvm -mcpu=skylake-avx512 -features=avx,avx2,avx512f,fma -cores=1")

CONV = dict(stride=1, padding=1, dilation=1, groups=1)
EXAMPLES = {
    "matmul": [dict(M=131, N=97, K=61), dict(M=7, N=5, K=3), dict(M=1, N=300, K=37)],
    "dense": [dict(M=129, N=77, K=65), dict(M=3, N=130, K=17)],
    "matmul_packed": [dict(M=131, N=97, K=61, panel=32), dict(M=1, N=300, K=37, panel=8)],
    "dense_packed": [dict(M=129, N=77, K=65, panel=48), dict(M=3, N=130, K=17, panel=16)],
    "dense_gelu": [dict(M=13, N=37, K=19), dict(M=67, N=100, K=96)],
    "batch_matmul": [dict(batch=3, M=37, N=29, K=17), dict(batch=2, M=130, N=65, K=33)],
    "conv1d": [dict(N=2, C=6, L=37, F=5, K=3, **CONV), dict(N=1, C=16, L=101, F=40, K=5, stride=2, padding=2,
                                                             dilation=1, groups=2)],
    "conv2d_nhwc": [dict(N=1, H=9, W=11, C=6, F=9, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=3),
                    dict(N=1, H=13, W=17, C=16, F=40, KH=3, KW=3, **CONV)],
    "conv2d": [dict(N=1, C=5, H=13, W=11, F=7, KH=3, KW=3, stride=1, padding=1)],
    "conv2d_grouped": [dict(N=1, C=6, H=13, W=11, F=6, KH=3, KW=3, stride=2, padding=1, dilation=1, groups=6)],
    "conv2d_bias_relu": [dict(N=1, C=5, H=13, W=11, F=7, KH=3, KW=3, **CONV)],
    "conv2d_bn": [dict(N=1, C=5, H=13, W=11, F=7, KH=1, KW=1, stride=1, padding=0, dilation=1, groups=1)],
    "softmax": [dict(M=37, N=1000), dict(M=3, N=5)],
    "log_softmax": [dict(M=37, N=999), dict(M=3, N=5)],
    "layer_norm": [dict(M=37, N=768), dict(M=3, N=5)],
    "rms_norm": [dict(M=37, N=767), dict(M=3, N=5)],
    "batch_norm": [dict(N=2, C=17, H=29, W=31), dict(N=1, C=3, H=5, W=7)],
    "cross_entropy": [dict(N=37, C=1000), dict(N=3, C=5)],
    "attention": [dict(batch=1, heads=3, seq_q=77, seq_k=93, head_dim=64, causal=1),
                  dict(batch=2, heads=2, seq_q=5, seq_k=7, head_dim=24, causal=0)],
    "max_pool2d": [dict(shape=(1, 17, 29, 31), kernel=3, stride=2, padding=1),
                   dict(shape=(2, 3, 7, 5), kernel=2, stride=1, padding=0)],
    "avg_pool2d": [dict(shape=(1, 17, 29, 31), kernel=3, stride=2, padding=1)],
    "max_pool2d_indices": [dict(shape=(1, 17, 29, 31), out=(15, 16), kernel=3, stride=2, padding=1, dilation=1,
                                column_major=0),
                           dict(shape=(2, 3, 7, 5), out=(5, 2), kernel=(2, 3), stride=(1, 2), padding=(0, 1),
                                dilation=(2, 1), column_major=1)],
    "global_avg_pool": [dict(shape=(2, 17, 29, 31)), dict(shape=(1, 3, 5, 7))],
    "transpose": [dict(shape=(37, 101), axes=(1, 0)), dict(shape=(3, 29, 31), axes=(0, 2, 1)),
                  dict(shape=(5, 7, 9), axes=(1, 0, 2))],
    "pad": [dict(shape=(37, 101), pad_before=(1, 2), pad_after=(3, 0), value=0.5)],
    "border_pad": [dict(shape=(37, 101), pad_before=(1, 40), pad_after=(3, 0), mode="reflect"),
                   dict(shape=(5, 7), pad_before=(6, 0), pad_after=(0, 9), mode="wrap"),
                   dict(shape=(1, 9), pad_before=(2, 1), pad_after=(0, 3), mode="edge")],
    "concat": [dict(shape=(37, 101), axis=1, sizes=(50, 51))],
    "slice": [dict(shape=(37, 101), begin=(1, -3), end=(30, 2), step=(2, -3))],
    "take": [dict(weight_shape=(1001, 77), indices_shape=(3, 5))],
    "where": [dict(cond_shape=(37, 1), a_shape=(37, 1001), b_shape=(1001,))],
    "clip": [dict(shape=(37, 1001), lo=0.0, hi=6.0)],
    **{op: [dict(shape=(37, 1001)), dict(shape=(5,))] for op in ("leaky_relu", "elu", "hard_sigmoid")},
    **{op: [dict(a_shape=(37, 1001), b_shape=(1001,))] for op in ("equal", "less", "greater", "less_equal",
                                                                  "greater_equal")},
    "logical_not": [dict(shape=(37, 1001), dtype="bool")],
    "cast": [dict(shape=(37, 1001), to="int32"), dict(shape=(5,), to="bool")],
    "expand": [dict(shape=(37, 1), out_shape=(3, 37, 1001))],
    "conv_transpose2d": [dict(N=1, C=16, H=13, W=11, F=8, KH=4, KW=4, stride=2, padding=1, output_padding=0,
                              dilation=1, groups=1)],
    "conv_transpose3d": [dict(N=1, C=16, D=5, H=13, W=11, F=8, KD=3, KH=4, KW=4, stride=2, padding=1,
                              output_padding=0, dilation=1, groups=1)],
    "instance_norm": [dict(shape=(2, 17, 29, 31), eps=1e-5), dict(shape=(1, 3, 5), eps=1e-5)],
    "resize": [dict(shape=(1, 17, 29, 31), out_shape=(1, 17, 58, 62), mode="nearest", coord="asymmetric",
                    nearest="floor"),
               dict(shape=(1, 3, 5, 7), out_shape=(1, 3, 9, 11), mode="linear", coord="half_pixel",
                    nearest="round_prefer_floor")],
    "resample": [dict(shape=(1, 17, 29, 31), axis=3, out_extent=13, taps=8),
                 dict(shape=(1, 3, 5, 7), axis=2, out_extent=11, taps=4, extrapolate=1, fill=0.5)],
}
EXAMPLES |= {op: [dict(shape=(37, 1001)), dict(shape=(5,))] for op in UNARY}
EXAMPLES |= {op: [dict(a_shape=(37, 1001), b_shape=(1001,)), dict(a_shape=(3, 1), b_shape=(1, 5))] for op in BINARY}
EXAMPLES |= {op: [dict(shape=(37, 1001), axes=1, keepdims=0), dict(shape=(37, 29, 31), axes=(0,), keepdims=1),
                  dict(shape=(5, 3), axes=(0, 1), keepdims=0)] for op in REDUCTIONS}
CASES = [(op, p) for op, shapes in sorted(EXAMPLES.items()) for p in shapes]


def test_every_cpu_op_has_examples():
    """Every built-in CPU op (templates other tests register are not built in)."""
    assert set(MODULE_OF_OP) - set(EXAMPLES) == set(), "add shapes for these ops"


@pytest.mark.parametrize("target", ["llvm", AVX2, AVX512_16], ids=["host", "avx2", "avx512-16-cores"])
@pytest.mark.parametrize("op, params", CASES, ids=[f"{op}-{k}" for k, (op, _) in enumerate(CASES)])
def test_the_default_config_is_legal(op, params, target):
    """Config 0 (what an untuned load runs and xgb measures first) instantiates and lowers."""
    task = autotune.create_task(op, target=target, **params)
    task.lower(0)


def default(op, target, **params):
    return autotune.create_task(op, target=target, **params).config(0).to_json()["knobs"]


# (op, params, knob, value on AVX2 (8 float lanes), value on AVX-512 (16 lanes)); each rule's docstring
# in autotune/schedules/cpu says why
VECTOR_RULES = [
    ("matmul", dict(M=997, N=1009, K=1013), "tile_x", [-1, 16], [-1, 32]),                 # 2 x lanes
    ("dense", dict(M=129, N=77, K=65), "tile_x", [-1, 16], [-1, 32]),
    ("dense", dict(M=129, N=20, K=65), "tile_x", [-1, 16], [-1, 32]),                     # a whole panel past N
    ("batch_matmul", dict(batch=2, M=130, N=64, K=33), "tile_x", [-1, 16], [-1, 32]),
    ("batch_matmul", dict(batch=2, M=130, N=50, K=33), "tile_x", [-1, 16], [-1, 32]),     # a short row with a tail
    ("conv1d", dict(N=1, C=16, L=101, F=40, K=5, **CONV), "tile_x", [-1, 16], [-1, 32]),
    ("conv2d_nhwc", dict(N=1, H=13, W=17, C=16, F=40, KH=3, KW=3, **CONV), "tile_f", [-1, 16], [-1, 32]),
    ("relu", dict(shape=(37, 1001)), "tile_inner", [-1, 4, 8], [-1, 4, 16]),             # 4 vectors of lanes
    ("sum", dict(shape=(37, 1001), axes=1, keepdims=0), "lanes", 8, 16),                 # one vector of partials
    ("softmax", dict(M=37, N=1000), "tile_j", [-1, 32], [-1, 64]),
    ("softmax", dict(M=37, N=1000), "lanes", 16, 32),                                    # two vectors of partials
    ("batch_norm", dict(N=2, C=17, H=29, W=31), "vec", 8, 16),
    ("transpose", dict(shape=(37, 101), axes=(1, 0)), "tile", 8, 16),
    # pooling windows: one vector a block, the whole row where it takes at most half the registers
    # (66 columns: 9 AVX2 registers, 5 AVX-512 ones), else two registers (600 columns)
    ("max_pool2d", dict(shape=(1, 17, 29, 131), kernel=3, stride=2, padding=1), "tile_inner", [-1, 1, 16],
     [-1, 1, 66]),
    ("avg_pool2d", dict(shape=(1, 3, 9, 1199), kernel=3, stride=2, padding=1), "tile_inner", [-1, 1, 16],
     [-1, 1, 32]),
    ("max_pool2d", dict(shape=(1, 17, 29, 111), kernel=3, stride=2, padding=1), "tile_inner", [-1, 1, 56],
     [-1, 1, 56]),
    # a long column sum keeps blocks of 4 vectors (independent adds)
    ("sum", dict(shape=(1000, 1001), axes=0, keepdims=0), "tile_inner", [-1, 4, 8], [-1, 4, 16]),
    # 5 input channels: over half an AVX2 vector for Winograd's input transform, under half of AVX-512's
    ("conv2d_grouped", dict(N=1, C=5, H=56, W=56, F=64, KH=3, KW=3, **CONV), "algorithm", "winograd", "nchw"),
    # 12 input channels, 5x5 stride 1: over an AVX2 vector (blocked), under one of AVX-512's
    ("conv2d_grouped", dict(N=1, C=12, H=57, W=57, F=40, KH=5, KW=5, stride=1, padding=2, dilation=1, groups=1),
     "algorithm", "nchwc", "nchw"),
    ("attention", dict(batch=1, heads=8, seq_q=1024, seq_k=1024, head_dim=64, causal=0), "out_width", 32, 64),
]


@pytest.mark.parametrize("op, params, knob, avx2, avx512", VECTOR_RULES,
                         ids=[f"{r[0]}.{r[2]}" for r in VECTOR_RULES])
def test_the_default_follows_the_vector_width(op, params, knob, avx2, avx512):
    assert default(op, AVX2, **params)[knob] == avx2
    assert default(op, AVX512, **params)[knob] == avx512


@pytest.mark.parametrize("C, F, H, stride, groups, pad", [
    (6, 24, 96, 1, 1, "inline"),      # 96 columns in tiles of 16
    (6, 24, 97, 1, 1, "root"),        # 97 columns in tiles of 16: a tail tile
    (6, 6, 97, 1, 6, "inline"),       # depthwise: one filter per channel, a copy costs the conv
])
def test_the_nchw_conv_pads_inline_unless_its_columns_have_a_tail(C, F, H, stride, groups, pad):
    knobs = default("conv2d_grouped", AVX512, N=1, C=C, H=H, W=H, F=F, KH=3, KW=3, stride=stride, padding=1,
                    dilation=1, groups=groups)
    assert knobs["pad"] == pad


@pytest.mark.parametrize("K, pad", [(7, "phases"), (5, "inline"), (3, "inline")])
def test_a_strided_depthwise_conv_reads_stride_phases_where_each_input_feeds_many_taps(K, pad):
    """49 taps over 4 phases: 12 per input element, at least PHASE_TAPS; 5x5's 6 and 3x3's 2 read
    the input in place. The tile is the stride-1 rule's either way: 4 rows of 14 columns at 56x56."""
    params = dict(N=1, C=96, H=112, W=112, F=96, KH=K, KW=K, stride=2, padding=K // 2, dilation=1, groups=96)
    knobs = default("conv2d_grouped", AVX512, **params)
    assert (knobs["pad"], knobs["tile_y"], knobs["tile_x"], knobs["parallel"]) == (pad, [-1, 4], [-1, 14], "outer")
    stride_1 = autotune.create_task("conv2d_grouped", target=AVX512, **{**params, "stride": 1})
    assert "phases" not in stride_1.config_space.knobs["pad"].entities


@pytest.mark.parametrize("C, F, H, want", [
    (3, 32, 224, ("phases", [-1, 16])),    # MobileNet-V2's stem: 112 columns in whole vectors
    (1, 19, 223, ("phases", [-1, 16])),    # odd: 112 columns too
])
def test_a_strided_conv_of_few_channels_reads_stride_phases_in_whole_vectors(C, F, H, want):
    """Every filter of the tile reads the same phases; each tap then reads consecutive columns,
    so the column tile is the stride-1 rule's. (NCHW's knobs: the blocked kernel leads.)"""
    knobs = default("conv2d_grouped", AVX512, N=1, C=C, H=H, W=H, F=F, KH=3, KW=3, stride=2, padding=1,
                    dilation=1, groups=1)
    assert (knobs["algorithm"], knobs["pad"], knobs["tile_x"]) == ("nchwc", *want)


@pytest.mark.parametrize("C, F, H, W, K, stride, groups, want", [
    (7, 37, 109, 109, 7, 2, 1, (11, 1)),      # 55 rows: two-row tiles would guard a tail row in every tile
    (7, 37, 111, 109, 7, 2, 1, (11, 2)),      # 56 rows: whole two-row tiles
    (1024, 1024, 7, 7, 3, 1, 32, (7, 4)),     # deep: 4 rows and a tail of 3 ran faster than 1 row
])
def test_a_blocked_conv_of_few_channels_takes_whole_row_tiles(C, F, H, W, K, stride, groups, want):
    knobs = default("conv2d_grouped", AVX512, N=1, C=C, H=H, W=W, F=F, KH=K, KW=K, stride=stride,
                    padding=K // 2, dilation=1, groups=groups)
    assert (knobs["nchwc_reg_n"], knobs["nchwc_oh_bn"]) == want


@pytest.mark.parametrize("C, F, K, stride", [(512, 2048, 1, 1), (512, 512, 3, 1), (1024, 2048, 1, 2)])
def test_with_16_registers_a_short_row_is_one_tile_of_one_vector_blocks(C, F, K, stride):
    """AVX2: two-vector blocks leave 6 positions, and a 7-column row split in half ran 2 x 2
    tiles; one-vector blocks hold the whole row. AVX-512's 14 positions hold it at 2L already."""
    params = dict(N=1, C=C, H=7 * stride, W=7 * stride, F=F, KH=K, KW=K, stride=stride, padding=K // 2,
                  dilation=1, groups=1)
    avx2, avx512 = default("conv2d_grouped", AVX2, **params), default("conv2d_grouped", AVX512, **params)
    assert (avx2["nchwc_oc_bn"], avx2["nchwc_reg_n"]) == (8, 7)
    assert (avx512["nchwc_oc_bn"], avx512["nchwc_reg_n"]) == (32, 7)


def test_the_register_tile_follows_the_register_count():
    """3/4 of the registers hold accumulators: 12 of AVX2's 16 (6 rows of 2 vectors), 24 of
    AVX-512's 32 (8 rows, the largest candidate)."""
    params = dict(M=997, N=1009, K=1013)
    assert default("matmul", AVX2, **params)["tile_y"][-1] == 6
    assert default("matmul", AVX512, **params)["tile_y"][-1] == 8
    assert default("attention", AVX2, **VECTOR_RULES[-1][1])["rows"] == 2     # 4 vectors a row: 12 // 4 -> 2
    assert default("attention", AVX512, **VECTOR_RULES[-1][1])["rows"] == 4   # 24 // 4 -> 4 (of 1, 2, 4, 8)


def test_the_default_follows_the_cores():
    """Threads only with more than one core; blocks shrink so that 16 cores get 4 chunks each
    (K=64: the A rows of any block fit in any L2 of 64 KiB or more)."""
    mm = dict(M=256, N=256, K=64)
    assert default("matmul", AVX512, **mm)["parallel"] == "fused"
    assert default("matmul", ONE_CORE, **mm)["parallel"] == "none"
    assert default("matmul", AVX512, **mm)["tile_y"] == [-1, 16, 8]       # 2 x 8 tiles >= 2 cores x 4
    assert default("matmul", AVX512_16, **mm)["tile_y"] == [-1, 4, 8]     # 8 x 8 tiles >= 16 cores x 4
    assert default("relu", AVX512, shape=(37, 1001))["parallel"] == 1
    assert default("relu", ONE_CORE, shape=(37, 1001))["parallel"] == 0
    assert default("softmax", ONE_CORE, M=37, N=1000)["parallel"] == 0


def test_small_work_runs_on_one_core():
    """Below 2^15 element operations waking the other threads costs about what the loop does."""
    assert default("relu", AVX512_16, shape=(37, 101))["parallel"] == 0
    assert default("matmul", AVX512_16, M=7, N=5, K=3)["parallel"] == "none"


def test_no_default_is_said_to_be_measured_best():
    """A guard on the wording; the rules themselves are tested above."""
    root = Path(autotune.__file__).parent / "schedules"
    said = [f"{p.name}: {m.group(0)}" for p in [*root.glob("cpu/*.py"), root / "generic.py"]
            for m in re.finditer(r"(measured|fastest|best)[^\n]{0,40}(default|first value)|"
                                 r"(default|first value)[^\n]{0,40}(measured|fastest|best)", p.read_text(), re.I)]
    assert said == []


@pytest.mark.parametrize("op", ["matmul", "dense"])
def test_an_unrolled_register_tile_past_twice_the_registers_is_refused(op):
    """8 rows x 96 columns unrolled: 96 accumulators on AVX2's 16 registers only spill (and took
    LLVM over a minute to compile); rolled rows, or AVX-512's 6-vector rows of 32 registers, stay."""
    from autotune.errors import InstantiationError

    def config(target, unroll_rows):
        task = autotune.create_task(op, target=target, M=67, N=197, K=33)
        j = task.config(task.default_index).to_json()
        j["knobs"].update(tile_x=[-1, 96], tile_y=[-1, 1, 8], unroll_rows=unroll_rows)
        return task, task.config_space.from_json(j)

    task, cfg = config(AVX2, 1)
    assert not task.is_valid(cfg.index)
    with pytest.raises(InstantiationError, match=r"96 vector accumulators is over 32 \(2x the vector registers"):
        task.instantiate(cfg)
    for target, unroll_rows in ((AVX2, 0), (AVX512, 1)):
        task, cfg = config(target, unroll_rows)
        assert task.is_valid(cfg.index)
    task, cfg = config(AVX2, 1)
    j = cfg.to_json()
    j["knobs"].update(tile_x=[-1, 32])                     # 8 rows x 4 vectors: 32, at the limit
    assert task.is_valid(task.config_space.from_json(j).index)
