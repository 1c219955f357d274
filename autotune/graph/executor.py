"""The graph runtime: a `CompiledModel` runs a Graph node by node on autotune's kernels
(`compile_model` first fuses the graph: then each kernel node is one fusion group).

Compiling does all the work a call need not repeat: every kernel is loaded once with
`autotune.load` (its provenance kept: tuned, nearest or default), the buffer plan is laid out in
one preallocated arena (`planner`), constants and every view of planned memory are bound once, and
every kernel is bound to the addresses of its fixed memory (its argument checks run once). A call
then checks the inputs, allocates the outputs (the caller owns them: fresh arrays each call, never
overwritten later) and runs every kernel from one native function (`autotune.codegen.sequence`),
which takes just the inputs' and outputs' addresses: a small model's call costs its kernels and a
few microseconds, not a ctypes call per kernel. Kernels that are not bound CPU functions run step
by step from Python, as `profile` runs every model.

Constants are passed to the kernels as they are, from memory, without a copy per call. Weights
are transformed once, here: a matmul or dense whose weight is a constant reads it pre-packed
(`prepack`), and any other kernel whose schedule transforms a constant input at root (a conv's
blocked or Winograd weights) runs that transform once and reads its result (`hoist`), so no
call repeats the packing the plain kernels do.
"""
from __future__ import annotations

import importlib
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..codegen.module import num_threads
from ..codegen.sequence import NativeSequence
from ..errors import InstantiationError
from ..interop import as_numpy, contiguous
from ..runtime import Kernel, resolve, with_config
from .hoist import HoistedWeights, hoist_weights
from .in_model import in_model_choices
from .input_checks import input_checks
from .ir import Graph, Node, Value
from .planner import ALIGN, ARENA, CONSTANT, OUTPUT, Plan, plan_buffers
from .prepack import prepack_weights


@dataclass
class _Step:
    """One kernel node at run time: its function and argument names (inputs, then outputs).
    `bound`: the call bound to its fixed memory; when it reads inputs or writes outputs
    (`free`: those arguments' names), it takes their addresses; `None` for a function that
    cannot be bound (called with every array, each checked)."""

    func: Callable[..., None]
    args: tuple[str, ...]
    bound: Callable[..., None] | None
    free: tuple[str, ...] = ()


def compile_model(graph_or_path: Any, db: Any = None, target: str = "llvm",
                  shapes: Mapping[str, tuple[int, ...]] | None = None, prepack: bool = True,
                  fuse: bool = True, layout: str = "nchw") -> CompiledModel:
    """A model ready to run: a Graph is compiled as it is; a path, ONNX ModelProto or bytes goes
    through `autotune.frontend.onnx.load(model, shapes=shapes)` first. The compile-time passes
    (`prepare_graph`) pre-pack constant weights and, with `fuse`, group the nodes into fused
    kernels; then the kernels' weight transforms run once (`hoist`). `prepack=False` turns off
    the packing and the hoisting, `fuse=False` the fusion. `layout="nchwc"` keeps the activations
    between convs blocked by channels (`autotune.graph.layout`; tune with the same layout)."""
    if isinstance(graph_or_path, Graph):
        graph = graph_or_path
        _check_shapes(graph, shapes or {})
    else:
        graph = onnx_frontend().load(graph_or_path, shapes=shapes)
    return CompiledModel(graph, db=db, target=target, prepack=prepack, fuse=fuse, layout=layout)


def prepare_graph(graph: Graph, target: str = "llvm", db: Any = None, prepack: bool = True,
                  fuse: bool = True, layout: str = "nchw") -> tuple[Graph, list[Any] | None]:
    """The graph as it runs and its fusion groups (None unfused): constant weights pre-packed,
    then the nodes fused (`autotune.graph.fused_graph`; a packed matmul anchors its group like a
    plain one), with `layout="nchwc"` the activations between convs kept blocked
    (`autotune.graph.layout`). What `CompiledModel` runs, `tune_model` tunes and `autotune model
    inspect` lists."""
    from .layout import layout_block

    block = layout_block(target, layout)
    graph.validate()
    if prepack:
        graph = prepack_weights(graph, target, db)
    if not fuse:
        return graph, None
    from .fused_graph import fuse as fuse_graph

    fusion = fuse_graph(graph, block, target)
    return fusion.graph, fusion.groups


