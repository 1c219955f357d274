"""Measurement fanned out on a Ray cluster (`autotune.tune(task, cluster="ray://head:10001")`).

Builds run as Ray tasks on any node; each measuring node advertises its target as a custom
resource (`nodes.target_resource`) and runs one runner actor per device, so a candidate is timed
only on hardware of its task's target and never beside another candidate. Results stream back as
they finish; a node that dies costs a retry, not the tuning run. Ray is an optional dependency
(the `cluster` extra): nothing here is imported unless a cluster is asked for.
"""
from __future__ import annotations

from .measurer import ClusterMeasurer
from .nodes import ClusterError, connect, target_resource

__all__ = ["ClusterError", "ClusterMeasurer", "connect", "target_resource"]
