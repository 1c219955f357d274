"""More convolutions and the conv/dense + pointwise epilogue templates on the CPU.

conv1d (NCW, or as one image row through the conv2d algorithms), conv2d_nhwc, conv2d_bias_relu
and conv2d_bn (NCHW, batch norm folded into the weights and bias by
`autotune.topi.conv.fold_batch_norm`), dense_gelu (dense + bias + gelu).
The epilogue templates compute the conv or matmul tile into a local buffer at the output's tile
loop and apply bias and activation on that tile, so the pre-activation never reaches memory.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import te
from ...dtype import dtype_info
from ...topi import conv as topi_conv, elementwise as topi_elementwise
from ...topi.conv import ConvGeometry
from ..schedule import Schedule
from ..space import Condition, KnobScope
from ..task import count_flop, template
from .conv2d import ALGORITHMS, algorithm_order, conv2d_nchw_schedule, define_algorithm_knobs, nchw_geometry
from .conv2d_nchw import place_pad
from .matmul import matmul_body
from .rules import (
    VectorTarget,
    ascending_first,
    constant_input,
    cpu_facts,
    enough_chunks,
    first,
    lanes,
    largest_fitting,
    register_tile,
    vector_target,
)

ROW = "row."                          # conv1d: the prefix of its knobs as a conv2d of one row
RC_TILES = (1, 4, 8, 16, 32)          # input channels per block of the reduction
CONV1D_F = (1, 2, 4, 8, 16)           # conv1d: filters per register tile (its rows)
CONV1D_X = (4, 8, 16, 32, 64)         # conv1d: output positions per register tile (its vector columns)
NHWC_F = (1, 4, 8, 16, 32, 64)        # conv2d_nhwc: filters per register tile (its vector columns)
NHWC_X = (1, 2, 4, 6, 8, 14)          # conv2d_nhwc: output columns per register tile (its rows)


def _annotate_reduction(cfg: Any, s: Any, CC: te.Tensor, spatial: list, rc: Any, kernel: list) -> None:
    """Split the channel reduction, order it against the kernel axes (spatial innermost), unroll
    the innermost kernel axis if asked, and vectorize the innermost spatial axis."""
    rco, rci = cfg["tile_rc"].apply(s, CC, rc)
    if cfg["reduce_order"].val == "rc_outer":
        s[CC].reorder(rco, *kernel, rci, *spatial)
    else:
        s[CC].reorder(*kernel, rco, rci, *spatial)
    if cfg["unroll_kernel"].val and kernel[-1].extent <= 8:
        s[CC].unroll(kernel[-1])
    s[CC].vectorize(spatial[-1])


def _reduction_knobs(cfg: Any, Cg: int, tile_weights: int, kernel_w: int, padded: bool, outer_chunks: int,
                     dtype: str, when: Condition | None = None) -> None:
    """The knobs of the channel reduction, each with its rule's value first:

    tile_rc = the most input channels (of 1, 4, 8, 16, 32) whose weights for one output tile
    (`tile_weights` per channel) fit in a quarter of L1; reduce_order rc_outer (every kernel tap
    of a channel block while its inputs are in cache); the innermost kernel axis unrolled when it
    has <= 8 taps (the only case the schedule unrolls); the padding computed at root when there is
    any (a copy of the input, 1/(filters x taps) of the conv's multiply-adds, and no bounds
    selects in the inner loops); the tile loop fused into the parallel loop unless the outer
    loops alone give >= 4 chunks per core (`outer_chunks`). Other values ascending.
    """
    nbytes = dtype_info(dtype).bytes
    rc = largest_fitting(RC_TILES, lambda c: c * tile_weights * nbytes <= cpu_facts(cfg).l1d_bytes // 4)
    cfg.define_split("tile_rc", Cg, 2, policy="candidate", candidate=[[-1, v] for v in ascending_first(rc, RC_TILES)],
                     when=when)
    cfg.define_knob("reduce_order", ["rc_outer", "kernel_outer"], when=when)
    cfg.define_knob("unroll_kernel", first(int(kernel_w <= 8), [0, 1]), when=when)
    cfg.define_knob("pad", first("root" if padded else "inline", ["inline", "root"]), when=when)
    cfg.define_knob("parallel", first("outer" if enough_chunks(cfg, outer_chunks) else "fused", ["fused", "outer"]),
                    when=when)


# ---- conv1d NCW --------------------------------------------------------------------------------

def _conv1d_reference(x, w, stride, padding, dilation, groups, **_):
    return topi_conv.conv1d_ncw_reference(x, w, stride, padding, dilation, groups)


@template("conv1d", reference=_conv1d_reference,
          description="NCW conv1d with stride, padding, dilation and groups: X N x C x L, W F x C/groups x K")
def conv1d_template(cfg, N: int, C: int, L: int, F: int, K: int, stride: Any, padding: Any, dilation: Any,
                    groups: int, dtype: str = "float32"):
    """The conv as one image row through the conv2d algorithms (knobs "row.*", the default by
    `row_algorithms`), or "ncw": output tiles (filters x vectorized positions) accumulated
    locally, channels split; records from before the algorithm knob load as "ncw".

    "ncw" defaults: matmul's register tile rule (`register_tile`) with positions as columns and
    filters as rows: tile_x = 2 x lanes, tile_f = the most filters whose accumulators fit in 3/4
    of the vector registers; then the channel rules of `_reduction_knobs`. Other values ascending.
    """
    if N < 1:
        raise ValueError(f"conv1d: batch N must be >= 1, got {N}")
    g = topi_conv.conv_geometry("conv1d", C, F, (L,), (K,), stride, padding, dilation, groups)
    row = topi_conv.conv_geometry("conv1d", C, F, (1, L), (1, K), (1, *g.stride),
                                  (0, *g.pad_before, 0, *g.pad_after), (1, *g.dilation), groups)
    sub = KnobScope(cfg, ROW)
    methods = row_algorithms(row, N, vector_target(cfg, dtype), constant_input(cfg, 1))
    define_algorithm_knobs(sub, row, N, dtype, [*methods, "ncw"], absent="ncw")
    ncw = (ROW + "algorithm", ("ncw",))
    tx, tf, _ = register_tile(cfg, dtype, F, CONV1D_X, CONV1D_F, (1,))
    cfg.define_split("tile_f", F, 2, policy="candidate", candidate=[[-1, v] for v in ascending_first(tf, CONV1D_F)],
                     when=ncw)
    cfg.define_split("tile_x", g.out[0], 2, policy="candidate",
                     candidate=[[-1, v] for v in ascending_first(tx, CONV1D_X)], when=ncw)
    _reduction_knobs(cfg, C // groups, tf * K, K, g.has_padding, N * -(-F // tf), dtype, when=ncw)
    X = te.placeholder((N, C, L), dtype, name="X")
    Wt = te.placeholder((F, C // groups, K), dtype, name="W")
    P, Y = topi_conv.conv1d_ncw(X, Wt, stride, padding, dilation, groups)
    cfg.add_flop(count_flop([Y]))
    if sub["algorithm"].val != "ncw":
        s, Y = _as_row(sub, X, Wt, row)
        return s, [X, Wt, Y]
    s = te.create_schedule(Y.op)
    place_pad(cfg, s, P, g.has_padding)
    CC = s.cache_write(Y, "local")
    n, f, x = Y.op.axis
    fo, fi = cfg["tile_f"].apply(s, Y, f)
    xo, xi = cfg["tile_x"].apply(s, Y, x)
    s[Y].reorder(n, fo, xo, fi, xi)
    if cfg["parallel"].val == "fused":      # fuse before compute_at: the tile loop is the fused one
        xo = s[Y].fuse(n, fo, xo)
        s[Y].parallel(xo)
    else:
        s[Y].parallel(s[Y].fuse(n, fo))
    s[CC].compute_at(s[Y], xo)
    _, cf, cx = s[CC].op.axis
    rc, rk = s[CC].op.reduce_axis
    _annotate_reduction(cfg, s, CC, [cf, cx], rc, [rk])
    s[Y].vectorize(xi)
    return s, [X, Wt, Y]


def row_algorithms(row: ConvGeometry, N: int, target: VectorTarget, constant_weights: bool) -> list[str]:
    """The conv2d algorithms for a conv1d as one image row, the default first: conv2d's rule
    (`algorithm_order`), but the GEMM first where it applies and the conv is strided (the
    blocked conv reads its single row through the stride) or its channels per group are not
    whole vectors (the blocked layout's input blocks are then partial vectors or padded). Zen 5,
    2 threads, weights constant, x onnxruntime, blocked / GEMM: strided, 512 -> 512 k3 over
    1499 0.38 / 1.04, 384 -> 384 over 3000 0.37 / 0.97, 768 -> 768 over 3000 0.37 / 0.90;
    partial blocks, 33 -> 65 k3 over 1777 0.22 / 0.83, 40 -> 80 k3 dilation 2 over 5000 0.66 /
    0.85, 100 -> 200 k3 over 640 0.77 / 1.00, 200 -> 100 k5 0.61 / 0.78, but 24 -> 48 k5 over
    3001 0.88 / 0.75; whole vectors, kept blocked: 80 -> 256 k3 over 3000 1.04 / 0.94, 128 ->
    128 k3 over 777 1.16 / 0.90, 256 -> 256 k7 1.14 / 0.94, 64 -> 128 k5 1.18 / 0.91, but
    96 -> 96 k7 over 2048 0.83 / 0.96. "ncw", last, ran best on 96 -> 96 k7 (1.13), 24 -> 48
    k5 over 3001 (1.03) and 40 -> 80 k3 dilation 2 over 5000 (0.99): no rule for it yet."""
    names = algorithm_order(row, N, target, constant_weights)
    partial_blocks = (row.in_channels // row.groups) % target.lanes != 0
    if "gemm" in names and (row.stride[1] > 1 or partial_blocks):
        names.insert(0, names.pop(names.index("gemm")))
    return names


def _as_row(cfg: Any, X: te.Tensor, Wt: te.Tensor, row: ConvGeometry) -> tuple[Schedule, te.Tensor]:
    """conv1d(X, Wt) through the conv2d algorithm of cfg["algorithm"] on views of X and Wt as
    one image row (inlined: they copy nothing), then the copy of its row out, vectorised."""
    (N, C, L), (F, Cg, K) = X.shape, Wt.shape
    X_row = te.compute((N, C, 1, L), lambda n, c, _, x: X[n, c, x], name="X_row")
    W_row = te.compute((F, Cg, 1, K), lambda f, c, _, k: Wt[f, c, k], name="W_row")
    s, Y = ALGORITHMS[cfg["algorithm"].val].build(
        cfg, X_row, W_row, row, None, (),
        finish=lambda Z: te.compute((N, F, row.out[1]), lambda n, f, x: Z[n, f, 0, x], name="Y"))
    s[X_row].compute_inline()
    s[W_row].compute_inline()
    n, f, x = Y.op.axis
    s[Y].parallel(s[Y].fuse(n, f))
    s[Y].vectorize(s[Y].split(x, lanes(cfg, Y.dtype))[1])
    return s, Y


# ---- conv2d NHWC -------------------------------------------------------------------------------

def _nhwc_reference(x, w, stride, padding, dilation, groups, **_):
    return topi_conv.conv2d_nhwc_reference(x, w, stride, padding, dilation, groups)


@template("conv2d_nhwc", reference=_nhwc_reference,
          description="NHWC conv2d with stride, padding, dilation and groups: X N x H x W x C, "
                      "W KH x KW x C/groups x F (HWIO)")
def conv2d_nhwc_template(cfg, N: int, H: int, W: int, C: int, F: int, KH: int, KW: int, stride: Any,
                         padding: Any, dilation: Any, groups: int, dtype: str = "float32"):
    """Output tiles of rows x columns x vectorized filters (contiguous in W and Y) accumulated
    locally: per input channel one broadcast input value times a vector of filters.

    Default: matmul's register tile rule (`register_tile`) with filters as columns and output
    columns as rows: tile_f = 2 x lanes, tile_x = the most columns whose accumulators fit in 3/4
    of the vector registers, tile_y = 1 (the register budget goes to the contiguous row); then the
    channel rules of `_reduction_knobs`. Other values ascending.
    """
    g = nchw_geometry("conv2d_nhwc", N, C, H, W, F, KH, KW, stride, padding, dilation, groups)
    OH, OW = g.out
    tf, tx, _ = register_tile(cfg, dtype, OW, NHWC_F, NHWC_X, (1,))
    cfg.define_split("tile_f", F, 2, policy="candidate", candidate=[[-1, v] for v in ascending_first(tf, NHWC_F)])
    cfg.define_split("tile_y", OH, 2, policy="candidate", candidate=[[-1, v] for v in (1, 2, 4)])
    cfg.define_split("tile_x", OW, 2, policy="candidate", candidate=[[-1, v] for v in ascending_first(tx, NHWC_X)])
    _reduction_knobs(cfg, C // groups, tf * KH * KW, KW, g.has_padding, N * OH, dtype)
    X = te.placeholder((N, H, W, C), dtype, name="X")
    Wt = te.placeholder((KH, KW, C // groups, F), dtype, name="W")
    P, Y = topi_conv.conv2d_nhwc(X, Wt, stride, padding, dilation, groups)
    s = te.create_schedule(Y.op)
    place_pad(cfg, s, P, g.has_padding)
    CC = s.cache_write(Y, "local")
    n, y, x, f = Y.op.axis
    yo, yi = cfg["tile_y"].apply(s, Y, y)
    xo, xi = cfg["tile_x"].apply(s, Y, x)
    fo, fi = cfg["tile_f"].apply(s, Y, f)
    s[Y].reorder(n, yo, xo, fo, yi, xi, fi)
    s[CC].compute_at(s[Y], fo)
    _, cy, cx, cf = s[CC].op.axis
    ry, rx, rc = s[CC].op.reduce_axis
    _annotate_reduction(cfg, s, CC, [cy, cx, cf], rc, [ry, rx])
    s[Y].vectorize(fi)
    s[Y].parallel(s[Y].fuse(n, yo, xo) if cfg["parallel"].val == "fused" else s[Y].fuse(n, yo))
    return s, [X, Wt, Y]


# ---- conv2d NCHW + epilogue --------------------------------------------------------------------

def _bias_relu_reference(x, w, bias, stride, padding, dilation, groups, **_):
    y = topi_conv.conv2d_nchw_reference(x, w, stride, padding, dilation, groups) + bias[None, :, None, None]
    return np.maximum(y, 0).astype(x.dtype)


def _bn_reference(x, w_folded, b_folded, stride, padding, dilation, groups, **_):
    y = topi_conv.conv2d_nchw_reference(x, w_folded, stride, padding, dilation, groups)
    return (y + b_folded[None, :, None, None]).astype(x.dtype)


def _nchw_epilogue(cfg, op: str, relu: bool, N, C, H, W, F, KH, KW, stride, padding, dilation, groups, dtype):
    """The conv by the algorithm knob with + bias (and relu) applied to its local output tile."""
    g = nchw_geometry(op, N, C, H, W, F, KH, KW, stride, padding, dilation, groups)
    bias = te.placeholder((F,), dtype, name="bias")
    return conv2d_nchw_schedule(cfg, g, N, dtype, topi_conv.bias_epilogue(bias, relu), (bias,))


@template("conv2d_bias_relu", reference=_bias_relu_reference,
          description="relu(conv2d NCHW + bias) in one kernel, with stride, padding, dilation and groups")
def conv2d_bias_relu_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any,
                              padding: Any, dilation: Any, groups: int, dtype: str = "float32"):
    """The conv by the algorithm knob; bias and relu applied to the local output tile."""
    return _nchw_epilogue(cfg, "conv2d_bias_relu", True, N, C, H, W, F, KH, KW, stride,
                          padding, dilation, groups, dtype)


@template("conv2d_bn", reference=_bn_reference,
          description="conv2d NCHW with inference batch norm folded into its weights and bias "
                      "(inputs X, W', b' from fold_batch_norm), one kernel")
def conv2d_bn_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any,
                       padding: Any, dilation: Any, groups: int, dtype: str = "float32"):
    """The conv by the algorithm knob; the folded batch-norm shift added to the local output tile."""
    return _nchw_epilogue(cfg, "conv2d_bn", False, N, C, H, W, F, KH, KW, stride, padding,
                          dilation, groups, dtype)


# ---- dense + bias + gelu -----------------------------------------------------------------------

def _dense_gelu_reference(x, w, bias, **_):
    return topi_elementwise.gelu_tanh_reference(x @ w.T + bias).astype(x.dtype)


@template("dense_gelu", reference=_dense_gelu_reference,
          description="gelu_tanh(X @ W.T + bias), X: M x K, W: N x K, bias (N,) (fused epilogue)")
def dense_gelu_template(cfg, M: int, N: int, K: int, dtype: str = "float32"):
    """The matmul schedule (packed W, register tile, k unroll, threads); bias and gelu on the tile.

    Default (`define_matmul_knobs`): tile_x = 2 x lanes; rows = the most whose accumulators fit
    3/4 of the vector registers; blocks = the most tiles whose A rows fit half of L2 with >= 4
    parallel chunks per core; k unrolled to ~64 multiply-adds a step; B packed when M >= lanes
    (W of dense always);
    threads when the product has >= 2^15 vector multiply-adds and the target more than one core.
    """
    if min(M, N, K) < 1:
        raise ValueError(f"dense_gelu: M, N and K must be >= 1, got M={M}, N={N}, K={K}")
    bias = te.placeholder((N,), dtype, name="bias")
    return matmul_body(cfg, M, N, K, dtype, transposed=True, extra_inputs=(bias,),
                        epilogue=lambda C: topi_conv.bias_gelu(C, bias))
