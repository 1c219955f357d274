"""The CUDA benchmark (issue 6), for a machine with an NVIDIA GPU: tuned kernels vs PyTorch,
measured in one run on the same GPU.

    matmul 4096^3 float32 (xgb, --trials)    GFLOP/s, x cuBLAS through torch.matmul (TF32 off)
    fused relu(x * w + b) over 2^26 floats   GB/s, as a fraction of a device-to-device copy's
    softmax 8192 x 4096                      x torch.softmax

Each op is tuned into a temporary database (`autotune.tune`, target "cuda"), loaded with
`autotune.load(..., target="cuda")`, checked against PyTorch on the GPU, then timed with CUDA
events around back-to-back launches on PyTorch tensors (no copies), like the reference.

Usage (PyCUDA first: scripts/gpu_setup.sh):
    python benchmarks/cuda_gpu.py [--trials 256] [--repeat 50] [--quick]
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
CHAIN_N = 1 << (16 if QUICK else 26)
CHAIN_OP = "bench_cuda.relu_mul_add"


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


def bench_matmul(torch: Any, args: argparse.Namespace) -> None:
    n = 256 if QUICK else 4096
    tuned(autotune.create_task("matmul", target="cuda", M=n, N=n, K=n), args)
    k = autotune.load("matmul", target="cuda", db=args.db, M=n, N=n, K=n)
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
    c = torch.empty(n, n, device="cuda")
    run = launch(k, a, b, c)
    run()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a @ b, rtol=1e-3, atol=1e-2)
    ours = gpu_seconds(torch, run, args.repeat)
    ref = gpu_seconds(torch, lambda: torch.matmul(a, b, out=c), args.repeat)
    flop = 2.0 * n ** 3
    print(f"matmul {n}^3 fp32: autotune {flop / ours / 1e9:.0f} GFLOP/s, cuBLAS {flop / ref / 1e9:.0f} GFLOP/s "
          f"-> {ref / ours:.2f}x cuBLAS (target 0.7x)")


def bench_chain(torch: Any, args: argparse.Namespace) -> None:
    chain, chain_inputs = relu_mul_add(CHAIN_N)
    task = autotune.create_task_from_te(chain, chain_inputs, name=CHAIN_OP, target="cuda",
                                        reference=relu_mul_add_reference)
    tuned(task, args)
    k = autotune.load(CHAIN_OP, target="cuda", db=args.db, fingerprint=task.params["fingerprint"])
    x, w, b = (torch.randn(CHAIN_N, device="cuda") for _ in range(3))
    y = torch.empty(CHAIN_N, device="cuda")
    run = launch(k, x, w, b, y)
    run()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.relu(x * w + b))
    ours = gpu_seconds(torch, run, args.repeat)
    copy = gpu_seconds(torch, lambda: y.copy_(x), args.repeat)
    ours_gbs = 4 * CHAIN_N * 4 / ours / 1e9           # three reads and one write
    copy_gbs = 2 * CHAIN_N * 4 / copy / 1e9           # one read and one write
    print(f"relu(x*w+b) 2^{CHAIN_N.bit_length() - 1}: autotune {ours_gbs:.0f} GB/s, device copy {copy_gbs:.0f} GB/s "
          f"-> {ours_gbs / copy_gbs:.2f}x copy bandwidth (target 0.8x)")


def bench_softmax(torch: Any, args: argparse.Namespace) -> None:
    m, n = (64, 512) if QUICK else (8192, 4096)
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
    args = parser.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, target key "
          f"{autotune.create_task('relu', target='cuda', shape=8).target_key!r}")
    with tempfile.TemporaryDirectory() as tmp:
        args.db = os.path.join(tmp, "cuda_bench.db")
        for bench in (bench_chain, bench_softmax, bench_matmul):
            bench(torch, args)


if __name__ == "__main__":
    main()
