"""What runs on the cluster's nodes: the build task (any node) and the runner actor (one per
device of a measuring node). Both take and return data only: IR bytes, object code, check arrays,
results as JSON."""
from __future__ import annotations

import os
from typing import Any, cast

import ray

from ..measure.check_data import CheckArrays, save_check_arrays
from ..measure.types import BuildResult, ErrorKind, MeasureOptions
from .nodes import node_id


def build(ir: bytes, target_key: str) -> dict[str, Any]:
    """Serialized loop IR -> a BuildResult's JSON (object code inside), compiled on this node
    for the task's target (the key names the triple, CPU and features, so any node can build)."""
    from ..measure.worker.build import handle_build

    reply, obj = handle_build({"target": target_key}, ir, lambda _event: None)
    kind = ErrorKind(reply["error_kind"])
    return BuildResult(-1, reply["signature"], obj if kind is ErrorKind.OK else None, kind, reply["error_msg"],
                       reply["build_seconds"]).to_json()


class RunnerActor:
    """Owns one device of its node: its LocalRunner's single worker process checks and times one
    candidate at a time (a crash or hang there costs that worker, as on one machine). A task's
    check data arrives once as an object ref and is written where that worker reads it."""

    def __init__(self, options: MeasureOptions) -> None:
        from ..measure.runner import LocalRunner

        self.runner = LocalRunner(options)

    def where(self) -> dict[str, Any]:
        """The node and process this actor runs in (answered once it is up)."""
        return {"node": node_id(), "pid": os.getpid()}

    def run(self, check_key: str, check_ref: list[ray.ObjectRef], built: dict[str, Any],
            config_index: int) -> dict[str, Any]:
        """`check_ref` is wrapped in a list so Ray does not fetch the arrays for every candidate:
        only a task this actor has not seen yet reads them."""
        check = self.runner.check_data.fetch(check_key, lambda directory: save_check_arrays(
            cast(CheckArrays, ray.get(check_ref[0])), directory))
        return self.runner.run_built(config_index, BuildResult.from_json(built), check.to_json()).to_json()

    def close(self) -> None:
        self.runner.close()

