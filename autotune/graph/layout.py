"""Activations kept blocked between convolutions, as TVM's alter-op-layout and ONNX Runtime's
NCHWc transformer do: a conv then reads its input and writes its output as N x C/b x H x W x b
(`autotune.topi.layout`), with no transpose at its edges. Opt-in (`layout="nchwc"`).

A conv through the blocked layout repacks its NCHW input into channel blocks and unpacks its
output back, two transposes per kernel: ResNet-18's 3x3 convs ran 4-23% faster without them and
its 1x1 stride-2 convs 5x (2 threads, same knobs). With the activations blocked between kernels,
each conv pays a copy of whole vectors (its zero padding) instead. It is not the default: every
conv is then the "nchwc" algorithm, which trails the Winograd and GEMM kernels the NCHW tuning
picks for most of ResNet-18's layers on this project's CPU (README, "Models").

The rule, on the fused groups (`plan_layout`): the block is one float32 vector of the target.
A conv group (a conv of one group with its epilogue, float32, output channels a multiple of the
block, not a narrowing 1x1 stride-1 conv) writes its output blocked when some reader takes it
blocked: another such conv group (as its input or as an epilogue input, a residual) or a max
pool, which then writes blocked too. Every other reader, and a graph output, reads the NCHW
tensor that one conversion kernel makes after the producer. A conv whose input stays NCHW (the
model's image) repacks it as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import te
from ..schedules.from_te import create_task_from_te, fingerprint
from ..target import Target
from ..topi.layout import LAYOUTS, blocked_shape, from_blocked
from ..topi.pooling import pool_geometry
from .fused_task import GroupKernel, register_kernel
from .ir import Node, Value

CONVS = ("conv2d", "conv2d_grouped")


@dataclass(frozen=True)
class Layout:
    """`blocked`: the NCHW values stored blocked by `block` channels, each under `name(value)`."""

    block: int
    blocked: frozenset[str]

    def name(self, value: str) -> str:
        return f"{value}@nchw{self.block}c"


def layout_block(target: str, layout: str = "nchwc") -> int:
    """The channel block of `layout` on `target`: 0 for "nchw" (no blocked activations), one
    float32 vector of the CPU for "nchwc"; ValueError for another layout, or "nchwc" off the CPU."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if layout == "nchw":
        return 0
    tgt = Target.parse(target)
    if tgt.kind != "llvm":
        raise ValueError(f"layout 'nchwc' is for CPU targets (llvm), not {tgt.kind!r}")
    return tgt.cpu.lanes(4)


def plan_layout(kernels: list[tuple[list[Node], GroupKernel]], block: int) -> Layout:
    """The values to keep blocked, from the groups (their source nodes and NCHW kernels, in the
    order they run) by the rule in the module docstring."""
    convs = {id(k) for nodes, k in kernels if _blockable_conv(nodes, k, block)}
    pools = {id(k) for nodes, k in kernels if len(nodes) == 1 and k.node.op == "max_pool2d"}

    def takes_blocked(reader: GroupKernel, value: str, blocked: set[str]) -> bool:
        """Whether `reader` reads `value` blocked: a conv as its input or an epilogue input, a
        pool as its input when it writes blocked itself."""
        ins = reader.node.inputs
        if id(reader) in convs:
            return ins[0] == value or value in ins[2:]
        return id(reader) in pools and ins[0] == value and reader.node.outputs[0] in blocked

    # start from every candidate blocked, drop what no reader takes blocked until nothing changes
    blocked = {k.node.outputs[0] for _, k in kernels if id(k) in convs | pools}
    while True:
        kept = {out for _, k in kernels if (out := k.node.outputs[0]) in blocked
                and (id(k) in convs or k.node.inputs[0] in blocked)
                and any(takes_blocked(r, out, blocked) for _, r in kernels)}
        if kept == blocked:
            return Layout(block, frozenset(blocked))
        blocked = kept


def _blockable_conv(nodes: list[Node], kernel: GroupKernel, block: int) -> bool:
    """A conv group the blocked layout suits: not a narrowing 1x1 stride-1 conv, which is a GEMM
    as laid out in NCHW (the blocked kernel ran it 2x slower, its activations' transposes aside)."""
    conv = nodes[0]
    if len(nodes) < 2 or conv.op not in CONVS or kernel.how not in ("template", "anchor"):
        return False
    p = conv.params
    narrowing = (p["KH"], p["KW"]) == (1, 1) and p["stride"] in (1, (1, 1), [1, 1]) and p["F"] <= p["C"]
    return not narrowing and conv.dtype == "float32" and p.get("groups", 1) == 1 and p["F"] % block == 0


def blocked_pool(node: Node, layout: Layout) -> GroupKernel:
    """A max pool of a blocked input, writing blocked: windows over whole vectors of channels."""
    p, b = node.params, layout.block
    (kh, kw), (sh, sw), (ph, pw), (OH, OW) = pool_geometry(p["shape"], p["kernel"], p.get("stride"),
                                                           p.get("padding", 0), "max_pool2d")
    N, C, H, W = p["shape"]
    X = te.placeholder(blocked_shape((N, C, H, W), b), node.dtype, name="X")
    ry, rx = te.reduce_axis((0, kh), name="ry"), te.reduce_axis((0, kw), name="rx")
    lowest = te.const(float("-inf"), node.dtype)

    def window(n: Any, cb: Any, y: Any, x: Any, ci: Any) -> Any:
        h, w = y * sh + ry - ph, x * sw + rx - pw
        inside = te.all(h >= 0, h < H, w >= 0, w < W)
        return te.max(te.if_then_else(inside, X[n, cb, h, w, ci], lowest), axis=[ry, rx])

    out = te.compute((N, C // b, OH, OW, b), window, name="pool")
    fp = fingerprint([out], [X])
    name = f"max_pool2d_nchw{b}c_{fp:08x}"

    def build(cfg: Any) -> Any:
        s = te.create_schedule(out.op)
        n, cb, y, x, ci = out.op.axis
        s[out].parallel(s[out].fuse(n, cb, y))
        s[out].reorder(x, *out.op.reduce_axis, ci)
        s[out].vectorize(ci)
        return s, [X, out]

    register_kernel(name, fp, build, [out], [X], "max_pool2d, blocked layout")
    return GroupKernel(Node(node.name, name, (layout.name(node.inputs[0]),), (layout.name(node.outputs[0]),),
                            {"fingerprint": fp}, node.dtype), "anchor")


def unblock(value: Value, layout: Layout) -> GroupKernel:
    """The kernel converting a blocked value back to NCHW, for its NCHW readers."""
    X = te.placeholder(blocked_shape(value.shape, layout.block), value.dtype, name="X")
    out = from_blocked(X)
    fp = fingerprint([out], [X])
    task = create_task_from_te(out, [X], f"unblock_nchw{layout.block}c_{fp:08x}")
    node = Node(f"{value.name}/unblock", task.name, (layout.name(value.name),), (value.name,),
                {"fingerprint": task.params["fingerprint"]}, value.dtype)
    return GroupKernel(node, "layout")


def blocked_value(value: Value, layout: Layout) -> Value:
    return Value(layout.name(value.name), blocked_shape(value.shape, layout.block), value.dtype)

