"""A build request inside a worker: serialized loop IR -> signature + object code (or cubin).
A hoisted kernel arrives as a bundle with its prologue and leaves as one: both compiled, the
prologue's signature and the input map under the kernel signature's "hoisted"."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..types import ErrorKind
from ..wire import first_line, pack_bundle, unpack_bundle


def build_reply(kind: ErrorKind, msg: str, seconds: float, signature: dict | None = None) -> dict[str, Any]:
    return {"error_kind": kind.value, "error_msg": msg, "signature": signature, "build_seconds": seconds}


def handle_build(req: dict[str, Any], payload: bytes,
                 _event: Callable[[dict[str, Any]], None]) -> tuple[dict[str, Any], bytes]:
    """`{"target": record key}` + the IR's bytes (autotune.ir.serialize) -> signature + object code."""
    from ...codegen import compile_for
    from ...ir.passes.verify import verify
    from ...ir.serialize import loads
    from ...target import Target

    t0 = time.perf_counter()
    try:
        target = Target.from_key(req["target"])
        bundle = unpack_bundle(payload)
        if bundle is None:
            # verify: the reader checks structure only; the loop IR's invariants are checked again here
            signature, obj = compile_for(verify(loads(payload)), target)
        else:                  # a kernel and its weight-transform prologue (builder.candidate_ir)
            meta, (kernel_ir, prologue_ir) = bundle
            signature, kernel = compile_for(verify(loads(kernel_ir)), target)
            prologue_sig, prologue = compile_for(verify(loads(prologue_ir)), target)
            signature["hoisted"] = {**meta, "prologue": prologue_sig}
            obj = pack_bundle({}, [kernel, prologue])
    except Exception as exc:  # noqa: BLE001  (a build failure of any kind fails this candidate, not the worker)
        return build_reply(ErrorKind.BUILD_ERROR, first_line(exc), time.perf_counter() - t0), b""
    return build_reply(ErrorKind.OK, "", time.perf_counter() - t0, signature), obj
