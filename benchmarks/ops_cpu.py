"""The op-library benchmark (issue 5): tuned kernels vs numpy, measured in one run on this machine.

Each op is tuned with the model-based tuner (`--trials`, 64 by default) into a temporary
database, loaded with `autotune.load`, checked against the numpy version and timed against it:

    fused relu(x * w + b) over 2^24 floats   GB/s, x numpy, and as a fraction of np.copyto's bandwidth
    softmax, layer_norm on 4096 x 1024       x numpy
    conv2d N=1 C=64 H=W=56 F=64 3x3 pad 1    x numpy im2col + matmul
    dense + bias + gelu 512 x 1024 x 1024    x numpy
    attention b=1, 8 heads, seq 1024, d 64   x numpy (also causal, vs numpy with the mask)

Usage:
    AUTOTUNE_NUM_THREADS=2 python benchmarks/ops_cpu.py [--trials 64] [--repeat 20] [--quick]
(--quick: tiny sizes and 4 trials, to check that the script runs).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from typing import Any, Callable

import numpy as np

import autotune
from fused_chain import relu_mul_add, relu_mul_add_reference
from timing import interleaved, seconds

QUICK = "--quick" in sys.argv
CHAIN_N = 1 << (12 if QUICK else 24)
CHAIN_OP = "bench_ops_cpu.relu_mul_add"


class Skip(Exception):
    """A section cannot report (no valid config was found); the message says why."""


def tuned(op: str, params: dict[str, Any], args: argparse.Namespace) -> Any:
    """Tune op at params into the temporary database and load the best kernel."""
    task = autotune.create_task(op, **params)
    t0 = time.perf_counter()
    res = autotune.tune(task, trials=args.trials, tuner="xgb", db=args.db, seed=0)
    if res.best_config is None:
        kinds = Counter(r.error_kind.value for _, r in res.history)
        first = next((r.error_msg for _, r in res.history if r.error_msg), "")
        raise Skip(f"skipped: op {op}: no valid config in {res.trials} trials ({dict(kinds)}; first: {first[:300]})")
    kernel = autotune.load(op, db=args.db, **params)
    print(f"  [{op}: {args.trials} trials in {time.perf_counter() - t0:.0f} s, provenance {kernel.provenance}]")
    return kernel


def compare(op: str, kernel: Any, inputs: list[np.ndarray], numpy_fn: Callable[[], Any],
            args: argparse.Namespace) -> tuple[float, float]:
    """(tuned seconds, numpy seconds), after checking the tuned output against numpy's."""
    outs = [np.empty(shape, dtype) for shape, dtype in kernel.task.arg_specs[kernel.task.num_inputs:]]
    kernel(*inputs, out=outs)
    want = numpy_fn()
    err = float(np.max(np.abs(outs[0] - want)))
    if not np.allclose(outs[0], want, rtol=1e-3, atol=1e-3):
        print(f"  WARNING {op}: tuned output differs from numpy by up to {err:.3g}")
    t, t_np = interleaved([lambda: kernel(*inputs, out=outs), numpy_fn], args.repeat)
    return t, t_np


def report(label: str, t: float, t_np: float, target: float, extra: str = "") -> None:
    ok = "meets" if t_np / t >= target else "MISSES"
    print(f"{label}: tuned {t * 1e3:.3f} ms, numpy {t_np * 1e3:.3f} ms -> {t_np / t:.2f}x numpy "
          f"({ok} target >= {target:g}x){extra}")


# ---- sections --------------------------------------------------------------------------------------

def fused_chain(args: argparse.Namespace) -> None:
    n = CHAIN_N
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
    src, dst = rng.standard_normal(n, dtype=np.float32), np.empty(n, np.float32)
    t_copy = min(seconds(lambda: np.copyto(dst, src), args.repeat) for _ in range(3))
    copy_gbs = 2 * 4 * n / t_copy / 1e9
    chain, chain_inputs = relu_mul_add(n)     # three te computes, tuned as one fused kernel
    task = autotune.create_task_from_te(chain, chain_inputs, name=CHAIN_OP, reference=relu_mul_add_reference)
    kernel = tuned(CHAIN_OP, dict(task.params), args)
    t, t_np = compare("relu(x*w+b)", kernel, [x, w, b], lambda: np.maximum(x * w + b, 0), args)
    gbs, np_gbs = 4 * 4 * n / t / 1e9, 4 * 4 * n / t_np / 1e9
    print(f"np.copyto of {n} floats: {copy_gbs:.1f} GB/s (read + write)")
    report(f"fused relu(x*w+b), n={n}", t, t_np, 3.0,
           f"; {gbs:.1f} GB/s (numpy {np_gbs:.1f}) = {gbs / copy_gbs:.2f} of copy bandwidth (target >= 0.7)")


def softmax(args: argparse.Namespace) -> None:
    M, N = (64, 128) if args.quick else (4096, 1024)
    kernel = tuned("softmax", dict(M=M, N=N), args)
    x = np.random.default_rng(0).standard_normal((M, N), dtype=np.float32)

    def numpy_fn() -> np.ndarray:
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    report(f"softmax {M}x{N}", *compare("softmax", kernel, [x], numpy_fn, args), 2.0)


