"""The builder: compiles candidates to object code in a pool of worker processes.

The parent lowers each candidate (`Task.lower`, once per config) and sends the loop IR,
serialized (`autotune.ir.serialize`), with the target's key; a worker only compiles it
(LLVM O3, or nvcc). A config the template refuses, or IR that lowering refuses, is a result
at once and never reaches a worker. `LocalBuilder` keeps `build_workers` workers busy, kills
and replaces one that exceeds the build timeout or dies, and recycles each after
`max_builds_per_worker` builds (llvmlite leaks a little memory per O3 run).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InstantiationError
from ..ir.serialize import dumps
from .pool import STARTUP_TIMEOUT_S, WorkerDied, WorkerHandle, wait_readable
from .types import BuildResult, ErrorKind, MeasureInput, MeasureOptions
from .wire import first_line, pack_bundle

if TYPE_CHECKING:
    from ..schedules.task import Task


def candidate_ir(task: Task, index: int) -> bytes:
    """What a build worker compiles for one config: its serialized kernel, or for a task with
    constant inputs whose weight transforms were hoisted, a bundle of the kernel's IR and its
    prologue's, with the map from the task's inputs to the kernel's."""
    func, plan = task.lower(index), task.hoist_plan(index)
    if plan is None:
        return dumps(func)
    meta = {"prologue_inputs": list(plan.prologue_inputs), "sources": [list(s) for s in plan.sources]}
    return pack_bundle(meta, [dumps(func), dumps(plan.prologue(f"{task.kernel_name}_prologue"))])


def lowered_ir(inp: MeasureInput) -> tuple[bytes | None, BuildResult | None]:
    """The candidate's serialized loop IR, or the BuildResult that says why there is none."""
    t0 = time.perf_counter()

    def failed(kind: ErrorKind, msg: str) -> tuple[None, BuildResult]:
        return None, BuildResult(inp.config_index, None, None, kind, msg, time.perf_counter() - t0)

    try:
        return candidate_ir(inp.task, inp.config_index), None
    except InstantiationError as exc:
        return failed(ErrorKind.INSTANTIATION_ERROR, first_line(exc))
    except Exception as exc:  # noqa: BLE001  (lowering refused it, or a template bug: this config's failure)
        return failed(ErrorKind.BUILD_ERROR, first_line(exc))


@dataclass
class _Job:
    position: int
    deadline: float
    started: float


class LocalBuilder:
    """`build(inputs)` -> one BuildResult per input, in order. Workers persist across calls."""

    def __init__(self, options: MeasureOptions | None = None) -> None:
        self.options = options or MeasureOptions()
        self._workers = [WorkerHandle("build") for _ in range(self.options.build_workers)]
        self._closed = False

    def build(self, inputs: list[MeasureInput]) -> list[BuildResult]:
        if self._closed:
            raise RuntimeError("LocalBuilder.build: the builder is closed")
        results: list[BuildResult | None] = [None] * len(inputs)
        jobs: dict[int, _Job] = {}                 # worker slot -> its running job
        try:
            self._loop(inputs, deque(range(len(inputs))), jobs, results)
        except BaseException:         # Ctrl-C: busy workers would answer into the next batch
            for slot in list(jobs):
                self._replace(slot)
            raise
        return [r for r in results if r is not None]

    def _loop(self, inputs: list[MeasureInput], unlowered: deque[int], jobs: dict[int, _Job],
              results: list[BuildResult | None]) -> None:
        """Lower in the parent while the workers compile: one candidate per turn, then a look
        at the workers without waiting; once all are lowered, wait for answers or deadlines."""
        lowered: deque[tuple[int, bytes]] = deque()
        while unlowered or lowered or jobs:
            self._dispatch(inputs, lowered, jobs)
            if unlowered:
                position = unlowered.popleft()
                ir, failure = lowered_ir(inputs[position])
                if ir is None:
                    results[position] = failure
                else:
                    lowered.append((position, ir))
                timeout: float | None = 0.0
            else:
                timeout = self._next_deadline(jobs)
            for w in wait_readable(self._workers, timeout):
                self._receive(self._workers.index(w), jobs, results, inputs)
            now = time.monotonic()
            for slot, job in list(jobs.items()):
                if now > job.deadline:
                    self._replace(slot)
                    del jobs[slot]
                    results[job.position] = self._failure(
                        inputs[job.position], ErrorKind.TIMEOUT,
                        f"build took longer than {self.options.build_timeout_s:g} s (worker killed)", job)

    def _next_deadline(self, jobs: dict[int, _Job]) -> float | None:
        """Seconds until the next job's deadline or a starting worker's startup limit."""
        now = time.monotonic()
        deadlines = [j.deadline for j in jobs.values()]
        for w in self._workers:
            if not w.ready:
                if now > w.started + STARTUP_TIMEOUT_S:
                    raise RuntimeError(f"build worker {w.pid} did not start within {STARTUP_TIMEOUT_S:.0f} s")
                deadlines.append(w.started + STARTUP_TIMEOUT_S)
        return max(0.0, min(deadlines) - now) if deadlines else None

    def _dispatch(self, inputs: list[MeasureInput], lowered: deque[tuple[int, bytes]], jobs: dict[int, _Job]) -> None:
        """Hand lowered candidates to the idle, ready workers."""
        for slot in range(len(self._workers)):
            if not lowered or slot in jobs or not self._workers[slot].ready:
                continue
            position, ir = lowered.popleft()
            try:
                self._workers[slot].send({"op": "build", "target": inputs[position].task.target_key}, ir)
            except WorkerDied:        # it died while idle: not this candidate's fault
                self._replace(slot)
                lowered.appendleft((position, ir))
                continue
            now = time.monotonic()
            jobs[slot] = _Job(position, now + self.options.build_timeout_s, now)

    def _receive(self, slot: int, jobs: dict[int, _Job], results: list[BuildResult | None],
                 inputs: list[MeasureInput]) -> None:
        w = self._workers[slot]
        job = jobs.get(slot)
        try:
            header, obj = w.recv()
        except WorkerDied as exc:
            self._replace(slot)
            if job is None:
                if w.ready:           # died while idle: nothing lost
                    return
                raise RuntimeError(f"build worker {w.pid} {exc} while starting; see its stderr") from exc
            del jobs[slot]
            inp = inputs[job.position]
            results[job.position] = self._failure(
                inp, ErrorKind.CRASH, f"build worker {exc} while building config {inp.config_index}", job)
            return
        if header.get("event") == "ready" or job is None:
            return
        del jobs[slot]
        kind = ErrorKind(header["error_kind"])
        results[job.position] = BuildResult(
            inputs[job.position].config_index, header.get("signature"), obj if kind is ErrorKind.OK else None,
            kind, header.get("error_msg", ""), float(header.get("build_seconds", 0.0)))
        w.jobs += 1
        if w.jobs >= self.options.max_builds_per_worker:
            self._replace(slot, graceful=True)

    def _failure(self, inp: MeasureInput, kind: ErrorKind, msg: str, job: _Job) -> BuildResult:
        return BuildResult(inp.config_index, None, None, kind, msg, time.monotonic() - job.started)

    def _replace(self, slot: int, graceful: bool = False) -> None:
        old = self._workers[slot]
        if graceful:
            old.close()
        else:
            old.kill()
        self._workers[slot] = WorkerHandle("build")

    @property
    def pids(self) -> list[int]:
        return [w.pid for w in self._workers]

    def close(self) -> None:
        """Stop every worker (idempotent)."""
        self._closed = True
        for w in self._workers:
            w.close()

    def __enter__(self) -> LocalBuilder:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
