"""The pre-packed weight layout of the matmul family: a weight as column panels.

The matmul micro-kernel reads B one panel of `panel` columns at a time, each panel K x panel and
contiguous, so the innermost loop loads whole vectors. A kernel that takes B as written packs it
on every call (for a 3072 x 768 weight that is 19 MB of copying per call); a weight that is a
model constant is packed once instead, at graph compile time (TVM's alter-op-layout), and the
`*_packed` templates read the panels directly. These numpy functions are that layout's
definition: the templates' references unpack with them and the graph runtime packs with them.
"""
from __future__ import annotations

import numpy as np

from ...dtype import dtype_info
from ...target import Target
from .rules import closest, two_vectors

PANEL_WIDTHS = (8, 16, 24, 32, 48, 64, 96, 128)   # the matmul template's tile_x columns


def panel_count(N: int, panel: int) -> int:
    return -(-N // panel)


def check_panel(op: str, panel: int) -> None:
    if panel not in PANEL_WIDTHS:
        raise ValueError(f"{op}: panel must be one of {', '.join(map(str, PANEL_WIDTHS))}, got {panel}")


def default_panel(target: Target, dtype: str, N: int) -> int:
    """The rule's panel for N columns: two vectors of the target (the matmul template's default
    tile_x), one only where one vector holds every column. A register tile of one vector loads
    (rows + 1) operands per `rows` multiply-adds, two vectors (rows + 2) per 2 x rows: a core
    that issues two vector multiply-adds a cycle (Zen 5, AVX-512 Xeons, AVX2 cores) waits on
    its loads with one vector, and that costs more than the zero columns two vectors pad (Zen 5,
    2 threads, dense at M, K ~ 1000, one vector / two: N=72 0.85x, 100 0.86x, 197 0.80-0.91x,
    300 0.75-0.87x, 521 0.78x, 877 0.79x, 937 0.75-0.86x; N=40 and 50 level). Zen 4, which
    issues one 512-bit multiply-add a cycle, had gained 1.04-1.14x with one vector where it
    padded less (N=100 to 521)."""
    lanes = target.cpu.lanes(dtype_info(dtype).bytes)
    return closest(lanes, PANEL_WIDTHS) if lanes >= N else two_vectors(lanes, PANEL_WIDTHS)


def pack_panels(weight: np.ndarray, panel: int, transposed: bool = False) -> np.ndarray:
    """B (K x N), or W (N x K) when `transposed`, as (ceil(N / panel), K, panel) panels; the
    columns past N are zeros."""
    b = np.asarray(weight)
    if b.ndim != 2:
        raise ValueError(f"a packed weight is made from a 2-d matrix, got shape {b.shape}")
    kn = b.T if transposed else b
    K, N = kn.shape
    count = panel_count(N, panel)
    padded = np.zeros((K, count * panel), dtype=b.dtype)
    padded[:, :N] = kn
    return np.ascontiguousarray(padded.reshape(K, count, panel).transpose(1, 0, 2))


def unpack_panels(packed: np.ndarray, N: int) -> np.ndarray:
    """The K x N matrix `packed` holds (padding columns dropped)."""
    count, K, panel = packed.shape
    return packed.transpose(1, 0, 2).reshape(K, count * panel)[:, :N]
