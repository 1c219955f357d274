"""conv2d NCHW on the CPU: templates "conv2d" (stride, padding) and "conv2d_grouped" (plus
dilation and groups; depthwise when groups == C), and the algorithm dispatcher that they and
the fused conv templates in `conv.py` share. The computes live in `autotune.topi.conv`.

The algorithm is a knob: ALGORITHMS maps each name to its module (`conv2d_<name>.py`: APPLIES,
define_knobs, build), and a template offers the algorithms whose APPLIES holds for its geometry,
each with its own knobs (read only under that algorithm). The tuner picks per layer; the
default (the knob's first value) is the first applicable algorithm in this order, a rule on the
layer's arithmetic and data volumes:
  "winograd"  first when it saves at least WINOGRAD_SAVING times the multiplies of a direct conv
              (`conv2d_winograd.multiply_saving`, kernel transform included): its input and output
              transforms run below GEMM speed and eat about half of the saving; and when the
              tiles of all images number more than 2 vectors (`conv2d_winograd.few_tiles`):
              with fewer, each element of the transformed weights, (m+2)^2/9 times the weights,
              feeds too few multiply-adds, whether read from memory or remade per call (2
              threads, weights cold, Winograd against "nchwc": ResNet-18's 256-channel 14x14
              layer, 16 tiles of 4x4, 1.25 / 1.09 ms; 64 channels at 14x14 0.126 / 0.075; 96
              at 20x20, 25 tiles, 0.335 / 0.265; with 49 tiles, 64 at 28x28, 0.193 / 0.256);
              and when the input channels fill more than half a vector
              (`conv2d_winograd.few_channels`: its input transform runs along them; Zen 4,
              2 threads, x onnxruntime: 1 channel 0.18, 3 0.31, 4 0.78, against 6 1.11, 8 1.20;
              but NCHW, which leads below, was faster up to 8 channels of 16 lanes: Zen 5,
              Winograd / NCHW, 6->24 at 64x64 0.53 / 2.15, 8->8 at 56x56 1.19 / 2.52, 8->32 at
              56x56 0.93 / 1.02, 6->64 and 8->64 at 56x56 level; Winograd from 9: 9->24 at
              40x40 0.95 / 0.83, 10->32 at 56x56 1.00 / 0.79, 12->12 at 45x45 1.13 / 0.84,
              13->43 at 67x67 1.21 / 0.59)
  "gemm"      next when the weights outweigh the input (F*C/g*KH*KW > N*C*H*W, deep narrow layers)
              and are not constant: it reads the weights in place, where "nchwc" repacks them
              on every call. A model's weights are constant (`rules.constant_input`): it repacks
              them once at compile time (`autotune.graph.hoist`), and "nchwc", its weight stream
              prefetched, goes first instead (ResNet-18's three 512-channel 7x7 layers in the
              model, 2 threads: 0.93-0.96 ms against the GEMM's 1.00-1.01); and for
              1x1 stride-1 convs where the blocked layout's two transposes, which move (C + F) x
              H x W elements against C x F x H x W multiply-adds, take a share 1/C + 1/F of at
              least POINTWISE_GEMM_SHARE (few channels on one side: MobileNet-V2's expansions
              and projections, ResNet-50's convs up to its 128-channel stage), or where the image
              has POINTWISE_GEMM_PIXELS pixels or more: X is already the GEMM's operand. On
              smaller images deep on both sides the blocked kernel wins. Constant weights, 2
              threads on a Zen 5, x onnxruntime, blocked / GEMM: at 14x14, share 0.003-0.005:
              1024->512 0.94 / 0.74, 1024->256 0.90 / 0.75, 768->768 0.94 / 0.85, 512->1024 0.93
              / 0.82, 512->512 0.93 / 0.83, 384->384 0.92 / 0.88, 256->1024 0.91 / 0.86; 512->512 at
              13x13 0.91 / 0.85, 600->600 at 12x12 0.89 / 0.82, 320->1280 at 9x9 0.90 / 0.64;
              share 0.006 and more: 320->320 0.89 / 0.89, 192->768 0.88 / 0.88, 256->256 0.88 /
              0.92, 128->512 0.90 / 0.93, 576->96 0.81 / 0.94, 96->576 0.65 / 0.84, 200->1000 at
              13x13 0.75 / 0.92; 256 pixels or more, deep: 1024->1024 at 17x17 0.92 / 0.91,
              512->2048 at 16x16 0.97 / 1.04, 2048->1024 at 16x16 0.90 / 0.91, 1536->384 at 20x20
              0.84 / 0.91, 640->320 at 20x20 0.89 / 0.96, 512->512 at 28x28 0.92 / 0.98,
              2048->512 at 28x28 0.81 / 1.05, 384->384 at 28x28 0.90 / 1.00, 288->288 at 56x56
              0.94 / 1.17, and odd: 321->275 at 31x31 0.68 / 1.00, 300->600 at 17x17 0.83 / 1.03,
              400->400 at 19x19 0.83 / 1.07, 2048->512 at 29x29 0.84 / 0.98; missed, below 256
              pixels: 720->360 at 15x15 0.89 / 0.90, 768->384 at 11x11 0.90 / 0.98;
              and for strided 1x1 convs whose blocked transposes move at least
              STRIDED_POINTWISE_TRANSPOSES elements per multiply-add: the input's C x H x W and
              the output's F x OH x OW against C x F x OH x OW, s_h*s_w/F + 1/C, where the GEMM
              only gathers the strided input once, 1/F. Constant weights, 2 threads on a Zen 4,
              GEMM against blocked (x faster), stride 2: 40->80 at 57x57 (share 0.075) 1.57,
              144->24 at 29x29 1.58, 200->96 at 33x33 1.34, 64->128 at 56x56 1.26, 96->200
              at 33x33 1.26, 24->144 at 29x29 1.40, 75->357 at 29x29 (0.024) 1.64, 128->256
              at 28x28 (0.023) 1.05; below the share: 160->320 at 20x20 (0.019) 0.96,
              128->512 at 14x14 0.88, 256->512 at 56x56 1.03 and at 14x14 0.84, 512->1024
              at 28x28 0.93, 1024->2048 at 14x14 0.78.
              Neither pointwise rule takes the GEMM where even one-vector pixel panels pad more
              than `conv2d_gemm.TAIL_WASTE` of their columns (`pads_panels`; 7x7 images, 49
              pixels in 64 columns): every padded column costs a column of multiply-adds, and the
              blocked kernel's rows have no tail (Zen 4, blocked against GEMM at 7x7, x faster:
              160->960 1.14, 960->160 1.04, 960->320 1.10, 320->1280 1.22, 64->384 1.05)
              And on a target whose blocked tile two vectors wide holds fewer than
              BLOCKED_TILE_POSITIONS output positions (16 registers: 6; 32: 14), for convs of one
              group whose GEMM panels do not pad (as above), whose im2col gathers each input for F
              >= 1/IM2COL_SHARE multiply-adds, and that are 1x1 or, on images of more than one row,
              whose blocked default tile is one vector wide (oc_bn's rule, `conv2d_nchwc_knobs`: 2L
              blocks would pad F), which broadcasts an input per multiply-add: the GEMM's
              micro-kernel runs two vectors wide along the flattened pixels, with no tile tail per
              row (a conv1d's one long row has none to lose: one-vector rows, GEMM against blocked,
              64->104 k5 over 2000 0.84, k3 0.94, 96->152 k5 over 1200 0.87, but 128->200 k3 over
              1000 1.11; 1x1 256->360 over 500 1.32). Zen 3 (AVX2), 2 threads, weights transformed
              once (as in a model), calls bound, GEMM against blocked in turns (x faster): 1x1,
              1024->256 at 14x14 1.01, 1024->512 1.02, 256->1024 1.01, 640->320 at 13x13 1.22,
              768->768 at 12x12 1.05, 512->1000 at 15x15 1.24; stride 2, 256->512 at 56x56 1.04,
              512->1024 at 28x28 1.05, 300->700 at 25x25 1.19; one-vector blocks, 3x3: 389->181
              stride 2 at 41x41 1.24-1.30, 150->227 stride 2 at 57x57 1.62, 100->150 stride 2 at
              60x60 1.52, 96->181 stride 2 at 35x35 1.16, 373->167 at 11x11 1.05, but 289->375 at
              9x9 0.90; 5x5 and 7x7, 96->200 at 27x27 1.03, 128->168 at 33x33 1.00, 64->136 7x7 at
              20x20 1.27. Left blocked: 3x3 of two-vector blocks (128->128 stride 2 at 56x56 0.95,
              256->256 stride 2 at 28x28 0.90, 200->301 stride 2 at 33x33 0.97, 300->171 stride 2 at
              29x29 0.92, 256->256 at 14x14 0.86); 7x7 images (0.63-0.81 on ResNet-50's and
              MobileNet-V2's, 461->419 3x3 1.03); few filters (9->31 7x7 stride 2 at 213x213 0.55,
              7->37 0.70, 3->64 0.80, 41->69 5x5 at 13x13 0.85)
  "nchwc"     blocked channels, vectorised along output channels: every output column is a
              full vector whatever the image width
  "nchwc_flat" the same kernel over the image as one row, for 1x1 stride-1 convs without
              padding; ahead of "nchwc" where that leads and the blocked default tile (oc_bn's and
              reg_n's rules, `conv2d_nchwc_knobs`) of the image leaves a tail on every row, or
              is one vector wide where the row's is two (`_flat_tile_better`): one tail per
              image, two-vector tiles (Zen 3 (AVX2), 2 threads, weights constant, calls bound, in
              turns, x onnxruntime, "nchwc" / flat, at 7x7: 512->2048 0.85 / 1.00, 2048->512
              0.90 / 0.98, 576->160 1.01 / 1.18, 160->960 0.91 / 1.01, 960->160 0.95 / 1.08,
              960->320 0.86 / 1.02, 320->1280 0.88 / 1.01). Where the tiles are alike it stays
              behind: 2048->1000 at 7x7 has one-vector 7-column tiles either way (as a conv over a
              1 x 49 image, 0.69 against the 7x7 image's 0.82)
  "gemm"      im2col panels through the matmul micro-kernel (when not placed above); last for
              grouped convs (not depthwise): each group is a GEMM of F/groups filter rows,
              narrower than its register tile (Zen 4, 2 threads, x onnxruntime, GEMM / NCHW:
              ResNeXt-50's 128 channels at 56x56 in 32 groups 0.53 / 2.39, 64 at 56x56 in 16
              groups 0.53 / 2.40, 100 at 29x29 in 25 0.52 / 1.55, 120 -> 240 at 28x28 in 40
              0.53 / 1.15, 32 at 14x14 in 8 0.53 / 1.06; with 16 or 32 filters per group, GEMM
              / blocked: 32 -> 64 at 14x14 in 4 0.60 / 0.96, 64 -> 128 at 28x28 in 4 0.48 /
              0.79, 128 -> 256 in 8 0.49 / 0.81); but first for grouped 1x1 convs under the
              pointwise rules above, with the channels of a group for C and F: each group is
              then a GEMM as laid out (Zen 5, 2 threads, x onnxruntime, blocked / GEMM: 240 at
              28x28 in 3 groups 0.66 / 1.17, 120 in 3 0.68 / 1.32, 256 in 4 0.73 / 1.14, 384 in 8
              0.92 / 1.35, 60 at 56x56 in 3 0.03 / 1.23, 136 in 2 0.14 / 0.91, 200 -> 400 at 20x20
              in 4 0.52 / 0.84; lost: 480 at 14x14 in 3 1.01 / 0.93; at 7x7 `pads_panels` keeps
              the blocked kernel: 960 in 3 1.00 / 0.87, 1536 in 8 1.01 / 0.88)
  "nchwc"     also first for depthwise layers of BLOCKED_DEPTHWISE_TAPS taps or more (7x7), any
              stride: per output, the taps at full vectors and two transposes (shuffled blocks,
              `codegen.llvm_transpose`), against NCHW's taps at the lanes its tiles fill, with
              masked and unaligned reads (Zen 5, 2 threads, x onnxruntime, NCHW / blocked: stride
              1, ConvNeXt-T's 96 channels at 56x56 0.74 / 1.07, 192 at 28x28 0.82 / 1.03, 384 at
              14x14 1.02 / 1.26, 768 at 7x7 0.72 / 1.01; 128 at 19x19 0.63 / 0.99, 160 at 20x20
              0.59 / 1.05, 256 at 17x17 0.73 / 1.15, 300 at 12x12 0.98 / 1.10, 480 at 6x6 0.73 /
              1.12, 88 at 34x34 0.81 / 0.89; stride 2: 48 at 97x97 0.90 / 1.09, 96 at 56x56 0.82 /
              0.97, 64 at 57x57 0.60 / 0.94, but 128 at 28x28 1.04 / 0.95, 120 at 29x29 1.14 /
              0.92). 5x5 windows were level (stride 1: 240 at 28x28 1.30 / 1.31, 672 at 14x14
              1.74 / 1.50, 1152 at 7x7 0.93 / 1.09; stride 2: 144 at 56x56 1.07 / 1.06, 240 at
              28x28 0.94 / 0.87, 72 at 45x45 1.31 / 0.80) and 3x3 ones won by NCHW (stride 1: 144
              at 56x56 3.63 / 0.92, 576 at 14x14 2.95 / 1.00; stride 2: 96 at 112x112 1.30 /
              1.03, 576 at 14x14 1.57 / 1.00)
  "nchw"      vectorised along the output width; first for other depthwise layers with a stride
              of at most MAX_SHUFFLED_STRIDE (1 to 4; a strided vector load is then one load of the
              span and a shuffle), as measured above; and, unless Winograd went first, for
              layers of one group and fewer than a vector of input channels at stride 1: the
              blocked layout's channel blocks are then single channels, and its output transpose
              costs what the few multiply-adds per output save (Zen 5, 2 threads, x onnxruntime,
              blocked / NCHW: 1->32 at 128x128 1.21 / 3.85, 4->64 at 56x56 0.70 / 0.96, 5->16 at
              64x64 5x5 1.46 / 1.79, 8->8 at 30x30 1.38 / 2.44). With a stride the blocked kernel
              leads since its transposes are shuffled blocks (`codegen.llvm_transpose`), even on
              3x3 taps and one channel, where NCHW reads the input through its stride phases:
              3->32 at 224x224 1.03 / 0.95, 3->32 at 225x225 0.95 / 0.61, 2->32 at 75x75 0.92 /
              0.75, 2->16 at 200x200 1.13 / 0.91, 4->32 at 128x128 1.10 / 0.82, 4->24 at 100x100
              0.75 / 0.69, 1->19 at 223x223 1.33 / 1.14, 1->16 at 128x128 2.17 / 2.02; lost by
              it: 1->32 at 96x96 0.87 / 1.05, 3->24 at 151x151 0.94 / 0.98, 3->16 at 160x160
              1.29 / 1.34, 3->64 at 112x112 0.82 / 0.84 (before, gathered transposes made NCHW
              lead up to 4 channels with 3x3 taps)
The rules of each algorithm's own knobs are in its module docstring.

"conv2d" keeps its parameters, so its workload keys stay valid; records made before the
algorithm knob existed load as algorithm "nchw" with their knobs (and "parallel", which "conv2d"
did not have, as the "fused" loop it used). Dilation and groups are parameters of
"conv2d_grouped" only.
"""
from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ... import te
from ...target import MAX_SHUFFLED_STRIDE
from ...topi import conv as topi_conv
from ...topi.conv import ConvGeometry, Epilogue
from ..schedule import Schedule
from ..task import count_flop, template
from . import (
    conv2d_gemm as gemm,
    conv2d_nchw as nchw,
    conv2d_nchwc as nchwc,
    conv2d_nchwc_flat as nchwc_flat,
    conv2d_nchwc_knobs as nchwc_knobs,
    conv2d_winograd as winograd,
    rules,
)

