"""ClusterMeasurer: the tuner's side of measurement on a Ray cluster.

    m = ClusterMeasurer("ray://head:10001", MeasureOptions())
    m.submit(task, [3, 17, 42])          # lowered here, built on any node, run on a node of task.target
    for task, index, result in m.wait():  # whatever finished, as it finishes
        ...

A candidate goes: lowered in the tuner -> a build task (any node, at most as many in flight as the
cluster has CPUs, so a build's deadline is its own time) -> the queue of its target -> a runner
actor of that target, which times one at a time and is handed the next before it ends. A
candidate whose actor died or hung is queued again once, then recorded as a node error (a CRASH
whose message says so).
`measure(task, indices)` is the batch form, for callers that want the Measurer interface.
"""
from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import ray

from ..measure.builder import lowered_ir
from ..measure.check_data import MAX_TASKS_ON_DISK, check_arrays
from ..measure.types import BuildResult, ErrorKind, MeasureInput, MeasureOptions, MeasureResult
from ..measure.wire import first_line
from ..schedules.task import Task
from .actors import DEPTH, Actor, ActorPool
from .nodes import ClusterError, connect, devices, target_resource
from .remote import RunnerActor, build

ATTEMPTS = 2                 # runs of a candidate whose node died or hung, before it is a node error
NODE_ERROR = "node error"    # how such a record's message starts


@dataclass(eq=False)
class _Job:
    task: Task
    index: int
    resource: str
    check: list[Any]                       # [ref of the task's CheckArrays], unresolved on purpose
    ir: bytes = b""
    built: dict[str, Any] | None = None    # the BuildResult's JSON once built
    attempts: int = 0
    deadline: float = 0.0
    actor: Actor | None = None


Done = tuple[Task, int, MeasureResult]


