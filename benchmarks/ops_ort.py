"""Non-GEMM ops of real networks against onnxruntime, on shapes nobody tuned by hand: each op's
default config (the template's rule; what an untuned `autotune.load` runs) against a one-node
onnxruntime model, measured in the same process.

    python benchmarks/ops_ort.py [--only REGEX] [--threads 2]

Cases: softmax (BERT's attention rows, a vocabulary of 50257, odd rows), layer_norm, batch matmul
(attention scores and context at sequence lengths 77, 197, ...), exp / sigmoid / tanh / erf,
transposes (2-d, NCHW -> NHWC, attention head permutes), pooling (3x3 max and average, global
average), transposed convs (GAN and U-Net upsampling, odd sizes), instance norm, concats (odd
planes, a DenseNet block's twelve inputs, Inception's four, a KV cache's new row), 2x resizes
(U-Net / FPN upsampling: linear, nearest, and align_corners at a ratio of 36/73), reflect and edge
padding, broadcast add and batch_norm. Every output is checked against the template's numpy
reference before timing; a mismatch stops the run.

Timing as in generalization.py: both bound once to preallocated arrays (onnxruntime through IO
binding), the fastest of 5 x n calls in 3 rounds taking turns (timing.interleaved). Prints per
case both times and the ratio onnxruntime / ours (above 1: ours faster), then the geomean and
the cases below 0.8x. onnxruntime runs `--threads` intra-op threads and 1 inter-op thread, the
kernels AUTOTUNE_NUM_THREADS (set to the same, before numpy loads).
"""
# ruff: noqa: E402  (the thread variables must be set before numpy loads)
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Any

