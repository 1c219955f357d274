"""Winograd convolution F(m x m, 3 x 3) as te computes (Lavin & Gray, arXiv:1509.09308).

Per m x m output tile, from the (m+2) x (m+2) input tile d it reads and the 3 x 3 filter g:

    Y = A^T [ (G g G^T) * (B^T d B) ] A        (* elementwise; summed over input channels)

Stages, each a compute (the CPU schedule runs them all in one kernel); t numbers the tiles of all
images (image, tile row, tile column), e and nu are positions in a transformed tile:
    D       the input zero-padded and in NHWC, big enough for whole tiles: padding and tile tails
            read zeros, so the transforms never branch
    Gg, U   kernel transform G g G^T, output channels packed in panels of `bf` (the GEMM's vector
            operand; channels past F are zero): U[fo, e, c, nu, fi]
    Bd, V   input transform B^T d B: V[t, e, nu, c]
    M       the (m+2)^2 GEMMs M[t, e, nu, f] = sum_c V[t, e, nu, c] * U[f // bf, e, c, nu, f % bf]
    AM, R   output transform A^T M A, channels last
    Y       R in NCHW, with the caller's epilogue on each value

The matrices are exact rationals from the Cook-Toom construction. Each transform L X R^T runs
as its separable two passes, (L X) then (L X) R^T, and each row of a pass is a linear
combination written out with the coefficients folded in (a 0 drops a term, a +-1 needs no
multiply), picked by a select chain over the row that unrolling the row's loop folds away. Two
passes rather than one also keep lowering fast: a chain over all (m+2)^2 positions, copied
(m+2)^2 times by unrolling, took tens of seconds to lower.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction

from .. import te
from ..te.expr import Expr

# Interpolation points (the last one is infinity): the accurate sets of Barabasz et al.,
# arXiv:1803.10986, which TVM also uses
POINTS: dict[int, tuple[Fraction, ...]] = {
    2: (Fraction(0), Fraction(-1), Fraction(1)),
    4: (Fraction(0), Fraction(-1), Fraction(1), Fraction(1, 2), Fraction(-2)),
}
Matrix = list[list[Fraction]]
Epilogue = Callable[[Expr, tuple[Expr, Expr, Expr, Expr]], Expr]


def _poly(roots: Sequence[Fraction]) -> list[Fraction]:
    """Coefficients (lowest power first) of prod (x - root)."""
    c = [Fraction(1)]
    for root in roots:
        c = [(c[i - 1] if i else 0) - root * (c[i] if i < len(c) else 0) for i in range(len(c) + 1)]
    return c


def winograd_matrices(m: int, r: int = 3) -> tuple[Matrix, Matrix, Matrix]:
    """(A^T, G, B^T) of F(m, r): m x a, a x r, a x a with a = m + r - 1.

    Toom-Cook for the linear convolution evaluates at the points and at infinity and interpolates
    (Lagrange); the correlation a conv layer computes is its transpose, so the input transform is
    the interpolation's transpose and the output transform the evaluation's."""
    if m not in POINTS or r != 3:
        raise ValueError(f"winograd: F({m}, {r}) is not supported; m must be one of {sorted(POINTS)}, r 3")
    pts = POINTS[m]
    at = [[p ** i for p in pts] + [Fraction(int(i == m - 1))] for i in range(m)]
    g = []
    for k, p in enumerate(pts):
        scale = Fraction(1)
        for q in pts[:k] + pts[k + 1:]:
            scale *= p - q
        g.append([p ** j / scale for j in range(r)])
    g.append([Fraction(int(j == r - 1)) for j in range(r)])
    bt = [_poly(pts[:k] + pts[k + 1:]) + [Fraction(0)] for k in range(len(pts))] + [_poly(pts)]
    return at, g, bt


def _signed_sum(terms: Sequence[tuple[int, Expr]]) -> tuple[int, Expr]:
    """(sign, x) with sign * x = sum(s * t): positive terms first, so only a sum of negative terms
    needs a negation (left to the caller, who may fold it into a subtraction)."""
    pos = [t for sg, t in terms if sg > 0]
    neg = [t for sg, t in terms if sg < 0]
    sign = 1 if pos else -1
    if not pos:
        pos, neg = neg, []
    out = pos[0]
    for t in pos[1:]:
        out = out + t
    for t in neg:
        out = out - t
    return sign, out


def _combination(terms: Sequence[tuple[Fraction, Expr]], dtype: str) -> Expr:
    """sum(c * x) with the constants folded: zero terms dropped, terms of equal |c| summed
    before one multiply, none for |c| = 1."""
    by_size: dict[Fraction, list[tuple[int, Expr]]] = {}
    for c, x in terms:
        if c != 0:
            by_size.setdefault(abs(c), []).append((1 if c > 0 else -1, x))
    if not by_size:
        return te.const(0, dtype)
    scaled = []
    for size, group in by_size.items():
        sign, x = _signed_sum(group)
        scaled.append((sign, x if size == 1 else x * te.const(float(size), dtype)))
    sign, out = _signed_sum(scaled)
    return out if sign > 0 else -out


def row_combination(matrix: Matrix, row: Expr, value: Callable[[int], Expr], dtype: str) -> Expr:
    """sum_k matrix[row][k] * value(k) for an index expression `row`: one folded combination per
    row, picked by a select chain that unrolling the row's loop folds away."""
    out = _combination([(matrix[-1][k], value(k)) for k in range(len(matrix[-1]))], dtype)
    for i in range(len(matrix) - 2, -1, -1):
        out = te.if_then_else(row == i, _combination([(matrix[i][k], value(k)) for k in range(len(matrix[i]))],
                                                     dtype), out)
    return out


