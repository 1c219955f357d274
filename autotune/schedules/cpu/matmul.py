"""Matmul on the CPU: the compute definitions and the classic hand schedule.

The template and the hand schedule follow TVM's GEMM recipe: B packed into column panels so the
innermost loop reads it contiguously, C tiled, each tile accumulated in a small local buffer
(registers after LLVM's promotion) by compute_at, k split and unrolled, the panel columns
vectorized, tiles in parallel.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ... import te
from ...dtype import dtype_info
from ...schedules.schedule import Schedule
from ..generic import vectorize_by
from ..space import KnobScope
from ..task import template
from .panels import PANEL_WIDTHS, check_panel, panel_count, unpack_panels
from .rules import (
    ascending_first,
    check_register_tile,
    cpu_facts,
    enough_chunks,
    first,
    lanes,
    largest_fitting,
    register_tile,
    worth_threads,
)


def matmul(M: int, N: int, K: int, dtype: str = "float32", name: str = "C") -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """C[i, j] = sum_k A[i, k] * B[k, j]."""
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name=name)
    return A, B, C


def default_schedule(M: int, N: int, K: int, dtype: str = "float32") -> tuple[Schedule, list[te.Tensor]]:
    """The naive triple loop (what an untuned kernel runs)."""
    A, B, C = matmul(M, N, K, dtype)
    return te.create_schedule(C.op), [A, B, C]


def hand_schedule(M: int, N: int, K: int, dtype: str = "float32", bn: int = 32, rows: int = 8,
                  kfactor: int = 4) -> tuple[Schedule, list[te.Tensor]]:
    """Packed B, bn x bn tiles, `rows` x bn register block, k split by `kfactor`, vector, parallel."""
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    panels = -(-N // bn)
    packed = te.compute((panels, K, bn), lambda x, y, z: te.if_then_else(
        x * bn + z < N, B[y, te.minimum(x * bn + z, N - 1)], te.const(0, dtype)), name="packedB")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * packed[j // bn, k, j % bn], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, bn, bn)
    iio, _iii = s[C].split(ii, rows)
    s[CC].compute_at(s[C], iio)
    ci, cj = s[CC].op.axis
    (kc,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kc, kfactor)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    fused = s[C].fuse(io, jo)
    s[C].parallel(fused)
    x, _, z = s[packed].op.axis
    s[packed].vectorize(z)
    s[packed].parallel(x)
    return s, [A, B, C]


def _packed_b(B: te.Tensor, N: int, K: int, bn: int, dtype: str, transposed: bool, name: str = "packedB") -> te.Tensor:
    """B (K x N, or N x K when transposed) as ceil(N/bn) panels of bn columns, zero-padded at the tail."""

    def elem(x, y, z):
        col = te.minimum(x * bn + z, N - 1)
        return te.if_then_else(x * bn + z < N, B[col, y] if transposed else B[y, col], te.const(0, dtype))

    return te.compute((panel_count(N, bn), K, bn), elem, name=name)


COLUMNS = PANEL_WIDTHS                          # tile_x: columns of a register tile (and of a B panel)
ROWS = (1, 2, 4, 6, 8)                          # register-tile rows
BLOCKS = (1, 2, 4, 8, 16)                       # register tiles per row block (they share a B panel)
UNROLL_K = (1, 2, 4, 8, 16)


def define_matmul_knobs(cfg, M: int, N: int, K: int, dtype: str, transposed: bool, panel: int | None = None) -> None:
    """The knobs of `matmul_body`, each with its rule's value first (the default config):

    tile_x = 2 x lanes (two vectors per row of the register tile); tile_y = [-1, blocks, rows]
    with rows the most that keep rows x tile_x/lanes accumulators within 3/4 of the vector
    registers (and rows <= M), and blocks the most register tiles whose A rows (blocks x rows x K)
    fit in half of L2, leave >= 4 chunks per core to the parallel tile loop and stay within M;
    tile_k = the unroll giving ~64 multiply-adds per unrolled step; B packed when M >= lanes
    (each packed element then feeds a vector of rows) and always for dense's W (N x K: unpacked,
    its columns would be strided gathers); threads when the product has >= 2^15 vector
    multiply-adds, or >= 2^15 elements of B (each read at least once: a matrix-vector product is
    bound by reading B, not by its multiply-adds), and the target more than one core. Other
    values ascending (strings in a fixed order). With B pre-packed in panels of `panel`
    columns, tile_x is the panel and there is no pack_b knob; rows and unroll follow the rule
    for that width.
    """
    width = lanes(cfg, dtype)
    bn, rows, unroll = register_tile(cfg, dtype, M, (panel,) if panel else COLUMNS, ROWS, UNROLL_K)
    blocks = largest_fitting(BLOCKS, lambda m: m * rows * K * dtype_info(dtype).bytes <= cpu_facts(cfg).l2_bytes // 2
                             and m * rows <= M and enough_chunks(cfg, -(-M // (m * rows)) * -(-N // bn)))
    packs = bool(panel) or transposed or width <= M
    if panel is None:
        cfg.define_knob("pack_b", first(int(packs), [0, 1]))
    columns = [panel] if panel else ascending_first(bn, COLUMNS)
    # packed, C spans whole panels: the rule's tile stays whole past N (shrunk to N, its vectors
    # were partial: 1001 x 20 x 1013 dense 0.23x onnxruntime); unpacked, C ends at N
    cfg.define_split("tile_x", max(N, bn) if packs else N, 2, policy="candidate",
                     candidate=[[-1, v] for v in columns])
    tiles = first([blocks, rows], [[m, r] for r in ROWS for m in BLOCKS])
    cfg.define_split("tile_y", M, 3, policy="candidate", candidate=[[-1, *t] for t in tiles])
    cfg.define_split("tile_k", K, 2, policy="candidate", candidate=[[-1, f] for f in ascending_first(unroll, UNROLL_K)])
    cfg.define_knob("unroll_rows", [1, 0])
    threads = worth_threads(cfg, max(M * N * K // width, N * K))
    cfg.define_knob("parallel", first("fused" if threads else "none", ["fused", "outer", "none"]))


class _Product(NamedTuple):
    A: te.Tensor
    B: te.Tensor
    C: te.Tensor                  # the product (the register tiles)
    out: te.Tensor                # what the kernel writes
    packed: te.Tensor | None      # B in panels, packed by the kernel (None: unpacked or pre-packed)
    view: te.Tensor | None        # C's first N columns, inlined into the epilogue


def _product(cfg, M: int, N: int, K: int, dtype: str, transposed: bool, epilogue, panel: int | None,
             A: te.Tensor | None = None, tag: str = "") -> _Product:
    """The computation of one config: C = A @ B (or A @ W.T) and the output read from it.

    With B packed, C spans whole panels (its padding columns are zeros), so the register tile at
    a column tail is as vectorized as the others; `out` reads C's first N columns through an
    inlined view, so only the store to the output is guarded. With `panel`, B arrives packed
    (`panels.pack_panels`) and the kernel has no packing stage. `A` is the left operand when
    another stage computes it (a GEMM chain); `tag` makes the tensor names distinct there."""
    A = te.placeholder((M, K), dtype, name="A") if A is None else A
    k = te.reduce_axis((0, K), name=f"k{tag}")
    packed: te.Tensor | None = None
    if panel:
        B = te.placeholder((panel_count(N, panel), K, panel), dtype, name=("Wp" if transposed else "Bp") + tag)
        panels, bn = B, panel
    else:
        B = te.placeholder((N, K) if transposed else (K, N), dtype, name=("W" if transposed else "B") + tag)
        if not cfg["pack_b"].val:
            C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * (B[j, k] if transposed else B[k, j]), axis=k),
                           name=f"C{tag}")
            return _Product(A, B, C, C if epilogue is None else epilogue(C), None, None)
        bn = cfg["tile_x"].size[-1]
        panels = packed = _packed_b(B, N, K, bn, dtype, transposed, f"packedB{tag}")
    C = te.compute((M, panels.shape[0] * bn), lambda i, j: te.sum(A[i, k] * panels[j // bn, k, j % bn], axis=k),
                   name=f"C{tag}")
    view = te.compute((M, N), lambda i, j: C[i, j], name=("Y" if epilogue is None else "Cview") + tag)
    if epilogue is None:
        return _Product(A, B, C, view, packed, None)
    return _Product(A, B, C, epilogue(view), packed, view)


def matmul_body(cfg, M: int, N: int, K: int, dtype: str, transposed: bool = False, epilogue=None,
                extra_inputs=(), panel: int | None = None):
    """Shared by matmul and dense: the packed/unpacked product with a tiled, tunable schedule.

    `epilogue(C)` returns the output computed from C elementwise (bias, activation): C is then
    computed into a local tile at the output's block and never written to memory. `panel`: B
    (or W) arrives pre-packed in panels of that many columns.
    """
    define_matmul_knobs(cfg, M, N, K, dtype, transposed, panel)
    p = _product(cfg, M, N, K, dtype, transposed, epilogue, panel)
    s = te.create_schedule(p.out.op)
    _schedule_product(cfg, s, p, transposed)
    return s, [p.A, p.B, *extra_inputs, p.out]


class Layer(NamedTuple):
    """One product of a GEMM chain: out = epilogue(A @ B), B K x N (pre-packed when `panel`),
    A the chain's input or the layer before's output."""
    N: int
    K: int
    panel: int | None
    epilogue: Any                 # C -> Tensor, or None


def matmul_chain_body(cfg, M: int, layers: Sequence[Layer], dtype: str, extra_inputs=()):
    """Products in sequence in one kernel (an MLP's layers): each layer's output, the next one's
    A, is an intermediate of the kernel, written and read while it is in cache, never by another
    kernel. Each layer is scheduled as `matmul_body` schedules one product, with its own knobs
    (`l0.tile_x`, `l1.tile_x`...) and defaults by the same rule; the layers run one after the
    other, each with its own threads. Inputs: A, each layer's B, then `extra_inputs`."""
    products: list[tuple[KnobScope, _Product]] = []
    a: te.Tensor | None = None
    for i, layer in enumerate(layers):
        scope = KnobScope(cfg, f"l{i}.")
        define_matmul_knobs(scope, M, layer.N, layer.K, dtype, False, layer.panel)
        p = _product(scope, M, layer.N, layer.K, dtype, False, layer.epilogue, layer.panel, A=a, tag=str(i))
        products.append((scope, p))
        a = p.out
    s = te.create_schedule(products[-1][1].out.op)
    for scope, p in products:
        _schedule_product(scope, s, p, False)
    return s, [products[0][1].A, *(p.B for _, p in products), *extra_inputs, products[-1][1].out]


def _schedule_product(cfg, s: Schedule, p: _Product, transposed: bool) -> None:
    """Register tiles of C accumulated locally at the output's row block, k unrolled, columns
    vectorized, tiles in parallel; the packing stage, if any, by `_schedule_packing`."""
    C, out, packed, view = p.C, p.out, p.packed, p.view
    if view is not None:
        s[view].compute_inline()
    CC = s.cache_write(C, "local") if out is C else C
    i, j = out.op.axis
    io, im, ir = cfg["tile_y"].apply(s, out, i)
    jo, ji = cfg["tile_x"].apply(s, out, j)
    s[out].reorder(io, jo, im, ir, ji)
    s[CC].compute_at(s[out], im)
    ci, cj = s[CC].op.axis
    ko, ki = cfg["tile_k"].apply(s, CC, s[CC].op.reduce_axis[0])
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    bn, width = cfg["tile_x"].size[-1], lanes(cfg, out.dtype)
    if cfg["unroll_rows"].val:
        check_register_tile(cfg, cfg["tile_y"].size[-1] * -(-bn // width), "matmul (rows x tile_x / lanes)")
        s[CC].unroll(ci)
    vectorize_by(s[CC], cj, bn, width)
    vectorize_by(s[out], ji, bn, width)
    if cfg["parallel"].val == "fused":
        s[out].parallel(s[out].fuse(io, jo))
    elif cfg["parallel"].val == "outer":
        s[out].parallel(io)
    if packed is not None:
        _schedule_packing(s[packed], transposed, bn, width)


def _schedule_packing(stage, transposed: bool, bn: int, width: int) -> None:
    """Copy B into panels in the order B is laid out: row by row of B (k outer, in parallel) reads
    it contiguously (twice the speed of panel by panel); W of dense (N x K) is read panel by panel."""
    x, y, z = stage.op.axis
    if not transposed:
        stage.reorder(y, x, z)
    stage.parallel(x if transposed else y)
    vectorize_by(stage, z, bn, width)


@template("matmul", reference=lambda a, b, **_: a @ b, description="C = A @ B, A: M x K, B: K x N")
def matmul_template(cfg, M: int, N: int, K: int, dtype: str = "float32"):
    """C = A @ B with packed B, register-blocked local accumulation, k unrolling and threads.

    Default (`define_matmul_knobs`): tile_x = 2 x lanes; rows = the most whose accumulators fit
    3/4 of the vector registers; blocks = the most tiles whose A rows fit half of L2 with >= 4
    parallel chunks per core; k unrolled to ~64 multiply-adds a step; B packed when M >= lanes
    (W of dense always);
    threads when the product has >= 2^15 vector multiply-adds and the target more than one core.
    """
    return matmul_body(cfg, M, N, K, dtype)


def _dense_reference(x, w, bias, **_):
    return np.maximum(x @ w.T + bias, 0)


@template("dense", reference=_dense_reference, description="relu(X @ W.T + bias), X: M x K, W: N x K (fused epilogue)")
def dense_template(cfg, M: int, N: int, K: int, dtype: str = "float32"):
    """relu(X @ W.T + bias) in one kernel: the epilogue runs on the register tile.

    Default (`define_matmul_knobs`): tile_x = 2 x lanes; rows = the most whose accumulators fit
    3/4 of the vector registers; blocks = the most tiles whose A rows fit half of L2 with >= 4
    parallel chunks per core; k unrolled to ~64 multiply-adds a step; B packed when M >= lanes
    (W of dense always);
    threads when the product has >= 2^15 vector multiply-adds and the target more than one core.
    """
    bias = te.placeholder((N,), dtype, name="bias")

    def epilogue(C):
        return te.compute((M, N), lambda i, j: te.maximum(C[i, j] + bias[j], te.const(0, dtype)), name="Y")

    return matmul_body(cfg, M, N, K, dtype, transposed=True, epilogue=epilogue, extra_inputs=(bias,))


def _packed_matmul_reference(a, bp, *, N, **_):
    return a @ unpack_panels(bp, N)


@template("matmul_packed", reference=_packed_matmul_reference,
          description="C = A @ B with B pre-packed: A: M x K, Bp: ceil(N/panel) x K x panel (panels.pack_panels)")
def matmul_packed_template(cfg, M: int, N: int, K: int, panel: int, dtype: str = "float32"):
    """matmul for a constant B, packed once (graph compile time, `autotune.ops.pack_weight`)
    instead of on every call: the kernel reads the panels directly.

    Default (`define_matmul_knobs`): tile_x = the panel; rows = the most whose accumulators fit
    3/4 of the vector registers; blocks = the most tiles whose A rows fit half of L2 with >= 4
    parallel chunks per core; k unrolled to ~64 multiply-adds a step; threads when the product
    has >= 2^15 vector multiply-adds and the target more than one core.
    """
    check_panel("matmul_packed", panel)
    return matmul_body(cfg, M, N, K, dtype, panel=panel)


def _packed_dense_reference(x, wp, bias, *, N, **_):
    return np.maximum(x @ unpack_panels(wp, N) + bias, 0)


@template("dense_packed", reference=_packed_dense_reference,
          description="relu(X @ W.T + bias) with W pre-packed: Wp = panels.pack_panels(W, panel, transposed=True)")
def dense_packed_template(cfg, M: int, N: int, K: int, panel: int, dtype: str = "float32"):
    """dense for a constant W, packed once (graph compile time) instead of on every call.

    Default (`define_matmul_knobs`): tile_x = the panel; rows = the most whose accumulators fit
    3/4 of the vector registers; blocks = the most tiles whose A rows fit half of L2 with >= 4
    parallel chunks per core; k unrolled to ~64 multiply-adds a step; threads when the product
    has >= 2^15 vector multiply-adds and the target more than one core.
    """
    check_panel("dense_packed", panel)
    bias = te.placeholder((N,), dtype, name="bias")

    def epilogue(C):
        return te.compute((M, N), lambda i, j: te.maximum(C[i, j] + bias[j], te.const(0, dtype)), name="Y")

    return matmul_body(cfg, M, N, K, dtype, transposed=True, epilogue=epilogue, extra_inputs=(bias,), panel=panel)
