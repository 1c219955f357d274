"""Test support in the package: templates with faults, to test measurement with real kernels in
real workers, and the configs template tests check (`legal_configs`).

Importing this module registers op "testing.faults" (target llvm): `B = A + 1` for `A` of
shape (n,), whose single knob "behaviour" makes each config fail one way (config index =
position in FAULTS):

    ok                   B = A + 1, correct
    wrong                B = A + 2 (the reference says A + 1)            -> WRONG_RESULT
    crash                reads A[i + 2**30], 4 GiB past a small buffer   -> SIGSEGV, CRASH
    hang                 two reduce axes of 2**20 each (2**40 adds)      -> TIMEOUT
    build_error          unrolls a loop of 100000 iterations; lowering refuses -> BUILD_ERROR
    instantiation_error  cfg.raise_if                                    -> INSTANTIATION_ERROR
    runtime_error        B has shape (n + 1,) while the task says (n,): the runner's argument
                         check raises inside the worker                  -> RUNTIME_ERROR

Op names starting with "testing." are not for users; listings should hide them.
"""
from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from . import te
from .schedules.schedule import Schedule
from .schedules.task import Task, create_task, template

FAULTS = ("ok", "wrong", "crash", "hang", "build_error", "instantiation_error", "runtime_error")
FAULT_OP = "testing.faults"


def _reference(a: Any, **_: Any) -> Any:
    return a + 1


@template(FAULT_OP, reference=_reference, description="test only: B = A + 1 with injected faults")
def faults_template(cfg: Any, n: int, dtype: str = "float32") -> tuple[Schedule, list[te.Tensor]]:
    """B = A + 1, or one of FAULTS, chosen by the knob "behaviour"."""
    cfg.define_knob("behaviour", list(FAULTS))
    behaviour = cfg["behaviour"].val
    cfg.raise_if(behaviour == "instantiation_error", "testing.faults: this config is illegal on purpose")
    A = te.placeholder((n,), dtype, name="A")
    one = te.const(1, dtype)
    if behaviour == "wrong":
        B = te.compute((n,), lambda i: A[i] + te.const(2, dtype), name="B")
    elif behaviour == "crash":
        B = te.compute((n,), lambda i: A[i + (1 << 30)] + one, name="B")
    elif behaviour == "hang":
        r1, r2 = te.reduce_axis((0, 1 << 20), name="r1"), te.reduce_axis((0, 1 << 20), name="r2")
        B = te.compute((n,), lambda i: te.sum(A[(i + r1 + r2) % n], axis=[r1, r2]), name="B")
    elif behaviour == "build_error":
        r = te.reduce_axis((0, 100000), name="r")
        B = te.compute((n,), lambda i: te.sum(A[(i + r) % n], axis=r), name="B")
    elif behaviour == "runtime_error":
        B = te.compute((n + 1,), lambda i: A[i % n] + one, name="B")
    else:
        B = te.compute((n,), lambda i: A[i] + one, name="B")
    s = te.create_schedule(B.op)
    if behaviour == "build_error":
        s[B].unroll(B.op.reduce_axis[0])
    return s, [A, B]


def fault_task(n: int = 37, dtype: str = "float32") -> Task:
    """The fault task at length `n`; `fault_index(name)` picks a config."""
    return create_task(FAULT_OP, n=n, dtype=dtype)


def fault_index(name: str) -> int:
    if name not in FAULTS:
        raise ValueError(f"unknown fault {name!r}; expected one of {FAULTS}")
    return FAULTS.index(name)


def legal_configs(task: Task, extra: int, seed: int = 0, where: Mapping[str, Sequence[Any]] | None = None) -> list[int]:
    """Index 0 (the default, when legal for the shape) and up to `extra` seeded legal others:
    the configs the template tests check. `where` keeps the configs whose knob `name` takes one of
    the values given (index 0 only if it does; the others are drawn with such a value)."""
    rng = random.Random(seed)
    space, where = task.config_space, dict(where or {})
    names = list(space.knobs)
    allowed = {names.index(n): [i for i, e in enumerate(space.knobs[n].entities) if e.val in vals]
               for n, vals in where.items()}
    first = space.point2knob(0)
    out = [0] if all(first[p] in ok for p, ok in allowed.items()) and task.is_valid(0) else []
    for _ in range(200 * (extra + 1)):
        if len(out) > extra:
            break
        knob = [rng.randrange(d) for d in space.dims]
        for pos, ok in allowed.items():
            knob[pos] = rng.choice(ok)
        i = space.knob2point(space.canonical(knob))
        if i not in out and all(space.point2knob(i)[p] in ok for p, ok in allowed.items()) and task.is_valid(i):
            out.append(i)
    return out
