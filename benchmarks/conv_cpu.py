"""conv2d layers on this CPU: the default config of each conv algorithm the template offers for
the layer (autotune.schedules.cpu.conv2d.ALGORITHMS) against numpy's im2col + sgemm.

The layers are ResNet's 3x3 convs at three depths, a strided 3x3 and a strided 1x1, and a
MobileNet-V2 depthwise 3x3 with and without stride. Each figure is the best of `--repeat` calls in each of `--rounds`
rounds (rounds alternate the kernels, so a change in the machine's load hits all of them);
numpy is timed in the same rounds. Prints GFLOP/s and the ratio to numpy.

Usage (one thread for both sides: pin BLAS too, on a shared machine):
    AUTOTUNE_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/conv_cpu.py [--repeat 20] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import platform

import numpy as np
from references import numpy_conv
from timing import interleaved

import autotune
from autotune.schedules.task import Task
from autotune.target import Target

LAYERS = [   # label, op, params
    ("3x3 64->64 56x56", "conv2d", dict(N=1, C=64, H=56, W=56, F=64, KH=3, KW=3, stride=1, padding=1)),
    ("3x3 256->256 14x14", "conv2d", dict(N=1, C=256, H=14, W=14, F=256, KH=3, KW=3, stride=1, padding=1)),
    ("3x3 512->512 7x7", "conv2d", dict(N=1, C=512, H=7, W=7, F=512, KH=3, KW=3, stride=1, padding=1)),
    ("3x3 64->128 56x56 stride 2", "conv2d", dict(N=1, C=64, H=56, W=56, F=128, KH=3, KW=3, stride=2, padding=1)),
    ("1x1 256->512 14x14 stride 2", "conv2d", dict(N=1, C=256, H=14, W=14, F=512, KH=1, KW=1, stride=2,
                                                   padding=0)),
    ("depthwise 3x3 144 56x56", "conv2d_grouped", dict(N=1, C=144, H=56, W=56, F=144, KH=3, KW=3, stride=1,
                                                       padding=1, dilation=1, groups=144)),
    ("depthwise 3x3 96 112x112 stride 2", "conv2d_grouped", dict(N=1, C=96, H=112, W=112, F=96, KH=3, KW=3,
                                                                 stride=2, padding=1, dilation=1, groups=96)),
]


def algorithm_defaults(task: Task) -> dict[str, int]:
    """Each offered algorithm's default config: the algorithm chosen, every other knob at its first value."""
    space = task.config_space
    names = [e.val for e in space.knobs["algorithm"].entities]
    position = list(space.knobs).index("algorithm")
    return {name: space.knob2point([i if p == position else 0 for p in range(len(space.knobs))])
            for i, name in enumerate(names)}


def bench(label: str, op: str, params: dict, args: argparse.Namespace) -> None:
    task = autotune.create_task(op, **params)
    inputs = task.make_inputs(np.random.default_rng(0))
    want = task.reference(inputs)[0]
    kernels = {"numpy im2col+sgemm": numpy_conv(inputs, {"groups": 1, **params})}
    np.testing.assert_allclose(kernels["numpy im2col+sgemm"](), want, rtol=1e-3, atol=1e-3)
    for name, index in algorithm_defaults(task).items():
        f = autotune.build(*task.instantiate(index), name=f"conv_{name}")
        out = np.empty_like(want)
        f(*inputs, out)
        np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
        kernels[f"{name} (default config)"] = lambda f=f, out=out: f(*inputs, out)
    times = dict(zip(kernels, interleaved(list(kernels.values()), args.repeat, args.rounds, np.min)))
    numpy_time = times["numpy im2col+sgemm"]
    print(label)
    for name, t in times.items():
        print(f"  {name:26s} {task.flop / t / 1e9:7.1f} GFLOP/s  {t * 1e3:7.3f} ms  {numpy_time / t:5.2f}x numpy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; {Target.host().key}")
    print(f"threads: {os.environ.get('AUTOTUNE_NUM_THREADS', 'every core')}; load average at start: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; best of {args.rounds} rounds x {args.repeat} calls")
    for label, op, params in LAYERS:
        bench(label, op, params, args)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
