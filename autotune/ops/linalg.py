"""Linear-algebra ops: matmul, batch_matmul, dense (+bias+relu), conv2d NCHW; weights packed once."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime import load
from ..schedules.cpu.panels import check_panel, default_panel, pack_panels
from ..target import Target
from .checks import arrays as _arrays, contiguous as _contiguous


@dataclass(frozen=True)
class PackedWeight:
    """A constant weight packed once into the matmul kernels' panel layout (`pack_weight`):
    matmul and dense given one run the `*_packed` kernels, which skip packing it per call."""

    data: np.ndarray       # (ceil(N / panel), K, panel)
    K: int
    N: int
    panel: int


def pack_weight(w: np.ndarray, transposed: bool = False, panel: int | None = None,
                target: str = "llvm") -> PackedWeight:
    """Pack a matmul B (K x N), or a dense W (N x K) with `transposed`, for repeated calls.

    `panel` (columns per panel) defaults to the rule for `target` and N (`default_panel`): two
    vectors, or one where that pads less."""
    dtype = _arrays("pack_weight", ("w",), (w,), (2,))
    K, N = (w.shape[1], w.shape[0]) if transposed else w.shape
    panel = default_panel(Target.parse(target), dtype, N) if panel is None else panel
    check_panel("pack_weight", panel)
    return PackedWeight(pack_panels(w, panel, transposed), K, N, panel)


def _packed_matmul(op: str, a: np.ndarray, w: PackedWeight, extra: tuple[np.ndarray, ...], db: Any) -> np.ndarray:
    dtype = _arrays(op, ("x", "w", *(["bias"] if extra else [])), (a, w.data, *extra), (2, 3, 1))
    if a.shape[1] != w.K:
        raise ValueError(f"{op}: x is {a.shape} but the packed weight has K={w.K}; need x.shape[1] == K")
    if extra and extra[0].shape[0] != w.N:
        raise ValueError(f"{op}: bias is {extra[0].shape} but the packed weight has N={w.N}")
    kernel = load(f"{op}_packed", db=db, dtype=dtype, M=a.shape[0], N=w.N, K=w.K, panel=w.panel)
    return kernel(*_contiguous(a, w.data, *extra))


def matmul(a: np.ndarray, b: np.ndarray | PackedWeight, db: Any = None) -> np.ndarray:
    """a @ b for 2-d a (M x K) and b (K x N), or b a `pack_weight(b)`."""
    if isinstance(b, PackedWeight):
        return _packed_matmul("matmul", a, b, (), db)
    dtype = _arrays("matmul", ("a", "b"), (a, b), (2, 2))
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: a is {a.shape} and b is {b.shape}; a.shape[1] must equal b.shape[0]")
    M, K = a.shape
    kernel = load("matmul", db=db, dtype=dtype, M=M, N=b.shape[1], K=K)
    return kernel(*_contiguous(a, b))


def batch_matmul(a: np.ndarray, b: np.ndarray, db: Any = None) -> np.ndarray:
    """a[i] @ b[i] for 3-d a (batch x M x K) and b (batch x K x N)."""
    dtype = _arrays("batch_matmul", ("a", "b"), (a, b), (3, 3))
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"batch_matmul: a is {a.shape} and b is {b.shape}; batch sizes must match and "
                         "a.shape[2] must equal b.shape[1]")
    batch, M, K = a.shape
    kernel = load("batch_matmul", db=db, dtype=dtype, batch=batch, M=M, N=b.shape[2], K=K)
    return kernel(*_contiguous(a, b))


def dense(x: np.ndarray, w: np.ndarray | PackedWeight, bias: np.ndarray, db: Any = None) -> np.ndarray:
    """relu(x @ w.T + bias) for x (M x K), w (N x K) or `pack_weight(w, transposed=True)`, bias (N,),
    in one fused kernel."""
    if isinstance(w, PackedWeight):
        return _packed_matmul("dense", x, w, (bias,), db)
    dtype = _arrays("dense", ("x", "w", "bias"), (x, w, bias), (2, 2, 1))
    if x.shape[1] != w.shape[1] or bias.shape[0] != w.shape[0]:
        raise ValueError(f"dense: x is {x.shape}, w is {w.shape}, bias is {bias.shape}; need x.shape[1] == "
                         "w.shape[1] and bias.shape[0] == w.shape[0]")
    kernel = load("dense", db=db, dtype=dtype, M=x.shape[0], N=w.shape[0], K=x.shape[1])
    return kernel(*_contiguous(x, w, bias))


def conv2d(x: np.ndarray, w: np.ndarray, stride: int = 1, padding: int = 0, db: Any = None) -> np.ndarray:
    """NCHW conv2d of x (N x C x H x W) with w (F x C x KH x KW)."""
    dtype = _arrays("conv2d", ("x", "w"), (x, w), (4, 4))
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"conv2d: x has {x.shape[1]} channels but w expects {w.shape[1]} (x {x.shape}, w {w.shape})")
    N, C, H, W = x.shape
    F, _, KH, KW = w.shape
    kernel = load("conv2d", db=db, dtype=dtype, N=N, C=C, H=H, W=W, F=F, KH=KH, KW=KW, stride=stride,
                  padding=padding)
    return kernel(*_contiguous(x, w))
