"""The CUDA benchmark (issue 6), for a machine with an NVIDIA GPU: tuned kernels vs PyTorch,
measured in one run on the same GPU.

    matmul 4096^3 float32 (xgb, --trials)    GFLOP/s, x cuBLAS through torch.matmul (TF32 off)
    fused relu(x * w + b) over 2^26 floats   GB/s, as a fraction of a device-to-device copy's
    softmax 8192 x 4096                      x torch.softmax

Each op also runs at a shape nobody tuned by hand, next to its power of two, so that a tail's
cost shows as the difference: matmul 4093 x 4091 x 4099 (primes), the chain over 2^26 - 3
elements, softmax 8191 x 4099.

Each op is tuned into a temporary database (`autotune.tune`, target "cuda"), loaded with
`autotune.load(..., target="cuda")`, checked against PyTorch on the GPU, then timed with CUDA
events around back-to-back launches on PyTorch tensors (no copies), like the reference.

Usage (PyCUDA first: scripts/gpu_setup.sh):
    python benchmarks/cuda_gpu.py [--trials 256] [--repeat 50] [--quick] [--ops chain,softmax,matmul]
(--quick: small sizes and 8 trials, to check that the script runs).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np

import autotune
from fused_chain import relu_mul_add, relu_mul_add_reference

QUICK = "--quick" in sys.argv
CHAIN_OP = "bench_cuda.relu_mul_add"
# (power-of-two shape, odd shape) per op
MATMUL_SHAPES = [(256, 256, 256), (251, 257, 263)] if QUICK else [(4096, 4096, 4096), (4093, 4091, 4099)]
CHAIN_SIZES = [1 << 16, (1 << 16) - 3] if QUICK else [1 << 26, (1 << 26) - 3]
SOFTMAX_SHAPES = [(64, 512), (61, 509)] if QUICK else [(8192, 4096), (8191, 4099)]


def gpu_seconds(torch: Any, fn: Callable[[], Any], repeat: int) -> float:
    """Median seconds of one call, from CUDA events around `repeat` back-to-back calls, 5 times."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeat):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0 / repeat)
    return float(np.median(times))


def tuned(task: Any, args: argparse.Namespace) -> None:
    """Tune into the temporary database; stop the run if no config measured correctly."""
    t0 = time.perf_counter()
    res = autotune.tune(task, trials=args.trials, tuner="xgb", db=args.db, seed=0)
    print(f"  tuned {task.workload_key}: {res.trials} trials in {time.perf_counter() - t0:.0f} s, "
          f"{res.errors} errors, best {res.best_gflops:.0f} GFLOP/s, config {res.best_config}")
    if res.best_config is None:
        first = next((r.error_msg for _, r in res.history if r.error_msg), "")
        raise SystemExit(f"no valid config for {task.workload_key}; first error: {first[:300]}")


def launch(kernel: Any, *tensors: Any) -> Callable[[], None]:
    """The kernel's asynchronous launch on torch tensors (checked once, no copies)."""
    return kernel.func.bind(*tensors)


def bench_matmul(torch: Any, args: argparse.Namespace, shape: tuple[int, int, int]) -> None:
    m, n, kk = shape
    tuned(autotune.create_task("matmul", target="cuda", M=m, N=n, K=kk), args)
    k = autotune.load("matmul", target="cuda", db=args.db, M=m, N=n, K=kk)
    a, b = torch.randn(m, kk, device="cuda"), torch.randn(kk, n, device="cuda")
    c = torch.empty(m, n, device="cuda")
    run = launch(k, a, b, c)
    run()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a @ b, rtol=1e-3, atol=1e-2)
    ours = gpu_seconds(torch, run, args.repeat)
    ref = gpu_seconds(torch, lambda: torch.matmul(a, b, out=c), args.repeat)
    flop = 2.0 * m * n * kk
    print(f"matmul {m}x{n}x{kk} fp32: autotune {flop / ours / 1e9:.0f} GFLOP/s, cuBLAS {flop / ref / 1e9:.0f} "
          f"GFLOP/s -> {ref / ours:.2f}x cuBLAS (target 0.7x)")


def bench_chain(torch: Any, args: argparse.Namespace, n: int) -> None:
    chain, chain_inputs = relu_mul_add(n)
    task = autotune.create_task_from_te(chain, chain_inputs, name=CHAIN_OP, target="cuda",
                                        reference=relu_mul_add_reference)
    tuned(task, args)
    k = autotune.load(CHAIN_OP, target="cuda", db=args.db, fingerprint=task.params["fingerprint"])
    x, w, b = (torch.randn(n, device="cuda") for _ in range(3))
    y = torch.empty(n, device="cuda")
    run = launch(k, x, w, b, y)
    run()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.relu(x * w + b))
    ours = gpu_seconds(torch, run, args.repeat)
    copy = gpu_seconds(torch, lambda: y.copy_(x), args.repeat)
    ours_gbs = 4 * n * 4 / ours / 1e9           # three reads and one write
    copy_gbs = 2 * n * 4 / copy / 1e9           # one read and one write
    print(f"relu(x*w+b) over {n}: autotune {ours_gbs:.0f} GB/s, device copy {copy_gbs:.0f} GB/s "
          f"-> {ours_gbs / copy_gbs:.2f}x copy bandwidth (target 0.8x)")


def bench_softmax(torch: Any, args: argparse.Namespace, shape: tuple[int, int]) -> None:
    m, n = shape
    tuned(autotune.create_task("softmax", target="cuda", M=m, N=n), args)
    k = autotune.load("softmax", target="cuda", db=args.db, M=m, N=n)
    x = torch.randn(m, n, device="cuda")
    y = torch.empty(m, n, device="cuda")
    run = launch(k, x, y)
    run()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.softmax(x, dim=1))
    ours = gpu_seconds(torch, run, args.repeat)
    ref = gpu_seconds(torch, lambda: torch.softmax(x, dim=1), args.repeat)
    gbs = 2 * m * n * 4 / ours / 1e9
    print(f"softmax {m}x{n}: autotune {ours * 1e6:.1f} us ({gbs:.0f} GB/s), torch {ref * 1e6:.1f} us "
          f"-> {ref / ours:.2f}x torch.softmax (target 1x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8 if QUICK else 256)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ops", default="chain,softmax,matmul",
                        help="comma-separated subset of chain, softmax, matmul")
    args = parser.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, target key "
          f"{autotune.create_task('relu', target='cuda', shape=8).target_key!r}")
    with tempfile.TemporaryDirectory() as tmp:
        args.db = os.path.join(tmp, "cuda_bench.db")
        ops = args.ops.split(",")
        for op, bench, shapes in (("chain", bench_chain, CHAIN_SIZES), ("softmax", bench_softmax, SOFTMAX_SHAPES),
                                  ("matmul", bench_matmul, MATMUL_SHAPES)):
            for shape in shapes if op in ops else ():
                bench(torch, args, shape)


if __name__ == "__main__":
    main()