def layer_norm(args: argparse.Namespace) -> None:
    M, N = (64, 128) if args.quick else (4096, 1024)
    kernel = tuned("layer_norm", dict(M=M, N=N), args)
    eps = kernel.task.params["eps"]
    rng = np.random.default_rng(0)
    x, g, b = rng.standard_normal((M, N), dtype=np.float32), rng.random(N, np.float32), rng.random(N, np.float32)

    def numpy_fn() -> np.ndarray:
        mean = x.mean(axis=1, keepdims=True)
        return (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + eps) * g + b

    report(f"layer_norm {M}x{N}", *compare("layer_norm", kernel, [x, g, b], numpy_fn, args), 2.0)


def im2col_conv2d(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """numpy conv2d NCHW (stride 1): an im2col view copied into columns, then one matmul per image."""
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    cols = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))     # n c oh ow kh kw
    cols = cols.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, oh * ow)
    return (w.reshape(f, -1) @ cols).reshape(n, f, oh, ow)


def conv2d(args: argparse.Namespace) -> None:
    N, C, H, F = (1, 8, 10, 8) if args.quick else (1, 64, 56, 64)
    params = dict(N=N, C=C, H=H, W=H, F=F, KH=3, KW=3, stride=1, padding=1)
    kernel = tuned("conv2d", params, args)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((N, C, H, H), dtype=np.float32), rng.standard_normal((F, C, 3, 3), dtype=np.float32)
    t, t_np = compare("conv2d", kernel, [x, w], lambda: im2col_conv2d(x, w, 1), args)
    flop = 2.0 * N * F * H * H * C * 9
    report(f"conv2d N={N} C={C} H=W={H} F={F} 3x3 pad 1 ({flop / t / 1e9:.0f} GFLOP/s)", t, t_np, 1.0,
           " [numpy: im2col + matmul]")


def dense_gelu(args: argparse.Namespace) -> None:
    M, N, K = (32, 64, 64) if args.quick else (512, 1024, 1024)
    kernel = tuned("dense_gelu", dict(M=M, N=N, K=K), args)
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s, dtype=np.float32) * 0.1 for s in ((M, K), (N, K), (N,)))
    c = np.float32(np.sqrt(2 / np.pi))

    def numpy_fn() -> np.ndarray:
        y = x @ w.T + b
        return 0.5 * y * (1 + np.tanh(c * (y + np.float32(0.044715) * y ** 3)))

    t, t_np = compare("dense_gelu", kernel, [x, w, b], numpy_fn, args)
    report(f"dense+bias+gelu {M}x{N}x{K} ({2.0 * M * N * K / t / 1e9:.0f} GFLOP/s)", t, t_np, 1.0)


def attention(args: argparse.Namespace, causal: int = 0) -> None:
    B, Hd, S, D = (1, 2, 64, 16) if args.quick else (1, 8, 1024, 64)
    params = dict(batch=B, heads=Hd, seq_q=S, seq_k=S, head_dim=D, causal=causal)  # default scale 1/sqrt(D)
    kernel = tuned("attention", params, args)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, Hd, S, D), dtype=np.float32) for _ in range(3))
    mask = np.tril(np.ones((S, S), bool))

    def numpy_fn() -> np.ndarray:
        s = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1 / np.sqrt(D))
        if causal:
            s = np.where(mask, s, np.float32(-np.inf))
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v

    t, t_np = compare("attention", kernel, [q, k, v], numpy_fn, args)
    flop = 4.0 * B * Hd * S * S * D / (2 if causal else 1)       # the work a causal kernel cannot skip
    report(f"attention{' causal' if causal else ''} b={B} heads={Hd} seq={S} d={D} "
           f"({flop / t / 1e9:.0f} GFLOP/s)", t, t_np, 2.0)


SECTIONS = [("fused chain", fused_chain), ("softmax", softmax), ("layer_norm", layer_norm), ("conv2d", conv2d),
            ("dense_gelu", dense_gelu), ("attention", attention),
            ("attention_causal", lambda args: attention(args, causal=1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=None, help="tuning trials per op (64; 4 with --quick)")
    ap.add_argument("--repeat", type=int, default=20, help="timed calls per measurement (median)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes and few trials: check the script runs")
    ap.add_argument("--only", nargs="*", default=None, help="run only these sections (e.g. conv2d dense_gelu)")
    args = ap.parse_args()
    args.trials = args.trials or (4 if args.quick else 64)
    from autotune.target import Target

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"AUTOTUNE_NUM_THREADS={os.environ.get('AUTOTUNE_NUM_THREADS', '(all)')}; {Target.host().key}")
    print(f"numpy {np.__version__}; {args.trials} trials per op (xgb); times: best of 3 alternating "
          f"medians of {args.repeat} calls")
    with tempfile.TemporaryDirectory() as tmp:
        args.db = os.path.join(tmp, "tuning.db")
        for name, section in SECTIONS:
            if args.only and name.replace(" ", "_") not in args.only and name not in args.only:
                continue
            try:
                section(args)
            except Skip as e:
                print(f"{name}: {e}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
