"""Loop partition on and off (issue "Fast on every shape", item 1: tails cost only the tail).

Each kernel is the template's default config, compiled twice in this run: with the pipeline as it
is and with the partition step replaced by the identity (the code before it existed). Rounds
alternate off/on so that a change in the machine's load hits both; the figure is the median over
rounds of the median of `--repeat` calls, with numpy timed in the same rounds.

    matmul 997 x 1009 x 1013 (primes: every tile has a tail) and 1024^3 (no tail)   GFLOP/s
    add over 100003 floats (in cache) and 4194319 floats (memory bound)              GB/s

Usage:
    AUTOTUNE_NUM_THREADS=1 python benchmarks/partition_cpu.py [--repeat 10] [--rounds 3] [--quick]
(on a loaded shared machine, threads that wait for a core make parallel timings noise: pin one.)
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

import autotune
import autotune.ir.lower as lowering
from autotune.target import Target
from timing import seconds

PARTITION = lowering.partition_loops


def compiled(op: str, params: dict, partition: bool):
    """The default config of `op`, built with or without the partition step."""
    lowering.partition_loops = PARTITION if partition else (lambda body: body)
    try:
        task = autotune.create_task(op, **params)
        t0 = time.perf_counter()
        f = autotune.build(*task.instantiate(0), name=f"{op}_{'on' if partition else 'off'}")
        return task, f, time.perf_counter() - t0
    finally:
        lowering.partition_loops = PARTITION


def bench(label: str, op: str, params: dict, numpy_fn, work: float, unit: str, args) -> None:
    task = autotune.create_task(op, **params)
    inputs = task.make_inputs(np.random.default_rng(0))
    want = task.reference(inputs)
    out = np.empty_like(np.asarray(want[0], dtype=np.float32))
    kernels = {}
    for mode in ("off", "on"):
        _, f, build_s = compiled(op, params, mode == "on")
        outs = [np.empty(shape, dtype) for shape, dtype in task.arg_specs[task.num_inputs:]]
        f(*inputs, *outs)
        np.testing.assert_allclose(outs[0], want[0], rtol=1e-3, atol=1e-2)
        kernels[mode] = (f, outs, build_s)
    times: dict[str, list[float]] = {"numpy": [], "off": [], "on": []}
    for _ in range(args.rounds):
        times["numpy"].append(seconds(lambda: numpy_fn(*inputs, out=out), args.repeat))
        for mode in ("off", "on"):
            f, outs, _ = kernels[mode]
            times[mode].append(seconds(lambda f=f, outs=outs: f(*inputs, *outs), args.repeat))
    med = {k: float(np.median(v)) for k, v in times.items()}
    print(f"{label}")
    print(f"  {'numpy':26s} {work / med['numpy'] / 1e9:8.1f} {unit}")
    for mode, name in (("off", "partition off (before)"), ("on", "partition on")):
        print(f"  {name:26s} {work / med[mode] / 1e9:8.1f} {unit}   {med['numpy'] / med[mode]:6.3f}x numpy"
              f"   (compile {kernels[mode][2] * 1e3:.0f} ms)")
    print(f"  on / off: {med['off'] / med['on']:.3f}x   (per-round off/on: "
          f"{', '.join(f'{a / b:.2f}' for a, b in zip(times['off'], times['on']))})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes, to check that the script runs")
    args = ap.parse_args()
    q = args.quick
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; {Target.host().key}")
    print(f"threads: {os.environ.get('AUTOTUNE_NUM_THREADS', 'every core')}; "
          f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"median of {args.rounds} rounds x {args.repeat} calls")
    for m, n, k in ((97, 101, 103), (128, 128, 128)) if q else ((997, 1009, 1013), (1024, 1024, 1024)):
        bench(f"matmul {m}x{n}x{k} float32 (default config)", "matmul", dict(M=m, N=n, K=k),
              np.matmul, 2.0 * m * n * k, "GFLOP/s", args)
    for n in (1009, 4099) if q else (100003, 4194319):
        bench(f"add {n} float32 (default config)", "add", dict(a_shape=(n,), b_shape=(n,)),
              np.add, 3 * 4 * n, "GB/s", args)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