def padded_tiles(X: te.Tensor, pad_before: Sequence[int], rows: int, cols: int) -> te.Tensor:
    """D[n, yy, xx, c] = X[n, c, yy - top, xx - left], zero outside X: NHWC, `rows` x `cols`."""
    N, C, H, W = X.shape
    top, left = pad_before

    def body(n: Expr, yy: Expr, xx: Expr, c: Expr) -> Expr:
        y, x = yy - top, xx - left
        inside = te.all(y >= 0, y < H, x >= 0, x < W)
        return te.if_then_else(inside, X[n, c, y, x], te.const(0, X.dtype))

    return te.compute((N, rows, cols, C), body, name="wino_pad")


def kernel_transform(Wt: te.Tensor, m: int, bf: int) -> tuple[te.Tensor, te.Tensor]:
    """(Gg, U): Gg[fo, c, e, s, fi] = (G g)[e, s] and U[fo, e, c, nu, fi] = (Gg G^T)[e, nu] of
    filter f = fo * bf + fi (zero when f >= F): G g G^T as two passes of its separable form.
    U's layout keeps each GEMM's panel (fixed fo, e, nu) a short stride per channel and the
    transform's stores for one (fo, c) in a + 2 runs."""
    F, C, KH, _ = Wt.shape
    _, g, _ = winograd_matrices(m)
    a, zero = m + 2, te.const(0, Wt.dtype)

    def left(fo: Expr, c: Expr, e: Expr, s: Expr, fi: Expr) -> Expr:
        f = fo * bf + fi
        return te.if_then_else(f < F, row_combination(g, e, lambda r: Wt[f, c, r, s], Wt.dtype), zero)

    Gg = te.compute((-(-F // bf), C, a, KH, bf), left, name="wino_Gg")
    U = te.compute((Gg.shape[0], a, C, a, bf), lambda fo, e, c, nu, fi: row_combination(
        g, nu, lambda s: Gg[fo, c, e, s, fi], Wt.dtype), name="wino_U")
    return Gg, U


def input_transform(D: te.Tensor, m: int, tiles: tuple[int, int]) -> tuple[te.Tensor, te.Tensor]:
    """(Bd, V): Bd[t, e, j, c] = (B^T d)[e, j] and V[t, e, nu, c] = (Bd B)[e, nu] of tile
    t = (n * TH + th) * TW + tw, whose input tile d starts at (th * m, tw * m)."""
    N, _, _, C = D.shape
    TH, TW = tiles
    _, _, bt = winograd_matrices(m)
    a = m + 2

    def left(t: Expr, e: Expr, j: Expr, c: Expr) -> Expr:
        n, th, tw = t // (TH * TW), t // TW % TH, t % TW
        return row_combination(bt, e, lambda i: D[n, th * m + i, tw * m + j, c], D.dtype)

    Bd = te.compute((N * TH * TW, a, a, C), left, name="wino_Bd")
    V = te.compute(Bd.shape, lambda t, e, nu, c: row_combination(bt, nu, lambda j: Bd[t, e, j, c], D.dtype),
                   name="wino_V")
    return Bd, V


def batched_gemm(U: te.Tensor, V: te.Tensor) -> te.Tensor:
    """M[t, e, nu, f] = sum_c V[t, e, nu, c] * U[f // bf, e, c, nu, f % bf], f over the padded panels."""
    panels, a, C, _, bf = U.shape
    c = te.reduce_axis((0, C), name="c")
    return te.compute((V.shape[0], a, a, panels * bf), lambda t, e, nu, f: te.sum(
        V[t, e, nu, c] * U[f // bf, e, c, nu, f % bf], axis=c), name="wino_M")


def output_transform(M: te.Tensor, m: int, shape: tuple[int, int, int, int], tiles: tuple[int, int],
                     epilogue: Epilogue | None) -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """(AM, R, Y): AM[t, i, nu, f] = (A^T M)[i, nu]; R[n, y, x, f] = (AM A)[y % m, x % m] of tile
    t = (n * TH + y // m) * TW + x // m, the output channels last as M has them; Y[n, f, y, x] =
    epilogue(R[n, y, x, f], (n, f, y, x)), the NCHW output (a transpose of R)."""
    TH, TW = tiles
    at, _, _ = winograd_matrices(m)
    a = m + 2
    N, F, OH, OW = shape
    AM = te.compute((M.shape[0], m, a, M.shape[3]), lambda t, i, nu, f: row_combination(
        at, i, lambda e: M[t, e, nu, f], M.dtype), name="wino_AM")
    R = te.compute((N, OH, OW, F), lambda n, y, x, f: row_combination(
        at, x % m, lambda nu: AM[(n * TH + y // m) * TW + x // m, y % m, nu, f], M.dtype), name="wino_R")

    def body(n: Expr, f: Expr, y: Expr, x: Expr) -> Expr:
        v = R[n, y, x, f]
        return v if epilogue is None else epilogue(v, (n, f, y, x))

    return AM, R, te.compute(shape, body, name="wino_Y")
