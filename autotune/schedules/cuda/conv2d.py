"""conv2d NCHW on CUDA: the direct convolution with shared-memory tiles, as a search space.

TVM's classic conv2d_nchw schedule. Each block computes an (f, y, x) tile of the output (blocks
over (n * f tiles, y tiles, x tiles)); each thread a register tile (`cache_write` "local",
computed at the thread's loop), with optional virtual threads so a thread's sub-tiles are a
thread-tile apart. The input channels are walked in steps of `tile_rc`: per step the block
fetches the padded input window and the kernel slice it needs into shared memory
cooperatively (every thread of the 3-d block takes consecutive elements), then every thread
accumulates its register tile over (rc, ry, rx). The zero padding is computed inline in the
input fetch: there is no padded copy of the input in global memory. Where a tile does not divide
the filters, rows, columns or input channels, the conv runs over them rounded up to whole tiles
and the fetch reads zero beyond the input, so only the fetch and the store test bounds. Same
compute, parameters, argument order and reference as the cpu "conv2d" template
(`autotune.schedules.cpu.conv2d`).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import te
from ...dtype import dtype_info
from ...target import CUDA_LIMITS
from ...topi.conv import ConvGeometry, pad
from ..cpu.conv2d import conv2d_reference, nchw_geometry
from ..schedule import Schedule
from ..task import template
from .generic import crop, round_up, split_exact, tile_extent

# candidates of each output axis, (vthread, threads, per-thread); the first is the default
# config's, chosen for the 3x3 / 64-channel / 56x56 layer and the ResNet-50 3x3 layers (56, 28,
# 14 wide): a block tile of 32 filters x 4 rows x 14 columns (divides 56, 28 and 14), 8 x 4 x 7 =
# 224 threads (7 whole warps), 4 x 1 x 2 = 8 outputs per thread; 112 blocks for the 56x56 layer.
_TILE_F = [(1, 8, 4), (1, 8, 2), (2, 4, 4), (1, 4, 4), (1, 16, 2), (2, 8, 1), (1, 4, 8), (1, 2, 4),
           (1, 4, 1), (1, 2, 2), (2, 2, 1)]
_TILE_Y = [(1, 4, 1), (1, 2, 2), (1, 7, 1), (1, 1, 4), (2, 2, 1), (1, 8, 1), (1, 2, 1)]
_TILE_X = [(1, 7, 2), (1, 14, 1), (1, 8, 2), (1, 16, 1), (1, 7, 4), (2, 7, 1), (1, 32, 1), (1, 4, 2),
           (2, 4, 1), (1, 4, 1), (2, 2, 1)]
_TILE_RC = (8, 4, 16, 2, 1, 32)
_MAX_REGISTER_TILE = 64


def _define_knobs(cfg: Any, F: int, OH: int, OW: int, C: int) -> None:
    for name, extent, cands in (("tile_f", F, _TILE_F), ("tile_y", OH, _TILE_Y), ("tile_x", OW, _TILE_X)):
        cfg.define_split(name, extent, 4, policy="candidate", candidate=[[-1, *c] for c in cands])
    cfg.define_split("tile_rc", C, 2, policy="candidate", candidate=[[-1, r] for r in _TILE_RC])
    cfg.define_knob("reduce_order", ["rc_outer", "kernel_outer"])
    cfg.define_knob("unroll", [1, 0])


def _check_limits(cfg: Any, KH: int, KW: int, stride: tuple[int, ...], dtype: str) -> tuple[int, int, int]:
    """(threads in f, y, x); configs no GPU can launch are rejected here, never measured."""
    _, vf, tf, rf = cfg["tile_f"].size
    _, vy, ty, ry = cfg["tile_y"].size
    _, vx, tx, rx = cfg["tile_x"].size
    rc = cfg["tile_rc"].size[-1]
    cfg.raise_if(rf * ry * rx * vf * vy * vx > _MAX_REGISTER_TILE,
                 f"a {vf * rf} x {vy * ry} x {vx * rx} register tile per thread spills")
    threads, limits = tf * ty * tx, CUDA_LIMITS
    cfg.raise_if(threads > limits.max_threads_per_block,
                 f"{tf} x {ty} x {tx} = {threads} threads per block > {limits.max_threads_per_block}")
    cfg.raise_if(threads < limits.warp_size, f"{tf} x {ty} x {tx} = {threads} threads per block is less than a warp")
    bf, by, bx = vf * tf * rf, vy * ty * ry, vx * tx * rx
    span_y = (by - 1) * stride[0] + KH
    span_x = (bx - 1) * stride[1] + KW
    shared = (rc * span_y * span_x + bf * rc * KH * KW) * dtype_info(dtype).bytes
    cfg.raise_if(shared > limits.shared_bytes_per_block,
                 f"shared tiles of {shared} bytes > {limits.shared_bytes_per_block}")
    return tf, ty, tx


def fetch_cooperative(s: Schedule, tensor: te.Tensor, threads: Sequence[int]) -> None:
    """Fetch a shared tile with every thread of a 3-d block: the tile's axes fused, split over
    (threadIdx.z, threadIdx.y, threadIdx.x), so consecutive threads load consecutive elements
    (coalesced along the tile's innermost axis). `threads` is (tz, ty, tx)."""
    st = s[tensor]
    f = st.fuse(*st.op.axis)
    for n, tag in reversed(list(zip(threads, ("threadIdx.z", "threadIdx.y", "threadIdx.x")))):
        f, t = st.split(f, factor=n)
        st.bind(t, te.thread_axis(tag))


def _tile_output(cfg: Any, s: Schedule, Y: te.Tensor) -> Any:
    """Output loops (block, vthread, thread, per-thread) of f, y, x, bound; returns threadIdx.x."""
    st = s[Y]
    n, f, y, x = st.op.axis
    bf, vf, tf, fi = split_exact(st, f, cfg["tile_f"].size)
    by, vy, ty, yi = split_exact(st, y, cfg["tile_y"].size)
    bx, vx, tx, xi = split_exact(st, x, cfg["tile_x"].size)
    st.reorder(n, bf, by, bx, vf, vy, vx, tf, ty, tx, fi, yi, xi)
    bz = st.fuse(n, bf)
    for axis, tag in ((bz, "blockIdx.z"), (by, "blockIdx.y"), (bx, "blockIdx.x"), (vf, "vthread"),
                      (vy, "vthread"), (vx, "vthread"), (tf, "threadIdx.z"), (ty, "threadIdx.y"),
                      (tx, "threadIdx.x")):
        st.bind(axis, te.thread_axis(tag))
    for axis in (fi, yi, xi):
        st.unroll(axis)
    return tx


def _schedule_accumulate(cfg: Any, s: Schedule, OL: te.Tensor, KH: int, KW: int) -> Any:
    """The register tile's reduction; returns the rc-step loop the shared tiles are fetched at.
    The output tile is innermost (each shared value feeds every accumulator of the thread)."""
    st = s[OL]
    _, f, y, x = st.op.axis
    rc, ry, rx = st.op.reduce_axis
    rco, rci = st.split(rc, factor=cfg["tile_rc"].size[-1])
    if cfg["reduce_order"].val == "rc_outer":
        st.reorder(rco, rci, ry, rx, f, y, x)
    else:
        st.reorder(rco, ry, rx, rci, f, y, x)
    if cfg["unroll"].val and KH * KW <= 49:
        st.unroll(ry)
        st.unroll(rx)
    for axis in (f, y, x):
        st.unroll(axis)
    return rco


@template("conv2d", reference=conv2d_reference, target="cuda",
          description="NCHW conv2d: X N x C x H x W, W F x C x KH x KW, with stride and padding "
                      "(shared-memory tiled direct convolution)")
def conv2d_cuda(cfg: Any, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: int, padding: int,
                dtype: str = "float32"):
    """Block output tiles, per-thread register tiles, input-channel steps staged in shared memory
    (the padded input window and the kernel slice), padding computed in the fetch."""
    g = nchw_geometry("conv2d", N, C, H, W, F, KH, KW, stride, padding)
    OH, OW = g.out
    _define_knobs(cfg, F, OH, OW, C)
    threads = _check_limits(cfg, KH, KW, g.stride, dtype)
    X = te.placeholder((N, C, H, W), dtype, name="X")
    Wt = te.placeholder((F, C, KH, KW), dtype, name="W")
    Xp, Wp, Yp = _conv_over_whole_tiles(cfg, X, Wt, g)
    Y = Yp if tuple(Yp.shape) == (N, F, OH, OW) else crop(Yp, (N, F, OH, OW), "Y_out")
    s = te.create_schedule(Y.op)
    for T in {Xp, Wp} - {Wt}:
        s[T].compute_inline()          # zero padding and bound tests happen in the shared fetch
    OL = s.cache_write(Yp, "local")
    if Y is not Yp:
        s[Yp].compute_inline()         # the store reads the register tile directly
    PS = s.cache_read(Xp, "shared", [OL])
    WS = s.cache_read(Wp, "shared", [OL])
    thread_x = _tile_output(cfg, s, Y)
    s[OL].compute_at(s[Y], thread_x)
    rco = _schedule_accumulate(cfg, s, OL, KH, KW)
    for T in (PS, WS):
        s[T].compute_at(s[OL], rco)
        fetch_cooperative(s, T, threads)
    return s, [X, Wt, Y]


def _conv_over_whole_tiles(cfg: Any, X: te.Tensor, Wt: te.Tensor, g: ConvGeometry
                           ) -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """(padded input, padded weight, output) of the conv over the filters, rows, columns and input
    channels rounded up to whole tiles, from operands read as zero beyond their bounds: where a
    tile does not divide the layer, only the fetch and the store test bounds, and the register
    tile accumulates guard-free (as the CUDA GEMM does)."""
    N, C, H, W = (int(d) for d in X.shape)
    F, KH, KW = int(Wt.shape[0]), g.kernel[0], g.kernel[1]
    Fp = round_up(F, tile_extent(cfg["tile_f"].size))
    OHp = round_up(g.out[0], tile_extent(cfg["tile_y"].size))
    OWp = round_up(g.out[1], tile_extent(cfg["tile_x"].size))
    Cp = round_up(C, cfg["tile_rc"].size[-1])
    (sh, sw), (pt, pl) = g.stride, g.pad_before
    rows, cols = (OHp - 1) * sh + KH, (OWp - 1) * sw + KW      # the padded input a whole tile reads
    Xp = pad(X, (1, 2, 3), (0, pt, pl), (Cp - C, max(rows - H - pt, 0), max(cols - W - pl, 0)))
    Wp = Wt if (Fp, Cp) == (F, C) else pad(Wt, (0, 1), (0, 0), (Fp - F, Cp - C), name="W_padded")
    rc, ry, rx = (te.reduce_axis((0, n), name=name) for n, name in ((Cp, "rc"), (KH, "ry"), (KW, "rx")))
    Yp = te.compute((N, Fp, OHp, OWp), lambda n, f, y, x: te.sum(
        Xp[n, rc, y * sh + ry, x * sw + rx] * Wp[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    return Xp, Wp, Yp