ALGORITHMS: dict[str, ModuleType] = {"winograd": winograd, "nchwc": nchwc, "gemm": gemm, "nchw": nchw,
                                     "nchwc_flat": nchwc_flat}
WINOGRAD_SAVING = 2.0
POINTWISE_GEMM_SHARE = 0.006
POINTWISE_GEMM_PIXELS = 256
STRIDED_POINTWISE_TRANSPOSES = 0.02
BLOCKED_DEPTHWISE_TAPS = 49
BLOCKED_TILE_POSITIONS = 8      # a two-vector blocked tile of fewer positions lets the GEMM lead more layers
IM2COL_SHARE = 0.01             # im2col's gathered inputs per multiply-add (1/F) the GEMM's lead allows


def conv2d_nchw(X: te.Tensor, Wt: te.Tensor, stride: Any, padding: Any, name: str = "Y") -> tuple[te.Tensor, te.Tensor]:
    """(pad, Y) of a dense NCHW conv2d (see `autotune.topi.conv.conv2d_nchw` for dilation and groups)."""
    return topi_conv.conv2d_nchw(X, Wt, stride, padding, name=name)


def conv2d_reference(x: np.ndarray, w: np.ndarray, stride: Any, padding: Any, dilation: Any = 1, groups: int = 1,
                     **_: int) -> np.ndarray:
    """numpy conv2d NCHW through one (grouped) einsum per kernel offset."""
    return topi_conv.conv2d_nchw_reference(x, w, stride, padding, dilation, groups)


