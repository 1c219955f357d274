"""Normalization, softmax family, attention and loss as te computes (TVM topi's nn ops).

Every op reduces over the last axis (the "row") and then applies a pointwise function of the
row statistics: the reduction + pointwise fusion class. The schedules in
`autotune.schedules.cpu.nn` compute every row statistic at the output's row loop.

`lanes` (a layout choice, not a change of the math): te has no rfactor, so a row reduction that
should run as SIMD lanes is written here as `lanes` partial accumulators (element j goes to lane
j % lanes), a tail stage for the last n % lanes elements, folds that halve the lanes with
vector ops down to FOLD_TO, and a horizontal reduction of those. `lanes=1` is the plain
one-stage reduction. Float results differ only by summation order.

Stage tags tell the schedule what each stage is (see the ROW_* constants).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .. import te
from ..te.expr import Expr, Var
from .reduction import unflatten

ROW_PARTIAL = "row_partial"      # (..., lanes): lane-wise partial reduction over the row's blocks
ROW_TAIL = "row_tail"            # (..., lanes): partials with the tail elements or the upper half folded in
ROW_REDUCE = "row_reduce"        # (...,): the row statistic (a reduction over the row or over the lanes)
ROW_SCALAR = "row_scalar"        # (...,): a pointwise function of row statistics (1 / sum, rsqrt(var))
ROW_ELEMWISE = "row_elemwise"    # (..., n): a pointwise stage over the row (exp(x - max))
KEY_PACK = "key_pack"            # attention: K transposed to (b, h, d, j) so scores vectorize over keys

FOLD_TO = 8                      # lane partials are halved down to this many before the serial sum

Value = Callable[[Sequence[Var], Expr], Expr]


def _reducer(combiner: str):
    return {"sum": te.sum, "max": te.max, "min": te.min}[combiner]


def _combine(combiner: str, a: Expr, b: Expr) -> Expr:
    return {"sum": lambda: a + b, "max": lambda: te.maximum(a, b), "min": lambda: te.minimum(a, b)}[combiner]()


def row_reduce(value: Value, lead: Sequence[int], n: int, combiner: str, lanes: int = 1,
               name: str = "r") -> te.Tensor:
    """r[idx] = combiner over j in [0, n) of value(idx, j), for idx over the `lead` shape.

    With lanes > 1 (and n >= lanes) the reduction is split into lane partials, a tail and a
    horizontal reduction (see the module docstring), so the schedule can vectorize the lanes.
    """
    lead = tuple(lead)
    red = _reducer(combiner)
    q, r = divmod(n, lanes)
    if lanes <= 1 or q == 0:
        k = te.reduce_axis((0, n), name=f"{name}.k")
        return te.compute(lead, lambda *idx: red(value(idx, k.var), axis=k), name=name, tag=ROW_REDUCE)
    ko = te.reduce_axis((0, q), name=f"{name}.ko")
    part = te.compute((*lead, lanes), lambda *il: red(value(il[:-1], ko.var * lanes + il[-1]), axis=ko),
                      name=f"{name}.part", tag=ROW_PARTIAL)
    if r:
        prev = part
        # the loads of the tail value sit in the if_then_else branch, so they are predicated:
        # masked-off lanes (l >= r) never read past the row
        part = te.compute((*lead, lanes), lambda *il: te.if_then_else(
            il[-1] < r, _combine(combiner, prev[il], value(il[:-1], q * lanes + il[-1])), prev[il]),
            name=f"{name}.tail", tag=ROW_TAIL)
    while lanes > FOLD_TO and lanes % 2 == 0:   # halve the lanes with vector ops, not a serial chain
        lanes //= 2
        part = _fold(part, lanes, combiner, name)
    kl = te.reduce_axis((0, lanes), name=f"{name}.kl")
    return te.compute(lead, lambda *idx: red(part[(*idx, kl.var)], axis=kl), name=name, tag=ROW_REDUCE)


def _fold(part: te.Tensor, half: int, combiner: str, name: str) -> te.Tensor:
    """part[..., l] combined with part[..., l + half]: one vector op on the lane partials."""
    lead = part.shape[:-1]
    return te.compute((*lead, half), lambda *il: _combine(combiner, part[il], part[(*il[:-1], il[-1] + half)]),
                      name=f"{name}.fold{half}", tag=ROW_TAIL)


def _rows(x: te.Tensor, op: str) -> tuple[tuple[int, ...], int]:
    if x.ndim < 2:
        raise ValueError(f"{op}: expected a tensor of at least 2 dimensions (rows x row length), got shape "
                         f"{x.shape}; reshape a vector to (1, n)")
    return tuple(x.shape[:-1]), x.shape[-1]


def _check_vector(op: str, name: str, t: te.Tensor, n: int, dtype: str) -> None:
    if t.shape != (n,):
        raise ValueError(f"{op}: {name} must have shape ({n},), got {t.shape}")
    if t.dtype != dtype:
        raise TypeError(f"{op}: {name} has dtype {t.dtype}, expected {dtype}")


def softmax(x: te.Tensor, lanes: int = 1, store_exp: bool = True, name: str = "Y") -> te.Tensor:
    """y = exp(x - max(x)) / sum(exp(x - max(x))) over the last axis.

    store_exp: keep exp(x - max) in a row stage (one exp per element) instead of recomputing it
    in the sum and in the output (no row buffer).
    """
    lead, n = _rows(x, "softmax")
    mx = row_reduce(lambda idx, j: x[(*idx, j)], lead, n, "max", lanes, name="max")

    def shifted_exp(idx, j):
        return te.exp(x[(*idx, j)] - mx[idx])

    if store_exp:
        ex = te.compute(x.shape, lambda *ij: shifted_exp(ij[:-1], ij[-1]), name="exp", tag=ROW_ELEMWISE)
        value = lambda idx, j: ex[(*idx, j)]  # noqa: E731
    else:
        value = shifted_exp
    sm = row_reduce(value, lead, n, "sum", lanes, name="sum")
    inv = te.compute(lead, lambda *idx: te.const(1.0, x.dtype) / sm[idx], name="inv_sum", tag=ROW_SCALAR)
    return te.compute(x.shape, lambda *ij: value(ij[:-1], ij[-1]) * inv[ij[:-1]], name=name)


def log_softmax(x: te.Tensor, lanes: int = 1, name: str = "Y") -> te.Tensor:
    """y = x - max(x) - log(sum(exp(x - max(x)))) over the last axis."""
    lead, n = _rows(x, "log_softmax")
    mx = row_reduce(lambda idx, j: x[(*idx, j)], lead, n, "max", lanes, name="max")
    sm = row_reduce(lambda idx, j: te.exp(x[(*idx, j)] - mx[idx]), lead, n, "sum", lanes, name="sum")
    lse = te.compute(lead, lambda *idx: mx[idx] + te.log(sm[idx]), name="logsumexp", tag=ROW_SCALAR)
    return te.compute(x.shape, lambda *ij: x[ij] - lse[ij[:-1]], name=name)


def layer_norm(x: te.Tensor, gamma: te.Tensor, beta: te.Tensor, eps: float, lanes: int = 1,
               name: str = "Y") -> te.Tensor:
    """y = (x - mean) / sqrt(var + eps) * gamma + beta over the last axis (biased variance,
    computed in two passes over the row: mean first, then the squared deviations)."""
    lead, n = _rows(x, "layer_norm")
    _check_vector("layer_norm", "gamma", gamma, n, x.dtype)
    _check_vector("layer_norm", "beta", beta, n, x.dtype)
    inv_n = te.const(1.0 / n, x.dtype)
    total = row_reduce(lambda idx, j: x[(*idx, j)], lead, n, "sum", lanes, name="sum")
    mean = te.compute(lead, lambda *idx: total[idx] * inv_n, name="mean", tag=ROW_SCALAR)

    def sq_dev(idx, j):
        d = x[(*idx, j)] - mean[idx]
        return d * d

    ssq = row_reduce(sq_dev, lead, n, "sum", lanes, name="sqdev")
    rstd = te.compute(lead, lambda *idx: te.rsqrt(ssq[idx] * inv_n + te.const(eps, x.dtype)), name="rstd",
                      tag=ROW_SCALAR)
    return te.compute(x.shape, lambda *ij: (x[ij] - mean[ij[:-1]]) * rstd[ij[:-1]] * gamma[ij[-1]]
                      + beta[ij[-1]], name=name)


def rms_norm(x: te.Tensor, gamma: te.Tensor, eps: float, lanes: int = 1, name: str = "Y") -> te.Tensor:
    """y = x / sqrt(mean(x^2) + eps) * gamma over the last axis."""
    lead, n = _rows(x, "rms_norm")
    _check_vector("rms_norm", "gamma", gamma, n, x.dtype)
    ssq = row_reduce(lambda idx, j: x[(*idx, j)] * x[(*idx, j)], lead, n, "sum", lanes, name="sumsq")
    rrms = te.compute(lead, lambda *idx: te.rsqrt(ssq[idx] * te.const(1.0 / n, x.dtype) + te.const(eps, x.dtype)),
                      name="rrms", tag=ROW_SCALAR)
    return te.compute(x.shape, lambda *ij: x[ij] * rrms[ij[:-1]] * gamma[ij[-1]], name=name)


def batch_norm(x: te.Tensor, mean: te.Tensor, var: te.Tensor, gamma: te.Tensor, beta: te.Tensor,
               eps: float, name: str = "Y") -> te.Tensor:
    """Inference batch norm of NCHW x with per-channel statistics:
    y = (x - mean[c]) * (gamma[c] / sqrt(var[c] + eps)) + beta[c].

    The per-channel scale is its own stage so a schedule computes it once per channel plane
    instead of once per element.
    """
    if x.ndim != 4:
        raise ValueError(f"batch_norm: x must be NCHW (4 dimensions), got shape {x.shape}")
    c = x.shape[1]
    for nm, t in (("mean", mean), ("var", var), ("gamma", gamma), ("beta", beta)):
        _check_vector("batch_norm", nm, t, c, x.dtype)
    scale = te.compute((c,), lambda ch: gamma[ch] * te.rsqrt(var[ch] + te.const(eps, x.dtype)), name="scale")
    return te.compute(x.shape, lambda b, ch, h, w: (x[b, ch, h, w] - mean[ch]) * scale[ch] + beta[ch], name=name)


def instance_norm(x: te.Tensor, scale: te.Tensor, bias: te.Tensor, eps: float, lanes: int = 1,
                  name: str = "Y") -> te.Tensor:
    """Instance norm of x (N, C, *spatial): per (n, c) plane, y = (x - mean) / sqrt(var + eps) *
    scale[c] + bias[c] with the plane's mean and biased variance (two passes: mean, then squared
    deviations). The statistics reduce over the plane flattened (its elements are contiguous),
    as `lanes` partials, so they are (N, C) stages a schedule computes at the output's plane loop."""
    if x.ndim < 3:
        raise ValueError(f"instance_norm: x must be (N, C, *spatial) with a spatial axis, got shape {x.shape}")
    c, spatial = x.shape[1], x.shape[2:]
    for nm, t in (("scale", scale), ("bias", bias)):
        _check_vector("instance_norm", nm, t, c, x.dtype)
    size = math.prod(spatial)
    inv_n = te.const(1.0 / size, x.dtype)

    def element(nc: Sequence[Var], j: Expr) -> Expr:
        """x at position j of plane nc."""
        return x[(*nc, *unflatten(j, spatial))]

    total = row_reduce(element, x.shape[:2], size, "sum", lanes, name="sum")
    mean = te.compute(x.shape[:2], lambda n, ch: total[n, ch] * inv_n, name="mean", tag=ROW_SCALAR)

    def sq_dev(nc: Sequence[Var], j: Expr) -> Expr:
        d = element(nc, j) - mean[tuple(nc)]
        return d * d

    ssq = row_reduce(sq_dev, x.shape[:2], size, "sum", lanes, name="sqdev")
    rstd = te.compute(x.shape[:2], lambda n, ch: te.rsqrt(ssq[n, ch] * inv_n + te.const(eps, x.dtype)), name="rstd",
                      tag=ROW_SCALAR)
    return te.compute(x.shape, lambda *i: (x[i] - mean[i[:2]]) * rstd[i[:2]] * scale[i[1]] + bias[i[1]], name=name)


