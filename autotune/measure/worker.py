"""Worker processes: the wire protocol, the parent's handle on a worker, and the serving loop.

Candidates are compiled and run in separate processes so a segfault or a hang costs a worker,
not the tuner. Workers are fresh interpreters (`subprocess`: fork + exec, never a bare fork of
a process holding LLVM or GPU state). Parent and worker speak over two private pipes in frames
of a JSON header plus an optional binary payload (object code): no pickle.

The request handlers themselves (what a worker does with a build or run request) live next to
their parent-side users, in builder.py and runner.py.
"""
from __future__ import annotations

import json
import math
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from typing import Any, Callable

_FRAME = struct.Struct("<IQ")     # header bytes, payload bytes
STARTUP_TIMEOUT_S = 120.0         # a fresh interpreter importing numpy + llvmlite on a busy machine


# -- the wire protocol (both sides) -------------------------------------------------------------
def write_frame(fd: int, header: dict[str, Any], payload: bytes = b"") -> None:
    data = json.dumps(header).encode()
    view = memoryview(_FRAME.pack(len(data), len(payload)) + data + payload)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> tuple[dict[str, Any], bytes]:
    n_header, n_payload = _FRAME.unpack(_read_exact(fd, _FRAME.size))
    header = json.loads(_read_exact(fd, n_header))
    return header, _read_exact(fd, n_payload) if n_payload else b""


# -- the parent's side --------------------------------------------------------------------------
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
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    while fds:
        try:
            os.close(fds.pop())
        except OSError:
            pass


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
        main_file = getattr(sys.modules.get("__main__"), "__file__", None) or ""
        code = "from autotune.measure.worker import serve; serve()"
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code, str(child_r), str(child_w), str(os.getpid()), main_file,
                 json.dumps(sys.path)],
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


# -- the worker's side --------------------------------------------------------------------------
Handler = Callable[[dict[str, Any], bytes, Callable[[dict[str, Any]], None]], tuple[dict[str, Any], bytes]]


def _watch_parent(parent: int) -> None:
    """Exit when the parent is gone, even from inside a hung kernel (the loop itself notices
    only when it next reads the pipe)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(3)


def _handlers() -> dict[str, Handler]:
    from .builder import handle_build
    from .runner import handle_run

    return {"build": handle_build, "run": handle_run}


def serve(argv: list[str] | None = None) -> None:
    """The worker's main loop: answer requests until told to exit or the parent goes away."""
    args = sys.argv[1:] if argv is None else argv
    rfd, wfd, parent = int(args[0]), int(args[1]), int(args[2])
    set_main_file(args[3] if len(args) > 3 else "")
    if len(args) > 4:                 # the parent's import path, as multiprocessing's spawn gives it:
        sys.path[:] = json.loads(args[4])   # modules beside the user's script import here too
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the parent's to handle
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    handlers = _handlers()
    from ..codegen import jit

    jit.host()                                        # LLVM initialized before "ready"
    write_frame(wfd, {"event": "ready", "pid": os.getpid()})
    while True:
        try:
            header, payload = read_frame(rfd)
        except EOFError:
            return
        op = header.get("op")
        if op == "exit":
            return
        failure = "build_error" if op == "build" else "runtime_error"
        try:
            reply, out = handlers[str(op)](header, payload, lambda event: write_frame(wfd, event))
        except Exception as exc:      # a bug of ours: this candidate fails, the worker lives on
            reply, out = {"error_kind": failure, "error_msg": f"measurement worker: {first_line(exc)}"}, b""
        write_frame(wfd, reply, out)


# -- tasks inside a worker ----------------------------------------------------------------------
_MAIN_FILE = ""
_MAIN_LOADED = False
_TASKS: dict[str, Any] = {}
_MAX_TASKS = 64


def set_main_file(path: str) -> None:
    global _MAIN_FILE
    _MAIN_FILE = path


def task_of(d: dict[str, Any]) -> Any:
    """The Task of `d` (a `Task.to_json()`), made once per worker. Templates defined in the
    parent's main script are found by running that script as "__mp_main__" (as multiprocessing
    does), so its tuning code must sit under `if __name__ == "__main__":`."""
    global _MAIN_LOADED
    key = json.dumps(d, sort_keys=True)
    task = _TASKS.get(key)
    if task is None:
        if d.get("module") == "__main__" and _MAIN_FILE and not _MAIN_LOADED:
            import runpy

            _MAIN_LOADED = True
            runpy.run_path(_MAIN_FILE, run_name="__mp_main__")
        from ..schedules.task import task_from_json

        if len(_TASKS) >= _MAX_TASKS:
            _TASKS.pop(next(iter(_TASKS)))
        task = _TASKS[key] = task_from_json(d)
    return task


def first_line(exc: BaseException) -> str:
    """`Type: first line of the message`: enough to recognize an error, short enough to store."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
