"""Matmul 1024^3 float32 on this CPU: naive schedule, the classic hand schedule, and numpy.

Prints GFLOP/s and the ratio to numpy measured in the same run. Usage:
    python benchmarks/matmul_cpu.py [--size 1024] [--repeat 10]
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import autotune
from autotune.schedules.cpu.matmul import default_schedule, hand_schedule
from autotune.target import Target
from timing import seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=10)
    n = ap.parse_args().size
    repeat = ap.parse_args().repeat
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    ref = a @ b
    flop = 2.0 * n ** 3
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; {Target.host().key}")
    print(f"matmul {n}x{n}x{n} float32, median of {repeat} runs")
    t_np = seconds(lambda: np.matmul(a, b, out=ref), repeat)
    rows = [("numpy", t_np, 0.0)]
    for label, make, reps in (("naive default schedule", default_schedule, 1),
                              ("classic hand schedule", hand_schedule, repeat)):
        t0 = time.perf_counter()
        s, args = make(n, n, n)
        f = autotune.build(s, args, name="matmul")
        compile_s = time.perf_counter() - t0
        c = np.empty((n, n), np.float32)
        f(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-2)
        rows.append((label, seconds(lambda: f(a, b, c), reps), compile_s))
    for label, t, compile_s in rows:
        extra = f"  (compile {compile_s * 1e3:.0f} ms)" if compile_s else ""
        print(f"  {label:24s} {flop / t / 1e9:8.1f} GFLOP/s   {t_np / t:6.3f}x numpy{extra}")


if __name__ == "__main__":
    main()
