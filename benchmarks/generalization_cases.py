"""The shape catalogue of the generalization benchmark (issue 13, benchmarks/generalization.py):
every shape it tunes, as data, with its numpy and onnxruntime references (benchmarks/references.py).

- conv: every distinct conv layer of torchvision's ResNet-50 (stem, bottlenecks with the stride on
  the 3x3, the 1x1 projection shortcuts) and MobileNet-V2 (stem, 1x1 expand and project, depthwise
  3x3 with groups == C at stride 1 and 2, the last 1x1), both at 224x224, batch 1, as
  "conv2d_grouped". Bias and batch norm fold into the next op and are not part of the conv.
- grouped conv: the 3x3 convs of ResNeXt-50 32x4d (32 groups, 128 to 1024 channels, stride 2 in
  the first block of layers 2-4).
- GEMM: BERT-base (768/3072), BERT-large (1024/4096) and GPT-2 small (768, fused qkv 768 -> 2304)
  at M = batch*seq = 128 and 512. The FFN up-projection, which an activation follows, is "dense"
  = relu(X @ W.T + bias) (ReLU in place of GELU; ONNX Gemm + Relu); the others (q, k, v or qkv,
  attention output, FFN down) are "matmul" = X @ W without bias (ONNX MatMul).
- random (seed 13): 6 shapes each of matmul, dense and conv. matmul/dense: M, N, K odd in
  [101, 1999]; in the first three shapes every size is a prime. conv (groups 1): C, F odd in
  [17, 511], kernel 1, 3 or 5 (pad kernel // 2), stride 1 or 2, H = W odd in [7, 111], the first
  three with prime C, F and H; H is redrawn below the last draw until the conv is <= 1 GFLOP.
  And 6 "random stem" convs, a network's first layer on an image of few channels: C odd in
  [1, 15], F odd in [17, 63], kernel 3, 5 or 7, stride 1 or 2, H odd in [31, 227] (primes and
  the GFLOP bound as for conv). And 6 "random depthwise" convs (F = groups = C): C odd in [17,
  1023], kernel 3, 5 or 7, stride 1 or 2, H odd in [7, 113] (primes and the bound as for conv).
- ConvNeXt-T's four depthwise 7x7 convs (96 channels at 56x56 to 768 at 7x7, stride 1).

A layer's weight and bias are model constants (ONNX initializers); a random matmul's B is not.
A kernel with constant inputs is tuned and timed as `compile_model` runs it, as onnxruntime packs
its initializers once: a matmul or dense runs its `*_packed` kernel on the weight packed once
(panel width by the template's rule); every such task is told its constant inputs
(`Task.set_constant_inputs`: the constant-weight default, configs ranked with their weight
transforms hoisted) and its kernel runs with those transforms done once (`autotune.runtime.hoist`:
a conv's blocked or Winograd weights).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from references import NUMPY, Run, conv_out, onnx_model, ort_runner

import autotune
from autotune.schedules.cpu.panels import default_panel, pack_panels
from autotune.target import Target

SEED = 13
RANDOM_PER_FAMILY = 6
QUICK = ("resnet50 layer1.0.conv2", "resnet50 layer3.0.downsample", "mobilenet_v2 block3.dw",
         "bert-base M=128 q/k/v/attn.out", "bert-base M=128 ffn.up", "random matmul 2", "random dense 2",
         "random conv 1")


@dataclass(frozen=True)
class Case:
    """One shape: where it comes from, the autotune template and parameters, its references."""

    name: str
    family: str                           # "conv", "depthwise", "matmul" or "dense"
    op: str
    params: dict[str, Any]
    random_odd: bool = False              # a random shape with odd sizes (the numpy target's rows)
    weights: tuple[int, ...] = field(default=())   # inputs that are model constants (ONNX initializers)

    def task(self) -> Any:
        """The plain task: its inputs are the references' inputs and its flop the row's."""
        return autotune.create_task(self.op, **self.params)

    def kernel_task(self) -> Any:
        """The task that is tuned: the kernel's op, told which of its inputs are constants."""
        op, params = self.kernel_op()
        task = autotune.create_task(op, **params)
        task.set_constant_inputs(self.weights)
        return task

    @property
    def panel(self) -> int | None:
        """The panel width a constant GEMM weight is packed in (None: the kernel takes it as is)."""
        if self.family not in ("matmul", "dense") or 1 not in self.weights:
            return None
        return default_panel(Target.parse("llvm"), "float32", self.params["N"])

    def kernel_op(self) -> tuple[str, dict[str, Any]]:
        """The op and parameters of the kernel that is tuned and timed."""
        return (self.op, self.params) if self.panel is None else (f"{self.op}_packed", {**self.params,
                                                                                          "panel": self.panel})

    def kernel_inputs(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The plain task's inputs as the kernel takes them (a constant weight packed once)."""
        if self.panel is None:
            return inputs
        return [inputs[0], pack_panels(inputs[1], self.panel, transposed=self.op == "dense"), *inputs[2:]]

    def numpy(self, inputs: list[np.ndarray]) -> Run:
        return NUMPY[self.family](inputs, self.params)

    def onnx(self, inputs: list[np.ndarray], out_shape: tuple[int, ...]) -> Any:
        return onnx_model(self.family, self.params, inputs, out_shape, self.weights)

    def ort(self, inputs: list[np.ndarray], out_shape: tuple[int, ...], threads: int) -> Run:
        return ort_runner(self.onnx(inputs, out_shape), inputs, self.weights, out_shape, threads)

    def tiny(self) -> Case:
        """The same kind of case at a few-thousand-FLOP size (kernel, stride, padding and
        grouping kept), for checking the references quickly."""
        p = dict(self.params)
        if self.op == "conv2d_grouped":
            g = min(p["groups"], 3)
            c = 3 if g > 1 else min(p["C"], 5)
            f = 3 if g > 1 else min(p["F"], 4)
            h = max(p["KH"], min(p["H"], 9))
            p.update(C=c, F=f, groups=g, H=h, W=h)
        else:
            p.update(M=min(p["M"], 7), N=min(p["N"], 11), K=min(p["K"], 13))
        return replace(self, params=p)


def conv(name: str, C: int, F: int, H: int, K: int, stride: int, pad: int, groups: int = 1,
         random_odd: bool = False) -> Case:
    params = dict(N=1, C=C, H=H, W=H, F=F, KH=K, KW=K, stride=stride, padding=pad, dilation=1, groups=groups)
    family = "depthwise" if groups == C == F and groups > 1 else "conv"
    return Case(name, family, "conv2d_grouped", params, random_odd, weights=(1,))


def gemm(name: str, op: str, M: int, N: int, K: int, weights: tuple[int, ...], random_odd: bool = False) -> Case:
    return Case(name, op, op, dict(M=M, N=N, K=K), random_odd, weights)


def resnet50() -> list[Case]:
    cases = [conv("resnet50 conv1", 3, 64, 224, 7, 2, 3)]
    c, h = 64, 56                          # after the stem and the 3x3 stride-2 max pool
    for layer, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], 1):
        for b in range(blocks):
            s, at = (stride if b == 0 else 1), f"resnet50 layer{layer}.{b}"
            ho = conv_out(h, 3, s, 1)
            cases += [conv(f"{at}.conv1", c, width, h, 1, 1, 0), conv(f"{at}.conv2", width, width, h, 3, s, 1),
                      conv(f"{at}.conv3", width, 4 * width, ho, 1, 1, 0)]
            if b == 0:
                cases.append(conv(f"{at}.downsample", c, 4 * width, h, 1, s, 0))
            c, h = 4 * width, ho
    return cases


