"""`autotune worker`: make this machine a measuring node of a Ray cluster.

It checks itself first (a known kernel built, run and checked against numpy here, so a node that
cannot measure never joins), then starts a Ray node joined to the cluster that advertises this
machine's target as a resource with one unit per device (`ray start --resources ... --block`).
Tuners then place their runner actors on it; stopping the command takes the node out.
Tested here up to the join (a bad address, the self-check); the join itself is Ray's `ray start`.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

from ..measure.types import MeasureOptions, MeasureResult
from .nodes import ClusterError, check_reachable, split_address, target_resource


def self_check(target: str) -> tuple[str, MeasureResult]:
    """This machine's target key and the result of measuring a known kernel for it: a matmul
    whose every split has a tail."""
    import autotune

    from ..measure import Measurer

    task = autotune.create_task("matmul", target=target, M=13, N=11, K=7)
    with Measurer(MeasureOptions(repeat=1, min_repeat_ms=1.0, build_workers=1)) as m:
        return task.target_key, m.measure(task, [0])[0]


def gcs_address(address: str) -> str:
    """The cluster's GCS address (what a joining node needs): given as HOST:PORT, or asked of the
    cluster through a Ray Client address (ray://HOST:PORT)."""
    if address == "auto":
        raise ClusterError("a worker joins a cluster by its address: ray://HOST:PORT or HOST:PORT, not auto")
    check_reachable(address)
    if not address.startswith("ray://"):
        split_address(address)
        return address
    import ray

    try:
        ray.init(address=address)
        return str(ray.get_runtime_context().gcs_address)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: {exc}") from exc
    finally:
        ray.shutdown()


def ray_start_command(gcs: str, target_key: str, devices: int, num_cpus: int | None,
                      node_ip: str | None) -> list[str]:
    """`ray start` joining `gcs` as a node that advertises `devices` units of the target."""
    exe = Path(sys.executable).with_name("ray")
    ray = str(exe) if exe.exists() else shutil.which("ray")
    if ray is None:
        raise ClusterError("the `ray` command is not installed; pip install 'autotune[cluster]'")
    cmd = [ray, "start", f"--address={gcs}", f"--resources={json.dumps({target_resource(target_key): devices})}",
           "--block"]
    if num_cpus is not None:
        cmd.append(f"--num-cpus={num_cpus}")
    return cmd if node_ip is None else [*cmd, f"--node-ip-address={node_ip}"]


def serve(command: list[str]) -> NoReturn:
    """Become the node (exec): a signal that stops this command stops the node, with nothing
    left behind."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)
