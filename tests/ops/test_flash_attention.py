"""Flash attention (online softmax over key blocks) vs numpy, for any shape and any tiling:
tails in every tiled axis (queries, key blocks, score and output vectors, register rows), causal
masks whose diagonal crosses blocks, and scales far from 1/sqrt(D) (the running max moves)."""
from __future__ import annotations

import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autotune
import autotune.te as te
from autotune.schedules.cpu.nn import attention_reference
from autotune.topi.flash_attention import Tiling, flash_attention


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 40), st.integers(1, 70),
                       st.integers(1, 24)),
       tiling=st.builds(Tiling, st.integers(1, 16), st.integers(1, 32), st.integers(1, 5), st.integers(1, 24),
                        st.integers(1, 24)),
       causal=st.booleans(), scale=st.sampled_from([None, 0.05, 3.0]))
def test_flash_attention_matches_numpy(sizes, tiling, causal, scale):
    B, H, Sq, Sk, D = sizes
    q = te.placeholder((B, H, Sq, D), name="q")
    k = te.placeholder((B, H, Sk, D), name="k")
    v = te.placeholder((B, H, Sk, D), name="v")
    O = flash_attention(q, k, v, scale=scale, causal=causal, tiling=tiling)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # every hand-written vector loop vectorizes
        f = autotune.build(te.create_schedule(O.op), [q, k, v, O])
    rng = np.random.default_rng(Sq * 1000 + Sk)
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in (q, k, v)]
    out = np.full(O.shape, np.nan, "float32")
    f(*arrays, out)
    scale_param = 0.0 if scale is None else scale
    want = attention_reference(*(a.astype("float64") for a in arrays), causal=int(causal), scale=scale_param)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_flop_counts_the_pairs_the_mask_keeps():
    q, k = te.placeholder((2, 3, 5, 8), name="q"), te.placeholder((2, 3, 4, 8), name="k")
    dense = flash_attention(q, k, k).op.flop
    causal = flash_attention(q, k, k, causal=True).op.flop
    assert dense == 4 * 2 * 3 * 5 * 4 * 8
    assert causal == 4 * 2 * 3 * (1 + 2 + 3 + 4 + 4) * 8       # query i sees keys 0..min(i, 3)
