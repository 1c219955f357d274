"""Does Winograd pay? (issue 13: "Winograd F(2x2,3x3) or F(4x4,3x3) for 3x3 stride-1 layers, if it pays")

Per layer (N=1, 3x3, pad 1), measured in this run: the winograd algorithm's default config
(`autotune/schedules/cpu/conv2d_winograd.py`, built directly since no dispatcher offers it yet),
each tile size m with its other knobs at their defaults, the direct NCHW "conv2d" template's
default config, and numpy im2col + sgemm (the reference of benchmarks/ops_cpu.py). Times are the
best of `--rounds` alternating medians of `--repeat` calls, so load from other processes hits
every side alike.

    conv2d 64->64 56x56, 128->128 28x28, 256->256 14x14, 512->512 7x7

Usage:
    AUTOTUNE_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/conv_winograd_cpu.py [--quick]
(one thread each is the fair comparison on a loaded shared machine; leave both unset for all cores.)
"""
from __future__ import annotations

import argparse
import os
import platform
from collections.abc import Callable
from typing import Any

import numpy as np
from ops_cpu import im2col_conv2d
from timing import interleaved

import autotune
from autotune import te
from autotune.schedules.cpu import conv2d_winograd as wino
from autotune.schedules.space import ConfigSpace
from autotune.target import Target
from autotune.topi.conv import conv2d_nchw_reference, conv_geometry

LAYERS = ((64, 56), (128, 28), (256, 14), (512, 7))
QUICK_LAYERS = ((16, 14), (32, 7))


def winograd_kernel(C: int, H: int, values: dict[str, Any]) -> tuple[Callable, dict[str, Any]]:
    """The winograd conv of the layer at its default config with `values` set, and the config."""
    g = conv_geometry("conv2d", C, C, (H, H), (3, 3), 1, 1, 1, 1)
    space = ConfigSpace(Target.host())
    space.define_knob("algorithm", ["winograd"])
    wino.define_knobs(space, g, 1, "float32", ("algorithm", ("winograd",)))
    knobs = [[e.val for e in k.entities].index(values[n]) if n in values else 0 for n, k in space.knobs.items()]
    cfg = space.get(space.knob2point(knobs))
    X, Wt = te.placeholder((1, C, H, H), name="X"), te.placeholder((C, C, 3, 3), name="W")
    s, out = wino.build(cfg, X, Wt, g, None, [])
    return autotune.build(s, [X, Wt, out]), {n: cfg[n].val for n in space.knobs if n != "algorithm"}


def direct_kernel(C: int, H: int) -> Callable:
    task = autotune.create_task("conv2d", N=1, C=C, H=H, W=H, F=C, KH=3, KW=3, stride=1, padding=1)
    return autotune.build(*task.instantiate(0))


def layer(C: int, H: int, args: argparse.Namespace) -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, C, H, H)).astype(np.float32)
    w = rng.uniform(-1, 1, (C, C, 3, 3)).astype(np.float32)
    want = conv2d_nchw_reference(x, w, 1, 1)
    default, cfg = winograd_kernel(C, H, {})
    kernels = {"winograd default": default, "direct default": direct_kernel(C, H)}
    for m in wino.TILE_SIZES:
        if m != cfg["winograd_m"]:
            kernels[f"winograd m={m}"] = winograd_kernel(C, H, {"winograd_m": m})[0]
    outs = {k: np.empty_like(want) for k in kernels}
    for k, f in kernels.items():
        f(x, w, outs[k])
        err = float(np.max(np.abs(outs[k] - want)))
        assert np.allclose(outs[k], want, rtol=1e-3, atol=1e-3 * np.sqrt(9 * C)), f"{k}: max error {err}"
    fns: dict[str, Callable[[], Any]] = {"numpy im2col+sgemm": lambda: im2col_conv2d(x, w, 1)}
    fns.update({k: (lambda f=f, o=outs[k]: f(x, w, o)) for k, f in kernels.items()})
    t = dict(zip(fns, interleaved(list(fns.values()), args.repeat, args.rounds)))
    flop = 2.0 * C * C * 9 * H * H
    print(f"conv2d {C}->{C} {H}x{H} 3x3 pad 1   winograd default {cfg}")
    for k, v in t.items():
        print(f"  {k:20s} {v * 1e3:8.3f} ms  {flop / v / 1e9:6.0f} GFLOP/s (direct-conv flop)  "
              f"{t['numpy im2col+sgemm'] / v:5.2f}x numpy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small layers: check that the script runs")
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"AUTOTUNE_NUM_THREADS={os.environ.get('AUTOTUNE_NUM_THREADS', '(all)')}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(all)')}; "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    for C, H in QUICK_LAYERS if args.quick else LAYERS:
        layer(C, H, args)
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
