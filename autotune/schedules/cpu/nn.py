"""Normalization, softmax family, attention and loss on the CPU: one template per op.

The reduction + pointwise fusion: each template computes every row statistic (max, sum, mean,
variance) and every row-sized intermediate at the output's row loop (`compute_at`), so a row is
read from memory once and then from cache, and intermediates live in small local buffers. Row
loops run in parallel; row reductions run as vector lanes (`lanes` partial accumulators, see
`autotune.topi.nn`); pointwise row loops are vectorized with a width knob.

Attention is flash attention: one kernel, per query tile an online softmax over key blocks, with
memory O(tile_q x (tile_k + head_dim)) per thread (see `autotune.topi.flash_attention`).

Float parameters `eps` and `scale` are floats, written `eps=1e-05` on the command line and in
workload keys. Attention's scale 0.0 means the default 1 / sqrt(head_dim).
"""
from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from ... import te
from ...dtype import dtype_info
from ...te.tensor import ComputeOp, ExternOp
from ...topi import nn as topi_nn
from ...topi.flash_attention import Tiling, flash_attention
from ...topi.nn import ROW_ELEMWISE, ROW_PARTIAL, ROW_TAIL
from ..schedule import Schedule
from ..task import template
from .elementwise import as_shape
from .rules import (
    accumulators,
    ascending_first,
    closest,
    cpu_facts,
    enough_chunks,
    first,
    lanes,
    largest_fitting,
    vector_tile,
    worth_threads,
)

DEFAULT_SCALE = 0.0    # attention: scale = 1 / sqrt(head_dim)


def _eps(eps: float, op: str) -> float:
    if not (eps >= 0 and math.isfinite(eps)):
        raise ValueError(f"{op}: eps must be finite and >= 0, got {eps}")
    return eps


# -- the shared row schedule ---------------------------------------------------------------------
ROW_TILES = (8, 16, 32, 64)
BN_VECTORS = (8, 16, 32, 64, 128)
PARTIALS = (1, 8, 16, 32, 64)


def partial_sums(cfg, dtype: str, n: int) -> int:
    """Rule for the lane partials of a row reduction over n elements: two vectors of them (two
    adds in flight) when the row holds 8 vectors, one vector when it holds one, else none (1)."""
    width = lanes(cfg, dtype)
    return closest(2 * width if n >= 8 * width else width if n >= width else 1, PARTIALS)


def row_knobs(cfg, M: int, N: int, dtype: str) -> None:
    """Rules: tile_j the vector tile of a row (`rules.vector_tile`), `partial_sums` lanes, rows
    in parallel when there are >= 2 and `rules.worth_threads` says so for M x N."""
    tile = closest(vector_tile(cfg, dtype, N), ROW_TILES)
    cfg.define_split("tile_j", N, 2, policy="candidate", candidate=[[-1, v] for v in ascending_first(tile, ROW_TILES)])
    cfg.define_knob("lanes", ascending_first(partial_sums(cfg, dtype, N), PARTIALS))
    cfg.define_knob("parallel", first(int(M > 1 and worth_threads(cfg, M * N)), [0, 1]))


def schedule_row_stages(s: Schedule, out: te.Tensor, row: Any, vec: int) -> None:
    """Compute every stage feeding `out` at `out`'s loop `row`.

    Lane partials loop over blocks outside the lanes (a vector accumulator), tails and folds are
    one vector op, row-sized pointwise stages are split by `vec`, vectorized and kept in `out`'s
    row (`store_in`), which `out` then scales in place: a buffer of their own would make `out`'s
    stores, which miss the cache, a pass of their own (softmax 37 x 50257 on a Zen 5: 196 -> 165
    us, 4096 x 1024: 658 -> 514 us).
    """
    for st in list(s.stages):
        op = st.op
        if st is s[out] or not isinstance(op, ComputeOp) or st.attach == "inline":
            continue
        st.compute_at(s[out], row)
        if op.tag == ROW_PARTIAL:
            lane, ko = op.axis[-1], op.reduce_axis[0]
            st.reorder(ko, lane)
            st.vectorize(lane)
        elif op.tag == ROW_TAIL:
            st.vectorize(op.axis[-1])
        elif op.tag == ROW_ELEMWISE:
            _, ji = st.split(op.axis[-1], vec)
            st.vectorize(ji)
            st.store_in(s[out])


