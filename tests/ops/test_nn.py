"""Normalization, softmax family, attention and loss: ops and templates vs numpy on shapes with
tails, random configs of every template, the fused loop structure, and bad input."""
import math
import random
import warnings

import numpy as np
import pytest

import autotune
from autotune.codegen import build_module
from autotune.ir.functor import walk
from autotune.ir.nodes import Allocate, Broadcast, For, ForKind, Load, Ramp, Store
from autotune.ops import nn as ops

RNG = np.random.default_rng(11)


def rand(*shape, dtype="float32", scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


# -- numpy oracles (float64) ---------------------------------------------------------------------
def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def np_layer_norm(x, g, b, eps):
    m = x.mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * g + b


def np_attention(q, k, v, causal, scale=None):
    s = q @ k.swapaxes(-1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    return np_softmax(s) @ v


def f64(*a):
    return [x.astype(np.float64) for x in a]


# -- each op vs numpy ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 37), (3, 4, 67), (1, 1), (29,)])
def test_softmax_and_log_softmax(shape):
    x = rand(*shape, scale=3.0)
    np.testing.assert_allclose(ops.softmax(x), np_softmax(*f64(x)), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ops.log_softmax(x), np_log_softmax(*f64(x)), rtol=1e-5, atol=1e-5)


def test_softmax_is_stable_for_large_logits_and_float64():
    x = rand(4, 45, scale=1.0) + np.float32(1000)      # exp(1000) overflows without the max shift
    y = ops.softmax(x)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, np_softmax(*f64(x)), rtol=1e-4, atol=1e-7)
    x64 = rand(6, 19, dtype="float64")
    np.testing.assert_allclose(ops.softmax(x64), np_softmax(x64), rtol=1e-12)
    assert ops.softmax(x64).dtype == np.float64


@pytest.mark.parametrize("shape", [(5, 37), (2, 3, 129)])
def test_layer_norm_and_rms_norm(shape):
    x, g, b = rand(*shape), rand(shape[-1]), rand(shape[-1])
    x64, g64, b64 = f64(x, g, b)
    np.testing.assert_allclose(ops.layer_norm(x, g, b), np_layer_norm(x64, g64, b64, 1e-5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ops.layer_norm(x, g, b, eps=0.25), np_layer_norm(x64, g64, b64, 0.25),
                               rtol=1e-4, atol=1e-5)
    want = x64 / np.sqrt((x64 * x64).mean(axis=-1, keepdims=True) + 1e-6) * g64
    np.testing.assert_allclose(ops.rms_norm(x, g), want, rtol=1e-4, atol=1e-5)


def test_batch_norm():
    x = rand(2, 3, 5, 7)
    mean, gamma, beta = rand(3), rand(3), rand(3)
    var = np.abs(rand(3)) + np.float32(0.1)
    sh = (1, -1, 1, 1)
    x64, m64, v64, g64, b64 = f64(x, mean, var, gamma, beta)
    want = (x64 - m64.reshape(sh)) / np.sqrt(v64.reshape(sh) + 1e-3) * g64.reshape(sh) + b64.reshape(sh)
    np.testing.assert_allclose(ops.batch_norm(x, mean, var, gamma, beta, eps=1e-3), want, rtol=1e-5, atol=1e-5)


def test_cross_entropy():
    logits = rand(7, 37, scale=4.0)
    labels = RNG.integers(0, 37, size=7)
    x = logits.astype(np.float64)
    m = x.max(axis=1)
    want = m + np.log(np.exp(x - m[:, None]).sum(axis=1)) - x[np.arange(7), labels]
    np.testing.assert_allclose(ops.cross_entropy(logits, labels), want, rtol=1e-5, atol=1e-5)
    big = logits + np.float32(500)                     # logsumexp must not overflow
    np.testing.assert_allclose(ops.cross_entropy(big, labels.astype(np.int32)), want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sq, sk", [(13, 37), (17, 9)])
def test_attention(causal, sq, sk):
    q, k, v = rand(2, 3, sq, 19), rand(2, 3, sk, 19), rand(2, 3, sk, 19)
    want = np_attention(*f64(q, k, v), causal)
    np.testing.assert_allclose(ops.attention(q, k, v, causal=causal), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ops.attention(q, k, v, causal=causal, scale=0.3),
                               np_attention(*f64(q, k, v), causal, 0.3), rtol=1e-4, atol=1e-5)


def test_attention_default_scale_is_one_workload(monkeypatch):
    seen = []
    real = ops.load
    monkeypatch.setattr(ops, "load", lambda op, **kw: seen.append(kw["scale"]) or real(op, **kw))
    q, k, v = rand(1, 1, 5, 16), rand(1, 1, 7, 16), rand(1, 1, 7, 16)
    a, b = ops.attention(q, k, v), ops.attention(q, k, v, scale=0.25)
    ops.attention(q, k, v, scale=0.5)
    assert seen == [0.0, 0.0, 0.5]
    np.testing.assert_array_equal(a, b)


# -- every template: random configs all match numpy ---------------------------------------------
TEMPLATE_CASES = [
    ("softmax", dict(M=5, N=37)),
    ("log_softmax", dict(M=4, N=53)),
    ("layer_norm", dict(M=5, N=37, eps=1e-5)),
    ("rms_norm", dict(M=3, N=71, eps=1e-6)),
    ("batch_norm", dict(N=2, C=3, H=5, W=7, eps=1e-5)),
    ("cross_entropy", dict(N=7, C=37)),
    ("attention", dict(batch=1, heads=2, seq_q=13, seq_k=37, head_dim=19, causal=0, scale=0.0)),
    ("attention", dict(batch=2, heads=1, seq_q=11, seq_k=29, head_dim=8, causal=1, scale=0.3)),
]


def _inputs(task):
    inputs = task.make_inputs(np.random.default_rng(3))
    if task.name == "batch_norm":
        inputs[2] = np.abs(inputs[2]) + np.float32(0.1)        # a variance is positive
    return inputs


@pytest.mark.parametrize("op, params", TEMPLATE_CASES, ids=[f"{op}-{i}" for i, (op, _) in enumerate(TEMPLATE_CASES)])
def test_random_configs_match_numpy(op, params):
    task = autotune.create_task(op, **params)
    n = len(task.config_space)
    picks = {0, n - 1, *random.Random(op).sample(range(n), min(n, 8 if op != "attention" else 5))}
    inputs = _inputs(task)
    want = task.reference(inputs)
    checked = 0
    for index in sorted(picks):
        if not task.is_valid(index):
            continue
        s, args = task.instantiate(index)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="loop .* runs as a scalar loop")
            f = build_module(autotune.lower(s, args))
        outs = [np.full(shape, np.nan, dtype) for shape, dtype in task.arg_specs[task.num_inputs:]]
        f(*inputs, *outs)
        for got, ref in zip(outs, want):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{task.workload_key} config {task.config(index)}")
        checked += 1
    assert checked >= 2


# -- the fused loop structure --------------------------------------------------------------------
def _lowered(op, knobs=None, **params):
    """The lowered default config of op at params (or the config of `knobs`)."""
    task = autotune.create_task(op, **params)
    s, args = task.instantiate(0 if knobs is None else {"knobs": knobs})
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # every vector loop really vectorizes
        return autotune.lower(s, args)


def _vector_accesses(func, skip=()):
    out = []
    walk(func.body, lambda n: out.append(n) if isinstance(n, (Load, Store)) and n.index.lanes > 1
         and n.buffer.name not in skip else None)
    return out


def _is_contiguous(index):
    if isinstance(index, Broadcast):
        return True
    return isinstance(index, Ramp) and getattr(index.stride, "value", None) == 1


@pytest.mark.parametrize("op, params", [
    ("softmax", dict(M=64, N=1024)), ("log_softmax", dict(M=64, N=1000)),
    ("layer_norm", dict(M=64, N=1024, eps=1e-5)), ("rms_norm", dict(M=64, N=999, eps=1e-6)),
    ("cross_entropy", dict(N=64, C=1000)), ("batch_norm", dict(N=2, C=8, H=56, W=56, eps=1e-5)),
])
def test_row_ops_are_fused_vectorized_without_gathers(op, params):
    func = _lowered(op, **params)
    top = func.body
    while isinstance(top, Allocate):
        top = top.body
    assert isinstance(top, For) and top.kind is ForKind.PARALLEL        # rows (planes) in parallel
    row = max(v for k, v in params.items() if isinstance(v, int) and k in ("N", "C", "W"))
    allocs = []
    walk(func.body, lambda n: allocs.append(n.buffer) if isinstance(n, Allocate) else None)
    assert all(b.scope == "local" and b.size <= row + 64 for b in allocs), allocs   # row-sized at most
    vec = _vector_accesses(func)
    assert vec, "no vector loads or stores"
    assert all(_is_contiguous(a.index) for a in vec), [str(a.index) for a in vec if not _is_contiguous(a.index)]


def _local_allocs(func):
    allocs = []
    walk(func.body, lambda n: allocs.append(n.buffer) if isinstance(n, Allocate) and n.buffer.scope == "local"
         else None)
    return sorted((b.name, b.size) for b in allocs)


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_memory_does_not_grow_with_the_sequence(causal):
    """The online softmax: per thread one query tile x one key block of scores plus the output
    rows, the same for 96 keys as for 4096; every vector loop vectorizes (the helper errors on a
    scalar fallback), and only the packing of K reads strided."""
    tiling = {"tile_q": 32, "tile_k": 64, "rows": 4, "score_width": 64, "out_width": 32}   # one for both lengths
    short, long = (_lowered("attention", tiling, batch=1, heads=2, seq_q=64, seq_k=sk, head_dim=32, causal=causal,
                            scale=0.0) for sk in (96, 4096))
    assert _local_allocs(short) == _local_allocs(long)
    assert max(size for _, size in _local_allocs(long)) <= 32 * 64
    for func in (short, long):
        globals_ = []
        walk(func.body, lambda n: globals_.append(n.buffer.name) if isinstance(n, Allocate)
             and n.buffer.scope == "global" else None)
        assert globals_ == ["KT"]                                      # the packed K, nothing of size seq^2
        gathers = [a for a in _vector_accesses(func) if not _is_contiguous(a.index)]
        assert not [a for a in gathers if a.buffer.name != "k"], [str(a) for a in gathers]


# -- float parameters ----------------------------------------------------------------------------
@pytest.mark.parametrize("eps, text", [(1e-5, "1e-05"), (1e-12, "1e-12"), (0.125, "0.125"), (0, "0.0"), (-0.0, "0.0"),
                                       (2.5e-6, "2.5e-06"), (300, "300.0"), (1 / math.sqrt(80), "0.11180339887498948")])
def test_float_parameters_are_floats_in_keys(eps, text):
    task = autotune.create_task("layer_norm", M=4, N=8, eps=eps)
    assert task.params["eps"] == eps and type(task.params["eps"]) is float
    assert task.workload_key == f"layer_norm(M=4,N=8,eps={text})float32"
    assert float(text) == eps                              # the key's text reads back as the same float


@pytest.mark.parametrize("eps, error, message", [
    ((1, -5), TypeError, r"layer_norm: parameter eps must be a float, got tuple \(1, -5\)"),
    ("1e-5", TypeError, "layer_norm: parameter eps must be a float, got str '1e-5'"),
    (True, TypeError, "layer_norm: parameter eps must be a float, got bool True"),
    (math.nan, ValueError, "layer_norm: parameter eps must be a float that is not NaN, got nan"),
    (-math.inf, ValueError, "layer_norm: eps must be finite and >= 0, got -inf"),
    (-1e-5, ValueError, "layer_norm: eps must be finite and >= 0, got -1e-05"),
])
def test_template_rejects_a_bad_eps(eps, error, message):
    with pytest.raises(error, match=message):
        autotune.create_task("layer_norm", M=4, N=8, eps=eps)


# -- bad input -----------------------------------------------------------------------------------
BAD = [
    (lambda: ops.softmax([1.0, 2.0]), TypeError, "softmax: argument x must be a numpy array"),
    (lambda: ops.softmax(np.ones((3, 4), np.int32)), TypeError, "softmax: argument x must be float32 or float64"),
    (lambda: ops.log_softmax(np.ones((), np.float32)), ValueError, "log_softmax: argument x"),
    (lambda: ops.layer_norm(rand(3, 8), rand(7), rand(8)), ValueError, "layer_norm: argument gamma"),
    (lambda: ops.layer_norm(rand(3, 8), rand(8), rand(8, dtype="float64")), TypeError, "layer_norm: arguments"),
    (lambda: ops.layer_norm(rand(3, 8), rand(8), rand(8), eps=-1.0), ValueError, "layer_norm: eps"),
    (lambda: ops.layer_norm(rand(3, 8), rand(8), rand(8), eps="1e-5"), TypeError, "layer_norm: eps"),
    (lambda: ops.rms_norm(rand(3, 8), rand(8, 1)), ValueError, "rms_norm: argument gamma must be 1-d"),
    (lambda: ops.batch_norm(rand(2, 3, 4), rand(3), rand(3), rand(3), rand(3)), ValueError,
     "batch_norm: argument x must be 4-d"),
    (lambda: ops.batch_norm(rand(2, 3, 4, 4), rand(3), rand(4), rand(3), rand(3)), ValueError,
     "batch_norm: argument var"),
    (lambda: ops.cross_entropy(rand(4, 5), np.array([0, 1, 5, 2])), ValueError,
     "cross_entropy: argument labels must lie"),
    (lambda: ops.cross_entropy(rand(4, 5), np.array([0, -1, 2, 2])), ValueError,
     "cross_entropy: argument labels must lie"),
    (lambda: ops.cross_entropy(rand(4, 5), np.zeros(3, np.int64)), ValueError,
     "cross_entropy: argument labels must have"),
    (lambda: ops.cross_entropy(rand(4, 5), np.zeros(4, np.float32)), TypeError,
     "cross_entropy: argument labels must hold"),
    (lambda: ops.attention(rand(1, 2, 3, 4), rand(1, 2, 5, 4), rand(1, 2, 5, 3)), ValueError,
     "attention: argument v"),
    (lambda: ops.attention(rand(1, 2, 3, 4), rand(1, 3, 5, 4), rand(1, 3, 5, 4)), ValueError,
     "attention: argument k"),
    (lambda: ops.attention(rand(2, 3, 4), rand(2, 3, 4), rand(2, 3, 4)), ValueError,
     "attention: argument q must be 4-d"),
    (lambda: ops.attention(rand(1, 1, 3, 4), rand(1, 1, 3, 4), rand(1, 1, 3, 4), scale=0.0), ValueError,
     "attention: scale"),
    (lambda: ops.attention(rand(1, 1, 3, 4), rand(1, 1, 3, 4), rand(1, 1, 3, 4), causal=1), TypeError,
     "attention: causal"),
]


@pytest.mark.parametrize("call, error, message", BAD, ids=[m for _, _, m in BAD])
def test_bad_input_names_the_op_and_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_empty_inputs_give_empty_outputs():
    assert ops.softmax(np.ones((0, 5), np.float32)).shape == (0, 5)
    assert ops.cross_entropy(np.ones((0, 5), np.float32), np.zeros(0, np.int32)).shape == (0,)
