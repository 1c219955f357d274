"""Tunable tasks from a user's own te computation: `create_task_from_te` checks the graph,
fingerprints it (so tuning records follow the computation, never a stale one) and registers a
template whose search space is the generic schedule (`autotune.schedules.generic`)."""
from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

from ..target import Target
from ..te.evaluate import evaluate_te
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor, post_order
from .generic import schedule_auto
from .schedule import Schedule
from .space import ConfigSpace
from .task import TEMPLATES, Task, _load_templates, create_task, template


def fingerprint(outs: Sequence[Tensor], ins: Sequence[Tensor]) -> int:
    """A CRC32 of the computation's text (ops, shapes, dtypes, bodies, argument order): a task's
    workload key changes whenever the computation does, so tuning records never go stale."""
    lines = [f"in {t.name} {t.shape} {t.dtype}" for t in ins] + [f"out {t.name}" for t in outs]
    for op in post_order(t.op for t in outs):
        if isinstance(op, ComputeOp):
            lines.append(f"{op.name} {op.shape} {op.dtype} ({', '.join(iv.name for iv in op.axis)}) = {op.body}")
    return zlib.crc32("\n".join(lines).encode())


def _check_graph(outs: list[Tensor], ins: list[Tensor], name: str) -> None:
    where = f"create_task_from_te({name!r})"
    if not isinstance(name, str) or not name:
        raise ValueError(f"create_task_from_te: name must be a non-empty string, got {name!r}")
    for k, t in enumerate(outs):
        if not isinstance(t, Tensor) or not isinstance(t.op, ComputeOp):
            raise TypeError(f"{where}: outputs[{k}] must be a te.compute tensor, got {t!r}")
    for k, t in enumerate(ins):
        if not isinstance(t, Tensor) or not isinstance(t.op, PlaceholderOp):
            raise TypeError(f"{where}: inputs[{k}] must be a te.placeholder tensor, got {t!r}")
    graph = post_order(t.op for t in outs)
    for op in graph:
        if not isinstance(op, (ComputeOp, PlaceholderOp)):
            raise TypeError(f"{where}: {op.name} is an extern op, whose loops no generic schedule can tune; "
                            "write a template for it")
    needed = [op for op in graph if isinstance(op, PlaceholderOp)]
    given = {id(t.op) for t in ins}
    missing = [op.name for op in needed if id(op) not in given]
    if missing:
        raise ValueError(f"{where}: the outputs read placeholder(s) {missing} that are not in inputs")
    if len(given) != len(ins):
        raise ValueError(f"{where}: an input is listed twice")


def create_task_from_te(outputs: Tensor | Sequence[Tensor], inputs: Sequence[Tensor], name: str,
                        target: str | Target = "llvm", reference: Callable[..., Any] | None = None,
                        description: str = "") -> Task:
    """A tunable Task for your own te computation, with a search space built automatically.

    Injective computations (elementwise chains, broadcasts, movement) and reductions over the
    innermost axes or along the output's innermost axis, with their pointwise producers and
    consumers, are supported (see `classify`); every injective stage is inlined, so
    `relu(x * w + b)` written as three computes tunes as one fused loop nest. The template is
    registered as op `name` (its parameter `fingerprint` identifies the computation), so
    `autotune.tune`, the database and `autotune.load(name, fingerprint=task.params["fingerprint"])`
    work with it. `reference(*input_arrays)` gives the expected outputs; by default the te
    computation itself is evaluated with numpy.

    Call it from anywhere: a notebook, a function, code built at run time. Measurement workers
    receive lowered IR and check data, never this computation, so nothing needs re-importing.
    """
    _load_templates()                 # the built-in ops, so a clash with their names is seen
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = list(inputs)
    _check_graph(outs, ins, name)
    kind = Target.parse(target).kind
    old = TEMPLATES.get((name, kind))
    if old is not None and not getattr(old.func, "from_te", False):
        raise ValueError(f"create_task_from_te: {name!r} is already the name of a registered op; choose another")
    _auto_schedule(kind)(ConfigSpace(), _new_schedule(outs), outs)   # unsupported computations fail here, early
    fp = fingerprint(outs, ins)
    ref = reference if reference is not None else (lambda *arrays: evaluate_te(outs, ins, arrays))
    doc = description or f"generic schedule of a te computation ({', '.join(t.name for t in outs)})"
    template(name, reference=lambda *arrays, **_: ref(*arrays), target=kind,
             description=doc)(_generic_template(outs, ins, name, fp, kind))
    return create_task(name, target=target, dtype=outs[0].dtype, fingerprint=fp)


def _new_schedule(outs: Sequence[Tensor]) -> Schedule:
    return Schedule([t.op for t in outs])


def _auto_schedule(kind: str) -> Callable[..., Any]:
    """The generic schedule of a target: `generic.schedule_auto` for the CPU, the CUDA one
    (injective computations as one kernel) for "cuda"."""
    if kind == "cuda":
        from .cuda.generic import schedule_auto as cuda_schedule_auto

        return cuda_schedule_auto
    return schedule_auto


def _generic_template(outs: list[Tensor], ins: list[Tensor], name: str, fp: int, kind: str) -> Callable:
    """The template function of a te computation: its generic schedule, for this computation only."""
    auto = _auto_schedule(kind)

    def generic_template(cfg: Any, fingerprint: int, dtype: str = outs[0].dtype) -> tuple[Schedule, list[Tensor]]:
        if fingerprint != fp:
            raise ValueError(f"{name}: fingerprint {fingerprint} is not this computation's ({fp}); the te "
                             "definition changed since the task was made")
        if dtype != outs[0].dtype:
            raise ValueError(f"{name}: the te computation's output dtype is {outs[0].dtype}, not {dtype}")
        s = _new_schedule(outs)
        auto(cfg, s, outs)
        return s, [*ins, *outs]

    generic_template.__qualname__ = generic_template.__name__ = f"generic_template[{name}]"
    generic_template.from_te = True  # type: ignore[attr-defined]
    return generic_template
