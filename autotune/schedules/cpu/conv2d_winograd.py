"""Winograd conv2d on the CPU: F(2x2, 3x3) and F(4x4, 3x3) for 3x3, stride-1, dilation-1 layers
without groups (the computes are `autotune.topi.winograd`), every stage in one kernel.

Schedule: the padded NHWC input and the input transform V vectorized along input channels
(contiguous in both); the (m+2)^2 GEMMs M = V U as in the matmul template, a register tile of
`tile_t` tiles x `tile_f` output channels (vector lanes) accumulated in a local tile over the
input channels (split by `unroll_c`, unrolled); the output transform with the epilogue
vectorized along output channels. The kernel transform U (lanes: the output channels of a
panel) runs one of two ways, by `kernel_chunk`:
    0      U whole at root, in parallel over panels; the GEMMs in parallel over positions, each
           U panel reused by every tile while it is in cache
    k > 0  per panel of output channels (in parallel), U made k input channels at a time just
           before the GEMMs use it, so it never goes to memory (it is (m+2)^2 / 9 times the
           weights); every position's accumulators for all tiles stay in one local buffer

Default rule (a knob's first value; the other values keep a fixed ascending order):
    winograd_m             the m of the fewest GEMM multiplies, (m+2)^2 * ceil(OH/m) * ceil(OW/m);
                           a tie goes to 2, the smaller float32 error
    winograd_tile_f        2 vectors of the target (32 float32 with AVX-512, 16 with AVX2)
    winograd_tile_t        the most tiles whose accumulators (tile_t x 2 vectors) take at most
                           half of the vector registers (32 with 64-byte vectors, else 16)
    winograd_unroll_c      4 (independent FMAs enough to hide the loop's overhead)
    winograd_kernel_chunk  0 (U at root) when the tiles of all images number more than 2 vectors
                           (32 with AVX-512): U, written and read back through memory (8 bytes
                           per element), then feeds 2 * N * tiles flops per element; with fewer
                           tiles the GEMMs would wait on memory, so U is made in chunks, the
                           largest whose U slice, (m+2)^2 * chunk * tile_f values, fits in L1
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import te
from ...dtype import dtype_info
from ...errors import InstantiationError
from ...schedules.schedule import Schedule
from ...topi import winograd as topi_wino
from ...topi.conv import ConvGeometry, Epilogue, Finish
from .rules import cpu_facts, first, lanes, largest_fitting, vector_registers

TILE_SIZES = (2, 4)
TILE_ROWS = (1, 2, 4, 6, 8, 12)
UNROLL_C = (1, 2, 4, 8)
KERNEL_CHUNKS = (0, 8, 16, 32, 64)


def APPLIES(g: ConvGeometry) -> bool:
    """3x3 stride 1, dilation 1, one group."""
    return g.kernel == (3, 3) and g.stride == (1, 1) and g.dilation == (1, 1) and g.groups == 1


def multiply_saving(g: ConvGeometry, N: int) -> float:
    """Direct multiplies over Winograd's (GEMMs plus the kernel transform, G g G^T) per pair of
    input and output channels, at the default m: what the dispatcher's default rule weighs."""
    m = _default_m(g)
    th, tw = _tiles(g, m)
    kernel_transform = 9 * (m + 2) + 3 * (m + 2) ** 2
    return 9 * N * g.out[0] * g.out[1] / ((m + 2) ** 2 * N * th * tw + kernel_transform)


def few_channels(g: ConvGeometry, vec: int) -> bool:
    """Whether the input channels fill at most half a vector (`vec` lanes): the input
    transform and its NHWC copy run along the channels, so most of each vector is idle, and
    the GEMMs reduce over fewer channels than a register tile's loop overhead amortises."""
    return 2 * g.in_channels <= vec


def few_tiles(g: ConvGeometry, N: int, vec: int) -> bool:
    """Whether the tiles of all images at the default m number at most 2 vectors (`vec` lanes):
    each element of U then feeds too few multiply-adds for the GEMMs to keep up with reading it
    (the kernel_chunk rule in the module docstring, and the dispatcher's in `conv2d`)."""
    th, tw = _tiles(g, _default_m(g))
    return N * th * tw <= 2 * vec


