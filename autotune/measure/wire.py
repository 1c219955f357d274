"""The wire protocol between the tuner and its worker processes (both sides import it).

A frame is a JSON header plus an optional binary payload (serialized loop IR to a build worker,
object code from it and to the runner): `<IQ` lengths, header bytes, payload bytes. No pickle:
what crosses the boundary is data a worker can check, never code it would run.
"""
from __future__ import annotations

import json
import os
import struct
from collections.abc import Sequence
from typing import Any

_FRAME = struct.Struct("<IQ")     # header bytes, payload bytes
_BUNDLE = b"autotune.bundle\n"    # never the start of serialized loop IR (a JSON object) or of an object file
_BUNDLE_HEAD = struct.Struct("<I")


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


def pack_bundle(meta: dict[str, Any], parts: Sequence[bytes]) -> bytes:
    """Several payloads as one, with a JSON header: a kernel split from its weight transforms
    travels as the IR (then the object code) of the kernel and of its prologue."""
    head = json.dumps({**meta, "sizes": [len(p) for p in parts]}).encode()
    return _BUNDLE + _BUNDLE_HEAD.pack(len(head)) + head + b"".join(parts)


def unpack_bundle(payload: bytes) -> tuple[dict[str, Any], list[bytes]] | None:
    """`pack_bundle`'s header and parts, or None when `payload` is not a bundle; ValueError when
    it is one that does not add up."""
    if not payload.startswith(_BUNDLE):
        return None
    start = len(_BUNDLE) + _BUNDLE_HEAD.size
    (n_head,) = _BUNDLE_HEAD.unpack_from(payload, len(_BUNDLE))
    meta = json.loads(payload[start:start + n_head])
    sizes = meta.pop("sizes", None) if isinstance(meta, dict) else None
    if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes) \
            or start + n_head + sum(sizes) != len(payload):
        raise ValueError("a bundle whose header does not match its length")
    parts, at = [], start + n_head
    for n in sizes:
        parts.append(payload[at:at + n])
        at += n
    return meta, parts


def first_line(exc: BaseException) -> str:
    """`Type: first line of the message`: enough to recognize an error, short enough to store."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