def resnext50() -> list[Case]:
    """The grouped 3x3 convs of torchvision's ResNeXt-50 32x4d (its 1x1 convs have ResNet-50's
    shapes at twice the width): 32 groups of width/32 channels, the stride on the first block's."""
    cases, h = [], 56
    for layer, (width, stride) in enumerate([(128, 1), (256, 2), (512, 2), (1024, 2)], 1):
        at = f"resnext50 layer{layer}"
        if stride > 1:
            cases.append(conv(f"{at}.0.conv2", width, width, h, 3, stride, 1, groups=32))
            h = conv_out(h, 3, stride, 1)
        cases.append(conv(f"{at}.{int(stride > 1)}.conv2", width, width, h, 3, 1, 1, groups=32))
    return cases


def mobilenet_v2() -> list[Case]:
    cases = [conv("mobilenet_v2 stem", 3, 32, 224, 3, 2, 1)]
    c, h, block = 32, 112, 1
    for t, out, n, stride in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                              (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            s, hidden, at = (stride if i == 0 else 1), c * t, f"mobilenet_v2 block{block}"
            if t != 1:
                cases.append(conv(f"{at}.expand", c, hidden, h, 1, 1, 0))
            cases.append(conv(f"{at}.dw", hidden, hidden, h, 3, s, 1, groups=hidden))
            h = conv_out(h, 3, s, 1)
            cases.append(conv(f"{at}.project", hidden, out, h, 1, 1, 0))
            c, block = out, block + 1
    return cases + [conv("mobilenet_v2 last", c, 1280, h, 1, 1, 0)]


def convnext_t() -> list[Case]:
    """The depthwise 7x7 convs of ConvNeXt-T's four stages (stride 1, pad 3), at 224x224."""
    return [conv(f"convnext_t stage{i}.dw", c, c, h, 7, 1, 3, groups=c)
            for i, (c, h) in enumerate([(96, 56), (192, 28), (384, 14), (768, 7)], 1)]


def transformers() -> list[Case]:
    cases = []
    for m in (128, 512):
        for model, d, ffn, qkv in [("bert-base", 768, 3072, 768), ("bert-large", 1024, 4096, 1024),
                                   ("gpt2", 768, 3072, 3 * 768)]:
            at = f"{model} M={m}"
            if qkv > d:                    # GPT-2: q, k and v in one GEMM
                cases.append(gemm(f"{at} qkv", "matmul", m, qkv, d, (1,)))
            cases += [gemm(f"{at} {'attn.out' if qkv > d else 'q/k/v/attn.out'}", "matmul", m, d, d, (1,)),
                      gemm(f"{at} ffn.up", "dense", m, ffn, d, (1, 2)),
                      gemm(f"{at} ffn.down", "matmul", m, d, ffn, (1,))]
    return cases


def _odd(rng: np.random.Generator, lo: int, hi: int, primes: bool) -> int:
    """An odd int in [lo, hi], a prime one if `primes`."""
    pool = [p for p in range(lo | 1, hi + 1, 2) if not primes or all(p % q for q in range(3, math.isqrt(p) + 1, 2))]
    return int(rng.choice(pool))


def _random_convs(rng: np.random.Generator, name: str, sizes: tuple[tuple[int, int], ...],
                  kernels: tuple[int, ...], depthwise: bool = False) -> list[Case]:
    """RANDOM_PER_FAMILY convs of odd C, F, H in `sizes` (primes in the first three), a kernel of
    `kernels`, stride 1 or 2; H redrawn below the last draw until the conv is <= 1 GFLOP.
    `depthwise`: `sizes` gives C and H, and F = groups = C."""
    cases = []
    for i in range(RANDOM_PER_FAMILY):
        drawn = [_odd(rng, lo, hi, i < 3) for lo, hi in sizes]
        (c, h), f = (drawn, drawn[0]) if depthwise else ((drawn[0], drawn[2]), drawn[1])
        groups = c if depthwise else 1
        k, s = int(rng.choice(kernels)), int(rng.choice([1, 2]))
        while 2 * c // groups * f * k * k * conv_out(h, k, s, k // 2) ** 2 > 1e9:
            h = _odd(rng, max(k, sizes[-1][0]), h - 1, i < 3)
        cases.append(conv(f"{name} {i}", c, f, h, k, s, k // 2, groups=groups, random_odd=True))
    return cases


def random_cases(seed: int = SEED) -> list[Case]:
    rng, cases = np.random.default_rng(seed), []
    for op, weights in (("matmul", ()), ("dense", (1, 2))):
        for i in range(RANDOM_PER_FAMILY):
            m, n, k = (_odd(rng, 101, 1999, i < 3) for _ in range(3))
            cases.append(gemm(f"random {op} {i}", op, m, n, k, weights, random_odd=True))
    cases += _random_convs(rng, "random conv", ((17, 511), (17, 511), (7, 111)), (1, 3, 5))
    cases += _random_convs(rng, "random stem", ((1, 15), (17, 63), (31, 227)), (3, 5, 7))
    cases += _random_convs(rng, "random depthwise", ((17, 1023), (7, 113)), (3, 5, 7), depthwise=True)
    return cases


def catalogue() -> list[Case]:
    """Every shape once (the first name of a repeated shape is kept), models first."""
    seen, cases = set(), []
    for case in resnet50() + resnext50() + mobilenet_v2() + convnext_t() + transformers() + random_cases():
        key = (case.op, tuple(sorted(case.params.items())))
        if key not in seen:
            seen.add(key)
            cases.append(case)
    return cases


def quick(cases: list[Case]) -> list[Case]:
    """The --quick subset: two ResNet convs, a depthwise conv, two BERT GEMMs, three random shapes."""
    return [c for c in cases if c.name in QUICK]
