"""conv2d as an implicit GEMM (`autotune.schedules.cpu.conv2d_gemm`), default config, against numpy
im2col + matmul measured in the same run (issue 13's layers, batch 1, float32):

    256 -> 256 14x14 3x3 pad 1      512 -> 512 7x7 3x3 pad 1      256 -> 512 14x14 1x1 stride 2
    64 -> 256 56x56 1x1             64 -> 128 56x56 3x3 stride 2 pad 1

The kernel is built from the algorithm's own knobs (its first values), without a template, so it
runs before the conv dispatcher exists. Rounds alternate numpy and the kernel so that a change in
the machine's load hits both; each figure is the best round's median of `--repeat` calls.

Usage:
    AUTOTUNE_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/conv_gemm_cpu.py [--rounds 5] [--repeat 10]
(one thread each on a loaded machine, where threads that wait for a core make parallel timings noise).
"""
from __future__ import annotations

import argparse
import os
import platform

import numpy as np
from references import numpy_conv
from timing import interleaved

import autotune
from autotune import te
from autotune.schedules.cpu import conv2d_gemm
from autotune.schedules.space import ConfigSpace
from autotune.target import Target
from autotune.topi.conv import conv2d_nchw_reference, conv_geometry

LAYERS = (   # C, H, F, K, stride, padding
    (256, 14, 256, 3, 1, 1), (512, 7, 512, 3, 1, 1), (256, 14, 512, 1, 2, 0), (64, 56, 256, 1, 1, 0),
    (64, 56, 128, 3, 2, 1),
)


def default_kernel(C: int, H: int, F: int, K: int, stride: int, padding: int):
    """The algorithm's default config for this layer, built."""
    g = conv_geometry("conv2d_gemm", C, F, (H, H), (K, K), stride, padding, 1, 1)
    space = ConfigSpace(Target.parse("llvm"))
    space.define_knob("algorithm", ["gemm"])
    conv2d_gemm.define_knobs(space, g, 1, "float32", ("algorithm", ("gemm",)))
    cfg = space.get(0)
    X, Wt = te.placeholder((1, C, H, H), name="X"), te.placeholder((F, C, K, K), name="W")
    s, out = conv2d_gemm.build(cfg, X, Wt, g, None, [])
    return autotune.build(s, [X, Wt, out]), cfg, g.out


def bench(layer: tuple[int, ...], args: argparse.Namespace) -> None:
    C, H, F, K, stride, padding = layer
    f, cfg, (OH, OW) = default_kernel(*layer)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, C, H, H)).astype(np.float32)
    w = rng.uniform(-1, 1, (F, C, K, K)).astype(np.float32)
    got = np.empty((1, F, OH, OW), np.float32)
    f(x, w, got)
    np.testing.assert_allclose(got, conv2d_nchw_reference(x, w, stride, padding), rtol=1e-3, atol=1e-3)
    numpy_run = numpy_conv([x, w], dict(stride=stride, padding=padding, groups=1))
    t_np, t_k = interleaved([numpy_run, lambda: f(x, w, got)], args.repeat, args.rounds)
    flop = 2.0 * F * C * K * K * OH * OW
    knobs = {k: v for k, v in cfg.to_json()["knobs"].items() if k != "algorithm"}
    print(f"{C:4d} -> {F:3d} {H}x{H} {K}x{K} stride {stride} pad {padding}: gemm {flop / t_k / 1e9:6.1f} GFLOP/s"
          f"  numpy {flop / t_np / 1e9:6.1f} GFLOP/s  {t_np / t_k:5.2f}x numpy   {knobs}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; {Target.parse('llvm').key}")
    print(f"threads: {os.environ.get('AUTOTUNE_NUM_THREADS', 'every core')} (numpy's BLAS: "
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'its default')}); load average at start: "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for layer in LAYERS:
        bench(layer, args)
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