def nchw_geometry(op: str, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any, padding: Any,
                  dilation: Any = 1, groups: int = 1) -> ConvGeometry:
    if N < 1:
        raise ValueError(f"{op}: batch N must be >= 1, got {N}")
    return topi_conv.conv_geometry(op, C, F, (H, W), (KH, KW), stride, padding, dilation, groups)


def algorithm_order(g: ConvGeometry, N: int, target: rules.VectorTarget,
                    constant_weights: bool = False) -> list[str]:
    """The algorithms that apply to this layer, the default rule's pick first (module docstring),
    on `target`; with `constant_weights` no weight repack costs anything per call."""
    vec = target.lanes
    names = [name for name, module in ALGORITHMS.items() if module.APPLIES(g)]
    if "winograd" in names and (winograd.multiply_saving(g, N) < WINOGRAD_SAVING or winograd.few_tiles(g, N, vec)
                                or winograd.few_channels(g, vec)):
        names.append(names.pop(names.index("winograd")))
    if g.depthwise and g.kernel[0] * g.kernel[1] >= BLOCKED_DEPTHWISE_TAPS:
        names.insert(0, names.pop(names.index("nchwc")))
    elif ((g.depthwise and max(g.stride) <= MAX_SHUFFLED_STRIDE)
            or (_few_channels(g, vec) and names[0] != "winograd")):
        names.insert(0, names.pop(names.index("nchw")))
    pointwise = (_stride1_pointwise(g) or _strided_pointwise(g)) and not gemm.pads_panels(g, vec)
    if g.groups > 1 and not g.depthwise:
        others, gemm_ = [name for name in names if name != "gemm"], ["gemm"] * ("gemm" in names)
        return gemm_ + others if pointwise else others + gemm_
    weights = g.out_channels * g.in_channels // g.groups * g.kernel[0] * g.kernel[1]
    heavy_weights = not constant_weights and weights > N * g.in_channels * g.spatial[0] * g.spatial[1]
    if "gemm" in names and ((names[0] != "winograd" and (heavy_weights or pointwise))
                            or (names[0] == "nchwc" and _gemm_tile_wider(g, target))):
        names.insert(0, names.pop(names.index("gemm")))
    if names[0] == "nchwc" and "nchwc_flat" in names and _flat_tile_better(g, target):
        names.insert(0, names.pop(names.index("nchwc_flat")))
    return names