def onnx_frontend() -> Any:
    """`autotune.frontend.onnx`, imported on first use (it needs the onnx package)."""
    return importlib.import_module("autotune.frontend.onnx")


def _check_shapes(graph: Graph, shapes: Mapping[str, tuple[int, ...]]) -> None:
    """A Graph's shapes are static: `shapes` may only restate them."""
    known = {v.name: v.shape for v in graph.inputs}
    for name, shape in shapes.items():
        if name not in known:
            raise ValueError(f"shapes: {name!r} is not an input of graph {graph.name!r}; inputs: {', '.join(known)}")
        if tuple(shape) != known[name]:
            raise ValueError(f"shapes: input {name!r} of graph {graph.name!r} is {known[name]}, got {tuple(shape)}")


class CompiledModel:
    """`m(x, ...)` (inputs in order) or `m.run({"name": x})` -> list of numpy outputs, fresh
    arrays each call. Inputs: numpy arrays or anything with `__dlpack__` / `__array_interface__`,
    read in place when C-contiguous. One call at a time per model (they share the arena).

    `graph` is the graph as it runs (`prepare_graph`) less the constants only hoisted kernels
    read: `hoisted.constants`, their transforms, replace them (its nodes still name them, so
    it is a description of the model, not one to compile again); `weights` is every constant
    the model binds."""

    def __init__(self, graph: Graph, db: Any = None, target: str = "llvm", prepack: bool = True,
                 fuse: bool = True, layout: str = "nchw", pinned: Mapping[str, int] | None = None) -> None:
        self.input_checks = input_checks(graph)
        self.model_key = graph.structure_key(layout)
        self.graph, self.groups = prepare_graph(graph, target, db, prepack, fuse, layout)   # groups: None unfused
        graph = self.graph
        self.target = target
        self.plan: Plan = plan_buffers(graph)
        configs: dict[str, tuple[int | dict[str, Any], str]] = (
            {k: (i, "pinned") for k, i in pinned.items()} if pinned is not None
            else {k: (c, "tuned:in-model") for k, c in in_model_choices(db, self.model_key, target).items()})
        self.kernels, self.hoisted, self.load_warnings = _load_kernels(graph, target, db, prepack, configs)
        kept = {k: a for k, a in graph.constants.items() if k not in self.hoisted.unread}
        self.graph = graph = replace(graph, constants=kept)          # the raw weights hoisting replaced: freed
        self.weights = kept | self.hoisted.constants
        self.arena = _aligned_bytes(self.plan.arena_bytes)
        self.buffers = _fixed_buffers(graph, self.plan, self.arena, self.weights)
        self._steps = [(i, s) for i, s in ((i, self._step(i, n)) for i, n in enumerate(graph.nodes)) if s is not None]
        self._native = _native_sequence(self._steps, self.buffers)
        self._fresh = [(r, graph.value(r).shape, np.dtype(graph.value(r).dtype))
                       for r, kind in self.plan.kinds.items() if kind == OUTPUT]
        # each output: fresh (the caller's own array), or a copy of memory the model keeps
        self._returns = [(v.name, self.plan.kinds[self.plan.roots[v.name]] == OUTPUT) for v in graph.outputs]
        self._lock = threading.Lock()

    @property
    def inputs(self) -> list[tuple[str, tuple[int, ...], str]]:
        return [(v.name, v.shape, v.dtype) for v in self.graph.inputs]

    @property
    def outputs(self) -> list[tuple[str, tuple[int, ...], str]]:
        return [(v.name, v.shape, v.dtype) for v in self.graph.outputs]

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        names = [v.name for v in self.graph.inputs]
        if len(arrays) != len(names):
            raise TypeError(f"model {self.graph.name!r} takes {len(names)} input(s) ({', '.join(names)}), "
                            f"got {len(arrays)}")
        return self.run(dict(zip(names, arrays)))

    def run(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        """The outputs, in the graph's order, for these inputs by name."""
        env = _check_feeds(self.graph, feeds)
        for check in self.input_checks:
            check(env)
        with self._lock:
            if self._native is None:
                self._start_call(env)
                for _, step in self._steps:
                    _run(step, env)
            else:                           # the kernels read the fixed memory at bound addresses
                self._start_call(env, fixed=False)
                self._native.run(env)
        kept = self.buffers
        return [env[n] if fresh else (env[n] if n in env else kept[n]).copy() for n, fresh in self._returns]

    def _start_call(self, env: dict[str, np.ndarray], fixed: bool = True) -> None:
        """Bind fresh output arrays (and, with `fixed`, the fixed memory) into a call's environment."""
        if fixed:
            env.update(self.buffers)
        for name, shape, dtype in self._fresh:
            env[name] = np.empty(shape, dtype)

    def step_times(self, feeds: Mapping[str, Any], repeat: int) -> tuple[dict[int, list[float]], list[float]]:
        """Seconds of each step (by node index) and of each whole run, over `repeat` runs after
        one warm-up run: the raw timings `profile` summarizes."""
        env = _check_feeds(self.graph, feeds)
        per_step: dict[int, list[float]] = {i: [] for i, _ in self._steps}
        runs: list[float] = []
        with self._lock:
            for r in range(repeat + 1):
                self._start_call(env)
                start = time.perf_counter()
                for i, step in self._steps:
                    t = time.perf_counter()
                    _run(step, env)
                    if r:
                        per_step[i].append(time.perf_counter() - t)
                if r:
                    runs.append(time.perf_counter() - start)
        return per_step, runs

    def profile(self, feeds: Mapping[str, Any] | None = None, repeat: int = 10, plot: str | None = None) -> Any:
        """Where the time goes: each kernel node timed inside `repeat` whole runs (random inputs
        when `feeds` is None); see `autotune.graph.profile`."""
        from .profile import profile_model

        return profile_model(self, feeds, repeat, plot)

    def summary(self) -> dict[str, Any]:
        """Node counts (kernels, views, per provenance: tuned / nearest / default), each distinct
        kernel with its provenance and whether its weight transforms were hoisted, and memory: the
        arena (planned peak), the live peak, the intermediates' total without sharing, the weights
        bound (hoisted transforms included) and outputs."""
        kernels: dict[str, dict[str, Any]] = {}
        for i, k in self.kernels.items():
            n = self.graph.nodes[i]
            row = kernels.setdefault(k.workload_key, {"op": n.op, "params": dict(n.params), "dtype": n.dtype,
                                                      "workload": k.workload_key, "provenance": k.provenance,
                                                      "hoisted": i in self.hoisted.funcs, "nodes": 0})
            row["nodes"] += 1
        provenance = Counter(_kind(k.provenance) for k in self.kernels.values())
        return {"graph": self.graph.name, "nodes": len(self.graph.nodes), "kernel_nodes": len(self.kernels),
                "view_nodes": len(self.graph.nodes) - len(self.kernels),
                "provenance": {p: provenance.get(p, 0) for p in ("tuned", "nearest", "default")},
                "kernels": list(kernels.values()), "memory": self._memory(), "warnings": len(self.load_warnings),
                "groups": None if self.groups is None else [
                    {"nodes": list(g.nodes), "ops": list(g.ops), "kernel": g.kernel.op, "how": g.how}
                    for g in self.groups]}

    def _memory(self) -> dict[str, int]:
        p, g = self.plan, self.graph
        return {"arena_bytes": p.arena_bytes, "live_peak_bytes": p.live_peak_bytes,
                "unshared_bytes": p.unshared_bytes,
                "constant_bytes": sum(int(a.nbytes) for a in self.weights.values()),
                "output_bytes": sum(g.value(r).nbytes for r, k in p.kinds.items() if k == OUTPUT)}

    def node_call(self, index: int) -> tuple[Callable[..., None], tuple[str, ...]]:
        """What kernel node `index` runs: its function and argument names (inputs, then outputs),
        its kernel's or, when its weight transforms were hoisted, the variant's."""
        if index in self.hoisted.funcs:
            return self.hoisted.funcs[index], self.hoisted.args[index]
        node = self.graph.nodes[index]
        return self.kernels[index].func, node.inputs + node.outputs

    def _step(self, index: int, node: Node) -> _Step | _View | None:
        """A kernel node's step, bound when its arguments are all fixed memory; a view of per-call
        memory (an input or an output) is reshaped each call; other views are bound already."""
        if node.is_view:
            out = node.outputs[0]
            return None if out in self.buffers else _View(node.inputs[0], out, self.graph.value(out).shape)
        func, args = self.node_call(index)
        fixed = [self.buffers.get(a) for a in args]
        free = tuple(a for a, f in zip(args, fixed) if f is None)
        bind = getattr(func, "bind_free" if free else "bind", None)
        return _Step(func, args, None if bind is None else bind(*fixed), free)


@dataclass(frozen=True)
class _View:
    """A view node of memory that changes per call: `dst` is `src` reshaped."""

    src: str
    dst: str
    shape: tuple[int, ...]


class _NativeSteps:
    """Every kernel step of a model in one native call (`autotune.codegen.sequence`), for models
    whose kernels are all bound CPU functions: the per-call arrays (inputs, fresh outputs) are
    passed by address, views of them made first, as the steps would."""

    def __init__(self, sequence: NativeSequence, views: list[_View], funcs: list[Any]) -> None:
        self.sequence, self.views, self.funcs = sequence, views, funcs

    def run(self, env: dict[str, np.ndarray]) -> None:
        for view in self.views:
            _run(view, env)
        failed = self.sequence([env[name].ctypes.data for name in self.sequence.names], num_threads())
        if failed is not None:
            index, status = failed
            raise self.funcs[index].status_error(status)


def _native_sequence(steps: list[tuple[int, _Step | _View]], buffers: dict[str, np.ndarray]) -> _NativeSteps | None:
    """The steps as one native call, or None when one of them cannot be (a kernel with no
    machine code of its own to call: not a bound CPU function)."""
    views = [s for _, s in steps if isinstance(s, _View)]
    kernels = [s for _, s in steps if isinstance(s, _Step)]
    if not kernels or any(s.bound is None or not hasattr(s.func, "native_call") for s in kernels):
        return None
    root = {v.dst: v.src for v in views}

    def per_call(name: str) -> str:          # a view of per-call memory has its source's address
        while name in root:
            name = root[name]
        return name

    funcs = [s.func for s in kernels]
    calls = [f.native_call(*(buffers[a] if a in buffers else per_call(a) for a in s.args))  # type: ignore[attr-defined]
             for f, s in zip(funcs, kernels)]
    return _NativeSteps(NativeSequence(calls, keep=funcs), views, funcs)


def _run(step: _Step | _View, env: dict[str, np.ndarray]) -> None:
    if isinstance(step, _View):
        env[step.dst] = env[step.src].reshape(step.shape)
    elif step.bound is None:
        step.func(*[env[a] for a in step.args])
    elif step.free:      # the model's inputs and fresh outputs: checked or made by `run`
        step.bound(*[env[a].ctypes.data for a in step.free])
    else:
        step.bound()


def _kind(provenance: str) -> str:
    return provenance.split(":", 1)[0]


def _load_kernels(graph: Graph, target: str, db: Any, hoisting: bool,
                  configs: Mapping[str, tuple[int | dict[str, Any], str]]
                  ) -> tuple[dict[int, Kernel], HoistedWeights, list[str]]:
    """Each kernel node's kernel (by node index), resolved once, or with the (config, provenance)
    `configs` names for its workload; with `hoisting`, the variants of those whose weight
    transforms run at compile time (the plain kernel is then never built); and the fallback
    warnings `load` gave (collected: a model with many untuned shapes would otherwise print one
    per kernel)."""
    kernels: dict[int, Kernel] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, n in enumerate(graph.nodes):
            if not n.is_view:
                consts = graph.constant_positions(n) if hoisting else []
                kernel = resolve(n.op, target=target, db=db, dtype=n.dtype, constant_inputs=consts, **n.params)
                if kernel.task.workload_key in configs:
                    kernel = _with_config(kernel, *configs[kernel.task.workload_key])
                kernels[i] = kernel
                _check_signature(graph, n, kernel)
        hoisted = hoist_weights(graph, kernels) if hoisting else HoistedWeights()
        for i, k in kernels.items():
            if i not in hoisted.funcs:
                k.func  # noqa: B018  (compiled now, not at the first call)
    return kernels, hoisted, [str(w.message) for w in caught]


def _with_config(kernel: Kernel, config: int | dict[str, Any], provenance: str) -> Kernel:
    """`kernel` with `config` instead, or as it is when a template change removed that config
    (the choice was made among the configs of an older space)."""
    try:
        return with_config(kernel, config, provenance)
    except InstantiationError:
        return kernel


def _check_signature(graph: Graph, node: Node, kernel: Kernel) -> None:
    """ValueError naming the node when its kernel's arguments are not the node's values: a
    frontend mapped an op wrongly, and the kernel must not read or write the wrong memory."""
    specs, n_in = kernel.task.arg_specs, kernel.task.num_inputs
    if (n_in, len(specs) - n_in) != (len(node.inputs), len(node.outputs)):
        raise ValueError(f"node {node.name!r}: kernel {kernel.workload_key} takes {n_in} input(s) and "
                         f"{len(specs) - n_in} output(s), the node has {len(node.inputs)} and {len(node.outputs)}")
    for name, (shape, dtype) in zip(node.inputs + node.outputs, specs):
        v = graph.value(name)
        if (tuple(shape), str(dtype)) != (v.shape, v.dtype):
            raise ValueError(f"node {node.name!r}: kernel {kernel.workload_key} expects {dtype}{list(shape)} "
                             f"where the node has {name!r}: {v.dtype}{list(v.shape)}")


def _aligned_bytes(nbytes: int) -> np.ndarray:
    """A byte array of `nbytes` starting at an ALIGN-byte boundary (numpy guarantees less)."""
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start:start + nbytes]


