"""Conv register tiles the templates refuse: over twice the vector registers of accumulators, or an
unrolled window counted in vector multiply-adds past its bound. The tuner never proposes them."""
import pytest

import autotune
from autotune.errors import InstantiationError
from autotune.target import Target

AVX2 = Target.from_key("llvm -mcpu=haswell -features=avx,avx2,fma -cores=2")           # 8 lanes, 16 registers
AVX512 = Target.from_key("llvm -mcpu=skylake-avx512 -features=avx,avx2,avx512f,fma -cores=2")   # 16, 32


def depthwise(target, K=5, C=17, H=79):
    return autotune.create_task("conv2d_grouped", target=target, N=1, C=C, H=H, W=H, F=C, KH=K, KW=K, stride=1,
                                padding=K // 2, dilation=1, groups=C)


def with_knobs(task, **knobs):
    """The default config with some knobs set."""
    record = task.config(task.default_index).to_json()
    return task.config_space.from_json({"knobs": {**record["knobs"], **knobs}})


def test_an_unrolled_window_counts_the_vectors_of_a_tile_row():
    """5x5 taps x 2 filters x 4 rows: 200 multiply-adds of one vector (16 columns), 400 of two (28)."""
    task = depthwise(AVX512)
    narrow = with_knobs(task, algorithm="nchw", unroll_window=1, tile_f=[-1, 2], tile_y=[-1, 4], tile_x=[-1, 16])
    assert task.is_valid(narrow.index)
    wide = with_knobs(task, algorithm="nchw", unroll_window=1, tile_f=[-1, 2], tile_y=[-1, 4], tile_x=[-1, 28])
    assert not task.is_valid(wide.index)
    with pytest.raises(InstantiationError, match=r"unrolled window of 400 vector multiply-adds is over 392"):
        task.instantiate(wide)
    rolled = with_knobs(task, algorithm="nchw", unroll_window=0, tile_f=[-1, 2], tile_y=[-1, 4], tile_x=[-1, 28])
    assert task.is_valid(rolled.index)


@pytest.mark.parametrize("target, tile_x, valid", [
    (AVX512, 56, True),      # 4 filters x 4 rows x 4 vectors: 64, twice AVX-512's 32 registers
    (AVX512, 28, True),
    (AVX2, 28, False),       # 4 x 4 x 4 vectors of 8 lanes: 64, over AVX2's 2 x 16
    (AVX2, 16, True),
])
def test_a_direct_conv_tile_past_twice_the_registers_is_refused(target, tile_x, valid):
    task = depthwise(target, K=3)
    config = with_knobs(task, algorithm="nchw", unroll_window=0, tile_f=[-1, 4], tile_y=[-1, 4], tile_x=[-1, tile_x])
    assert task.is_valid(config.index) == valid
    if not valid:
        with pytest.raises(InstantiationError, match=r"64 vector accumulators is over 32 \(2x the vector registers"):
            task.instantiate(config)


def test_a_blocked_conv_tile_past_twice_the_registers_is_refused():
    """4 rows x 32 columns x 2 vectors of channels: 256 accumulators; 4 x 8 x 2 = 64 stays."""
    task = depthwise(AVX512, K=7, C=96, H=56)
    big = with_knobs(task, algorithm="nchwc", nchwc_oc_bn=32, nchwc_reg_n=32, nchwc_oh_bn=4)
    assert not task.is_valid(big.index)
    with pytest.raises(InstantiationError, match=r"conv2d nchwc .* 256 vector accumulators is over 64"):
        task.instantiate(big)
    assert task.is_valid(with_knobs(task, algorithm="nchwc", nchwc_oc_bn=32, nchwc_reg_n=8, nchwc_oh_bn=4).index)


@pytest.mark.parametrize("target", [AVX2, AVX512], ids=["avx2", "avx512"])
@pytest.mark.parametrize("K, C, H", [(3, 144, 56), (5, 17, 79), (7, 96, 56), (7, 384, 14), (5, 523, 83)])
def test_no_default_is_refused(target, K, C, H):
    task = depthwise(target, K=K, C=C, H=H)
    assert task.is_valid(task.default_index)
    nchw = with_knobs(task, algorithm="nchw")
    assert task.is_valid(nchw.index)
