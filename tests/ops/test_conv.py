"""Convolution ops and conv/dense epilogue fusion: each op against a direct numpy definition on
odd shapes (every tile has a tail), with stride, padding, dilation and groups; random configs
of each template; bad input names the op and the argument."""
import random
import warnings

import numpy as np
import pytest

import autotune
from autotune.errors import InstantiationError
from autotune.ops import conv as ops
from autotune.topi.conv import fold_batch_norm

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.uniform(-1, 1, size=shape).astype("float32")


def pair(v, n=2):
    return (v,) * n if isinstance(v, int) else tuple(v)


def direct_conv2d(x, w, stride=1, padding=0, dilation=1, groups=1):
    """The definition, one output point at a time, in float64 (NCHW, OIHW)."""
    (sh, sw), (dh, dw) = pair(stride), pair(dilation)
    p = pair(padding, 4) if isinstance(padding, int) else tuple(padding) * (2 if len(padding) == 2 else 1)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    n, c, hp, wp = xp.shape
    f, cg, kh, kw = w.shape
    oh, ow = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, f, oh, ow))
    fg = f // groups
    for o in range(f):
        c0 = (o // fg) * cg
        for y in range(oh):
            for x_ in range(ow):
                win = xp[:, c0:c0 + cg, y * sh:y * sh + dh * (kh - 1) + 1:dh, x_ * sw:x_ * sw + dw * (kw - 1) + 1:dw]
                out[:, o, y, x_] = np.tensordot(win, w[o].astype(np.float64), axes=3)
    return out


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


@pytest.fixture(autouse=True)
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE", str(tmp_path / "cache"))
    from autotune import runtime

    runtime.clear_caches()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # "no tuned record ... default config"
        yield str(tmp_path / "none.db")


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


# ---- each op vs the definition ------------------------------------------------------------------

@pytest.mark.parametrize("x, w, kw", [
    ((1, 6, 9, 11), (9, 2, 3, 3), dict(stride=(2, 1), padding=(1, 0, 2, 1), dilation=2, groups=3)),
    ((2, 3, 8, 7), (5, 3, 2, 3), dict(stride=1, padding=0, dilation=(1, 2), groups=1)),
])
def test_conv2d_grouped(env, x, w, kw):
    x, w = rand(*x), rand(*w)
    _close(ops.conv2d_grouped(x, w, db=env, **kw), direct_conv2d(x, w, **kw))


def test_depthwise_conv2d_with_multiplier(env):
    x, w = rand(2, 5, 7, 13), rand(10, 1, 3, 3)
    _close(ops.depthwise_conv2d(x, w, stride=2, padding=1, db=env), direct_conv2d(x, w, 2, 1, 1, groups=5))


def test_conv1d(env):
    x, w = rand(2, 6, 37), rand(4, 3, 3)
    want = direct_conv2d(x[:, :, None], w[:, :, None], (1, 2), (0, 2), (1, 2), groups=2)[:, :, 0]
    _close(ops.conv1d(x, w, stride=2, padding=2, dilation=2, groups=2, db=env), want)


@pytest.mark.parametrize("C, F, groups", [(6, 9, 3), (7, 7, 7), (5, 11, 1)])
def test_conv2d_nhwc(env, C, F, groups):
    x, w = rand(1, 9, 11, C), rand(3, 3, C // groups, F)
    want = direct_conv2d(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), 2, 1, 1, groups).transpose(0, 2, 3, 1)
    _close(ops.conv2d_nhwc(x, w, stride=2, padding=1, groups=groups, db=env), want)


def test_conv2d_bias_relu(env):
    x, w, b = rand(1, 5, 9, 11), rand(7, 5, 3, 3), rand(7)
    want = np.maximum(direct_conv2d(x, w, 1, 1) + b[None, :, None, None], 0)
    _close(ops.conv2d_bias_relu(x, w, b, padding=1, db=env), want)


def test_conv2d_bn_folds_batch_norm(env):
    x, w, b = rand(2, 4, 9, 10), rand(6, 2, 3, 3), rand(6)
    mean, gamma, beta = rand(6), rand(6), rand(6)
    var = RNG.uniform(0.5, 2, 6).astype("float32")
    conv = direct_conv2d(x, w, 1, (1, 2), groups=2) + b[None, :, None, None]
    want = (conv - mean[:, None, None]) / np.sqrt(var[:, None, None] + 1e-3) * gamma[:, None, None] + beta[:, None, None]
    wf, bf = fold_batch_norm(w, b, mean, var, gamma, beta, eps=1e-3)
    assert wf.dtype == bf.dtype == np.float32
    _close(ops.conv2d_bn(x, wf, bf, padding=(1, 2), groups=2, db=env), want)


def test_dense_gelu(env):
    x, w, b = rand(13, 29), rand(37, 29), rand(37)
    _close(ops.dense_gelu(x, w, b, db=env), gelu(x.astype(np.float64) @ w.T + b))


def test_hyper_parameters_are_canonical():
    from autotune.ops.conv import _canon

    assert _canon((1, 1, 1, 1), 2) == 1 and _canon((1, 2, 1, 2), 2) == (1, 2) and _canon((2, 2), 2) == 2
    assert _canon((0, 1, 1, 0), 2) == (0, 1, 1, 0)


def test_conv2d_keeps_its_workload_key_and_knobs():
    """Records tuned before dilation, groups and the algorithm knob existed stay valid: the old
    knobs are those of algorithm "nchw" (tests/ops/test_conv2d_nchwc.py loads such a record)."""
    t = autotune.create_task("conv2d", N=1, C=3, H=8, W=8, F=4, KH=3, KW=3, stride=1, padding=1)
    assert t.workload_key == "conv2d(N=1,C=3,H=8,W=8,F=4,KH=3,KW=3,stride=1,padding=1)float32"
    nchw = [n for n, k in t.config_space.knobs.items() if k.when == ("algorithm", ("nchw",))]
    assert nchw == ["tile_f", "tile_y", "tile_x", "tile_rc", "reduce_order", "unroll_kw", "pad", "parallel",
                    "unroll_window"]
    absent = [t.config_space.knobs[name].absent for name in ("algorithm", "parallel", "unroll_window")]
    assert absent == ["nchw", "fused", 0]


# ---- random configs of every template -----------------------------------------------------------

TEMPLATES = [
    ("conv2d", dict(N=1, C=5, H=9, W=11, F=7, KH=3, KW=3, stride=2, padding=1)),
    ("conv2d_grouped", dict(N=1, C=6, H=9, W=11, F=9, KH=3, KW=3, stride=1, padding=(1, 2), dilation=2, groups=3)),
    ("conv2d_grouped", dict(N=1, C=5, H=7, W=13, F=5, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=5)),
    ("conv1d", dict(N=2, C=6, L=37, F=5, K=3, stride=1, padding=1, dilation=1, groups=1)),
    ("conv2d_nhwc", dict(N=1, H=9, W=11, C=6, F=9, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=3)),
    ("conv2d_bias_relu", dict(N=1, C=5, H=9, W=11, F=7, KH=3, KW=3, stride=1, padding=1, dilation=1, groups=1)),
    ("conv2d_bn", dict(N=1, C=4, H=9, W=11, F=6, KH=3, KW=1, stride=(2, 1), padding=(1, 0, 2, 0), dilation=1,
                       groups=2)),
    ("dense_gelu", dict(M=13, N=37, K=19)),
]


PHASED = [
    ("conv2d_grouped", dict(N=1, C=5, H=19, W=23, F=5, KH=7, KW=7, stride=2, padding=3, dilation=1, groups=5)),
    ("conv2d_grouped", dict(N=2, C=3, H=17, W=29, F=3, KH=5, KW=3, stride=(2, 3), padding=(2, 1), dilation=(1, 2),
                            groups=3)),
    ("conv2d_bias_relu", dict(N=1, C=4, H=21, W=13, F=4, KH=5, KW=5, stride=2, padding=2, dilation=1, groups=4)),
    ("conv2d", dict(N=1, C=3, H=19, W=23, F=6, KH=3, KW=3, stride=2, padding=1)),     # a stem: filters share them
    ("conv2d_grouped", dict(N=1, C=6, H=17, W=21, F=8, KH=3, KW=3, stride=(2, 3), padding=1, dilation=1, groups=2)),
]


@pytest.mark.parametrize("op, params", PHASED, ids=[f"{op}-{i}" for i, (op, _) in enumerate(PHASED)])
def test_strided_convs_read_through_stride_phases(op, params):
    """pad "phases" (depthwise convs and convs of few channels): the input split by stride phase
    per task, each tap reading it at stride 1;
    random tiles (tails in rows and columns), parallel loops and unrolls, dilation, unequal
    strides and a fused epilogue against the definition."""
    task = autotune.create_task(op, **params)
    rng, space = random.Random(op), task.config_space
    picks = {space.random_index(rng) for _ in range(300)}
    knobs = {i: task.config(i) for i in picks}
    phased = sorted(i for i, k in knobs.items() if (k["algorithm"].val, k["pad"].val) == ("nchw", "phases"))
    assert len(phased) >= 6
    assert_configs_match_the_reference(task, phased[:6], np.random.default_rng(2))


@pytest.mark.parametrize("op, params", TEMPLATES, ids=[f"{op}-{i}" for i, (op, _) in enumerate(TEMPLATES)])
def test_random_configs_match_numpy(op, params):
    task = autotune.create_task(op, **params)
    assert len(task.config_space) >= 100
    picks = random.Random(op).sample(range(len(task.config_space)), 8)
    assert_configs_match_the_reference(task, [0, *picks], np.random.default_rng(1))


def assert_configs_match_the_reference(task, indices, rng):
    """Each config that instantiates, built and run on random inputs, against the template's
    reference."""
    inputs = task.make_inputs(rng)
    want = task.reference(inputs)[0]
    shape, dtype = task.arg_specs[-1]
    for index in indices:
        try:
            s, args = task.instantiate(index)
        except InstantiationError:
            continue
        out = np.empty(shape, dtype)
        autotune.build(s, args)(*inputs, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=f"config {task.config(index)}")


def test_template_references_match_the_definition():
    rng = np.random.default_rng(3)
    for op, params in TEMPLATES[:3] + TEMPLATES[5:6]:
        task = autotune.create_task(op, **params)
        inputs = task.make_inputs(rng)
        want = direct_conv2d(*inputs[:2], params["stride"], params["padding"], params.get("dilation", 1),
                             params.get("groups", 1))
        if op == "conv2d_bias_relu":
            want = np.maximum(want + inputs[2][None, :, None, None], 0)
        _close(task.reference(inputs)[0], want)


# ---- bad input ------------------------------------------------------------------------------------

X4, W4, B = np.ones((1, 6, 8, 8), "float32"), np.ones((4, 3, 3, 3), "float32"), np.ones(4, "float32")


@pytest.mark.parametrize("call, exc, match", [
    (lambda: ops.conv2d_grouped(X4, W4), ValueError, r"conv2d_grouped: argument w has 3 input channels.*groups=1"),
    (lambda: ops.conv2d_grouped(X4, np.ones((5, 3, 3, 3), "float32"), groups=2), ValueError, "5 output channels"),
    (lambda: ops.conv2d_grouped(X4, W4, groups=0), ValueError, "argument groups"),
    (lambda: ops.conv2d_grouped(X4, W4, groups=2, stride=0), ValueError, "conv2d_grouped: stride"),
    (lambda: ops.conv2d_grouped(X4, W4, groups=2, stride=1.5), TypeError, "conv2d_grouped: stride"),
    (lambda: ops.conv2d_grouped(X4, W4, groups=2, padding=(1, 2, 3)), TypeError, "conv2d_grouped: padding"),
    (lambda: ops.conv2d_grouped(X4, W4, groups=2, padding=-1), ValueError, "padding"),
    (lambda: ops.conv2d_grouped(X4, W4, groups=2, dilation=5), ValueError, "larger than the padded input"),
    (lambda: ops.conv2d_grouped(X4[0], W4, groups=2), ValueError, "conv2d_grouped: argument x must be 4-d"),
    (lambda: ops.conv2d_grouped(X4, W4.astype("float64"), groups=2), TypeError, "must share a dtype"),
    (lambda: ops.conv2d_grouped(X4.astype("int32"), W4.astype("int32"), groups=2), TypeError,
     "conv2d_grouped: argument x must be float32 or float64"),
    (lambda: ops.conv2d_grouped(X4.tolist(), W4, groups=2), TypeError, "argument x must be a numpy array"),
    (lambda: ops.depthwise_conv2d(X4, W4), ValueError, r"depthwise_conv2d: argument w must have shape \(C \*"),
    (lambda: ops.conv2d_bias_relu(X4, W4, np.ones(5, "float32"), groups=2), ValueError,
     r"conv2d_bias_relu: argument bias must have shape \(4,\)"),
    (lambda: ops.conv2d_bn(X4, W4, B[:, None], groups=2), ValueError, "conv2d_bn: argument b_folded must be 1-d"),
    (lambda: ops.conv1d(X4[0], W4[..., 0], groups=1), ValueError, "conv1d: argument w has 3 input channels"),
    (lambda: ops.conv2d_nhwc(X4, W4), ValueError, "conv2d_nhwc: argument w has 3 input channels"),
    (lambda: ops.dense_gelu(X4[0, 0], np.ones((4, 7), "float32"), B), ValueError, "dense_gelu: argument w"),
    (lambda: ops.dense_gelu(X4[0, 0], np.ones((4, 8), "float32"), B[:3]), ValueError, "dense_gelu: argument bias"),
])
def test_bad_input_names_op_and_argument(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("op, params, match", [
    ("conv2d_grouped", dict(N=1, C=6, H=8, W=8, F=4, KH=3, KW=3, stride=1, padding=0, dilation=1, groups=4), "groups"),
    ("conv1d", dict(N=1, C=2, L=4, F=2, K=3, stride=1, padding=0, dilation=2, groups=1), "larger than"),
    ("conv2d_nhwc", dict(N=1, H=8, W=8, C=2, F=2, KH=3, KW=3, stride=(1, 1, 1), padding=0, dilation=1, groups=1),
     "stride"),
])
def test_create_task_errors_name_the_parameter(op, params, match):
    with pytest.raises((ValueError, TypeError), match=match):
        autotune.create_task(op, **params)
