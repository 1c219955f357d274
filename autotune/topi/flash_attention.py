"""Flash attention: scaled dot-product attention with an online softmax, written as loop IR.

Per tile of `tile_q` queries, keys are visited in blocks of `tile_k` (FlashAttention, Dao et al.
2022), carrying a running max m, a running sum l and an output accumulator acc per query row:

    S = q @ k_block^T * scale (causal: masked to -inf above the diagonal)
    m_new = max(m, rowmax(S));  alpha = exp(m - m_new);  P = exp(S - m_new)
    l = l * alpha + rowsum(P);  acc = acc * alpha + P @ v_block;  m = m_new
    ...and after the last block, O = acc / l.

The state carried from one key block to the next is a recurrence, which a te compute cannot
express (a stage is computed whole before its consumer reads it), so the kernel is a `te.extern`
(TVM writes such kernels in TIR); its tile sizes and register blocking are arguments, the knobs of
the CPU template. Memory per thread is tile_q x (tile_k + head_dim) floats whatever the sequence
length: the score matrix is never stored. With `causal`, key blocks wholly above the diagonal of
a query tile are skipped.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from .. import te
from ..ir.builder import IRBuilder
from ..ir.nodes import Buffer, Load, Store
from ..te.expr import Expr, Select, const
from .nn import KEY_PACK, check_qkv

FLASH_ATTENTION = "flash_attention"
LANES = 16                  # partial max / sum accumulators of a score row (one AVX-512 register)


@dataclass(frozen=True)
class Tiling:
    """tile_q queries per parallel task, tile_k keys per block, `rows` query rows register-blocked
    in both products, `score_width` keys and `out_width` head dims per vector accumulator."""

    tile_q: int = 32
    tile_k: int = 64
    rows: int = 4
    score_width: int = 64
    out_width: int = 64

    def check(self) -> None:
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"flash_attention: {name} must be an int >= 1, got {value!r}")


def flash_attention(q: te.Tensor, k: te.Tensor, v: te.Tensor, scale: float | None = None, causal: bool = False,
                    tiling: Tiling = Tiling(), name: str = "O") -> te.Tensor:
    """softmax(q @ k^T * scale [+ causal mask]) @ v for q (B, H, Sq, D), k and v (B, H, Sk, D).

    Same contract as `autotune.topi.nn.attention` (scale defaults to 1/sqrt(D); the causal mask
    keeps key j for query i when j <= i). K is packed transposed (stage KT, tag KEY_PACK) so the
    scores of a query against consecutive keys are vector loads.
    """
    B, H, Sq, Sk, D = check_qkv(q, k, v, "flash_attention")
    tiling.check()
    sc = 1.0 / math.sqrt(D) if scale is None else float(scale)
    kt = te.compute((B, H, D, Sk), lambda b, h, d, j: k[b, h, j, d], name="KT", tag=KEY_PACK)
    build = partial(_build, sizes=(B * H, Sq, Sk, D), scale=sc, causal=bool(causal), tiling=tiling)
    # the two products over the (query, key) pairs the mask keeps: the work a kernel cannot skip
    pairs = sum(min(i + 1, Sk) for i in range(Sq)) if causal else Sq * Sk
    return te.extern(q.shape, [q, kt, v], build, name=name, flop=4.0 * B * H * pairs * D, reduction=Sk,
                     tag=FLASH_ATTENTION)


class _TileBuffers(NamedTuple):
    """Per-thread buffers of one query tile: running max m, running sum l, output rows acc,
    the block's scores S (probabilities after the update), lane partials, and (m_new, alpha)."""

    m: Buffer
    l: Buffer  # noqa: E741  (the algorithm's name)
    acc: Buffer
    S: Buffer
    part: Buffer
    stat: Buffer


def _build(ins: list[Buffer], out: Buffer, sizes: tuple[int, int, int, int], scale: float, causal: bool,
           tiling: Tiling) -> Any:
    ib = IRBuilder()
    q, kt, v = ins
    _Kernel(ib, q, kt, v, out, sizes, scale, causal, tiling).emit()
    return ib.get()


def _blocks(n: int, width: int) -> list[tuple[int, int, int]]:
    """(count, width, start) runs covering [0, n): `count` blocks of `width`, then the remainder."""
    full, rest = divmod(n, min(width, n))
    out = [(full, min(width, n), 0)]
    return out + [(1, rest, full * width)] if rest else out