def _flat_tile_better(g: ConvGeometry, target: rules.VectorTarget) -> bool:
    """Whether the blocked default tile over the image as one row is two vectors wide where the
    image's is one, or as wide without the image's tail on every row (module docstring)."""
    oc_bn, _, reg_n = nchwc_knobs.default_tile(g, target)
    flat_oc_bn, _, _ = nchwc_knobs.default_tile(nchwc_knobs.flat_geometry(g), target)
    return flat_oc_bn > oc_bn or (flat_oc_bn == oc_bn and g.out[1] % reg_n != 0)


def _gemm_tile_wider(g: ConvGeometry, target: rules.VectorTarget) -> bool:
    """Where a blocked tile two vectors wide holds fewer than BLOCKED_TILE_POSITIONS positions
    (16 registers), a conv of one group whose GEMM panels do not pad, whose im2col gathers an
    input for F >= 1/IM2COL_SHARE multiply-adds, and that is 1x1 or, on an image of more than
    one row, whose blocked default tile is one vector wide, broadcasting an input per
    multiply-add (module docstring)."""
    if (g.groups != 1 or nchwc_knobs.register_tile_positions(target.registers, 2) >= BLOCKED_TILE_POSITIONS
            or g.out_channels * IM2COL_SHARE < 1 or gemm.pads_panels(g, target.lanes)):
        return False
    return g.kernel == (1, 1) or (g.out[0] > 1 and nchwc_knobs.default_tile(g, target)[0] <= target.lanes)


