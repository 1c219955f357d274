"""The worker's main loop: read a request frame, dispatch it to its handler, write the reply."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ..wire import first_line, read_frame, write_frame

Handler = Callable[[dict[str, Any], bytes, Callable[[dict[str, Any]], None]], tuple[dict[str, Any], bytes]]


def _watch_parent(parent: int) -> None:
    """Exit when the parent is gone, even from inside a hung kernel (the loop itself notices
    only when it next reads the pipe)."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(3)


def _handlers() -> dict[str, Handler]:
    from .build import handle_build
    from .run import handle_run

    return {"build": handle_build, "run": handle_run}


def serve(argv: list[str] | None = None) -> None:
    """Answer requests until told to exit or the parent goes away. argv: read fd, write fd, parent pid."""
    args = sys.argv[1:] if argv is None else argv
    rfd, wfd, parent = int(args[0]), int(args[1]), int(args[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the parent's to handle
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    handlers = _handlers()
    from ...codegen import jit

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
        except Exception as exc:  # noqa: BLE001  (a bug of ours: this candidate fails, the worker lives on)
            reply, out = {"error_kind": failure, "error_msg": f"measurement worker: {first_line(exc)}"}, b""
        write_frame(wfd, reply, out)