def _tiles(g: ConvGeometry, m: int) -> tuple[int, int]:
    return -(-g.out[0] // m), -(-g.out[1] // m)


def _default_m(g: ConvGeometry) -> int:
    def multiplies(m: int) -> int:
        th, tw = _tiles(g, m)
        return (m + 2) ** 2 * th * tw

    return min(TILE_SIZES, key=lambda m: (multiplies(m), m))


def define_knobs(cfg: Any, g: ConvGeometry, N: int, dtype: str, when: tuple[str, tuple[str, ...]]) -> None:
    """The tile size m, the GEMM's register tile and where U is made; defaults by the rule in
    the module docstring."""
    facts, vec, nbytes = cpu_facts(cfg), lanes(cfg, dtype), dtype_info(dtype).bytes
    m, bf = _default_m(g), 2 * vec
    registers = vector_registers(cfg)
    rows = max(r for r in TILE_ROWS if r * 2 <= registers // 2)
    a2 = (m + 2) ** 2
    chunk = largest_fitting(KERNEL_CHUNKS[1:], lambda k: a2 * k * bf * nbytes <= facts.l1d_bytes)
    fused = few_tiles(g, N, vec)
    cfg.define_knob("winograd_m", first(m, TILE_SIZES), when=when)
    cfg.define_knob("winograd_tile_f", first(bf, [vec, 2 * vec, 4 * vec]), when=when)
    cfg.define_knob("winograd_tile_t", first(rows, TILE_ROWS), when=when)
    cfg.define_knob("winograd_unroll_c", first(4, UNROLL_C), when=when)
    cfg.define_knob("winograd_kernel_chunk", first(chunk if fused else 0, KERNEL_CHUNKS), when=when)


def build(cfg: Any, X: te.Tensor, Wt: te.Tensor, g: ConvGeometry, epilogue: Epilogue | None,
          extra: Sequence[te.Tensor], finish: Finish | None = None) -> tuple[Schedule, te.Tensor]:
    """The NCHW output of the conv with `epilogue` applied, and its schedule. `extra` (the
    epilogue's own inputs) needs no stage: the epilogue reads them where it runs."""
    N, F = X.shape[0], Wt.shape[0]
    if not APPLIES(g):
        raise InstantiationError(f"conv2d winograd: needs a 3x3 kernel, stride 1, dilation 1 and one group; got "
                                 f"kernel {g.kernel}, stride {g.stride}, dilation {g.dilation}, groups {g.groups}")
    m = cfg["winograd_m"].val
    vec = lanes(cfg, X.dtype)
    bf = min(cfg["winograd_tile_f"].val, -(-F // vec) * vec)
    tiles = _tiles(g, m)
    D = topi_wino.padded_tiles(X, g.pad_before, tiles[0] * m + 2, tiles[1] * m + 2)
    Gg, U = topi_wino.kernel_transform(Wt, m, bf)
    Bd, V = topi_wino.input_transform(D, m, tiles)
    M = topi_wino.batched_gemm(U, V)
    AM, R, out = topi_wino.output_transform(M, m, (N, F, g.out[0], g.out[1]), tiles, epilogue)
    final = finish(out) if finish else out
    s = te.create_schedule(final.op)
    _schedule_pad(s, D, vec)
    _schedule_input(s, Bd, V, vec)
    chunk = cfg["winograd_kernel_chunk"].val
    if chunk:
        MC, ko = _schedule_gemm_fused(cfg, s, M, bf, chunk)
        _schedule_kernel(s, Gg, U, (MC, ko))
    else:
        _schedule_gemm(cfg, s, M, bf)
        _schedule_kernel(s, Gg, U, None)
    _schedule_output(s, AM, R, out, m, vec)
    return s, final


def _schedule_pad(s: Schedule, D: te.Tensor, vec: int) -> None:
    """Rows in parallel, channels as lanes (the stores contiguous), columns unrolled around them
    in blocks of `vec`: the loads, strided by a channel plane, are then a transposed block that
    the codegen reads as rows and shuffles. Gathered a vector per column, with every lane in one
    L1 set where a plane is a multiple of 4 KiB, they held 64 -> 8 at 64x64 at 0.76x onnxruntime
    (1.76x at 65x65; now 2.1x)."""
    n, yy, xx, c = D.op.axis
    co, ci = s[D].split(c, vec)
    xo, xi = s[D].split(xx, vec)
    s[D].reorder(n, yy, co, xo, xi, ci)
    s[D].unroll(xi)
    s[D].vectorize(ci)
    s[D].parallel(s[D].fuse(n, yy))


def _unrolled_half(s: Schedule, T: te.Tensor, at: te.Tensor, axis: Any, positions: tuple[int, int],
                   lanes_axis: int) -> None:
    """The first pass of a separable transform, computed per tile (or panel) into a local
    buffer that LLVM keeps in registers: its two position axes unrolled, one axis as lanes."""
    s[T].compute_at(s[at], axis)
    ax = T.op.axis
    s[T].unroll(ax[positions[0]])
    s[T].unroll(ax[positions[1]])
    s[T].vectorize(ax[lanes_axis])


def _schedule_kernel(s: Schedule, Gg: te.Tensor, U: te.Tensor, at: tuple[te.Tensor, Any] | None) -> None:
    """Positions unrolled (the select chains fold), the panel's channels as vector lanes; the
    whole U at root (in parallel over panels) or a chunk of channels where the GEMM needs it."""
    fo, e, c, nu, fi = U.op.axis
    s[U].reorder(fo, c, e, nu, fi)
    s[U].unroll(e)
    s[U].unroll(nu)
    s[U].vectorize(fi)
    if at is None:
        s[U].parallel(fo)
    else:
        s[U].compute_at(s[at[0]], at[1])
    _unrolled_half(s, Gg, U, c, (2, 3), 4)


def _schedule_input(s: Schedule, Bd: te.Tensor, V: te.Tensor, vec: int) -> None:
    """Tiles in parallel, a vector of channels at a time: the tile's loads and stores contiguous."""
    t, e, nu, c = V.op.axis
    co, ci = s[V].split(c, vec)
    s[V].reorder(t, co, e, nu, ci)
    s[V].unroll(e)
    s[V].unroll(nu)
    s[V].vectorize(ci)
    s[V].parallel(t)
    _unrolled_half(s, Bd, V, co, (1, 2), 3)


def _schedule_gemm(cfg: Any, s: Schedule, M: te.Tensor, bf: int) -> None:
    """The matmul template's recipe per position: tile_t x tile_f accumulated in a local tile."""
    MC = s.cache_write(M, "local")
    t, e, nu, f = M.op.axis
    fo, fi = s[M].split(f, bf)
    to, ti = s[M].split(t, min(cfg["winograd_tile_t"].val, M.shape[0]))
    s[M].reorder(e, nu, fo, to, ti, fi)
    s[MC].compute_at(s[M], to)
    s[M].vectorize(fi)
    s[M].parallel(s[M].fuse(e, nu))
    ct, _, _, cf = s[MC].op.axis
    (c,) = s[MC].op.reduce_axis
    ko, ki = s[MC].split(c, cfg["winograd_unroll_c"].val)
    s[MC].reorder(ko, ki, ct, cf)
    s[MC].unroll(ki)
    s[MC].unroll(ct)
    s[MC].vectorize(cf)


def _schedule_gemm_fused(cfg: Any, s: Schedule, M: te.Tensor, bf: int, chunk: int) -> tuple[te.Tensor, Any]:
    """Per panel of output channels (in parallel): every position's accumulators for all tiles
    in one local buffer, the channels in chunks, each chunk's U made just before its use, so U
    never goes to memory; inside a chunk, tile_t x tile_f register tiles as in the matmul."""
    MC = s.cache_write(M, "local")
    t, e, nu, f = M.op.axis
    fo, fi = s[M].split(f, bf)
    s[M].reorder(fo, t, e, nu, fi)
    s[MC].compute_at(s[M], fo)
    s[M].vectorize(fi)
    s[M].parallel(fo)
    ct, ce, cnu, cf = s[MC].op.axis
    (c,) = s[MC].op.reduce_axis
    cto, cti = s[MC].split(ct, min(cfg["winograd_tile_t"].val, M.shape[0]))
    ko, kin = s[MC].split(c, chunk)
    kc, ku = s[MC].split(kin, min(cfg["winograd_unroll_c"].val, chunk))
    s[MC].reorder(ko, ce, cnu, cto, kc, ku, cti, cf)
    s[MC].unroll(ku)
    s[MC].unroll(cti)
    s[MC].vectorize(cf)
    return MC, ko


def _schedule_output(s: Schedule, AM: te.Tensor, R: te.Tensor, out: te.Tensor, m: int, vec: int) -> None:
    """Per row of tiles and vector of output channels: R, the transform's results with the
    channels as lanes, for the whole row (per tile, its positions unrolled so the select chains
    fold, one vector load per position of M); then the NCHW output from it, columns as lanes and
    the channels unrolled, a transposed block the codegen reads as rows and shuffles. Stored
    channel by channel (a scatter of `vec` lanes at a stride of the image), the output ran 2.4x
    slower on images whose channel planes are multiples of 4 KiB (64 x 64: the lanes of a store
    fell in one L1 set): 64 -> 64 at 64x64 0.92x onnxruntime against 2.2x at 56x56; now 2.5x."""
    n, f, y, x = out.op.axis
    yo, yi = s[out].split(y, m)
    fo, fi = s[out].split(f, vec)
    xo, xv = s[out].split(x, vec)
    s[out].reorder(n, yo, fo, yi, xo, fi, xv)
    s[out].unroll(fi)
    s[out].vectorize(xv)
    s[out].parallel(s[out].fuse(n, yo))
    s[R].compute_at(s[out], fo)
    _, ry, rx, rf = R.op.axis
    rxo, rxi = s[R].split(rx, m)
    s[R].reorder(rxo, ry, rxi, rf)
    s[R].unroll(ry)
    s[R].unroll(rxi)
    s[R].vectorize(rf)
    _unrolled_half(s, AM, R, rxo, (1, 2), 3)