def cross_entropy(logits: te.Tensor, labels: te.Tensor, lanes: int = 1, name: str = "loss") -> te.Tensor:
    """loss[i] = logsumexp(logits[i, :]) - logits[i, labels[i]] (softmax cross-entropy, no reduction
    over the batch). The logsumexp is max-shifted, so large logits do not overflow. A label outside
    [0, C) is clamped to the nearest class in the kernel (memory safety); `autotune.ops` rejects it."""
    if logits.ndim != 2:
        raise ValueError(f"cross_entropy: logits must be N x C (2 dimensions), got shape {logits.shape}")
    n, c = logits.shape
    if labels.shape != (n,) or labels.dtype != "int32":
        raise ValueError(f"cross_entropy: labels must be int32 of shape ({n},), got {labels.dtype} {labels.shape}")
    mx = row_reduce(lambda idx, j: logits[(*idx, j)], (n,), c, "max", lanes, name="max")
    se = row_reduce(lambda idx, j: te.exp(logits[(*idx, j)] - mx[idx]), (n,), c, "sum", lanes, name="sumexp")
    lse = te.compute((n,), lambda i: mx[i] + te.log(se[i]), name="logsumexp", tag=ROW_SCALAR)
    return te.compute((n,), lambda i: lse[i] - logits[i, te.minimum(te.maximum(labels[i], 0), c - 1)],
                      name=name)


