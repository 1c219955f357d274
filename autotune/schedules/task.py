"""Templates and tasks: `@template` registers a tunable op; `create_task` binds it to a shape.

A template is `f(cfg, **params) -> (schedule, args)` with args = inputs then outputs. It runs in
collect mode once per task to build the config space, then in apply mode for each config.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import pickle
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from ..dtype import dtype_info, is_float
from ..errors import ArgumentError, BuildError, InstantiationError, ScheduleError
from ..forked import map_forked
from ..ir.bounds import const_bound
from ..ir.hoist import HoistPlan, plan_hoist
from ..ir.lower import lower
from ..ir.nodes import PrimFunc
from ..target import Target
from ..te.expr import Binary, Call, Reduce, TensorLoad
from ..te.tensor import ComputeOp, ExternOp, PlaceholderOp, Tensor, post_order
from ..te.traversal import walk
from .schedule import Schedule
from .space import INSTANTIATION_ERRORS, ConfigEntity, ConfigSpace

MAX_PARAM = 2 ** 1023     # larger ints overflow float (flop counts), and past 4300 digits even str()
Lowered = tuple[PrimFunc, HoistPlan | None] | Exception   # a config's kernel and hoist plan, or why not
Instantiated = tuple[Schedule, list[Tensor]] | InstantiationError  # a checked config's schedule, or why not
MAX_LOWERED = 512         # lowered configs a task keeps (the xgb tuner ranks pools of 3x a batch)
AUTOTUNE_ERRORS = (ScheduleError, InstantiationError, BuildError, ArgumentError)   # already name their object
V = TypeVar("V")


def _remember(cache: OrderedDict[int, V], index: int, value: V) -> V:
    """`value` kept under `index`, the oldest entry dropped past MAX_LOWERED."""
    cache[index] = value
    if len(cache) > MAX_LOWERED:
        cache.popitem(last=False)
    return value


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
    param_kinds: dict[str, str] = field(default_factory=dict)  # "int", "float", "str" or "int_or_tuple"


PARAM_KINDS = {"int": "int", int: "int", "float": "float", float: "float", "str": "str", str: "str"}
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")    # a str parameter: a word (a mode, a dtype name)


def _param_kind(annotation: Any) -> str:
    """What a parameter annotated `annotation` accepts (annotations are strings under
    `from __future__ import annotations`): an int, a float, a word, or an int or a tuple of ints."""
    return PARAM_KINDS.get(annotation, "int_or_tuple")


TEMPLATES: dict[tuple[str, str], Template] = {}


def template(name: str, reference: Callable[..., Any], target: str = "llvm",
             description: str = "") -> Callable[[Callable], Callable]:
    """Register `f(cfg, **params)` as the template of op `name` for `target`."""

    def deco(func: Callable) -> Callable:
        params = list(inspect.signature(func).parameters.values())[1:]
        shape = tuple(p.name for p in params if p.name != "dtype")
        defaults = {p.name: p.default for p in params
                    if p.name != "dtype" and p.default is not inspect.Parameter.empty}
        kinds = {p.name: _param_kind(p.annotation) for p in params if p.name != "dtype"}
        doc = description or next(iter((func.__doc__ or name).strip().splitlines()), name)
        TEMPLATES[(name, target)] = Template(name, func, reference, doc, target, shape, defaults, kinds)
        return func

    return deco


def count_flop(outputs: list[Tensor]) -> float:
    """Float operations of a computation: per element the outputs need, its float arithmetic and
    reduce combines (an extern op counts the flop it declares). A stage computed past what its
    readers use (a product padded to whole vector panels) counts only the part they read."""
    total = 0.0
    ops = post_order(t.op for t in outputs)
    needed = _needed_regions(ops)
    for op in ops:
        if isinstance(op, ExternOp):
            total += op.flop
        elif isinstance(op, ComputeOp):
            ops_per_point = 0

            def count(n: Any) -> None:
                nonlocal ops_per_point
                if isinstance(n, (Binary, Call, Reduce)) and is_float(n.dtype):
                    ops_per_point += 1

            walk(op.body, count)
            points = math.prod(hi - lo + 1 for lo, hi in needed[id(op)])
            total += ops_per_point * points * math.prod(iv.extent for iv in op.reduce_axis)
    return total


def _needed_regions(ops: list[Any]) -> dict[int, list[tuple[int, int]]]:
    """Per compute op, the [lo, hi] per dimension its readers load (consumers first; an output,
    an extern op's input or an index without a constant bound needs the whole dimension)."""
    whole = {id(op): [(iv.dom_min, iv.dom_min + iv.extent - 1) for iv in op.axis]
             for op in ops if isinstance(op, ComputeOp)}
    readers = {id(t.op) for op in ops for t in op.input_tensors}
    needed: dict[int, list[tuple[int, int]]] = {i: r for i, r in whole.items() if i not in readers}
    for op in ops:
        if isinstance(op, ExternOp):
            needed.update({id(t.op): whole[id(t.op)] for t in op.input_tensors if id(t.op) in whole})
    for op in reversed(ops):
        if not isinstance(op, ComputeOp):
            continue
        ranges = {iv.var: r for iv, r in zip(op.axis, needed.get(id(op), whole[id(op)]))}
        ranges.update({iv.var: (iv.dom_min, iv.dom_min + iv.extent - 1) for iv in op.reduce_axis})

        def read(n: Any, ranges: dict = ranges) -> None:
            if isinstance(n, TensorLoad) and id(n.tensor.op) in whole:
                full = whole[id(n.tensor.op)]
                got = [const_bound(i, ranges) or f for i, f in zip(n.indices, full)]
                got = [(max(lo, f[0]), min(hi, f[1])) for (lo, hi), f in zip(got, full)]
                cur = needed.get(id(n.tensor.op))
                needed[id(n.tensor.op)] = got if cur is None else [
                    (min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(cur, got)]

        walk(op.body, read)
    return {i: needed.get(i, whole[i]) for i in whole}


def longest_reduction(args: list[Tensor]) -> int:
    """The longest reduction of the computation (product of a stage's reduce extents, or what an
    extern op declares): float outputs are checked with a tolerance that grows with it."""
    ops = post_order(t.op for t in args)
    return max([op.reduction if isinstance(op, ExternOp) else math.prod(iv.extent for iv in op.reduce_axis)
                for op in ops if isinstance(op, (ComputeOp, ExternOp))], default=1)


def param_text(value: Any) -> str:
    """A parameter as written in keys and on the command line: 5, 5:37 for a tuple, 1e-05 for a
    float (inf and -inf for the infinities), a word as is. A float is its repr, the shortest text
    that reads back as the same float: the same on every machine and Python since 3.1, so a key
    made anywhere finds the records made elsewhere."""
    if isinstance(value, tuple):
        return ":".join(map(str, value))
    return repr(value) if isinstance(value, float) else str(value)


def workload_key(op: str, params: dict[str, Any], dtype: str) -> str:
    """Canonical name of a workload: op, parameters in the template's order, dtype."""
    inner = ",".join(f"{k}={param_text(v)}" for k, v in params.items())
    return f"{op}({inner}){dtype}"


@functools.cache
def physical_memory() -> int | None:
    """Bytes of RAM, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def check_memory(workload: str, arg_specs: list[tuple[tuple[int, ...], str]]) -> None:
    """ValueError when a task's buffers alone exceed the machine's memory: every measurement
    would fail allocating them (and the ones that don't would swap)."""
    need = sum(math.prod(shape) * dtype_info(dtype).bytes for shape, dtype in arg_specs)
    have = physical_memory()
    if have is not None and need > have:
        raise ValueError(f"{workload}: its buffers need {_gib(need)}, more than this machine's "
                         f"{have / 2**30:.1f} GiB of memory")


def _gib(nbytes: int) -> str:
    """`nbytes` in GiB, also past the range of a float (a product of huge sizes)."""
    if nbytes.bit_length() < 1000:
        return f"{nbytes / 2**30:.3g} GiB"
    return f"about 10**{int(math.log10(nbytes >> 30))} GiB"


class Task:
    """A template bound to a shape, dtype and target: a config space to search."""

    def __init__(self, tmpl: Template, params: dict[str, Any], dtype: str, target: Target) -> None:
        self.template = tmpl
        self.name = tmpl.name
        self.params = params
        self.dtype = dtype
        self.target = target
        self.workload_key = workload_key(tmpl.name, params, dtype)
        self.config_space = ConfigSpace(target)
        args = self._collect()
        self.num_inputs = sum(isinstance(t.op, PlaceholderOp) for t in args)
        self.arg_specs = [(t.shape, t.dtype) for t in args]
        check_memory(self.workload_key, self.arg_specs)   # before anything sizes by them (flop are floats)
        computed = [t for t in args if not isinstance(t.op, PlaceholderOp)]
        declared = self.config_space.flop      # cfg.add_flop: the work the template stands for
        self.flop = declared if declared is not None else count_flop(computed)
        self.reduction = longest_reduction(args)
        self.kernel_name = re.sub(r"\W", "_", self.name) or "kernel"     # a C identifier (CUDA)
        self.constant_inputs: tuple[int, ...] = ()
        self._defaults: dict[tuple[int, ...], int] = {}
        self._lowered: OrderedDict[int, Lowered] = OrderedDict()
        self._checked: OrderedDict[int, Instantiated] = OrderedDict()    # by is_valid, not lowered yet

    @property
    def target_key(self) -> str:
        """The target string records and kernel caches are keyed by (the first use looks up the
        host CPU or the GPU; creating a task does not)."""
        return self.target.key

    def _collect(self) -> list[Tensor]:
        """Run the template in collect mode. A plain failure in it (a zero size, a shape it
        cannot take) is re-raised naming the workload; autotune's own errors already name theirs."""
        try:
            return self.template.func(self.config_space, **self.params, dtype=self.dtype)[1]
        except AUTOTUNE_ERRORS:
            raise
        except TypeError as e:
            raise TypeError(f"{self.workload_key}: {e}") from e
        except ValueError as e:
            raise ValueError(f"{self.workload_key}: {e}") from e
        except Exception as e:  # any bug in a template must not become a traceback
            raise ValueError(f"{self.workload_key}: the template failed with {type(e).__name__}: {e}") from e

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

    def set_constant_inputs(self, positions: Sequence[int]) -> None:
        """Declare the inputs at `positions` constant where the kernel runs (a model's weights):
        each config is then lowered, measured and ranked as `compile_model` runs it, with the
        stages that read only those inputs (weight repacking, Winograd's U) hoisted out into a
        prologue that measurement runs once, untimed (`autotune.ir.hoist`). CPU targets only."""
        positions = self.input_positions(positions)
        if positions != self.constant_inputs:
            self.constant_inputs = positions
            self._lowered.clear()
            self._checked.clear()

    def input_positions(self, positions: Sequence[int]) -> tuple[int, ...]:
        """`positions` sorted and distinct; ValueError naming those that are not input positions."""
        positions = tuple(sorted(set(positions)))
        bad = [p for p in positions if not (_is_int(p) and 0 <= p < self.num_inputs)]
        if bad:
            raise ValueError(f"{self.workload_key}: constant inputs {bad} are not input positions "
                             f"(it has {self.num_inputs} inputs)")
        return positions

    @property
    def default_index(self) -> int:
        """The config an untuned kernel runs and the xgb tuner measures first (`default_for`
        this task's constant inputs)."""
        return self.default_for(self.constant_inputs)

    def default_for(self, constant_inputs: Sequence[int]) -> int:
        """The default config where the inputs at these positions are constant: the space's
        first, or with constant inputs the first config of the space the template's rules
        define knowing them (`ConfigSpace.constant_inputs`: a weight repack done once at compile
        time costs nothing per call), as the same knobs in this task's space, whose order stays
        the rules' standalone one so that an index means one config whatever the inputs."""
        positions = self.input_positions(constant_inputs)
        if positions not in self._defaults:
            self._defaults[positions] = 0
            if positions:
                knowing = ConfigSpace(self.target, positions)
                self.template.func(knowing, **self.params, dtype=self.dtype)
                with contextlib.suppress(InstantiationError):   # else the rules named a config this space lacks
                    self._defaults[positions] = self.config_space.from_json(knowing.get(0).to_json()).index
        return self._defaults[positions]

    def lower(self, config: ConfigEntity | int | dict) -> PrimFunc:
        """The loop IR of one config, the kernel as it runs (without its hoisted stages when
        the task has constant inputs). Each config is instantiated and lowered once and kept (a
        few hundred, most recent first): the validity check, the cost model's features, the
        builder and the runtime all read this one function. Raises InstantiationError for a
        config illegal at this shape, and whatever lowering raised for one it cannot lower."""
        return self._lower(config)[0]

    def hoist_plan(self, config: ConfigEntity | int | dict) -> HoistPlan | None:
        """How `lower`'s kernel was split from its weight transforms, or None when it was not."""
        return self._lower(config)[1]

    def prelower(self, configs: Sequence[ConfigEntity | int | dict]) -> None:
        """Lower the configs not lowered yet on every core at once (forked processes,
        `autotune.forked`), so that `lower` then finds them: a tuner ranking a pool of
        candidates by their IR would otherwise wait on one core's Python lowering, 1-2 s per
        conv config and most of a tuning run's wall time."""
        indices = (c if isinstance(c, int) else self.config(c).index for c in configs)
        todo = [i for i in dict.fromkeys(indices) if i not in self._lowered]
        for index, hit in zip(todo, map_forked(self._portable_lowering, todo)):
            self._keep(index, hit)
            self._checked.pop(index, None)          # a child used (its copy of) the schedule

    def _lower(self, config: ConfigEntity | int | dict) -> tuple[PrimFunc, HoistPlan | None]:
        index = self.config(config).index
        hit = self._lowered.get(index)
        if hit is None:
            hit = self._keep(index, self._lowering(index))
        self._lowered.move_to_end(index)
        if isinstance(hit, Exception):
            raise hit
        return hit

    def _lowering(self, index: int) -> Lowered:
        """The kernel and its hoist plan, or the exception lowering raised (kept: the same config
        fails the same way)."""
        try:
            checked = self._checked.pop(index, None)
            if isinstance(checked, InstantiationError):
                raise checked
            s, args = checked if checked is not None else self.instantiate(index)
            plan = plan_hoist(s, args, self.constant_inputs) if self.constant_inputs and self.target.kind == "llvm" \
                else None
            return plan.kernel(self.kernel_name) if plan else lower(s, args, name=self.kernel_name), plan
        except Exception as e:   # noqa: BLE001
            return e

    def _portable_lowering(self, index: int) -> Lowered:
        """`_lowering` as a forked child returns it: an exception that would not unpickle as it
        is becomes a RuntimeError with its type and message (what a build error records)."""
        hit = self._lowering(index)
        if isinstance(hit, Exception) and not isinstance(hit, InstantiationError):
            try:
                pickle.loads(pickle.dumps(hit))
            except Exception:   # noqa: BLE001
                return RuntimeError(f"{type(hit).__name__}: {hit}")
        return hit

    def _keep(self, index: int, hit: Lowered) -> Lowered:
        return _remember(self._lowered, index, hit)

    def is_valid(self, index: int) -> bool:
        """Whether the template accepts this config at this shape. A config it accepts but
        lowering refuses is valid: measuring it records the build error, so it is never retried.
        Only the template runs (a few ms), not the lowering (up to seconds), unless it was lowered."""
        hit = self._lowered.get(index)
        if hit is not None:
            return not isinstance(hit, InstantiationError)
        checked = self._checked.get(index)
        if checked is None:
            try:
                checked = self.instantiate(index)
            except InstantiationError as e:
                checked = e
            except Exception:  # noqa: BLE001   (lowering meets it again and records it)
                return True
            _remember(self._checked, index, checked)    # lowering takes this schedule: one instantiation
        return not isinstance(checked, InstantiationError)

    def make_inputs(self, rng: np.random.Generator) -> list[np.ndarray]:
        """Random inputs (never all zeros: those time unrealistically)."""
        out: list[np.ndarray] = []
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

    def __repr__(self) -> str:
        return f"Task({self.workload_key}, target={self.target!r}, space={len(self.config_space)})"


def _load_templates(op: str | None = None) -> None:
    """Register the built-in templates of `op` for every target, or all of them (op None)."""
    from . import cpu, cuda

    cpu.load(op)
    if op is None or op in cuda.MODULE_OF_OP:
        cuda.load(op)


def create_task(op: str, target: str | Target = "llvm", dtype: str = "float32", **params: Any) -> Task:
    """A task for op `op` at the given shape parameters (those the template gives a default may be
    left out: the task, and so its workload key, holds every one); errors name the bad parameter."""
    _load_templates(op)
    target = Target.parse(target)
    kind = target.kind
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
    ordered = {p: _check_param(op, p, params[p], tmpl.param_kinds.get(p, "int_or_tuple")) for p in tmpl.shape_params}
    return Task(tmpl, ordered, dtype, target)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_param(op: str, name: str, value: Any, kind: str) -> int | float | str | tuple[int, ...]:
    """`value` as the template takes it (a list becomes a tuple, an int for a float parameter a
    float). ValueError for an int too large to be any size or float (past 2**1023; past 4300
    digits it could not even be printed), for a NaN float and for a str that is not a word (keys
    and command lines separate parameters by `,` and `=`); TypeError for a value of the wrong
    kind (a bool is not an int)."""
    if kind == "str":
        if not isinstance(value, str):
            raise TypeError(f"{op}: parameter {name} must be a str, got {_shown(value)}")
        if not NAME.fullmatch(value):
            raise ValueError(f"{op}: parameter {name} must be a word (letters, digits, _), got {_shown(value)}")
        return value
    if isinstance(value, list):
        value = tuple(value)
    items = value if isinstance(value, tuple) else (value,)
    largest = max((abs(v) for v in items if _is_int(v)), default=0)
    if largest >= MAX_PARAM:
        raise ValueError(f"{op}: parameter {name} must be below 2**1023 in magnitude, "
                         f"got an int of {largest.bit_length()} bits")
    if kind == "float":
        return _check_float(op, name, value)
    if kind == "int" and not _is_int(value):
        raise TypeError(f"{op}: parameter {name} must be an int, got {_shown(value)}")
    if not all(map(_is_int, items)):
        raise TypeError(f"{op}: parameter {name} must be an int (or a tuple of ints), got {_shown(value)}")
    return value


def _check_float(op: str, name: str, value: Any) -> float:
    """A float parameter as a float, not NaN (NaN is no value: it equals nothing, so no key could
    find it again); -0.0 becomes 0.0 (they compare equal, so they are one workload and must have
    one key). The infinities are values (Clip without a bound); a template that needs a finite
    value checks its own range."""
    if not (isinstance(value, float) or _is_int(value)):
        raise TypeError(f"{op}: parameter {name} must be a float, got {_shown(value)}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{op}: parameter {name} must be a float that is not NaN, got {value}")
    return value + 0.0


def _shown(value: Any) -> str:
    """A bad parameter for a one-line message: its type and its repr, clipped."""
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:60] + '...'}"
