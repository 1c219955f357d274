"""The runner: checks and times built candidates in one persistent, isolated worker process.

`LocalRunner` makes each task's check data once (`check_data`: inputs and expected outputs, in
files) and feeds the worker candidates one at a time: object code, its signature and where the
check data is. The worker (`worker/run.py`) loads, checks and times; one that segfaults (CRASH)
or outlives `run_timeout_s` (TIMEOUT, killed) is replaced and the batch carries on. The parent
never loads candidate code.
"""
from __future__ import annotations

import time
from typing import Any

from .check_data import CheckDataStore
from .pool import WorkerDied, WorkerHandle
from .types import BuildResult, ErrorKind, MeasureInput, MeasureOptions, MeasureResult
from .wire import first_line

PREPARE_TIMEOUT_S = 300.0   # reading a task's check data in the worker (not the candidate's time)


class LocalRunner:
    """`run(inputs, build_results)` -> one MeasureResult per input, in order, measured one at a
    time in a single worker process that persists across calls."""

    def __init__(self, options: MeasureOptions | None = None) -> None:
        self.options = options or MeasureOptions()
        self._worker = WorkerHandle("run")      # imports while the first batch builds
        self.check_data = CheckDataStore()
        self._closed = False

    @property
    def pid(self) -> int:
        return self._worker.pid

    def prepare(self, inputs: list[MeasureInput]) -> None:
        """Make the check data of the inputs' tasks now, not just before their first timing:
        numpy's reference leaves its BLAS threads spinning for about 0.1 s, and a candidate
        timed then ran its first timings 2-3x slow (the default config, measured first, lost to
        configs no faster). A task whose reference fails is left to `run`, which reports it."""
        for inp in {id(inp.task): inp for inp in inputs}.values():
            try:
                self.check_data.get(inp.task, self.options.to_json())
            except Exception:  # noqa: BLE001  (run() fails each of the task's candidates with it)
                continue

    def run(self, inputs: list[MeasureInput], build_results: list[BuildResult]) -> list[MeasureResult]:
        if self._closed:
            raise RuntimeError("LocalRunner.run: the runner is closed")
        if len(inputs) != len(build_results):
            raise ValueError(f"LocalRunner.run: {len(inputs)} inputs but {len(build_results)} build results")
        out = []
        for inp, built in zip(inputs, build_results):
            if not built.ok:
                out.append(MeasureResult((), built.error_kind, built.error_msg, built.build_seconds, time.time()))
                continue
            try:
                check = self.check_data.get(inp.task, self.options.to_json())
            except Exception as exc:  # noqa: BLE001  (a reference that fails fails each candidate, not the tuner)
                out.append(MeasureResult((), ErrorKind.RUNTIME_ERROR, f"making the task's check data: "
                                         f"{first_line(exc)}", built.build_seconds, time.time()))
                continue
            try:
                out.append(self.run_built(inp.config_index, built, check.to_json()))
            except BaseException:     # Ctrl-C: its answer would land in the next candidate's place
                self._replace()
                raise
        return out

    def run_built(self, config_index: int, built: BuildResult, check: dict[str, Any]) -> MeasureResult:
        """Check and time one built candidate against check data already on this machine
        (`CheckData.to_json()`): the step a cluster's runner actor shares with `run`."""
        from ..codegen.module import num_threads

        def failed(kind: ErrorKind, msg: str) -> MeasureResult:
            return MeasureResult((), kind, msg, built.build_seconds, time.time())

        if not self._worker.alive:    # died while idle (killed from outside): not this candidate's fault
            self._replace()
        worker = self._worker
        worker.wait_ready()
        request = {"op": "run", "check": check, "signature": built.signature,
                   "options": self.options.to_json(), "num_threads": num_threads()}
        limit = self.options.run_timeout_s
        deadline = time.monotonic() + limit
        try:
            worker.send(request, built.obj or b"")
            while True:
                if not worker.readable(deadline - time.monotonic()):
                    self._replace()
                    return failed(ErrorKind.TIMEOUT, f"config {config_index} ran longer than {limit:g} s "
                                  "(runner worker killed)")
                header, _ = worker.recv()
                event = header.get("event")
                if event is None:
                    break
                # the task's data is read once, on its own clock
                deadline = time.monotonic() + (PREPARE_TIMEOUT_S if event == "preparing" else limit)
        except WorkerDied as exc:
            self._replace()
            return failed(ErrorKind.CRASH, f"runner worker {exc} while running config {config_index}")
        if header.get("restart"):     # a GPU fault leaves the worker's CUDA context unusable
            self._replace()
        return MeasureResult(tuple(header.get("costs", ())), ErrorKind(header["error_kind"]),
                             header.get("error_msg", ""), built.build_seconds, time.time(),
                             float(header.get("run_seconds", 0.0)))

    def _replace(self) -> None:
        self._worker.kill()
        self._worker = WorkerHandle("run")

    def close(self) -> None:
        """Stop the worker (idempotent)."""
        self._closed = True
        self._worker.close()
        self.check_data.close()

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
