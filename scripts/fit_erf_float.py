"""Fit the float32 erf's two polynomials (autotune/codegen/llvm_math.py, `_ERF_NEAR` and
`_ERF_FAR`) and print them with their error in a float32 evaluation.

    python scripts/fit_erf_float.py

near |x| < 0.9:   erf(x) = x * P(x^2)          (P fitted to erf(x)/x, weighted by x: absolute error)
far  0.9..4:      erf(|x|) = 1 - exp(Q(|x|))   (Q fitted to log erfc, weighted by erfc: absolute error)

Each by iteratively reweighted least squares on Chebyshev nodes toward the minimax fit, against
math.erf / math.erfc in double. The float32 evaluation rounds each coefficient and each Horner
step (as one fused multiply-add), so the printed error is what the emitted code can reach,
before exp's own rounding.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

SPLIT, TOP, NEAR_DEGREE, FAR_DEGREE = 0.9, 4.0, 5, 5
erf, erfc = np.vectorize(math.erf), np.vectorize(math.erfc)


def fit(f: Callable, lo: float, hi: float, degree: int, var: Callable, weight: Callable) -> np.ndarray:
    """Coefficients (constant term first) of a polynomial in var(x) near f on [lo, hi]."""
    x = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.pi * (np.arange(4000) + 0.5) / 4000)
    y, w = f(x), weight(x)
    rows = np.vander(var(x), degree + 1, increasing=True)
    ww = w.copy()
    for _ in range(30):
        coef = np.linalg.lstsq(rows * ww[:, None], y * ww, rcond=None)[0]
        err = np.abs(rows @ coef - y) * w
        ww = ww * np.sqrt(err / err.max() + 1e-3)
    return coef


def horner_f32(coef: np.ndarray, v: np.ndarray) -> np.ndarray:
    acc = np.full_like(v, np.float32(coef[-1]))
    for c in reversed(coef[:-1]):
        acc = (acc.astype(np.float64) * v + np.float32(c)).astype(np.float32)
    return acc


def main() -> None:
    near = fit(lambda x: erf(x) / x, 1e-6, SPLIT, NEAR_DEGREE, lambda x: x * x, lambda x: x)
    far = fit(lambda x: np.log(erfc(x)), SPLIT, TOP, FAR_DEGREE, lambda x: x, erfc)
    x = np.linspace(0, SPLIT, 100_001, dtype=np.float32)
    near_err = np.abs(x * horner_f32(near, x * x) - erf(x.astype(np.float64))).max()
    x = np.linspace(SPLIT, TOP, 100_001, dtype=np.float32)
    far_y = np.float32(1) - np.exp(horner_f32(far, x).astype(np.float64)).astype(np.float32)
    far_err = np.abs(far_y - erf(x.astype(np.float64))).max()
    print(f"_ERF_NEAR = {[float(c) for c in near]}  # max abs error {near_err:.2g}")
    print(f"_ERF_FAR = {[float(c) for c in far]}  # max abs error {far_err:.2g}")


if __name__ == "__main__":
    main()
