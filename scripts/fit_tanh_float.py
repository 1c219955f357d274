"""Fit the float32 tanh's rational function (autotune/codegen/llvm_math.py, `_TANH_P` and
`_TANH_Q`) and print it with its relative error in a float32 evaluation.

    python scripts/fit_tanh_float.py

|x| <= 9:   tanh(x) = x * P(x^2) / Q(x^2), Q(0) = 1   (beyond 9 tanh rounds to +-1 in float32)

By iteratively reweighted linear least squares on Chebyshev nodes toward the minimax fit of the
relative error, against numpy's tanh in double. The float32 evaluation rounds each coefficient,
each Horner step (as one fused multiply-add) and the division, as the emitted code does.
"""
from __future__ import annotations

import numpy as np
from fit_erf_float import horner_f32  # the float32 Horner evaluation both fits are checked with

TOP, P_DEGREE, Q_DEGREE = 9.0, 4, 4


def fit() -> tuple[np.ndarray, np.ndarray]:
    """(P, Q), constant terms first, Q's 1: r(v) = P(v) / Q(v) near tanh(x) / x with v = x^2."""
    x = TOP / 2 + TOP / 2 * np.cos(np.pi * (np.arange(6000) + 0.5) / 6000) + 1e-9
    y, v = np.tanh(x) / x, x * x
    vp, vq = np.vander(v, P_DEGREE + 1, increasing=True), np.vander(v, Q_DEGREE + 1, increasing=True)
    rows = np.hstack([vp, -y[:, None] * vq[:, 1:]])      # P(v) - y (Q(v) - 1) = y, linear in both
    weight, q_value = np.ones_like(x), np.ones_like(x)
    for _ in range(60):
        scale = weight / (y * q_value)                  # relative error of the ratio
        coef = np.linalg.lstsq(rows * scale[:, None], y * scale, rcond=None)[0]
        p, q = coef[:P_DEGREE + 1], np.concatenate([[1.0], coef[P_DEGREE + 1:]])
        q_value = vq @ q
        err = np.abs((vp @ p) / q_value / y - 1)
        weight = weight * np.sqrt(err / err.max() + 1e-3)
    return p, q


def main() -> None:
    p, q = fit()
    x = np.concatenate([np.linspace(0, TOP, 400_001, dtype=np.float32),
                        np.geomspace(1e-30, 1, 100_000).astype(np.float32)])
    v = x * x
    got = np.minimum((x * horner_f32(p, v)) / horner_f32(q, v), np.float32(1))
    want = np.tanh(x.astype(np.float64))
    rel = np.abs(got - want) / np.maximum(want, 1e-38)
    print(f"_TANH_P = {[float(c) for c in p]}")
    print(f"_TANH_Q = {[float(c) for c in q]}  # max rel error {rel.max():.2g}")


if __name__ == "__main__":
    main()