def _rowwise(cfg, out: te.Tensor) -> Schedule:
    """The schedule of a 2-d (rows x n) output: rows parallel, statistics at the row."""
    s = te.create_schedule(out.op)
    i, j = out.op.axis
    vec = cfg["tile_j"].size[-1]
    schedule_row_stages(s, out, i, vec)
    _, ji = cfg["tile_j"].apply(s, out, j)
    s[out].vectorize(ji)
    if cfg["parallel"].val:
        s[out].parallel(i)
    return s


def _check_rows(op: str, M: int, N: int) -> None:
    if M < 1 or N < 1:
        raise ValueError(f"{op}: M and N must be >= 1, got M={M}, N={N}")


# -- softmax, log_softmax ------------------------------------------------------------------------
# The references are numpy as a user writes it, in the inputs' dtype: the checks' oracle and the
# baseline of the "x numpy" figures.
def softmax_reference(x: np.ndarray, **_: Any) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax_reference(x: np.ndarray, **_: Any) -> np.ndarray:
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


@template("softmax", reference=softmax_reference, description="softmax over the rows of X (M x N), fused")
def softmax_template(cfg, M: int, N: int, dtype: str = "float32"):
    """Row max, exp, row sum and scaling in one pass per row (stats at the row loop).

    Default: the row rules (`row_knobs`); exp stored in Y's row (see `schedule_row_stages`),
    not recomputed: reading a row back costs less than a second exp per element, even from
    memory (a Zen 5, 2 threads: 6 x 131101 71 vs 95 us, 8 x 300007 266 vs 314 us)."""
    _check_rows("softmax", M, N)
    row_knobs(cfg, M, N, dtype)
    cfg.define_knob("store_exp", [1, 0])
    X = te.placeholder((M, N), dtype, name="X")
    Y = topi_nn.softmax(X, lanes=cfg["lanes"].val, store_exp=bool(cfg["store_exp"].val))
    return _rowwise(cfg, Y), [X, Y]


@template("log_softmax", reference=log_softmax_reference, description="log_softmax over the rows of X (M x N), fused")
def log_softmax_template(cfg, M: int, N: int, dtype: str = "float32"):
    """x - max - log(sum(exp(x - max))) with the row statistics at the row loop. Default: the row rules
    (`row_knobs`)."""
    _check_rows("log_softmax", M, N)
    row_knobs(cfg, M, N, dtype)
    X = te.placeholder((M, N), dtype, name="X")
    Y = topi_nn.log_softmax(X, lanes=cfg["lanes"].val)
    return _rowwise(cfg, Y), [X, Y]


# -- layer_norm, rms_norm ------------------------------------------------------------------------
def layer_norm_reference(x, gamma, beta, eps: float = 1e-5, **_: Any) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + x.dtype.type(eps)) * gamma + beta)


def rms_norm_reference(x, gamma, eps: float = 1e-6, **_: Any) -> np.ndarray:
    ms = (x * x).mean(axis=-1, keepdims=True)
    return x / np.sqrt(ms + x.dtype.type(eps)) * gamma


@template("layer_norm", reference=layer_norm_reference,
          description="layer norm over the rows of X (M x N), gamma/beta (N,); eps a float")
def layer_norm_template(cfg, M: int, N: int, eps: float = 1e-5, dtype: str = "float32"):
    """Row mean, then row variance (two passes over the cached row), then the affine output. Default: the row rules
    (`row_knobs`)."""
    _check_rows("layer_norm", M, N)
    e = _eps(eps, "layer_norm")
    row_knobs(cfg, M, N, dtype)
    X = te.placeholder((M, N), dtype, name="X")
    gamma = te.placeholder((N,), dtype, name="gamma")
    beta = te.placeholder((N,), dtype, name="beta")
    Y = topi_nn.layer_norm(X, gamma, beta, e, lanes=cfg["lanes"].val)
    return _rowwise(cfg, Y), [X, gamma, beta, Y]


@template("rms_norm", reference=rms_norm_reference,
          description="RMS norm over the rows of X (M x N), gamma (N,); eps a float")
def rms_norm_template(cfg, M: int, N: int, eps: float = 1e-6, dtype: str = "float32"):
    """Row mean of squares, then x * rsqrt(ms + eps) * gamma. Default: the row rules
    (`row_knobs`)."""
    _check_rows("rms_norm", M, N)
    e = _eps(eps, "rms_norm")
    row_knobs(cfg, M, N, dtype)
    X = te.placeholder((M, N), dtype, name="X")
    gamma = te.placeholder((N,), dtype, name="gamma")
    Y = topi_nn.rms_norm(X, gamma, e, lanes=cfg["lanes"].val)
    return _rowwise(cfg, Y), [X, gamma, Y]


