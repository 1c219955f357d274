"""Matmul and dense on CUDA: the classic shared-memory tiled GEMM as a search space.

Each block computes a BM x BN tile of the output; each thread a register tile (rows x cols,
`cache_write` "local", computed at the thread's loop). K is walked in steps of BK: per step the
block fetches the A and B slices it needs into shared memory cooperatively (the fetch loop fused,
split over the block's threads and vectorized, so an aligned fetch is one float4 per thread),
then every thread accumulates its register tile from shared memory (with `double_buffer`, into
one copy of the slices while the next step's fetch fills the other). Same compute, args and
references as `autotune.schedules.cpu.matmul`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import te
from ...dtype import dtype_info
from ...target import CUDA_LIMITS
from ...topi.movement import pad
from ..cpu.matmul import _dense_reference
from ..task import template
from .generic import bind_cooperative, crop, round_up, split_exact, tile_extent

# (vthread, threads, per-thread) of each output axis. The default config: 128 x 128 block tiles,
# 16 x 16 threads, 8 x 8 outputs per thread; along x as 4 virtual threads of 2 columns, so the 16
# threads of a half-warp read 16 different banks of the B tile (stride 2 words, no conflicts).
_THREADS = (16, 8, 32, 4)
_PER_THREAD = (8, 4, 2, 1, 16)
_VTHREAD = (1, 2, 4, 8)
_TILE_K = (8, 16, 4, 32)
_FETCH_VEC = (4, 1, 2)
_DEFAULT_Y, _DEFAULT_X = [-1, 1, 16, 8], [-1, 4, 16, 2]


def _candidates(first: list[int]) -> list[list[int]]:
    cand = [[-1, v, t, r] for v in _VTHREAD for r in _PER_THREAD for t in _THREADS]
    return [first] + [c for c in cand if c != first]


def _define_knobs(cfg: Any, M: int, N: int, K: int) -> None:
    cfg.define_split("tile_y", M, 4, policy="candidate", candidate=_candidates(_DEFAULT_Y))
    cfg.define_split("tile_x", N, 4, policy="candidate", candidate=_candidates(_DEFAULT_X))
    cfg.define_split("tile_k", K, 2, policy="candidate", candidate=[[-1, k] for k in _TILE_K])
    cfg.define_knob("fetch_vec", list(_FETCH_VEC))
    cfg.define_knob("unroll_k", [1, 0])
    cfg.define_knob("double_buffer", [0, 1])


def _check_limits(cfg: Any, dtype: str) -> tuple[int, int]:
    """(threads in y, in x); the configs no GPU can launch are rejected here, never measured."""
    _, vy, ty, ry = cfg["tile_y"].size
    _, vx, tx, rx = cfg["tile_x"].size
    bk = cfg["tile_k"].size[-1]
    threads, limits = ty * tx, CUDA_LIMITS
    cfg.raise_if(threads > limits.max_threads_per_block,
                 f"{ty} x {tx} = {threads} threads per block > {limits.max_threads_per_block}")
    cfg.raise_if(threads < limits.warp_size, f"{ty} x {tx} = {threads} threads per block is less than a warp")
    shared = (vy * ty * ry + vx * tx * rx) * bk * dtype_info(dtype).bytes * (1 + cfg["double_buffer"].val)
    cfg.raise_if(shared > limits.shared_bytes_per_block,
                 f"shared tiles of {shared} bytes > {limits.shared_bytes_per_block}")
    cfg.raise_if(vy * ry * vx * rx > 128, f"a {vy * ry} x {vx * rx} register tile per thread spills")
    vec = cfg["fetch_vec"].val
    cfg.raise_if(bk % vec != 0 or (vx * tx * rx) % vec != 0,
                 f"fetch vector {vec} does not divide the k tile {bk} and the column tile {vx * tx * rx}")
    return ty, tx


def gemm_schedule(cfg: Any, M: int, N: int, K: int, dtype: str, transposed: bool = False,
                  epilogue: Callable[[te.Tensor], te.Tensor] | None = None,
                  extra_inputs: tuple[te.Tensor, ...] = ()) -> tuple[te.Schedule, list[te.Tensor]]:
    """The tiled GEMM of A (M x K) and B (K x N, or N x K when transposed), with an optional
    elementwise `epilogue(C)` applied on the register tile before the single store.

    Where a tile does not divide M, N or K, the product is computed over the sizes rounded up to
    the tiles, from operands read as zero outside their bounds: the shared fetch is the only
    place that tests a bound on the way in, and the store on the way out, so the inner product
    runs guard-free on every shape (guarded, it ran at a sixth of the divisible shape's rate)."""
    _define_knobs(cfg, M, N, K)
    ty, tx = _check_limits(cfg, dtype)
    Mp = round_up(M, tile_extent(cfg["tile_y"].size))
    Np = round_up(N, tile_extent(cfg["tile_x"].size))
    Kp = round_up(K, cfg["tile_k"].size[-1])
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((N, K) if transposed else (K, N), dtype, name="W" if transposed else "B")
    a_tile, b_tile = _zero_padded(A, (Mp, Kp)), _zero_padded(B, (Np, Kp) if transposed else (Kp, Np))
    k = te.reduce_axis((0, Kp), name="k")
    C = te.compute((Mp, Np), lambda i, j: te.sum(a_tile[i, k] * (b_tile[j, k] if transposed else b_tile[k, j]),
                                                 axis=k), name="C")
    out = (epilogue(C) if epilogue is not None                   # a padded product stores its M x N corner
           else C if (Mp, Np) == (M, N) else crop(C, (M, N), "C_out"))
    s = te.create_schedule(out.op)
    for padded in {a_tile, b_tile} - {A, B}:
        s[padded].compute_inline()     # the bound test happens in the shared fetch
    AA = s.cache_read(a_tile, "shared", [C])
    BB = s.cache_read(b_tile, "shared", [C])
    CL = s.cache_write(C, "local")
    if out is not C:
        s[C].compute_inline()          # the epilogue (or the crop) reads the register tile directly
    thread_x = _tile_output(cfg, s, out)
    s[CL].compute_at(s[out], thread_x)
    ci, cj = s[CL].op.axis
    ko, ki = cfg["tile_k"].apply(s, CL, s[CL].op.reduce_axis[0])
    s[CL].reorder(ko, ki, ci, cj)
    if cfg["unroll_k"].val:
        s[CL].unroll(ki)
    s[CL].unroll(ci)
    s[CL].unroll(cj)
    for X in (AA, BB):
        s[X].compute_at(s[CL], ko)
        bind_cooperative(s, X, (ty, tx), cfg["fetch_vec"].val)
        if cfg["double_buffer"].val:
            s[X].double_buffer()
    return s, [A, B, *extra_inputs, out]


def _zero_padded(X: te.Tensor, shape: tuple[int, int]) -> te.Tensor:
    """X itself when it already has `shape`, else X read as zero beyond its bounds."""
    rows, cols = (int(d) for d in X.shape)
    if (rows, cols) == shape:
        return X
    return pad(X, (0, 0), (shape[0] - rows, shape[1] - cols), name=f"{X.name}_padded")


def _tile_output(cfg: Any, s: te.Schedule, out: te.Tensor) -> Any:
    """Output loops (by, bx, vy, vx, ty, tx, yi, xi), bound; returns the threadIdx.x loop."""
    i, j = s[out].op.axis
    st = s[out]
    by, vy, ty, yi = split_exact(st, i, cfg["tile_y"].size)
    bx, vx, tx, xi = split_exact(st, j, cfg["tile_x"].size)
    st.reorder(by, bx, vy, vx, ty, tx, yi, xi)
    for axis, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (vy, "vthread"), (vx, "vthread"),
                      (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        st.bind(axis, te.thread_axis(tag))
    st.unroll(yi)
    st.unroll(xi)
    return tx


@template("matmul", reference=lambda a, b, **_: a @ b, target="cuda",
          description="C = A @ B, A: M x K, B: K x N (shared-memory tiled GEMM)")
def matmul_cuda(cfg: Any, M: int, N: int, K: int, dtype: str = "float32"):
    """C = A @ B: block tiles, register tiles, K slices staged in shared memory."""
    return gemm_schedule(cfg, M, N, K, dtype)


@template("dense", reference=_dense_reference, target="cuda",
          description="relu(X @ W.T + bias), X: M x K, W: N x K (fused epilogue, tiled GEMM)")
def dense_cuda(cfg: Any, M: int, N: int, K: int, dtype: str = "float32"):
    """relu(X @ W.T + bias) in one kernel: the epilogue runs on the register tile."""
    bias = te.placeholder((N,), dtype, name="bias")

    def epilogue(C: te.Tensor) -> te.Tensor:
        return te.compute((M, N), lambda i, j: te.maximum(C[i, j] + bias[j], te.const(0, dtype)), name="Y")

    return gemm_schedule(cfg, M, N, K, dtype, transposed=True, epilogue=epilogue, extra_inputs=(bias,))