def _fixed_buffers(graph: Graph, plan: Plan, arena: np.ndarray, weights: dict[str, Any]) -> dict[str, np.ndarray]:
    """The arrays that are the same at every call: the weights (C-contiguous, converted once),
    intermediates in the arena, and views of either."""
    fixed = {name: contiguous(a) for name, a in weights.items()}
    for r, offset in plan.offsets.items():
        v = graph.value(r)
        fixed[r] = arena[offset:offset + v.nbytes].view(v.dtype).reshape(v.shape)
    for n in graph.nodes:
        if n.is_view and plan.kinds[plan.roots[n.inputs[0]]] in (CONSTANT, ARENA):
            fixed[n.outputs[0]] = fixed[n.inputs[0]].reshape(graph.value(n.outputs[0]).shape)
    return fixed


def _check_feeds(graph: Graph, feeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The inputs by name as C-contiguous numpy arrays; ValueError for a missing or unknown name
    or a wrong shape, TypeError for a wrong dtype or a non-array, each naming the input."""
    names = [v.name for v in graph.inputs]
    missing = [n for n in names if n not in feeds]
    unknown = [n for n in feeds if n not in names]
    if missing or unknown:
        said = "; ".join(f"{what} {', '.join(map(repr, ns))}" for what, ns in
                         (("missing input(s)", missing), ("unknown input(s)", unknown)) if ns)
        raise ValueError(f"model {graph.name!r}: {said}; its inputs are {', '.join(names)}")
    return {v.name: _check_feed(v, feeds[v.name]) for v in graph.inputs}


def _check_feed(v: Value, obj: Any) -> np.ndarray:
    a = obj if type(obj) is np.ndarray else as_numpy(obj, f"input {v.name!r}")
    if a.dtype != np.dtype(v.dtype):
        raise TypeError(f"input {v.name!r}: expected dtype {v.dtype}, got {a.dtype}")
    if tuple(a.shape) != v.shape:
        raise ValueError(f"input {v.name!r}: expected shape {v.shape}, got {tuple(a.shape)}")
    return contiguous(a)