# -- batch_norm (inference) ----------------------------------------------------------------------
def batch_norm_reference(x, mean, var, gamma, beta, eps: float = 1e-5, **_: Any) -> np.ndarray:
    shape = (1, -1, 1, 1)
    with np.errstate(invalid="ignore"):
        scale = gamma / np.sqrt(var + x.dtype.type(eps))
    return (x - mean.reshape(shape)) * scale.reshape(shape) + beta.reshape(shape)


@template("batch_norm", reference=batch_norm_reference,
          description="inference batch norm, NCHW X, per-channel mean/var/gamma/beta; eps a float")
def batch_norm_template(cfg, N: int, C: int, H: int, W: int, eps: float = 1e-5, dtype: str = "float32"):
    """Per channel plane: the channel's scale once, then one vectorized pass over the plane.

    Default: rows of w (fuse_hw 0, see below), vec the vector tile of a row (`rules.vector_tile`),
    planes in parallel when they give >= 4 chunks per core, else the fused loop, none when
    `rules.worth_threads` says the tensor is too small."""
    if min(N, C, H, W) < 1:
        raise ValueError(f"batch_norm: N, C, H, W must be >= 1, got {(N, C, H, W)}")
    e = _eps(eps, "batch_norm")
    # fuse_hw=1 (one loop over the plane) waits on two simplifier rules: the index of a fused
    # h*w, (f // W) * W + f % W, is not folded back to f (scalar lane addresses), and a split
    # tail's guard on it has a division (scalar loop); rows of w vectorize cleanly today
    cfg.define_knob("fuse_hw", [0, 1])
    cfg.define_knob("vec", ascending_first(closest(vector_tile(cfg, dtype, W), BN_VECTORS), BN_VECTORS))
    threads = worth_threads(cfg, N * C * H * W)
    cfg.define_knob("parallel", first("plane" if threads and enough_chunks(cfg, N * C) else "fused" if threads
                                      else "none", ["plane", "fused", "none"]))
    X = te.placeholder((N, C, H, W), dtype, name="X")
    stats = [te.placeholder((C,), dtype, name=nm) for nm in ("mean", "var", "gamma", "beta")]
    mean, var, gamma, beta = stats
    Y = topi_nn.batch_norm(X, mean, var, gamma, beta, e)
    s = te.create_schedule(Y.op)
    n, c, h, w = Y.op.axis
    plane = s[Y].fuse(n, c)
    inner = s[Y].fuse(h, w) if cfg["fuse_hw"].val else w
    outer, vi = s[Y].split(inner, min(cfg["vec"].val, inner.extent))
    s[Y].vectorize(vi)
    at = plane
    if cfg["parallel"].val == "fused":
        at = s[Y].fuse(plane, h, outer) if not cfg["fuse_hw"].val else s[Y].fuse(plane, outer)
        s[Y].parallel(at)
    elif cfg["parallel"].val == "plane":
        s[Y].parallel(plane)
    scale = next(t for t in Y.op.input_tensors if t.name == "scale")
    s[scale].compute_at(s[Y], at)
    return s, [X, *stats, Y]


# -- instance_norm -------------------------------------------------------------------------------
def instance_norm_reference(x, scale, bias, eps: float = 1e-5, **_: Any) -> np.ndarray:
    axes = tuple(range(2, x.ndim))
    plane = (-1,) + (1,) * (x.ndim - 2)
    mean, var = x.mean(axis=axes, keepdims=True), x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + x.dtype.type(eps)) * scale.reshape(plane) + bias.reshape(plane)


@template("instance_norm", reference=instance_norm_reference,
          description="instance norm of X (N, C, *spatial) per (n, c) plane, scale/bias (C,); eps a float")
