"""The cost model's own speed on this machine: what the tuner pays per candidate and per batch.

Prints the time to extract loop-IR features of a scheduled 256^3 matmul and of the matmul
template's default config at 97x61x43, where every split has a tail and guards are sampled
(target: under 5 ms, the tuner featurizes every candidate it ranks), and to fit the ranking model
on 500 rows (target: under 1 s, it refits after every batch). Usage:
    python benchmarks/costmodel_speed.py
"""
from __future__ import annotations

import numpy as np

import autotune
from autotune.costmodel import FEATURE_LEN, XGBCostModel, extract
from autotune.schedules.cpu.matmul import hand_schedule
from autotune.target import Target
from timing import seconds


def main() -> None:
    cpu = Target.parse("llvm").cpu
    s, args = hand_schedule(256, 256, 256, bn=32, rows=8, kfactor=4)
    funcs = {"matmul 256^3 hand schedule": autotune.lower(s, args),
             "matmul 97x61x43 template default (tails)": autotune.create_task("matmul", M=97, N=61, K=43).lower(0)}
    for name, func in funcs.items():
        t_extract = min(seconds(lambda: extract(func, cpu=cpu), 7) for _ in range(3))
        print(f"feature extraction, {name}: {t_extract * 1e3:.2f} ms (target < 5 ms)")

    rng = np.random.default_rng(0)
    X = rng.random((500, FEATURE_LEN)).astype(np.float32)
    y = np.exp(2 * X[:, 0] - X[:, 1] + X[:, 2] * X[:, 3])
    groups = [f"w{i % 3}" for i in range(500)]
    t_fit = seconds(lambda: XGBCostModel("rank", seed=0).fit(X, y, groups), 3)
    print(f"ranking model fit, 500 rows x {FEATURE_LEN} features: {t_fit:.3f} s (target < 1 s)")


if __name__ == "__main__":
    main()
