"""Templates and tasks: `@template` registers a tunable op; `create_task` binds it to a shape.

A template is `f(cfg, **params) -> (schedule, args)` with args = inputs then outputs. It runs in
collect mode once per task to build the config space, then in apply mode for each config.
"""
from __future__ import annotations

import importlib
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..dtype import dtype_info, is_float
from ..errors import InstantiationError
from ..te.expr import Binary, Call, Reduce
from ..te.tensor import ComputeOp, ExternOp, PlaceholderOp, Tensor
from ..te.traversal import walk
from .schedule import Schedule
from .space import INSTANTIATION_ERRORS, ConfigEntity, ConfigSpace

TARGETS = ("llvm", "cuda")


@dataclass(frozen=True)
class Template:
    """A registered tunable op: its schedule function, numpy reference and description."""

    name: str
    func: Callable[..., tuple[Schedule, list[Tensor]]]
    reference: Callable[..., Any]
    description: str
    target: str
    shape_params: tuple[str, ...] = field(default=())
    defaults: dict[str, Any] = field(default_factory=dict)     # shape parameters that may be left out


TEMPLATES: dict[tuple[str, str], Template] = {}


def template(name: str, reference: Callable[..., Any], target: str = "llvm",
             description: str = "") -> Callable[[Callable], Callable]:
    """Register `f(cfg, **params)` as the template of op `name` for `target`."""

    def deco(func: Callable) -> Callable:
        params = list(inspect.signature(func).parameters.values())[1:]
        shape = tuple(p.name for p in params if p.name != "dtype")
        defaults = {p.name: p.default for p in params
                    if p.name != "dtype" and p.default is not inspect.Parameter.empty}
        doc = description or next(iter((func.__doc__ or name).strip().splitlines()), name)
        TEMPLATES[(name, target)] = Template(name, func, reference, doc, target, shape, defaults)
        return func

    return deco


def count_flop(outputs: list[Tensor]) -> float:
    """Float operations of a computation: per element, its float arithmetic and reduce combines
    (an extern op counts the flop it declares)."""
    seen: set[int] = set()
    total = 0.0

    def visit(op: Any) -> None:
        nonlocal total
        if id(op) in seen or isinstance(op, PlaceholderOp):
            return
        seen.add(id(op))
        for t in op.input_tensors:
            visit(t.op)
        if isinstance(op, ExternOp):
            total += op.flop
            return
        ops = 0

        def count(n: Any) -> None:
            nonlocal ops
            if isinstance(n, (Binary, Call)) and is_float(n.dtype):
                ops += 1
            if isinstance(n, Reduce) and is_float(n.dtype):
                ops += 1

        walk(op.body, count)
        points = math.prod(op.shape) * math.prod(iv.extent for iv in op.reduce_axis)
        total += ops * points

    for t in outputs:
        visit(t.op)
    return total


def param_text(value: Any) -> str:
    """A parameter as written in keys and on the command line: 5, or 5:37 for a tuple."""
    return ":".join(map(str, value)) if isinstance(value, tuple) else str(value)


def workload_key(op: str, params: dict[str, Any], dtype: str) -> str:
    """Canonical name of a workload: op, parameters in the template's order, dtype."""
    inner = ",".join(f"{k}={param_text(v)}" for k, v in params.items())
    return f"{op}({inner}){dtype}"


def canonical_target(target: str) -> str:
    """The target key records are stored under: configs tuned on one machine are not reused on another."""
    kind = str(target).split()[0] if target else ""
    if kind not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    if kind == "llvm":
        from ..codegen import target_key

        return target_key()
    from ..codegen.cuda_device import cuda_target_key

    return cuda_target_key(target)