def instance_norm_template(cfg, shape: Any, eps: float = 1e-5, dtype: str = "float32"):
    """Per (n, c) plane, in parallel: the plane's mean and variance at the plane loop (two passes
    over the plane, from cache), then the affine output, vectorized along the last spatial axis.

    Default: the row rules of `row_knobs` with the plane as the row: tile_j the vector tile of
    the last spatial axis, `partial_sums` lanes over the plane flattened (a serial sum waited on
    the add latency: 64 planes of 56x56 on a Zen 5, 2 threads, 156 us against onnxruntime's 40),
    planes in parallel when there are >= 2 and `rules.worth_threads` says so for the whole tensor."""
    dims = as_shape(shape, "instance_norm", "shape")
    e = _eps(eps, "instance_norm")
    if len(dims) < 3:
        raise ValueError(f"instance_norm: parameter shape must be (N, C, *spatial) with a spatial axis, got {dims}")
    last, planes = dims[-1], dims[0] * dims[1]
    tiles = ascending_first(closest(vector_tile(cfg, dtype, last), ROW_TILES), ROW_TILES)
    cfg.define_split("tile_j", last, 2, policy="candidate", candidate=[[-1, v] for v in tiles])
    cfg.define_knob("parallel", first(int(planes > 1 and worth_threads(cfg, math.prod(dims))), [0, 1]))
    cfg.define_knob("lanes", ascending_first(partial_sums(cfg, dtype, math.prod(dims[2:])), PARTIALS), absent=1)
    X = te.placeholder(dims, dtype, name="X")
    scale, bias = (te.placeholder((dims[1],), dtype, name=nm) for nm in ("scale", "bias"))
    Y = topi_nn.instance_norm(X, scale, bias, e, lanes=cfg["lanes"].val)
    s = te.create_schedule(Y.op)
    n, c, *_, w = Y.op.axis
    plane = s[Y].fuse(n, c)
    schedule_row_stages(s, Y, plane, cfg["tile_j"].size[-1])
    _, wi = cfg["tile_j"].apply(s, Y, w)
    s[Y].vectorize(wi)
    if cfg["parallel"].val:
        s[Y].parallel(plane)
    return s, [X, scale, bias, Y]


# -- cross-entropy -------------------------------------------------------------------------------
def cross_entropy_reference(logits, labels, **_: Any) -> np.ndarray:
    m = logits.max(axis=1)
    lse = m + np.log(np.exp(logits - m[:, None]).sum(axis=1))
    lab = np.clip(labels, 0, logits.shape[1] - 1)      # the kernel clamps labels (memory safety)
    return lse - logits[np.arange(len(lab)), lab]


@template("cross_entropy", reference=cross_entropy_reference,
          description="softmax cross-entropy per row: logits N x C, int32 labels (N,) -> loss (N,)")
def cross_entropy_template(cfg, N: int, C: int, dtype: str = "float32"):
    """Row max and sum of exp at the row loop; loss = max + log(sum) - logits[label].

    Default: `partial_sums` lanes; rows in parallel when there are >= 2 and `rules.worth_threads`
    says so for N x C."""
    if N < 1 or C < 1:
        raise ValueError(f"cross_entropy: N and C must be >= 1, got N={N}, C={C}")
    cfg.define_knob("lanes", ascending_first(partial_sums(cfg, dtype, C), PARTIALS))
    cfg.define_knob("parallel", first(int(N > 1 and worth_threads(cfg, N * C)), [0, 1]))
    logits = te.placeholder((N, C), dtype, name="logits")
    labels = te.placeholder((N,), "int32", name="labels")
    loss = topi_nn.cross_entropy(logits, labels, lanes=cfg["lanes"].val)
    s = te.create_schedule(loss.op)
    (i,) = loss.op.axis
    schedule_row_stages(s, loss, i, 16)
    if cfg["parallel"].val:
        s[loss].parallel(i)
    return s, [logits, labels, loss]


# -- attention -----------------------------------------------------------------------------------
def attention_scale(scale: float, head_dim: int) -> float:
    """The scale an attention task applies: its parameter, or 1/sqrt(D) for DEFAULT_SCALE (so the
    default is one workload whether it is left out or passed)."""
    if not math.isfinite(scale):
        raise ValueError(f"attention: scale must be finite, got {scale}")
    return 1.0 / math.sqrt(head_dim) if scale == DEFAULT_SCALE else scale


def attention_reference(q, k, v, causal: int = 0, scale: float = DEFAULT_SCALE, **_: Any) -> np.ndarray:
    s = (q @ k.swapaxes(-1, -2)) * q.dtype.type(attention_scale(scale, q.shape[-1]))
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, q.dtype.type(-np.inf))
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return (s / s.sum(axis=-1, keepdims=True)) @ v


