"""The builder: compiles candidates to object code in a pool of worker processes.

`handle_build` is what a worker does with one request (instantiate -> lower -> object code);
`LocalBuilder` keeps `build_workers` such workers busy, kills and replaces one that exceeds the
build timeout or dies, and recycles each after `max_builds_per_worker` builds (llvmlite leaks a
little memory per O3 run).
"""
from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InstantiationError
from .types import BuildResult, ErrorKind, MeasureInput, MeasureOptions
from .worker import STARTUP_TIMEOUT_S, WorkerDied, WorkerHandle, first_line, task_of, wait_readable


# -- inside a build worker ----------------------------------------------------------------------
def _reply(kind: ErrorKind, msg: str, t0: float, signature: dict | None = None) -> dict[str, Any]:
    return {"error_kind": kind.value, "error_msg": msg, "signature": signature,
            "build_seconds": time.perf_counter() - t0}


def handle_build(req: dict[str, Any], _payload: bytes,
                 _event: Callable[[dict[str, Any]], None]) -> tuple[dict[str, Any], bytes]:
    """One candidate: `{"task": Task.to_json(), "config_index": i}` -> signature + object code."""
    from ..codegen import compile_for
    from ..ir.lower import lower

    t0 = time.perf_counter()
    index = int(req["config_index"])
    try:
        task = task_of(req["task"])
    except Exception as exc:      # a template module that no longer imports, a changed signature
        return _reply(ErrorKind.BUILD_ERROR, f"cannot rebuild the task: {first_line(exc)}", t0), b""
    try:
        s, args = task.instantiate(index)
    except InstantiationError as exc:
        return _reply(ErrorKind.INSTANTIATION_ERROR, first_line(exc), t0), b""
    except Exception as exc:      # a template bug: this config's failure, not the tuner's
        return _reply(ErrorKind.BUILD_ERROR, f"template raised {first_line(exc)}", t0), b""
    try:
        name = re.sub(r"\W", "_", task.name) or "kernel"
        signature, obj = compile_for(lower(s, args, name=name), task.target)
    except Exception as exc:
        return _reply(ErrorKind.BUILD_ERROR, first_line(exc), t0), b""
    return _reply(ErrorKind.OK, "", t0, signature), obj


# -- the parent's side --------------------------------------------------------------------------
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
        todo = deque(range(len(inputs)))
        jobs: dict[int, _Job] = {}                 # worker slot -> its running job
        task_json: dict[int, dict] = {}
        try:
            self._loop(inputs, todo, jobs, results, task_json)
        except BaseException:         # Ctrl-C: busy workers would answer into the next batch
            for slot in list(jobs):
                self._replace(slot)
            raise
        return [r for r in results if r is not None]

    def _loop(self, inputs: list[MeasureInput], todo: deque[int], jobs: dict[int, _Job],
              results: list[BuildResult | None], task_json: dict[int, dict]) -> None:
        while todo or jobs:
            for slot, w in enumerate(self._workers):
                if todo and w.ready and slot not in jobs:
                    self._start(slot, todo, inputs, jobs, task_json)
            now = time.monotonic()
            deadlines = [j.deadline for j in jobs.values()]
            for w in self._workers:
                if not w.ready:
                    if now > w.started + STARTUP_TIMEOUT_S:
                        raise RuntimeError(f"build worker {w.pid} did not start within {STARTUP_TIMEOUT_S:.0f} s")
                    deadlines.append(w.started + STARTUP_TIMEOUT_S)
            timeout = max(0.0, min(deadlines) - now) if deadlines else None
            ready = wait_readable(self._workers, timeout)
            for w in ready:
                self._receive(self._workers.index(w), jobs, results, inputs)
            now = time.monotonic()
            for slot, job in list(jobs.items()):
                if now > job.deadline:
                    self._replace(slot)
                    del jobs[slot]
                    results[job.position] = self._failure(
                        inputs[job.position], ErrorKind.TIMEOUT,
                        f"build took longer than {self.options.build_timeout_s:g} s (worker killed)", job)

    def _start(self, slot: int, todo: deque[int], inputs: list[MeasureInput], jobs: dict[int, _Job],
               task_json: dict[int, dict]) -> None:
        position = todo.popleft()
        inp = inputs[position]
        key = id(inp.task)
        if key not in task_json:
            task_json[key] = inp.task.to_json()
        try:
            self._workers[slot].send({"op": "build", "task": task_json[key], "config_index": inp.config_index})
        except WorkerDied:            # it died while idle: not this candidate's fault
            self._replace(slot)
            todo.appendleft(position)
            return
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
