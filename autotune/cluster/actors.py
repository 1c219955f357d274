"""The runner actors of one target: as many as the cluster's live nodes have devices of it.

Ray places each actor (one unit of the target's resource) on a node of that target. An actor that
died or hung is dropped and a new one is started wherever a unit is free, so a node that comes
back, or another node of the target, picks up the work. Startup never counts against a candidate.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import ray

from ..measure.pool import STARTUP_TIMEOUT_S
from .nodes import devices

MAX_STARTUP_FAILURES = 3     # actors of a target that died while starting, before its work fails
RECOUNT_S = 1.0              # how often the live devices are counted again while work waits
DEPTH = 2                    # candidates handed to an actor at once: the next one is there when one ends
CLOSE_TIMEOUT_S = 5.0        # how long closing waits for actors to remove their check data before killing them


@dataclass(eq=False)
class Actor:
    """One runner actor: its handle, and once it has answered, where it runs. It runs the
    candidates it is handed one at a time, in order; `running` counts those not yet answered."""

    handle: Any
    started: float = field(default_factory=time.monotonic)
    node: str | None = None
    pid: int | None = None
    running: int = 0

    @property
    def ready(self) -> bool:
        return self.node is not None


class ActorPool:
    """The actors of one target resource."""

    def __init__(self, resource: str, actor_class: Any, options: Any) -> None:
        self.resource = resource
        self._class = actor_class
        self._options = options
        self.actors: list[Actor] = []
        self.starting: dict[Any, Actor] = {}      # `where` ref -> the actor it answers for
        self.failures = 0
        self.last_error = ""
        self._counted = -RECOUNT_S

    def fill(self) -> None:
        """Start actors until every live device of the target has one (counted at most once a second)."""
        now = time.monotonic()
        if now - self._counted < RECOUNT_S or self.failures >= MAX_STARTUP_FAILURES:
            return
        self._counted = now
        for _ in range(devices(self.resource) - len(self.actors)):
            handle = self._class.options(resources={self.resource: 1}, num_cpus=0, max_restarts=0,
                                         max_concurrency=1).remote(self._options)
            actor = Actor(handle)
            self.actors.append(actor)
            self.starting[handle.where.remote()] = actor

    def started(self, ref: Any) -> None:
        """The actor answered `where` (or died trying)."""
        actor = self.starting.pop(ref)
        try:
            info = ray.get(ref)
        except ray.exceptions.RayError as exc:
            self.failures += 1
            self.last_error = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.drop(actor)
            return
        self.failures = 0
        actor.node, actor.pid = info["node"], info["pid"]

    def expire_starting(self) -> None:
        """Drop actors that Ray could not place or start in time (their node left meanwhile)."""
        now = time.monotonic()
        for ref, actor in list(self.starting.items()):
            if now > actor.started + STARTUP_TIMEOUT_S:
                del self.starting[ref]
                self.drop(actor)

    def free(self) -> list[Actor]:
        """Ready actors that can take a candidate, the idle ones first."""
        return sorted((a for a in self.actors if a.ready and a.running < DEPTH), key=lambda a: a.running)

    @property
    def dead_end(self) -> bool:
        """No actor and no hope of one: work for this target would wait forever."""
        if self.actors:
            return False
        return self.failures >= MAX_STARTUP_FAILURES or devices(self.resource) == 0

    def drop(self, actor: Actor) -> None:
        """Forget the actor and kill it (its runner worker exits with it); its device's unit frees."""
        if actor in self.actors:
            self.actors.remove(actor)
        ray.kill(actor.handle, no_restart=True)
        self._counted = -RECOUNT_S

    def close(self) -> None:
        """Let the ready actors close their runners (which removes their check data), then kill all."""
        closing = [a.handle.close.remote() for a in self.actors if a.ready]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=CLOSE_TIMEOUT_S)
        for actor in list(self.actors):
            self.drop(actor)
        self.starting.clear()
