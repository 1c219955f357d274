"""The cluster as the tuner sees it: how to reach it, and which nodes measure for which target.

A measuring node advertises `target_resource(key)` with one unit per device (`autotune worker`
does this, or `ray start --resources`). A runner actor asks for one unit, so Ray itself places
it only on a node of the task's target, and never two actors on one device, even for two tuners
sharing the cluster.
"""
from __future__ import annotations

import hashlib
import logging
import socket
from typing import Any

import ray

RESOURCE_PREFIX = "autotune_target_"
NAMESPACE = "autotune"
REACH_TIMEOUT_S = 5.0


class ClusterError(ValueError):
    """The cluster address is wrong or unreachable, or no node measures a task's target (a user
    error: the command line prints it as one line and exits 2)."""


def target_resource(target_key: str) -> str:
    """The custom resource a node of this target advertises (a hash: target keys are long and
    hold characters resource names should not)."""
    return RESOURCE_PREFIX + hashlib.sha256(target_key.encode()).hexdigest()[:16]


def split_address(address: str) -> tuple[str, int] | None:
    """(host, port) of `ray://host:port` or `host:port`; None for "auto" (Ray finds it)."""
    if address == "auto":
        return None
    rest = address.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ClusterError(f"bad cluster address {address!r}; expected ray://HOST:PORT, HOST:PORT or auto")
    return host.strip("[]"), int(port)


def check_reachable(address: str) -> None:
    """Fail in seconds with one line where Ray would retry for a minute."""
    hostport = split_address(address)
    if hostport is None:
        return
    try:
        socket.create_connection(hostport, timeout=REACH_TIMEOUT_S).close()
    except OSError as exc:
        raise ClusterError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from exc


def connect(address: str) -> None:
    """Join the cluster as a driver (a no-op when this process is already connected)."""
    if ray.is_initialized():
        return
    check_reachable(address)
    try:
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(f"cannot connect to the Ray cluster at {address}: {exc}") from exc


def devices(resource: str) -> int:
    """Devices of this target on the cluster's live nodes."""
    return int(ray.cluster_resources().get(resource, 0))


def node_id() -> str:
    """The node this process runs on (for the record of where a candidate was measured)."""
    context: Any = ray.get_runtime_context()
    return str(context.get_node_id())
