"""One fusion group -> one te computation -> one task, and the graph node that runs it.

A group of pointwise nodes and reductions is composed from each node's compute
(`compose.COMPUTES`; a view inside the group is a reshape) and becomes a task through
`create_task_from_te` (the generic schedules). A group led by a conv or a matmul keeps the
anchor's own schedule and takes the rest of the group as its epilogue, written as one expression
at the output's index, as TVM schedules a fused group by its anchor op:
- a conv: `conv2d_nchw_schedule` (every conv algorithm applies the epilogue to its output
  tile); a batch norm right after it is folded into its weights and a bias at compile time
  (constants); conv + bias [+ relu] is the `conv2d_bn` / `conv2d_bias_relu` template;
- a matmul: `matmul`'s schedule with the epilogue on its register tile, computed in the
  (M, N) domain of the product (views that keep the last axis are free there); a GEMM chain
  (`fusion`) schedules each matmul so, with its own knobs, in one kernel (`matmul_chain_body`);
- a row op (softmax, log_softmax, layer_norm, rms_norm) after a pointwise prologue: the row
  op's knobs and row schedule, the prologue inlined into its loads (the generic row reduction
  ran such groups about 4x slower than the unfused kernels).
The anchors' schedule bodies are the templates' own (`matmul_body`, `row_knobs`). Each anchor
group registers a template named by what it computes and a fingerprint (as `create_task_from_te`
does), so identical groups are one task and the database keys its records.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import te
from ..schedules.cpu.conv2d import blocked_conv2d_schedule, conv2d_nchw_schedule, nchw_geometry
from ..schedules.cpu.matmul import Layer, matmul_body, matmul_chain_body
from ..schedules.cpu.nn import row_knobs, schedule_row_stages
from ..schedules.from_te import create_task_from_te, fingerprint
from ..schedules.task import template
from ..te.evaluate import evaluate_te
from ..te.expr import Expr, TensorLoad
from ..te.tensor import ComputeOp, Tensor
from ..te.traversal import transform
from ..topi import conv as topi_conv, nn
from ..topi.layout import blocked_shape, from_blocked, to_blocked
from .compose import COMPUTES, NotPointwise, inline_at, reshape
from .fusion import MATMULS
from .ir import Graph, Node, Value

if TYPE_CHECKING:
    from .layout import Layout


@dataclass(frozen=True)
class GroupKernel:
    """What a group became: `node` (runs it: a template op and its parameters), `how`:
    "template" (an existing fused template), "anchor" (an anchor's schedule with the group as
    epilogue) or "te" (create_task_from_te); `views` (view nodes after it, back to the group's
    output shape), new constants (folded weights) with their arrays, and new `values` (the
    kernel's own output when a view follows it)."""

    node: Node
    how: str
    views: tuple[Node, ...] = ()
    constants: tuple[tuple[Value, np.ndarray], ...] = ()
    values: tuple[Value, ...] = ()


class _Composer:
    """Composes member nodes' computes; values from outside the group become placeholders
    (`inputs`: their names, in first-use order), shared by every composition of one group."""

    def __init__(self, graph: Graph, members: list[Node], values: dict[str, Value]) -> None:
        self.values = values
        self.produced = {n.outputs[0] for n in members}
        self.views = {n.outputs[0]: n for n in graph.nodes if n.is_view}
        self.inputs: list[str] = []
        self.placeholders: dict[str, Tensor] = {}

    def external(self, name: str) -> Tensor:
        if name not in self.placeholders:
            v = self.values[name]
            self.placeholders[name] = te.placeholder(v.shape, v.dtype, name=f"in{len(self.inputs)}")
            self.inputs.append(name)
        return self.placeholders[name]

    def internal(self, name: str) -> bool:
        while name in self.views:
            name = self.views[name].inputs[0]
        return name in self.produced

    def tensor(self, name: str, env: dict[str, Tensor], reader: Node,
               adapt: Callable[[str, Tensor, Node], Tensor] | None = None,
               view: Callable[[str, Tensor], Tensor] | None = None) -> Tensor:
        """Value `name` as `reader` reads it: composed already, a view inside the group (by
        default a reshape; `view(value, tensor)` maps it into the composition's domain), or an
        outside value (a placeholder, mapped into the domain by `adapt(value, tensor, reader)`)."""
        if name in env:
            return env[name]
        if self.internal(name):
            src = self.tensor(self.views[name].inputs[0], env, reader, adapt, view)
            env[name] = view(name, src) if view else reshape(src, self.values[name].shape)
            return env[name]
        t = self.external(name)
        return adapt(name, t, reader) if adapt else t

    def run(self, members: list[Node], env: dict[str, Tensor],
            adapt: Callable[[str, Tensor, Node], Tensor] | None = None,
            view: Callable[[str, Tensor], Tensor] | None = None) -> Tensor:
        """The last member's tensor, each member's compute applied to its inputs (`tensor`)."""
        for n in members:
            if n.op not in COMPUTES:
                raise NotPointwise(f"{n.op} has no te compute to compose")
            env[n.outputs[0]] = COMPUTES[n.op](n, [self.tensor(v, env, n, adapt, view) for v in n.inputs])
        return env[members[-1].outputs[0]]


def lower_group(graph: Graph, members: list[Node], layout: Layout | None = None) -> GroupKernel:
    """The kernel of one group of two or more nodes; NotPointwise or ValueError when the group
    cannot be one computation (the caller then runs its nodes one by one). A conv group reads
    and writes the values `layout` keeps blocked in that layout."""
    if members[0].op in ("conv2d", "conv2d_grouped"):
        return _conv_group(graph, members, layout)
    if members[0].op in ("matmul", "matmul_packed"):
        return _matmul_group(graph, members)
    if members[-1].op in ROW_OPS:
        return _row_group(graph, members)
    comp = _Composer(graph, members, graph.values)
    out = comp.run(members, {})
    ins = [comp.placeholders[n] for n in comp.inputs]
    name = _task_name(members, fingerprint([out], ins))
    task = create_task_from_te(out, ins, name)
    node = Node(_label(members), name, tuple(comp.inputs), (members[-1].outputs[0],),
                {"fingerprint": task.params["fingerprint"]}, out.dtype)
    return GroupKernel(node, "te")


ROW_OPS: dict[str, Callable[..., Tensor]] = {"softmax": nn.softmax, "log_softmax": nn.log_softmax,
           "layer_norm": lambda x, g, b, eps, lanes: nn.layer_norm(x, g, b, eps, lanes=lanes),
           "rms_norm": lambda x, g, eps, lanes: nn.rms_norm(x, g, eps, lanes=lanes)}


def _row_group(graph: Graph, members: list[Node]) -> GroupKernel:
    """Pointwise nodes before a row op (softmax, layer_norm...) under the row op's own schedule:
    its knobs and lane partials, statistics at the row loop, the prologue inlined into the loads."""
    red = members[-1]
    M, N, dtype = red.params["M"], red.params["N"], red.dtype
    comp = _Composer(graph, members, graph.values)

    def compose(lanes: int) -> tuple[Tensor, list[Tensor]]:
        env: dict[str, Tensor] = {}
        comp.run(members[:-1], env)
        xs = [comp.tensor(v, env, red) for v in red.inputs]
        params = [red.params[k] for k in ("eps",) if k in red.params]
        out = ROW_OPS[red.op](*xs, *params, lanes=lanes)
        return out, list(env.values())

    def build(cfg: Any) -> Any:
        row_knobs(cfg, M, N, dtype)
        out, prologue = compose(cfg["lanes"].val)
        s = te.create_schedule(out.op)
        for t in prologue:
            if isinstance(t.op, ComputeOp):
                s[t].compute_inline()
        i, j = out.op.axis
        schedule_row_stages(s, out, i, cfg["tile_j"].size[-1])
        _, ji = cfg["tile_j"].apply(s, out, j)
        s[out].vectorize(ji)
        if cfg["parallel"].val:
            s[out].parallel(i)
        return s, [*ins, out]

    ref = compose(1)[0]
    ins = [comp.placeholders[n] for n in comp.inputs]
    fp = fingerprint([ref], ins)
    name = _task_name(members, fp)
    register_kernel(name, fp, build, [ref], ins, f"{red.op} + prologue")
    return GroupKernel(Node(_label(members), name, tuple(comp.inputs), (red.outputs[0],), {"fingerprint": fp}, dtype),
                       "anchor")


def _task_name(members: list[Node], fp: int) -> str:
    ops = "_".join(dict.fromkeys(n.op for n in members))
    return f"fused_{ops[:40]}_{fp:08x}"


def _label(members: list[Node]) -> str:
    return "+".join(n.name for n in members)


def register_kernel(name: str, fp: int, build: Callable[[Any], Any], outs: list[Tensor], ins: list[Tensor],
                    what: str) -> None:
    """A template for this group's computation only (its fingerprint checked, as from_te's are);
    the reference evaluates the unscheduled computation with numpy."""
    def fused_template(cfg: Any, fingerprint: int, dtype: str = outs[0].dtype) -> Any:
        if fingerprint != fp:
            raise ValueError(f"{name}: fingerprint {fingerprint} is not this group's ({fp})")
        return build(cfg)

    fused_template.__name__ = fused_template.__qualname__ = f"fused_template[{name}]"
    template(name, reference=lambda *arrays, **_: evaluate_te(outs, ins, arrays),
             description=f"fused {what}")(fused_template)


def _fold(graph: Graph, conv: Node, bn: Node) -> tuple[tuple[Value, np.ndarray], ...] | None:
    """(W', b') of a batch norm folded into the conv before it, when the weights and statistics
    are constants: conv(x, W') + b'[f] == batch_norm(conv(x, W))."""
    w, stats = conv.inputs[1], bn.inputs[1:]
    if bn.inputs[0] != conv.outputs[0] or not all(v in graph.constants for v in (w, *stats)):
        return None
    mean, var, gamma, beta = (graph.constants[v] for v in stats)
    wf, bf = topi_conv.fold_batch_norm(graph.constants[w], None, mean, var, gamma, beta, bn.params.get("eps", 1e-5))
    base = bn.outputs[0]
    return ((Value(f"{base}/folded_w", wf.shape, str(wf.dtype)), wf),
            (Value(f"{base}/folded_b", bf.shape, str(bf.dtype)), bf))


def _conv_params(conv: Node) -> dict[str, Any]:
    return {"dilation": 1, "groups": 1, **conv.params}


def _conv_group(graph: Graph, members: list[Node], layout: Layout | None = None) -> GroupKernel:
    conv, rest = members[0], members[1:]
    folded = _fold(graph, conv, rest[0]) if rest[0].op == "batch_norm" else None
    values = dict(graph.values) | {v.name: v for v, _ in folded or ()}
    block, blocked = (layout.block, layout.blocked) if layout else (0, frozenset[str]())
    for name in blocked & {v for n in rest for v in n.inputs}:      # residuals read blocked
        values[name] = replace(values[name], shape=blocked_shape(values[name].shape, block))

    def adapt(name: str, t: Tensor, reader: Node) -> Tensor:
        return from_blocked(t, name="unblocked") if name in blocked else t

    comp = _Composer(graph, members, values)
    y_value = values[conv.outputs[0]]
    Y = te.placeholder(y_value.shape, y_value.dtype, name="conv")
    env: dict[str, Tensor] = {conv.outputs[0]: Y}
    w = conv.inputs[1]
    if folded:
        w, b = folded[0][0].name, comp.external(folded[1][0].name)
        env[rest[0].outputs[0]] = te.compute(Y.shape, lambda n, c, h, x: Y[n, c, h, x] + b[c], name="bias")
        rest = rest[1:]
    out = comp.run(rest, env, adapt) if rest else env[members[-1].outputs[0]]
    params = _conv_params(conv)
    x_name, out_name = conv.inputs[0], members[-1].outputs[0]
    x_block, out_block = (block if v in blocked else 0 for v in (x_name, out_name))
    inputs = tuple(layout.name(v) if layout and v in blocked else v for v in (x_name, w, *comp.inputs))
    if folded and not (x_block or out_block) and [n.op for n in rest] in ([], ["relu"]):
        op = "conv2d_bias_relu" if rest else "conv2d_bn"
        return GroupKernel(Node(_label(members), op, inputs, (out_name,), params, conv.dtype),
                           "template", constants=folded)
    extra = [comp.placeholders[n] for n in comp.inputs]
    node = _conv_anchor(members, params, values[w].shape, _pointwise_epilogue(out, Y), extra, x_block, out_block)
    outputs = (layout.name(out_name) if layout and out_block else out_name,)
    return GroupKernel(replace(node, inputs=inputs, outputs=outputs), "anchor", constants=folded or ())


def _conv_anchor(members: list[Node], p: dict[str, Any], w_shape: tuple[int, ...],
                 epilogue: Callable[[Expr, tuple[Expr, ...]], Expr], extra: list[Tensor],
                 x_block: int = 0, out_block: int = 0) -> Node:
    """The node of a conv template with this epilogue (registered under the group's name); its
    inputs are X, W, then `extra`'s values, which the caller names. With X (`x_block`) or the
    output (`out_block`) blocked, the blocked conv schedule; the reference then converts the
    layouts around the NCHW computation."""
    dtype = members[0].dtype
    g = nchw_geometry("fused conv", p["N"], p["C"], p["H"], p["W"], p["F"], p["KH"], p["KW"], p["stride"],
                      p["padding"], p["dilation"], p["groups"])
    shape = (p["N"], p["C"], p["H"], p["W"])
    X = te.placeholder(blocked_shape(shape, x_block) if x_block else shape, dtype, name="X")
    Wt = te.placeholder(w_shape, dtype, name="W")
    _, Y = topi_conv.conv2d_nchw(from_blocked(X) if x_block else X, Wt, g.stride,
                                 (*g.pad_before, *g.pad_after), g.dilation, g.groups)
    ref = topi_conv.apply_epilogue(Y, epilogue)
    ref = to_blocked(ref, out_block, name="out") if out_block else ref
    fp = fingerprint([ref], [X, Wt, *extra])
    name = _task_name(members, fp)
    if x_block or out_block:
        register_kernel(name, fp, lambda cfg: blocked_conv2d_schedule(cfg, g, p["N"], dtype, epilogue, extra,
                                                                      x_block, out_block),
                        [ref], [X, Wt, *extra], "conv2d + epilogue, blocked layout")
    else:
        register_kernel(name, fp, lambda cfg: conv2d_nchw_schedule(cfg, g, p["N"], dtype, epilogue, extra),
                        [ref], [X, Wt, *extra], "conv2d + epilogue")
    return Node(_label(members), name, (), (members[-1].outputs[0],), {"fingerprint": fp}, dtype)


def _pointwise_epilogue(out: Tensor, Y: Tensor) -> Callable[[Expr, tuple[Expr, ...]], Expr]:
    """out as a conv epilogue: f(v, i) with v the conv's value at output index i. out must read Y
    only at i (dimensions of extent 1 may read 0), and have Y's shape."""
    if tuple(out.shape) != tuple(Y.shape):
        raise NotPointwise(f"the epilogue's shape {list(out.shape)} is not the conv's {list(Y.shape)}")

    def epilogue(v: Expr, i: tuple[Expr, ...]) -> Expr:
        expr = inline_at(out, i, keep=lambda t: t is Y)

        def at_i(n: Any) -> Expr | None:
            if not (isinstance(n, TensorLoad) and n.tensor is Y):
                return None
            if not all(a is b or Y.shape[d] == 1 for d, (a, b) in enumerate(zip(n.indices, i))):
                raise NotPointwise("the epilogue reads the conv's output at another index")
            return v

        return transform(expr, at_i)

    return epilogue


def _matmul_group(graph: Graph, members: list[Node]) -> GroupKernel:
    """A matmul with its epilogue (`matmul_body`), or a GEMM chain (`fusion`): each matmul with
    its epilogue, the next one's left operand the output before it (`matmul_chain_body`)."""
    mm = members[0]
    starts = [i for i, n in enumerate(members) if n.op in MATMULS]
    segments = [members[a:b] for a, b in zip(starts, [*starts[1:], len(members)])]
    M, dtype = mm.params["M"], mm.dtype
    comp = _Composer(graph, members, graph.values)
    for later in (seg[0] for seg in segments[1:]):
        a = graph.value(later.inputs[0])
        if a.shape != (M, later.params["K"]) or later.params["M"] != M:
            raise NotPointwise(f"{later.name} reads the product before it as {list(a.shape)}, not its (M, N)")
    epilogues = [_Epilogue(graph, comp, seg[0], seg[1:]) if len(seg) > 1 else None for seg in segments]
    for e in epilogues:                     # the inputs, in order, before any build
        if e is not None:
            e(te.placeholder((M, e.N), dtype, name="C"))
    extra = [comp.placeholders[n] for n in comp.inputs]
    A = te.placeholder((M, mm.params["K"]), dtype, name="A")
    Bs = [te.placeholder(graph.value(seg[0].inputs[1]).shape, dtype, name="B" if i == 0 else f"B{i}")
          for i, seg in enumerate(segments)]
    ref = A
    for i, (seg, B, e) in enumerate(zip(segments, Bs, epilogues)):
        ref = _reference_product(ref, B, seg[0], e, "" if i == 0 else str(i))
    fp = fingerprint([ref], [A, *Bs, *extra])
    name = _task_name(members, fp)
    if len(segments) == 1:
        build = partial(matmul_body, M=M, N=mm.params["N"], K=mm.params["K"], dtype=dtype, epilogue=epilogues[0],
                        extra_inputs=extra, panel=mm.params.get("panel"))
        what = "matmul + epilogue"
    else:
        layers = [Layer(seg[0].params["N"], seg[0].params["K"], seg[0].params.get("panel"), e)
                  for seg, e in zip(segments, epilogues)]
        build = partial(matmul_chain_body, M=M, layers=layers, dtype=dtype, extra_inputs=extra)
        what = f"chain of {len(segments)} matmuls + epilogues"
    register_kernel(name, fp, build, [ref], [A, *Bs, *extra], what)
    last, N = graph.value(members[-1].outputs[0]), segments[-1][0].params["N"]
    out = last.name if last.shape == (M, N) else f"{last.name}/2d"
    inputs = (mm.inputs[0], *(seg[0].inputs[1] for seg in segments), *comp.inputs)
    node = Node(_label(members), name, inputs, (out,), {"fingerprint": fp}, dtype)
    back = () if out == last.name else (Node(f"{node.name}/view", "view", (out,), (last.name,)),)
    new = () if out == last.name else (Value(out, (M, N), dtype),)
    return GroupKernel(node, "anchor", views=back, values=new)


def _reference_product(A: Tensor, B: Tensor, mm: Node, epilogue: _Epilogue | None, tag: str) -> Tensor:
    """A @ B (B in panels for matmul_packed) with the epilogue: the computation a config must match."""
    M, N, K, panel = mm.params["M"], mm.params["N"], mm.params["K"], mm.params.get("panel")
    k = te.reduce_axis((0, K), name=f"k{tag}")
    C = te.compute((M, N), lambda i, j: te.sum(
        A[i, k] * (B[j // panel, k, j % panel] if panel else B[k, j]), axis=k), name=f"C{tag}")
    return epilogue(C) if epilogue else C


class _Epilogue:
    """A matmul's pointwise epilogue in the product's (M, N) domain: `self(C)` is the output
    computed from the product C; views that keep the last axis are free there, and outside
    values broadcast along its rows."""

    def __init__(self, graph: Graph, comp: _Composer, mm: Node, rest: list[Node]) -> None:
        self.graph, self.comp, self.mm, self.rest = graph, comp, mm, rest
        self.M, self.N = mm.params["M"], mm.params["N"]

    def _in_domain(self, shape: tuple[int, ...]) -> bool:
        return math.prod(shape) == self.M * self.N and shape[-1] == self.N

    def _adapt(self, name: str, t: Tensor, reader: Node) -> Tensor:
        shape = tuple(t.shape)
        if not self._in_domain(self.graph.value(reader.outputs[0]).shape):
            raise NotPointwise(f"{reader.name} leaves the product's (M, N) domain")
        if self._in_domain(shape):
            return reshape(t, (self.M, self.N))
        if math.prod(shape[:-1]) == 1 and shape[-1] in (1, self.N):
            return reshape(t, shape[-1:])
        raise NotPointwise(f"{name}{list(shape)} does not broadcast along the product's rows")

    def _free_view(self, name: str, t: Tensor) -> Tensor:
        if not self._in_domain(self.graph.value(name).shape):
            raise NotPointwise(f"view {name} leaves the product's (M, N) domain")
        return t

    def __call__(self, C: Tensor) -> Tensor:
        T = self.comp.run(self.rest, {self.mm.outputs[0]: C}, self._adapt, self._free_view)
        return te.compute((self.M, self.N), lambda i, j: inline_at(T, (i, j), keep=lambda t: t is C), name="Y")