def check_qkv(q: te.Tensor, k: te.Tensor, v: te.Tensor, op: str) -> tuple[int, int, int, int, int]:
    """(batch, heads, seq_q, seq_k, head_dim) of attention inputs; errors name the op and the input."""
    for nm, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim != 4:
            raise ValueError(f"{op}: {nm} must be (batch, heads, seq, head_dim), got shape {t.shape}")
    B, H, Sq, D = q.shape
    Sk = k.shape[2]
    if k.shape != (B, H, Sk, D) or v.shape != (B, H, Sk, D):
        raise ValueError(f"{op}: k {k.shape} and v {v.shape} must both be ({B}, {H}, seq_k, {D}) for q {q.shape}")
    return B, H, Sq, Sk, D


def attention(q: te.Tensor, k: te.Tensor, v: te.Tensor, scale: float | None = None, causal: bool = False,
              lanes: int = 1, name: str = "O") -> te.Tensor:
    """Scaled dot-product attention: softmax(q @ k^T * scale [+ causal mask]) @ v per (batch, head).

    q: (B, H, Sq, D), k and v: (B, H, Sk, D) -> (B, H, Sq, D). scale defaults to 1/sqrt(D). The
    causal mask keeps key j for query i when j <= i (top-left aligned, as torch's
    scaled_dot_product_attention(is_causal=True)), so every query sees at least key 0.

    K is packed transposed (stage tag KEY_PACK) so the scores of one query against consecutive
    keys are contiguous vector loads; scores S and probabilities P are (.., Sq, Sk) stages that a
    schedule computes per query tile (never as a whole matrix).
    """
    B, H, Sq, Sk, D = check_qkv(q, k, v, "attention")
    dtype = q.dtype
    sc = te.const(1.0 / math.sqrt(D) if scale is None else float(scale), dtype)
    kt = te.compute((B, H, D, Sk), lambda b, h, d, j: k[b, h, j, d], name="KT", tag=KEY_PACK)
    rd = te.reduce_axis((0, D), name="d")
    S = te.compute((B, H, Sq, Sk), lambda b, h, i, j: te.sum(q[b, h, i, rd] * sc * kt[b, h, rd, j], axis=rd),
                   name="S")
    neg_inf = te.const(float("-inf"), dtype)

    def score(idx, j):
        b, h, i = idx
        return te.if_then_else(j <= i, S[b, h, i, j], neg_inf) if causal else S[b, h, i, j]

    mx = row_reduce(score, (B, H, Sq), Sk, "max", lanes, name="max")
    # exp(-inf - max) = 0: masked keys get probability 0
    P = te.compute((B, H, Sq, Sk), lambda b, h, i, j: te.exp(score((b, h, i), j) - mx[b, h, i]), name="P",
                   tag=ROW_ELEMWISE)
    sm = row_reduce(lambda idx, j: P[(*idx, j)], (B, H, Sq), Sk, "sum", lanes, name="sum")
    inv = te.compute((B, H, Sq), lambda b, h, i: te.const(1.0, dtype) / sm[b, h, i], name="inv_sum", tag=ROW_SCALAR)
    rj = te.reduce_axis((0, Sk), name="j")
    acc = te.compute((B, H, Sq, D), lambda b, h, i, d: te.sum(P[b, h, i, rj] * v[b, h, rj, d], axis=rj), name="PV")
    return te.compute((B, H, Sq, D), lambda b, h, i, d: acc[b, h, i, d] * inv[b, h, i], name=name)
