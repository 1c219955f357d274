"""The wire protocol between the tuner and its worker processes (both sides import it).

A frame is a JSON header plus an optional binary payload (serialized loop IR to a build worker,
object code from it and to the runner): `<IQ` lengths, header bytes, payload bytes. No pickle:
what crosses the boundary is data a worker can check, never code it would run.
"""
from __future__ import annotations

import json
import os
import struct
from typing import Any

_FRAME = struct.Struct("<IQ")     # header bytes, payload bytes


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


def first_line(exc: BaseException) -> str:
    """`Type: first line of the message`: enough to recognize an error, short enough to store."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
