"""Pre-packed weights: the panel layout round-trips, the `*_packed` templates give numpy's answer
on shapes where every split has a tail, and `ops.pack_weight` feeds matmul and dense."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import autotune
from autotune.schedules.cpu.panels import PANEL_WIDTHS, pack_panels, unpack_panels

RNG = np.random.default_rng(3)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@settings(max_examples=40, deadline=None)
@given(K=st.integers(1, 9), N=st.integers(1, 40), panel=st.sampled_from(PANEL_WIDTHS), transposed=st.booleans())
def test_panels_round_trip_with_zero_padding(K, N, panel, transposed):
    b = RNG.standard_normal((N, K) if transposed else (K, N)).astype(np.float32)
    packed = pack_panels(b, panel, transposed)
    assert packed.shape == (-(-N // panel), K, panel) and packed.flags.c_contiguous
    np.testing.assert_array_equal(unpack_panels(packed, N), b.T if transposed else b)
    assert not packed.transpose(1, 0, 2).reshape(K, -1)[:, N:].any()


@pytest.mark.parametrize("op, params", [
    ("matmul_packed", dict(M=37, N=53, K=29, panel=16)),
    ("matmul_packed", dict(M=1, N=7, K=301, panel=32)),
    ("dense_packed", dict(M=13, N=101, K=67, panel=48)),
    ("dense_packed", dict(M=67, N=5, K=3, panel=8)),
])
def test_packed_templates_match_numpy(check_configs, op, params):
    check_configs(op, n_random=3, **params)


def test_pack_weight_feeds_matmul_and_dense():
    a, b, w, bias = rand(19, 31), rand(31, 45), rand(45, 31), rand(45)
    np.testing.assert_allclose(autotune.ops.matmul(a, autotune.ops.pack_weight(b)), a @ b, rtol=1e-5, atol=1e-5)
    packed = autotune.ops.pack_weight(w, transposed=True, panel=24)
    assert (packed.K, packed.N, packed.panel) == (31, 45, 24)
    np.testing.assert_allclose(autotune.ops.dense(a, packed, bias), np.maximum(a @ w.T + bias, 0), rtol=1e-5,
                               atol=1e-5)


def test_packed_weight_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match="panel must be one of"):
        autotune.ops.pack_weight(rand(4, 5), panel=12)
    with pytest.raises(ValueError, match="must be 2-d"):
        autotune.ops.pack_weight(rand(4, 5, 6))
    with pytest.raises(ValueError, match="K=4"):
        autotune.ops.matmul(rand(3, 5), autotune.ops.pack_weight(rand(4, 5)))
    with pytest.raises(ValueError, match="bias"):
        autotune.ops.dense(rand(3, 5), autotune.ops.pack_weight(rand(4, 5), transposed=True), rand(5))
    with pytest.raises(ValueError, match="panel must be one of"):
        autotune.create_task("matmul_packed", M=3, N=4, K=5, panel=7)


@pytest.mark.parametrize("key, N, panel", [
    ("llvm -mcpu=x -features=avx2,avx512f,fma -cores=2", 1024, 32),   # no padding: two vectors
    ("llvm -mcpu=x -features=avx2,avx512f,fma -cores=2", 197, 32),    # 27 padded columns, not 11: still two
    ("llvm -mcpu=x -features=avx2,avx512f,fma -cores=2", 17, 32),     # one column past one vector
    ("llvm -mcpu=x -features=avx2,avx512f,fma -cores=2", 16, 16),     # one vector holds them all
    ("llvm -mcpu=x -features=avx2,avx512f,fma -cores=2", 5, 16),
    ("llvm -mcpu=x -features=avx2,fma -cores=2", 197, 16),            # AVX2: 16 lanes two vectors
    ("llvm -mcpu=x -features=avx2,fma -cores=2", 8, 8),
])
def test_default_panel_is_two_vectors_unless_one_holds_every_column(key, N, panel):
    from autotune.schedules.cpu.panels import default_panel
    from autotune.target import Target

    assert default_panel(Target.from_key(key), "float32", N) == panel
