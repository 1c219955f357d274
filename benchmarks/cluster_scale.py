"""Scheduling throughput of measurement on Ray (issue 16, section 3), on this machine.

The real ClusterMeasurer (lowering in the tuner, Ray build tasks, the target's queue, runner
actors, ray.wait) drives 1, 2, 4 and 8 runner actors whose measurement is a fixed sleep and whose
build returns at once, so what is left is the cost of scheduling. Reported per actor count:
candidates per second against the ideal (actors / sleep), and with a zero sleep the ceiling of the
scheduling loop itself. Then the tuner's side: how many candidates per second the xgb tuner
proposes (next_batch + update) for a real task, to compare with what 100 machines would consume.

    PYTHONPATH=. python benchmarks/cluster_scale.py [--sleep-ms 50] [--per-actor 30]
"""
from __future__ import annotations

import argparse
import os
import time
from collections import deque

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")     # Ray on the loopback address only

import ray

import autotune
from autotune.cluster import ClusterMeasurer, target_resource
from autotune.cluster.actors import DEPTH
from autotune.measure import MeasureOptions
from autotune.measure.builder import lowered_ir
from autotune.measure.types import BuildResult, ErrorKind, MeasureInput, MeasureResult
from autotune.search.tune import make_tuner
from autotune.testing import legal_configs

TASK = ("matmul", {"M": 64, "N": 64, "K": 64})


def fake_build(ir: bytes, target_key: str) -> dict:
    """A build that returns at once: object code is not what is measured here."""
    return BuildResult(-1, {}, b"", ErrorKind.OK, "", 0.0).to_json()


class FakeRunner:
    """A runner actor whose measurement is a sleep of a fixed duration."""

    sleep_s = 0.05

    def __init__(self, options: MeasureOptions) -> None:
        self.options = options

    def where(self) -> dict:
        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    def run(self, check_key: str, check_ref: list, built: dict, config_index: int) -> dict:
        time.sleep(self.sleep_s)
        return MeasureResult((self.sleep_s,), ErrorKind.OK, "", 0.0, time.time()).to_json()


def throughput(actors: int, sleep_s: float, per_actor: int) -> float:
    """Candidates per second through `actors` fake runners, in the tuner's pipelined pattern
    (as many candidates in flight per actor as stream_loop keeps)."""
    task = autotune.create_task(TASK[0], **TASK[1])
    ray.init(num_cpus=2, resources={target_resource(task.target_key): actors}, object_store_memory=80 * 2**20,
             include_dashboard=False, log_to_driver=False)
    runner = type("Runner", (FakeRunner,), {"sleep_s": sleep_s})
    try:
        with ClusterMeasurer("auto", MeasureOptions(build_workers=1), runner=runner, builder=fake_build) as m:
            legal = legal_configs(task, 7)                      # cycled: lowering is cached after the warm-up
            m.measure(task, legal[:actors])                   # actors started, outside the clock
            queue = deque(legal[i % len(legal)] for i in range(actors * per_actor))
            total, finished = len(queue), 0
            t0 = time.perf_counter()
            while finished < total:
                n = min(len(queue), (DEPTH + 1) * actors - m.pending)
                if n > 0:
                    m.submit(task, [queue.popleft() for _ in range(n)])
                finished += len(m.wait())
            return total / (time.perf_counter() - t0)
    finally:
        ray.shutdown()


def tuner_rates(batch: int = 16, rounds: int = 6) -> tuple[float, float]:
    """Candidates per second the xgb tuner proposes and learns from (fake costs, no measuring),
    and candidates per second the tuner lowers (fresh configs, as submit does)."""
    task = autotune.create_task(TASK[0], **TASK[1])
    tuner = make_tuner("xgb", task, seed=0)
    proposed: list[int] = []
    t0 = time.perf_counter()
    for _ in range(rounds):
        idx = tuner.next_batch(batch)
        tuner.update(idx, [MeasureResult((1e-3 * (1 + i % 7),), ErrorKind.OK, "", 0.0, 0.0) for i in idx])
        proposed += idx
    propose_s = time.perf_counter() - t0
    fresh = autotune.create_task(TASK[0], **TASK[1])      # nothing lowered yet
    t0 = time.perf_counter()
    for i in proposed:
        lowered_ir(MeasureInput(fresh, i))
    return len(proposed) / propose_s, len(proposed) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sleep-ms", type=float, default=50.0)
    ap.add_argument("--per-actor", type=int, default=30)
    args = ap.parse_args()
    sleep_s = args.sleep_ms / 1e3
    print(f"fake measurement {args.sleep_ms:g} ms, {args.per_actor} candidates per actor, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"{'actors':>6} {'cand/s':>8} {'ideal':>8} {'ratio':>6}  {'no-sleep cand/s':>15}")
    for actors in (1, 2, 4, 8):
        got = throughput(actors, sleep_s, args.per_actor)
        ceiling = throughput(actors, 0.0, args.per_actor)
        ideal = actors / sleep_s
        print(f"{actors:>6} {got:>8.1f} {ideal:>8.1f} {got / ideal:>6.2f}  {ceiling:>15.1f}", flush=True)
    propose, lower = tuner_rates()
    print(f"tuner side, {TASK[0]} {TASK[1]}: xgb proposes {propose:.1f} candidates/s (next_batch + update, "
          f"batches of 16); lowering {lower:.1f} candidates/s")


if __name__ == "__main__":
    main()