class _Kernel:
    """Emits the loop nest; methods follow the algorithm in the module docstring."""

    def __init__(self, ib: IRBuilder, q: Buffer, kt: Buffer, v: Buffer, out: Buffer,
                 sizes: tuple[int, int, int, int], scale: float, causal: bool, tiling: Tiling) -> None:
        self.ib, self.q, self.kt, self.v, self.out = ib, q, kt, v, out
        self.BH, self.Sq, self.Sk, self.D = sizes
        self.scale, self.causal, self.t = scale, causal, tiling
        self.dtype = q.dtype

    def c(self, x: float) -> Expr:
        return const(x, self.dtype)

    @staticmethod
    def at(buf: Buffer, bh: Expr, x: Any, y: Any) -> Expr:
        """Offset of [bh, x, y] in a (B, H, X, Y) buffer, batch and head fused."""
        _, _, nx, ny = buf.shape
        return (bh * nx + x) * ny + y

    def for_each(self, n: int, width: int, name: str, kind: str, body: Callable[[Expr, Any], None]) -> None:
        """body(start, i) over [0, n): loops of `width` iterations of the given kind, in serial
        blocks, with a shorter last block when width does not divide n."""
        for count, w, start in _blocks(n, width):
            with self.ib.loop(count, f"{name}o") as blk, self.ib.loop(w, name, kind) as i:
                body(blk * w + start, i)

    # -- the kernel ---------------------------------------------------------------------------
    def emit(self) -> None:
        ib, tq = self.ib, self.t.tile_q
        ntiles = -(-self.Sq // tq)
        last = self.Sq - (ntiles - 1) * tq
        with ib.loop(self.BH * ntiles, "tile", "parallel") as tile:
            bh, i0 = tile // ntiles, tile % ntiles * tq
            if last == tq:
                self.query_tile(bh, i0, tq)
            else:
                with ib.if_scope(tile % ntiles < ntiles - 1):
                    self.query_tile(bh, i0, tq)
                with ib.else_scope():
                    self.query_tile(bh, i0, last)

    def query_tile(self, bh: Expr, i0: Expr, nrows: int) -> None:
        ib, D, dt = self.ib, self.D, self.dtype
        with ib.allocate("m", (nrows,), dt) as m, ib.allocate("l", (nrows,), dt) as l_, \
                ib.allocate("acc", (nrows, D), dt) as acc, ib.allocate("S", (nrows, self.t.tile_k), dt) as S, \
                ib.allocate("part", (LANES,), dt) as part, ib.allocate("stat", (2,), dt) as stat:
            self.tile = _TileBuffers(m, l_, acc, S, part, stat)
            with ib.loop(nrows, "r") as r:
                ib.store(m, [r], self.c(float("-inf")))
                ib.store(l_, [r], self.c(0.0))
                with ib.loop(D, "d", "vectorize") as d:
                    ib.store(acc, [r, d], self.c(0.0))
            for count, width, start in _blocks(self.Sk, self.t.tile_k):
                with ib.loop(count, "kb") as kb:
                    j0 = kb * width + start
                    if self.causal:         # skip blocks whose first key is after the tile's last query
                        with ib.if_scope(j0 <= i0 + (nrows - 1)):
                            self.key_block(bh, i0, nrows, j0, width)
                    else:
                        self.key_block(bh, i0, nrows, j0, width)
            with ib.loop(nrows, "r") as r, ib.loop(D, "d", "vectorize") as d:
                ib.emit(Store(self.out, self.at(self.out, bh, i0 + r, d), ib.load(acc, [r, d]) / ib.load(l_, [r])))

    def key_block(self, bh: Expr, i0: Expr, nrows: int, j0: Expr, width: int) -> None:
        self.scores(bh, i0, nrows, j0, width)
        with self.ib.loop(nrows, "r") as r:
            self.softmax_update(i0, r, j0, width)
        self.accumulate(bh, nrows, j0, width)

    def scores(self, bh: Expr, i0: Expr, nrows: int, j0: Expr, width: int) -> None:
        """S[r, j] = q[i0 + r] . k[j0 + j]: `rows` x `score_width` vector accumulators over D."""
        ib, S = self.ib, self.tile.S
        for count, R, start in _blocks(nrows, self.t.rows):
            with ib.loop(count, "rb") as rb:
                r0 = rb * R + start
                for jcount, w, jstart in _blocks(width, self.t.score_width):
                    with ib.loop(jcount, "jb") as jb:
                        c0 = jb * w + jstart
                        with ib.loop(R, "r", "unroll") as r, ib.loop(w, "j", "vectorize") as j:
                            ib.store(S, [r0 + r, c0 + j], self.c(0.0))
                        with (ib.loop(self.D, "d") as d, ib.loop(R, "r", "unroll") as r,
                              ib.loop(w, "j", "vectorize") as j):
                            qv = Load(self.q, self.at(self.q, bh, i0 + r0 + r, d))
                            kv = Load(self.kt, self.at(self.kt, bh, d, j0 + c0 + j))
                            ib.store(S, [r0 + r, c0 + j], ib.load(S, [r0 + r, c0 + j]) + qv * kv)

    def softmax_update(self, i0: Expr, r: Expr, j0: Expr, width: int) -> None:
        """Row r of the block: scale and mask, new running max, P = exp(S - m_new) in place of S,
        rescale l and acc by alpha = exp(m - m_new)."""
        ib = self.ib
        m, l_, acc, S, part, stat = self.tile
        lanes = min(LANES, width)

        def scaled(c0: Expr, j: Any) -> None:
            s = ib.load(S, [r, c0 + j]) * self.c(self.scale)
            if self.causal:
                s = Select(j0 + c0 + j <= i0 + r, s, self.c(float("-inf")))
            ib.store(S, [r, c0 + j], s)    # the partials read S back: s reads the old S
            ib.store(part, [j], te.maximum(ib.load(part, [j]), ib.load(S, [r, c0 + j])))

        def exponent(c0: Expr, j: Any) -> None:
            ib.store(S, [r, c0 + j], te.exp(ib.load(S, [r, c0 + j]) - m_new))
            ib.store(part, [j], ib.load(part, [j]) + ib.load(S, [r, c0 + j]))

        self.fill_partials(lanes, float("-inf"))
        self.for_each(width, lanes, "j", "vectorize", scaled)
        ib.store(stat, [0], ib.load(m, [r]))
        self.fold_partials(stat, 0, lanes, te.maximum)                            # stat[0] = m_new
        m_new = ib.load(stat, [0])
        ib.store(stat, [1], te.exp(ib.load(m, [r]) - m_new))                     # stat[1] = alpha
        alpha = ib.load(stat, [1])
        self.fill_partials(lanes, 0.0)
        self.for_each(width, lanes, "j", "vectorize", exponent)
        ib.store(l_, [r], ib.load(l_, [r]) * alpha)
        self.fold_partials(l_, r, lanes, lambda a, b: a + b)
        ib.store(m, [r], m_new)
        with ib.loop(self.D, "d", "vectorize") as d:
            ib.store(acc, [r, d], ib.load(acc, [r, d]) * alpha)

    def fill_partials(self, lanes: int, value: float) -> None:
        with self.ib.loop(lanes, "p", "vectorize") as p:
            self.ib.store(self.tile.part, [p], self.c(value))

    def fold_partials(self, dst: Buffer, di: Any, lanes: int, fold: Callable[[Expr, Expr], Expr]) -> None:
        """dst[di] = fold(dst[di], partial) over the `lanes` partials."""
        ib, part = self.ib, self.tile.part
        with ib.loop(lanes, "p") as p:
            ib.store(dst, [di], fold(ib.load(dst, [di]), ib.load(part, [p])))

    def accumulate(self, bh: Expr, nrows: int, j0: Expr, width: int) -> None:
        """acc[r, d] += sum_j P[r, j] * v[j0 + j, d]: `rows` x `out_width` vector accumulators over j."""
        ib, acc, S = self.ib, self.tile.acc, self.tile.S
        for count, R, start in _blocks(nrows, self.t.rows):
            with ib.loop(count, "rb") as rb:
                r0 = rb * R + start
                for dcount, w, dstart in _blocks(self.D, self.t.out_width):
                    with ib.loop(dcount, "db") as db:
                        c0 = db * w + dstart
                        with (ib.loop(width, "j") as j, ib.loop(R, "r", "unroll") as r,
                              ib.loop(w, "d", "vectorize") as d):
                            vv = Load(self.v, self.at(self.v, bh, j0 + j, c0 + d))
                            p = ib.load(S, [r0 + r, j])
                            ib.store(acc, [r0 + r, c0 + d], ib.load(acc, [r0 + r, c0 + d]) + p * vv)