def _few_channels(g: ConvGeometry, vec: int) -> bool:
    """A conv of one group and fewer than a vector of input channels at stride 1: the blocked
    layout's channel blocks are then single channels, and its output transpose costs what the
    few multiply-adds per output save."""
    return g.groups == 1 and g.stride == (1, 1) and g.in_channels < vec


def _stride1_pointwise(g: ConvGeometry) -> bool:
    """A 1x1 stride-1 conv, a GEMM per group as laid out, where the blocked layout's transposes
    take a share 1/C + 1/F (channels of a group) of POINTWISE_GEMM_SHARE or more, or on an image
    of POINTWISE_GEMM_PIXELS pixels or more (module docstring)."""
    if g.kernel != (1, 1) or g.stride != (1, 1) or g.depthwise:
        return False
    share = g.groups / g.in_channels + g.groups / g.out_channels
    return share >= POINTWISE_GEMM_SHARE or g.out[0] * g.out[1] >= POINTWISE_GEMM_PIXELS


def _strided_pointwise(g: ConvGeometry) -> bool:
    """A 1x1 strided conv whose blocked layout moves more per multiply-add than its GEMM gains:
    the transposes' s_h*s_w/F + 1/C elements (channels of a group) at least
    STRIDED_POINTWISE_TRANSPOSES."""
    if g.kernel != (1, 1) or g.stride == (1, 1) or g.depthwise:
        return False
    share = (g.stride[0] * g.stride[1] / g.out_channels + 1 / g.in_channels) * g.groups
    return share >= STRIDED_POINTWISE_TRANSPOSES