class Task:
    """A template bound to a shape, dtype and target: a config space to search."""

    def __init__(self, tmpl: Template, params: dict[str, Any], dtype: str, target: str) -> None:
        self.template = tmpl
        self.name = tmpl.name
        self.params = params
        self.dtype = dtype
        self.target_kind = tmpl.target
        self.target = target
        self.workload_key = workload_key(tmpl.name, params, dtype)
        self.config_space = ConfigSpace()
        s, args = tmpl.func(self.config_space, **params, dtype=dtype)
        self.num_inputs = sum(isinstance(t.op, PlaceholderOp) for t in args)
        self.arg_specs = [(t.shape, t.dtype) for t in args]
        self.flop = count_flop([t for t in args if not isinstance(t.op, PlaceholderOp)])

    def config(self, config: ConfigEntity | int | dict) -> ConfigEntity:
        if isinstance(config, ConfigEntity):
            return config
        if isinstance(config, dict):
            return self.config_space.from_json(config)
        if isinstance(config, int) and not isinstance(config, bool):
            return self.config_space.get(config)
        raise TypeError(f"a config is a ConfigEntity, an index or a JSON dict, got {type(config).__name__}")

    def instantiate(self, config: ConfigEntity | int | dict) -> tuple[Schedule, list[Tensor]]:
        """The schedule and args of one config; InstantiationError when it is illegal for the shape."""
        entity = self.config(config)
        try:
            return self.template.func(entity, **self.params, dtype=self.dtype)
        except InstantiationError:
            raise
        except INSTANTIATION_ERRORS as e:
            raise InstantiationError(f"config {entity.index} of {self.workload_key}: {e}") from e

    def is_valid(self, index: int) -> bool:
        try:
            self.instantiate(index)
            return True
        except InstantiationError:
            return False

    def make_inputs(self, rng: np.random.Generator) -> list[np.ndarray]:
        """Random inputs (never all zeros: those time unrealistically)."""
        out = []
        for shape, dtype in self.arg_specs[:self.num_inputs]:
            np_dtype = dtype_info(dtype).numpy
            if is_float(dtype):
                out.append(rng.uniform(-1.0, 1.0, size=shape).astype(np_dtype))
            else:
                out.append(rng.integers(-8, 9, size=shape).astype(np_dtype))
        return out

    def reference(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The expected outputs, from numpy."""
        out = self.template.reference(*inputs, **self.params)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def to_json(self) -> dict[str, Any]:
        """What a worker process needs to rebuild this task (no pickled objects)."""
        return {"op": self.name, "params": self.params, "dtype": self.dtype, "target": self.target_kind,
                "module": self.template.func.__module__}

    def __repr__(self) -> str:
        return f"Task({self.workload_key}, target={self.target!r}, space={len(self.config_space)})"


def _load_templates(op: str | None = None) -> None:
    """Register the built-in templates of `op` for every target, or all of them (op None)."""
    from . import cpu, cuda

    cpu.load(op)
    if op is None or op in cuda.MODULE_OF_OP:
        cuda.load(op)


def create_task(op: str, target: str = "llvm", dtype: str = "float32", **params: Any) -> Task:
    """A task for op `op` at the given shape parameters (those the template gives a default may be
    left out: the task, and so its workload key, holds every one); errors name the bad parameter."""
    _load_templates(op)
    kind = str(target).split()[0] if target else ""
    if kind not in TARGETS:
        raise ValueError(f"unknown target {target!r}; expected one of {TARGETS}")
    tmpl = TEMPLATES.get((op, kind))
    if tmpl is None:
        _load_templates()           # the error lists every op
        known = sorted(n for n, t in TEMPLATES if t == kind and not n.startswith("testing."))
        raise ValueError(f"unknown op {op!r} for target {kind}; tunable ops: {', '.join(known)}")
    dtype_info(dtype)
    unknown = set(params) - set(tmpl.shape_params)
    if unknown:
        raise ValueError(f"{op}: unknown parameter(s) {sorted(unknown)}; expected {list(tmpl.shape_params)}")
    params = {**tmpl.defaults, **params}
    missing = [p for p in tmpl.shape_params if p not in params]
    if missing:
        raise ValueError(f"{op}: missing parameter(s) {missing}; expected {list(tmpl.shape_params)}")
    ordered = {p: params[p] for p in tmpl.shape_params}
    for k, v in ordered.items():
        if isinstance(v, list):
            v = ordered[k] = tuple(v)
        ok = isinstance(v, int) or (isinstance(v, tuple) and all(isinstance(x, int) and not isinstance(x, bool)
                                                                 for x in v))
        if not ok:
            raise TypeError(f"{op}: parameter {k} must be an int (or a tuple of ints), got {v!r}")
    return Task(tmpl, ordered, dtype, canonical_target(target))


def task_from_json(d: dict[str, Any]) -> Task:
    """The task of `Task.to_json()`, in any process: imports the template's module first, so
    templates registered outside autotune.schedules.cpu are found (worker processes)."""
    module = d.get("module")
    if module and module != "__main__":
        importlib.import_module(module)
    return create_task(d["op"], target=d.get("target", "llvm"), dtype=d.get("dtype", "float32"), **d["params"])