@template("attention", reference=attention_reference,
          description="fused attention, q/k/v (batch, heads, seq, head_dim); causal 0/1; scale a float, "
                      "0.0 = 1/sqrt(head_dim)")
def attention_template(cfg, batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, causal: int,
                       scale: float = DEFAULT_SCALE, dtype: str = "float32"):
    """Flash attention (`autotune.topi.flash_attention`): per query tile, in parallel over batch x
    heads x tiles, key blocks with an online softmax; scores and output rows register-blocked.
    Memory per thread tile_q x (tile_k + head_dim), whatever seq_k; causal skips masked blocks.

    Default (`_define_attention_knobs`): tile_q the largest giving >= 4 tiles per core whose
    output rows (tile_q x head_dim) fit in half of L1; tile_k the largest whose K and V blocks and
    score tile (tile_k x (2 head_dim + tile_q)) fit in L1; score and output vectors as wide as
    the axis allows up to 4 x lanes; rows the most whose accumulators fit 3/4 of the registers."""
    if min(batch, heads, seq_q, seq_k, head_dim) < 1 or causal not in (0, 1):
        raise ValueError(f"attention: sizes must be >= 1 and causal 0 or 1, got batch={batch}, heads={heads}, "
                         f"seq_q={seq_q}, seq_k={seq_k}, head_dim={head_dim}, causal={causal}")
    sc = attention_scale(scale, head_dim)
    _define_attention_knobs(cfg, batch * heads, seq_q, seq_k, head_dim, dtype)
    tiling = Tiling(*(cfg[k].val for k in ("tile_q", "tile_k", "rows", "score_width", "out_width")))
    cfg.raise_if(tiling.rows > tiling.tile_q, "register rows exceed the query tile")
    cfg.raise_if(tiling.score_width > tiling.tile_k, "score vector wider than the key block")
    shape_q, shape_kv = (batch, heads, seq_q, head_dim), (batch, heads, seq_k, head_dim)
    q = te.placeholder(shape_q, dtype, name="q")
    k = te.placeholder(shape_kv, dtype, name="k")
    v = te.placeholder(shape_kv, dtype, name="v")
    out = flash_attention(q, k, v, scale=sc, causal=bool(causal), tiling=tiling)
    s = te.create_schedule(out.op)
    _schedule_key_pack(s[cast(ExternOp, out.op).inputs[1]])   # flash_attention is an extern op
    return s, [q, k, v, out]


def _capped(values: tuple[int, ...], limit: int) -> list[int]:
    """Candidates no larger than the axis, ascending (larger ones repeat the axis's extent)."""
    return sorted(set(min(x, limit) for x in values))


def _define_attention_knobs(cfg, planes: int, seq_q: int, seq_k: int, head_dim: int, dtype: str) -> None:
    """The flash-attention tiling knobs, each with its rule's value first (see attention_template)."""
    nbytes, l1, width = dtype_info(dtype).bytes, cpu_facts(cfg).l1d_bytes, lanes(cfg, dtype)
    tq_values, tk_values = _capped((8, 16, 32, 64), seq_q), _capped((32, 64, 128, 256), seq_k)
    tq = largest_fitting(tq_values, lambda t: enough_chunks(cfg, planes * -(-seq_q // t))
                         and t * head_dim * nbytes <= l1 // 2)
    tk = largest_fitting(tk_values, lambda t: t * (2 * head_dim + tq) * nbytes <= l1)
    sw_values, ow_values = _capped((16, 32, 64), seq_k), _capped((16, 32, 64), head_dim)
    sw = largest_fitting(sw_values, lambda w: w <= min(4 * width, tk))
    ow = largest_fitting(ow_values, lambda w: w <= 4 * width)
    rows = largest_fitting((1, 2, 4, 8), lambda r: r * -(-max(sw, ow) // width) <= accumulators(cfg) and r <= tq)
    cfg.define_knob("tile_q", first(tq, tq_values))
    cfg.define_knob("tile_k", first(tk, tk_values))
    cfg.define_knob("rows", first(rows, [1, 2, 4, 8]))
    cfg.define_knob("score_width", first(sw, sw_values))
    cfg.define_knob("out_width", first(ow, ow_values))


def _schedule_key_pack(st) -> None:
    b, h, d, j = st.op.axis
    st.parallel(st.fuse(b, h, d))
    _, ji = st.split(j, 16)
    st.vectorize(ji)