def define_algorithms(cfg: Any, g: ConvGeometry, N: int, dtype: str) -> None:
    """The "algorithm" knob over the algorithms that apply (the default rule's pick first), then
    each one's knobs, read only under it."""
    names = algorithm_order(g, N, rules.vector_target(cfg, dtype), rules.constant_input(cfg, 1))
    define_algorithm_knobs(cfg, g, N, dtype, names, absent="nchw")


def define_algorithm_knobs(cfg: Any, g: ConvGeometry | None, N: int, dtype: str, names: Sequence[str],
                           absent: str, sharing: dict[str, str] | None = None) -> None:
    """The "algorithm" knob over `names`, the default first (`absent`: what records made before
    the knob load as), then the knobs of each conv2d algorithm among them, read only under it. A
    template that runs a conv (geometry g; None where it has none to run) through these
    algorithms adds its own schedule to the names and defines that one's knobs itself, or reads
    an algorithm's: `sharing` maps such a name to the algorithm whose knobs it reads too."""
    cfg.define_knob("algorithm", list(names), absent=absent)
    readers = {name: (name, *(own for own, shared in (sharing or {}).items() if shared == name)) for name in names}
    for name in names:
        if name in ALGORITHMS and g is not None:
            ALGORITHMS[name].define_knobs(cfg, g, N, dtype, when=("algorithm", readers[name]))