_THREADS = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--threads=")), None)
for _var in ("AUTOTUNE_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, _THREADS or "2")

import numpy as np
from references import ort_runner
from timing import interleaved, repeat_for

import autotune

OPSET = 17
SLOW = 0.8


@dataclass(frozen=True)
class Case:
    op: str                    # the autotune template
    params: dict[str, Any]
    node: str                  # the onnx operator
    attrs: dict[str, Any]
    order: tuple[int, ...] = ()   # the template's inputs in the onnx node's input order (default: as is)
    extra: tuple[Any, ...] = ()   # node inputs after those: int64 constants (a list), or None for an empty name

    @property
    def label(self) -> str:
        return f"{self.op} " + ", ".join(f"{k}={v}" for k, v in self.params.items())


def _pool(kind: str, shape: tuple[int, ...], k: int, s: int, p: int) -> Case:
    attrs: dict[str, Any] = dict(kernel_shape=[k, k], strides=[s, s], pads=[p] * 4)
    if kind == "avg":
        attrs["count_include_pad"] = 0
    return Case(f"{kind}_pool2d", dict(shape=shape, kernel=k, stride=s, padding=p),
                "MaxPool" if kind == "max" else "AveragePool", attrs)


CASES = [
    *(Case("softmax", dict(M=m, N=n), "Softmax", dict(axis=-1))
      for m, n in [(4096, 1024), (12 * 128, 128), (8 * 77, 77), (1000, 1001), (2311, 97), (37, 50257)]),
    *(Case("layer_norm", dict(M=m, N=n), "LayerNormalization", dict(axis=-1, epsilon=1e-5))
      for m, n in [(512, 768), (197, 768), (1000, 1001), (2311, 97)]),
    *(Case("batch_matmul", dict(batch=b, M=m, N=n, K=k), "MatMul", {})
      for b, m, n, k in [(12, 128, 128, 64), (12, 128, 64, 128), (8, 77, 77, 64), (8, 77, 64, 77),
                         (16, 197, 197, 64), (16, 197, 64, 197), (12, 50, 50, 64), (3, 333, 251, 129)]),
    *(Case(op, dict(shape=(1000, 1001)), node, {})
      for op, node in [("exp", "Exp"), ("sigmoid", "Sigmoid"), ("tanh", "Tanh"), ("erf", "Erf"), ("sin", "Sin")]),
    *(Case("transpose", dict(shape=shape, axes=axes), "Transpose", dict(perm=list(axes)))
      for shape, axes in [((1001, 999), (1, 0)), ((1, 64, 57, 57), (0, 2, 3, 1)), ((1, 197, 12, 64), (0, 2, 1, 3)),
                          ((8, 77, 8, 64), (0, 2, 1, 3))]),
    _pool("max", (1, 64, 112, 112), 3, 2, 1), _pool("max", (1, 37, 99, 99), 3, 2, 1),
    _pool("max", (1, 256, 28, 28), 3, 1, 1), _pool("avg", (1, 256, 28, 28), 3, 1, 1),
    _pool("avg", (1, 64, 56, 56), 3, 2, 1),
    *(Case("global_avg_pool", dict(shape=shape), "GlobalAveragePool", {})
      for shape in [(1, 2048, 7, 7), (1, 1280, 7, 7)]),
    *(Case("conv_transpose2d", dict(N=1, C=c, H=h, W=h, F=f, KH=k, KW=k, stride=st, padding=p, output_padding=op,
                                    dilation=1, groups=g), "ConvTranspose",
           dict(kernel_shape=[k, k], strides=[st, st], pads=[p] * 4, output_padding=[op, op], group=g))
      for c, f, h, k, st, p, op, g in [(64, 32, 28, 4, 2, 1, 0, 1), (128, 64, 16, 4, 2, 1, 0, 1),
                                       (37, 19, 33, 3, 2, 1, 1, 1), (128, 64, 64, 2, 2, 0, 0, 1),
                                       (40, 80, 15, 3, 2, 1, 1, 4), (256, 128, 13, 3, 2, 1, 1, 1),
                                       (29, 31, 40, 5, 2, 2, 1, 1)]),
    *(Case("conv2d_grouped", dict(N=1, C=c, H=h, W=h, F=f, KH=k, KW=k, stride=1, padding=k // 2, dilation=1,
                                  groups=g), "Conv", dict(kernel_shape=[k, k], pads=[k // 2] * 4, group=g))
      for c, f, h, g, k in [(48, 96, 28, 4, 3), (30, 300, 17, 3, 3), (40, 320, 16, 4, 3), (240, 240, 28, 3, 1),
                            (200, 400, 20, 4, 1), (60, 60, 56, 3, 3)]),
    *(Case("instance_norm", dict(shape=shape, eps=1e-5), "InstanceNormalization", dict(epsilon=1e-5))
      for shape in [(1, 64, 56, 56), (2, 37, 45, 45)]),
    *(Case("concat", dict(shape=shape, axis=axis, sizes=sizes), "Concat", dict(axis=axis))
      for shape, axis, sizes in [((1, 192, 57, 57), 1, (64, 32, 96)), ((1, 416, 56, 56), 1, (64,) + (32,) * 11),
                                 ((1, 256, 28, 28), 1, (64, 128, 32, 32)), ((8, 12, 78, 64), 2, (77, 1)),
                                 ((1000, 1001), 1, (501, 500))]),
    *(Case("resize", dict(shape=shape, out_shape=out, mode=mode, coord=coord), "Resize",
           dict(mode=mode, coordinate_transformation_mode=coord, nearest_mode="floor"), extra=(None, None, out))
      for shape, out, mode, coord in [((1, 64, 28, 28), (1, 64, 56, 56), "linear", "half_pixel"),
                                      ((1, 256, 13, 13), (1, 256, 26, 26), "nearest", "asymmetric"),
                                      ((1, 32, 37, 45), (1, 32, 74, 90), "linear", "align_corners")]),
    *(Case("border_pad", dict(shape=shape, pad_before=pads, pad_after=pads, mode=mode), "Pad", dict(mode=mode),
           extra=(list(pads) * 2,))
      for shape, pads, mode in [((1, 64, 56, 56), (0, 0, 1, 1), "reflect"), ((1, 3, 224, 224), (0, 0, 3, 3), "reflect"),
                                ((2, 37, 45, 47), (0, 0, 2, 2), "edge")]),
    Case("add", dict(a_shape=(197, 768), b_shape=(768,)), "Add", {}),
    Case("batch_norm", dict(N=1, C=64, H=56, W=56), "BatchNormalization", dict(epsilon=1e-5), order=(0, 3, 4, 1, 2)),
]


def onnx_model(case: Case, inputs: list[np.ndarray], out_shape: tuple[int, ...]) -> Any:
    """One node, the template's inputs as graph inputs in0, in1, ... -> out."""
    from onnx import TensorProto, helper, numpy_helper

    names = [f"in{i}" for i in range(len(inputs))]
    order = case.order or tuple(range(len(inputs)))
    consts = {f"const{i}": v for i, v in enumerate(case.extra) if v is not None}
    extra = [f"const{i}" if v is not None else "" for i, v in enumerate(case.extra)]
    graph = helper.make_graph(
        [helper.make_node(case.node, [names[i] for i in order] + extra, ["out"], **case.attrs)], case.op,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape) for n, a in zip(names, inputs)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, list(out_shape))],
        initializer=[numpy_helper.from_array(np.array(v, np.int64), n) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)


def run_case(case: Case, threads: int) -> tuple[float, float]:
    """Seconds per call of (ours, onnxruntime), both checked against the numpy reference."""
    task = autotune.create_task(case.op, **case.params)
    inputs = [np.ascontiguousarray(a) for a in task.make_inputs(np.random.default_rng(0))]
    want = np.ascontiguousarray(task.reference(inputs)[0])
    out = np.empty_like(want)
    ours = autotune.build(*task.instantiate(0)).bind(*inputs, out)
    ort = ort_runner(onnx_model(case, inputs, want.shape), inputs, (), want.shape, threads)
    for run in (ours, ort):
        got = run() if run is ort else (run(), out)[1]
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4, err_msg=case.label)
    mine, theirs = interleaved([ours, ort], repeat_for(ours), 3, np.min)
    return mine, theirs


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="run the cases whose label matches this regex")
    ap.add_argument("--threads", type=int, default=int(os.environ["AUTOTUNE_NUM_THREADS"]))
    args = ap.parse_args(argv)
    cases = [c for c in CASES if args.only is None or re.search(args.only, c.label)]
    print(f"{'case':70} {'ours us':>9} {'ORT us':>9} {'x ORT':>6}")
    ratios = []
    for case in cases:
        mine, theirs = run_case(case, args.threads)
        ratios.append((case.label, theirs / mine))
        print(f"{case.label:70} {mine * 1e6:9.1f} {theirs * 1e6:9.1f} {theirs / mine:6.2f}", flush=True)
    if ratios:
        geomean = math.exp(sum(math.log(r) for _, r in ratios) / len(ratios))
        slow = [f"{label} {r:.2f}" for label, r in ratios if r < SLOW]
        print(f"geomean x onnxruntime {geomean:.2f} over {len(ratios)} cases; below {SLOW}x: {len(slow)}"
              + (f" ({'; '.join(slow)})" if slow else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