class ClusterMeasurer:
    """Measures candidates on a Ray cluster; `close()` (or `with`) stops its actors."""

    def __init__(self, cluster: str, options: MeasureOptions | None = None, actor_timeout_s: float | None = None,
                 runner: type = RunnerActor, builder: Any = build) -> None:
        """actor_timeout_s: a runner actor that has not answered in this long is hung and replaced
        (default: twice the run timeout plus a minute, beyond the runner's own per-candidate limit).
        runner/builder: the actor class and build function (a benchmark swaps in fakes)."""
        self._owns_connection = not ray.is_initialized()
        connect(cluster)
        self.options = options or MeasureOptions()
        self.actor_timeout_s = actor_timeout_s or 2 * self.options.run_timeout_s + 60.0
        self._build = ray.remote(num_cpus=1, max_retries=1, max_calls=self.options.max_builds_per_worker)(builder)
        self._runner: Any = ray.remote(runner)
        self._pools: dict[str, ActorPool] = {}
        self._checks: OrderedDict[tuple[str, str], list[Any]] = OrderedDict()
        self._unbuilt: deque[_Job] = deque()
        self._building: dict[Any, _Job] = {}
        self._queued: dict[str, deque[_Job]] = {}
        self._running: dict[Any, _Job] = {}
        self._done: list[Done] = []
        self.measured_on: Counter[str] = Counter()     # node id -> candidates it measured

    @property
    def pending(self) -> int:
        """Candidates submitted and not yet handed back by `wait`."""
        queued = sum(len(q) for q in self._queued.values())
        return len(self._unbuilt) + len(self._building) + queued + len(self._running) + len(self._done)

    @property
    def runners(self) -> list[Actor]:
        """The runner actors started so far, of every target (each says its node and pid once up)."""
        return [a for pool in self._pools.values() for a in pool.actors]

    def check_target(self, task: Task) -> None:
        """ClusterError unless some live node advertises the task's target."""
        if devices(target_resource(task.target_key)) == 0:
            raise ClusterError(f"no node of the cluster measures target {task.target_key!r} (resource "
                               f"{target_resource(task.target_key)}); start `autotune worker --cluster ADDRESS` "
                               "on a machine of that target")

    def submit(self, task: Task, indices: Iterable[int]) -> None:
        """Lower the candidates and start their builds; configs the template refuses are done at once."""
        resource = target_resource(task.target_key)
        if resource not in self._pools:
            self._pools[resource] = ActorPool(resource, self._runner, self.options)
            self._queued[resource] = deque()
        check = self._check_ref(task)
        for index in indices:
            ir, failure = lowered_ir(MeasureInput(task, int(index)))
            if failure is not None:
                self._finish(task, int(index), _from_build(failure))
            elif isinstance(check, str):
                self._finish(task, int(index), MeasureResult((), ErrorKind.RUNTIME_ERROR, check, 0.0, time.time()))
            else:
                self._unbuilt.append(_Job(task, int(index), resource, check, ir or b""))

    def wait(self, timeout: float | None = None) -> list[Done]:
        """What finished since the last call: waits until at least one candidate is done (or
        `timeout` seconds pass, or nothing is pending)."""
        limit = None if timeout is None else time.monotonic() + timeout
        while not self._done and self.pending:
            self._pump()
            refs = [*self._building, *self._running, *(r for p in self._pools.values() for r in p.starting)]
            now = time.monotonic()
            deadlines = [j.deadline for j in (*self._building.values(), *self._running.values())]
            until = min([*deadlines, now + 1.0, *([limit] if limit is not None else [])])
            ready, _ = ray.wait(refs, num_returns=1, timeout=max(0.0, until - now)) if refs else ([], [])
            if ready:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            for ref in ready:
                self._receive(ref)
            self._expire()
            if limit is not None and time.monotonic() >= limit:
                break
        done, self._done = self._done, []
        return done

    def measure(self, task: Task, indices: Iterable[int]) -> list[MeasureResult]:
        """One MeasureResult per index, in order (the Measurer interface)."""
        indices = [int(i) for i in indices]
        self.submit(task, indices)
        results: dict[int, MeasureResult] = {}
        while len(results) < len(set(indices)):
            results.update((i, r) for t, i, r in self.wait() if t is task)
        return [results[i] for i in indices]

    def _check_ref(self, task: Task) -> list[Any] | str:
        """The task's check arrays in the object store (made once), or why they cannot be made."""
        key = (task.workload_key, task.target_key)
        if key not in self._checks:
            try:
                arrays = check_arrays(task, self.options.to_json())
            except Exception as exc:  # noqa: BLE001  (a reference that fails fails each candidate, not the tuner)
                return f"making the task's check data: {first_line(exc)}"
            self._checks[key] = [ray.put(arrays)]
            while len(self._checks) > MAX_TASKS_ON_DISK:      # queued jobs keep their own ref alive
                self._checks.popitem(last=False)
        self._checks.move_to_end(key)
        return self._checks[key]

    def _pump(self) -> None:
        """Start builds up to the cluster's CPUs, start actors where work waits, hand out work."""
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1))) if self._unbuilt else 0
        while self._unbuilt and len(self._building) < cpus:
            job = self._unbuilt.popleft()
            job.deadline = time.monotonic() + self.options.build_timeout_s
            self._building[self._build.remote(job.ir, job.task.target_key)] = job
        for resource, queue in self._queued.items():
            pool = self._pools[resource]
            if not queue:
                continue
            pool.expire_starting()
            pool.fill()
            if pool.dead_end:
                self._fail_queue(pool, queue)
            for actor in pool.free():
                while queue and actor.running < DEPTH:
                    self._dispatch(queue.popleft(), actor)

    def _dispatch(self, job: _Job, actor: Actor) -> None:
        """Hand the job to the actor; its clock runs from when the actor's earlier ones are done."""
        actor.running += 1
        job.actor = actor
        job.attempts += 1
        job.deadline = time.monotonic() + actor.running * self.actor_timeout_s
        self._running[actor.handle.run.remote(_check_key(job.task), job.check, job.built, job.index)] = job

    def _fail_queue(self, pool: ActorPool, queue: deque[_Job]) -> None:
        why = pool.last_error or "no live node advertises it"
        while queue:
            job = queue.popleft()
            self._finish(job.task, job.index, self._node_error(job, f"no runner for target resource "
                                                                    f"{pool.resource}: {why}"))

    def _receive(self, ref: Any) -> None:
        if ref in self._building:
            self._built(ref, self._building.pop(ref))
        elif ref in self._running:
            self._ran(ref, self._running.pop(ref))
        else:
            next(p for p in self._pools.values() if ref in p.starting).started(ref)

    def _built(self, ref: Any, job: _Job) -> None:
        try:
            built = ray.get(ref)
        except ray.exceptions.RayError as exc:
            self._finish(job.task, job.index, MeasureResult((), ErrorKind.CRASH, f"build worker died while building "
                                                            f"config {job.index}: {_line(exc)}", 0.0, time.time()))
            return
        if built["error_kind"] != ErrorKind.OK.value:
            self._finish(job.task, job.index, _from_build(BuildResult.from_json(built)))
            return
        job.built, job.ir = built, b""
        self._queued[job.resource].append(job)

    def _ran(self, ref: Any, job: _Job) -> None:
        actor = job.actor
        assert actor is not None
        actor.running -= 1
        for other in self._running.values():    # the actor's next candidate starts now
            if other.actor is actor:
                other.deadline = time.monotonic() + self.actor_timeout_s
        try:
            result = MeasureResult.from_json(ray.get(ref))
        except ray.exceptions.RayError as exc:       # the actor or its node died
            self._retry(job, f"runner actor on node {actor.node} died: {_line(exc)}")
            self._pools[job.resource].drop(actor)
            return
        self.measured_on[actor.node or "?"] += 1
        self._finish(job.task, job.index, result)

    def _expire(self) -> None:
        """Builds and actors past their deadline: a build is cancelled (TIMEOUT); a hung actor is
        killed and replaced, and its candidate queued again."""
        now = time.monotonic()
        for ref, job in [(r, j) for r, j in self._building.items() if now > j.deadline]:
            del self._building[ref]
            ray.cancel(ref, force=True)
            self._finish(job.task, job.index, MeasureResult(
                (), ErrorKind.TIMEOUT, f"build took longer than {self.options.build_timeout_s:g} s (cancelled)",
                self.options.build_timeout_s, time.time()))
        for ref, job in [(r, j) for r, j in self._running.items() if now > j.deadline]:
            del self._running[ref]
            assert job.actor is not None
            self._retry(job, f"runner actor on node {job.actor.node} did not answer in {self.actor_timeout_s:g} s "
                             "(replaced)")
            self._pools[job.resource].drop(job.actor)

    def _retry(self, job: _Job, why: str) -> None:
        if job.attempts < ATTEMPTS:
            self._queued[job.resource].appendleft(job)
        else:
            self._finish(job.task, job.index, self._node_error(job, why))

    def _node_error(self, job: _Job, why: str) -> MeasureResult:
        build_s = float((job.built or {}).get("build_seconds", 0.0))
        return MeasureResult((), ErrorKind.CRASH, f"{NODE_ERROR} after {job.attempts} attempt(s): {why}", build_s,
                             time.time())

    def _finish(self, task: Task, index: int, result: MeasureResult) -> None:
        self._done.append((task, index, result))

    def cancel(self) -> None:
        """Forget every pending candidate (early stop): builds are cancelled, runs finish unread."""
        for ref in self._building:
            ray.cancel(ref, force=True)
        for job in self._running.values():
            if job.actor is not None:
                self._pools[job.resource].drop(job.actor)
        self._unbuilt.clear()
        self._building.clear()
        self._running.clear()
        self._done.clear()
        for queue in self._queued.values():
            queue.clear()

    def close(self) -> None:
        """Stop the actors; disconnect if this measurer connected."""
        if not ray.is_initialized():
            return
        self.cancel()
        for pool in self._pools.values():
            pool.close()
        if self._owns_connection:
            ray.shutdown()

    def __enter__(self) -> ClusterMeasurer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _check_key(task: Task) -> str:
    return f"{task.workload_key}\n{task.target_key}\n{list(task.constant_inputs)}"


def _from_build(failure: BuildResult) -> MeasureResult:
    return MeasureResult((), failure.error_kind, failure.error_msg, failure.build_seconds, time.time())


def _line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1][:200] if text else type(exc).__name__
