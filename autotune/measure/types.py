"""Measurement records: what goes into a measurement, what comes out, and the options.

Frozen dataclasses that hold no exceptions and no live objects besides the input's Task: a
failure is an `ErrorKind` plus a one-line message, so results travel as JSON (worker pipes, the
tuning database) and never as pickle.
"""
from __future__ import annotations

import base64
import enum
import math
import statistics
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..target import usable_cores

if TYPE_CHECKING:        # workers import this module; they never see a Task
    from ..schedules.task import Task


class ErrorKind(str, enum.Enum):
    """How a measurement ended. Everything but OK has cost inf."""

    OK = "ok"
    INSTANTIATION_ERROR = "instantiation_error"   # the config is illegal for the shape
    BUILD_ERROR = "build_error"                   # lowering or LLVM failed
    RUNTIME_ERROR = "runtime_error"               # raised in the runner (load, arguments, ...)
    TIMEOUT = "timeout"                           # build or run exceeded its limit; worker killed
    WRONG_RESULT = "wrong_result"                 # output differs from the numpy reference
    CRASH = "crash"                               # the worker process died (e.g. SIGSEGV)


@dataclass(frozen=True)
class MeasureInput:
    """One candidate: a task and the index of a config in its space."""

    task: Task
    config_index: int


@dataclass(frozen=True)
class BuildResult:
    """A compiled candidate (signature + object code) or why there is none."""

    config_index: int
    signature: dict | None
    obj: bytes | None
    error_kind: ErrorKind
    error_msg: str
    build_seconds: float

    @property
    def ok(self) -> bool:
        return self.error_kind is ErrorKind.OK

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["error_kind"] = self.error_kind.value
        d["obj"] = None if self.obj is None else base64.b64encode(self.obj).decode("ascii")
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BuildResult:
        obj = d.get("obj")
        return cls(int(d["config_index"]), d.get("signature"),
                   None if obj is None else base64.b64decode(obj), ErrorKind(d["error_kind"]),
                   str(d.get("error_msg", "")), float(d.get("build_seconds", 0.0)))


@dataclass(frozen=True)
class MeasureResult:
    """Per-call seconds of each timing (`repeat` of them) or why there are none.

    run_seconds: time the runner worker spent in loops calling the kernel (the checked call,
    warm-up, calibration and timings), to tell measurement overhead from kernel time.
    """

    costs: tuple[float, ...]
    error_kind: ErrorKind
    error_msg: str
    build_seconds: float
    timestamp: float
    run_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error_kind is ErrorKind.OK

    @property
    def cost(self) -> float:
        """The median per-call seconds; inf for a failed candidate."""
        if not self.ok or not self.costs:
            return math.inf
        return float(statistics.median(self.costs))

    def to_json(self) -> dict[str, Any]:
        return {"costs": list(self.costs), "error_kind": self.error_kind.value, "error_msg": self.error_msg,
                "build_seconds": self.build_seconds, "timestamp": self.timestamp,
                "run_seconds": self.run_seconds}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MeasureResult:
        return cls(tuple(float(c) for c in d.get("costs", ())), ErrorKind(d["error_kind"]),
                   str(d.get("error_msg", "")), float(d.get("build_seconds", 0.0)),
                   float(d.get("timestamp", 0.0)), float(d.get("run_seconds", 0.0)))


@dataclass(frozen=True)
class MeasureOptions:
    """How candidates are built, checked and timed (AutoTVM's LocalBuilder/LocalRunner knobs).

    number: calls per timing; None = the smallest power of two (or estimate) that makes one
        timing last at least `min_repeat_ms`.
    repeat: timings kept per candidate (its `costs`).
    warmup: calls before timing; the first call is also the one whose output is checked.
    flush_cache: before each timing, write a buffer twice the last-level cache (cold-cache
        costs; pair it with number=1 for every call to start cold).
    cold_inputs: the timed calls take turns over enough copies of the inputs that no call finds
        its inputs in the cores' private (L2) caches, as a kernel inside a model never finds its
        weights there: every other layer's data passed through since its last call. Off, a
        kernel whose inputs fit in L2 is timed with them hot (a matrix-vector product 12x
        faster than it runs in the model). Every input is copied, activations too. CPU only.
    cold_weights: only the task's constant inputs (`Task.set_constant_inputs`: a model's
        weights, or what a hoisted kernel's prologue made from them) take turns, over copies
        that outweigh the last-level cache twice (taken as at most 64 MiB: VMs report the
        host's): in a model the weights stream from memory, while the activations were just
        written by the previous kernel. No effect on a task without constants.
    rtol/atol: None = by dtype (float32: rtol 1e-4, atol 1e-4 * sqrt(reduction size)); a
        given atol is used as is.
    max_builds_per_worker: builds before a build worker is replaced (llvmlite leaks a little
        memory per O3 run).
    """

    number: int | None = None
    repeat: int = 5
    min_repeat_ms: float = 50.0
    warmup: int = 1
    flush_cache: bool = False
    cold_inputs: bool = False
    cold_weights: bool = False
    run_timeout_s: float = 10.0
    build_timeout_s: float = 30.0
    build_workers: int = field(default_factory=usable_cores)
    rtol: float | None = None
    atol: float | None = None
    check: bool = True
    max_builds_per_worker: int = 200

    def __post_init__(self) -> None:
        positive = {"repeat": self.repeat, "run_timeout_s": self.run_timeout_s,
                    "build_timeout_s": self.build_timeout_s, "build_workers": self.build_workers,
                    "max_builds_per_worker": self.max_builds_per_worker}
        if self.number is not None:
            positive["number"] = self.number
        for name, value in positive.items():
            if isinstance(value, bool) or not value > 0:
                raise ValueError(f"MeasureOptions.{name} must be positive, got {value!r}")
        for name in ("min_repeat_ms", "warmup"):
            if getattr(self, name) < 0:
                raise ValueError(f"MeasureOptions.{name} must be >= 0, got {getattr(self, name)!r}")
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ValueError(f"MeasureOptions.{name} must be >= 0 or None, got {value!r}")

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