def direct_flop(X: te.Tensor, Wt: te.Tensor, g: ConvGeometry, epilogue: Epilogue | None) -> float:
    """The flop of the direct conv (and epilogue) every algorithm computes: the task's work."""
    _, Y = topi_conv.conv2d_nchw(X, Wt, g.stride, (*g.pad_before, *g.pad_after), g.dilation, g.groups)
    return count_flop([topi_conv.apply_epilogue(Y, epilogue) if epilogue else Y])


def conv2d_nchw_schedule(cfg: Any, g: ConvGeometry, N: int, dtype: str, epilogue: Epilogue | None = None,
                         extra: Sequence[te.Tensor] = ()) -> tuple[Schedule, list[te.Tensor]]:
    """Declare the knobs, then build X (N x C x H x W) * W (F x C/groups x KH x KW) with the
    chosen algorithm: (schedule, [X, W, *extra, out])."""
    define_algorithms(cfg, g, N, dtype)
    (H, W), (KH, KW), C = g.spatial, g.kernel, g.in_channels
    X = te.placeholder((N, C, H, W), dtype, name="X")
    Wt = te.placeholder((g.out_channels, C // g.groups, KH, KW), dtype, name="W")
    cfg.add_flop(direct_flop(X, Wt, g, epilogue))
    s, out = ALGORITHMS[cfg["algorithm"].val].build(cfg, X, Wt, g, epilogue, extra)
    return s, [X, Wt, *extra, out]


def blocked_conv2d_schedule(cfg: Any, g: ConvGeometry, N: int, dtype: str, epilogue: Epilogue | None,
                            extra: Sequence[te.Tensor], x_block: int, out_block: int
                            ) -> tuple[Schedule, list[te.Tensor]]:
    """A conv of a model whose activations stay blocked between kernels (`autotune.graph.layout`):
    X arrives as N x C/x_block x H x W x x_block when `x_block`, the output leaves blocked by
    `out_block` when set. Only "nchwc" works in that layout, so it is the one algorithm."""
    cfg.define_knob("algorithm", ["nchwc"], absent="nchwc")
    nchwc.define_knobs(cfg, g, N, dtype, ("algorithm", ("nchwc",)), x_block, out_block)
    (H, W), (KH, KW), C = g.spatial, g.kernel, g.in_channels
    X = te.placeholder((N, C // x_block, H, W, x_block) if x_block else (N, C, H, W), dtype, name="X")
    Wt = te.placeholder((g.out_channels, C // g.groups, KH, KW), dtype, name="W")
    cfg.add_flop(direct_flop(te.placeholder((N, C, H, W), dtype, name="X"), Wt, g, epilogue))
    s, out = nchwc.build(cfg, X, Wt, g, epilogue, extra, out_block)
    return s, [X, Wt, *extra, out]


@template("conv2d", reference=conv2d_reference,
          description="NCHW conv2d: X N x C x H x W, W F x C x KH x KW, with stride and padding")
def conv2d_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: int, padding: int,
                    dtype: str = "float32"):
    """The conv by the algorithm knob (blocked channels or direct NCHW)."""
    g = nchw_geometry("conv2d", N, C, H, W, F, KH, KW, stride, padding)
    return conv2d_nchw_schedule(cfg, g, N, dtype)


@template("conv2d_grouped", reference=conv2d_reference,
          description="NCHW conv2d with stride, padding, dilation and groups (depthwise: groups == C): "
                      "X N x C x H x W, W F x C/groups x KH x KW")
def conv2d_grouped_template(cfg, N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: Any,
                            padding: Any, dilation: Any, groups: int, dtype: str = "float32"):
    """The conv by the algorithm knob, each group reading its own channels."""
    g = nchw_geometry("conv2d_grouped", N, C, H, W, F, KH, KW, stride, padding, dilation, groups)
    return conv2d_nchw_schedule(cfg, g, N, dtype)
