"""The parent's side of the worker processes: start one, talk to it, notice how it died.

Candidates are compiled and run in separate processes so a segfault or a hang costs a worker,
not the tuner. Workers are fresh interpreters (`subprocess`: fork + exec, never a bare fork of
a process holding LLVM or GPU state) running `autotune.measure.worker.serve`; they are handed
data only (see wire.py), so they never import the user's code or a template.
"""
from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import subprocess
import sys
import time
import weakref
from pathlib import Path
from typing import Any

from .wire import read_frame, write_frame

STARTUP_TIMEOUT_S = 120.0         # a fresh interpreter importing numpy + llvmlite on a busy machine
# where the worker imports autotune from: this very copy of it, whatever the user's sys.path was
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class WorkerDied(Exception):
    """The worker's pipe closed: it crashed, was killed or exited. The message says how."""


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _reap(proc: subprocess.Popen, fds: list[int]) -> None:
    """Kill and wait (no zombie), close our pipe ends. Safe to call twice; runs at exit too."""
    if proc.poll() is None:
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    while fds:
        with contextlib.suppress(OSError):
            os.close(fds.pop())


def wait_readable(handles: list[WorkerHandle], timeout: float | None) -> list[WorkerHandle]:
    """The handles with a frame (or EOF) to read within `timeout` seconds (None: no limit).
    poll, not select: select fails on descriptors above 1023, which a long-lived tuner may hold."""
    if not hasattr(select, "poll"):
        return select.select(handles, [], [], None if timeout is None else max(timeout, 0.0))[0]
    poller = select.poll()
    by_fd = {h.fileno(): h for h in handles}
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
    return [by_fd[fd] for fd, _ in poller.poll(ms)]


class WorkerHandle:
    """One worker process as the parent sees it: started at once, `ready` once it has imported
    everything (startup never counts against a candidate's timeout)."""

    def __init__(self, role: str) -> None:
        child_r, parent_w = os.pipe()
        parent_r, child_w = os.pipe()
        code = (f"import sys; sys.path.insert(0, {_PACKAGE_ROOT!r}); "
                "from autotune.measure.worker.serve import serve; serve()")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code, str(child_r), str(child_w), str(os.getpid())],
                pass_fds=(child_r, child_w), stdin=subprocess.DEVNULL,
                stdout=2)             # our stderr: a worker's prints never mix into the parent's output
        except BaseException:
            os.close(parent_r)
            os.close(parent_w)
            raise
        finally:
            os.close(child_r)
            os.close(child_w)
        self.role = role
        self.started = time.monotonic()
        self.ready = False
        self.jobs = 0                       # requests answered, for recycling
        self._rfd, self._wfd = parent_r, parent_w
        self._fds = [parent_r, parent_w]
        self._reaper = weakref.finalize(self, _reap, self.proc, self._fds)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def fileno(self) -> int:
        return self._rfd

    def readable(self, timeout: float) -> bool:
        return bool(wait_readable([self], timeout))

    def send(self, header: dict[str, Any], payload: bytes = b"") -> None:
        try:
            write_frame(self._wfd, header, payload)
        except OSError as exc:     # BrokenPipeError: it is gone
            raise WorkerDied(self.death()) from exc

    def recv(self) -> tuple[dict[str, Any], bytes]:
        """The next frame; a "ready" frame marks the worker ready and is returned too."""
        try:
            header, payload = read_frame(self._rfd)
        except (EOFError, OSError) as exc:
            raise WorkerDied(self.death()) from exc
        if header.get("event") == "ready":
            self.ready = True
        return header, payload

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        deadline = self.started + timeout
        while not self.ready:
            if not self.readable(deadline - time.monotonic()):
                self.kill()
                raise RuntimeError(f"{self.role} worker {self.pid} did not start within {timeout:.0f} s")
            try:
                self.recv()
            except WorkerDied as exc:
                raise RuntimeError(f"{self.role} worker {self.pid} {exc} while starting; see its stderr") from exc

    def death(self) -> str:
        """How the process ended, e.g. "killed by SIGSEGV" (waits briefly for it to end)."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return "stopped answering (killed)"
        return f"killed by {_signal_name(-code)}" if code < 0 else f"exited with status {code}"

    def kill(self) -> None:
        self._reaper()

    def close(self, timeout: float = 1.0) -> None:
        """Ask it to exit (it is idle between requests), then make sure."""
        if self.proc.poll() is None:
            try:
                write_frame(self._wfd, {"op": "exit"})
                self.proc.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._reaper()

    @property
    def alive(self) -> bool:
        return self._reaper.alive and self.proc.poll() is None
