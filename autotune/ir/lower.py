"""Lowering: schedule -> loop-nest IR. This file is the compiler's table of contents.

Set AUTOTUNE_DEBUG=1 to print the IR after every step.
"""
from __future__ import annotations

import os
from collections.abc import Sequence

from ..schedules.schedule import Schedule
from ..te.tensor import Tensor
from .infer_bound import BoundInference
from .nodes import PrimFunc, Stmt
from .passes.partition import partition_loops
from .passes.register_tiles import unmask_register_tiles
from .passes.simplify import simplify
from .passes.unroll import unroll_loops
from .passes.unswitch import unswitch_selects
from .passes.vectorize import vectorize_loops
from .passes.verify import verify
from .schedule_ops import NestBuilder, needed_stages, param_buffers


def _after(step: str, body: Stmt) -> Stmt:
    if os.environ.get("AUTOTUNE_DEBUG") == "1":
        print(f"# ---- after {step}\n{body}\n")
    return body


def lower(s: Schedule, args: Sequence[Tensor], name: str = "main", given: Sequence[Tensor] = ()) -> PrimFunc:
    """Lower a schedule to a PrimFunc whose parameters are `args`' buffers, in order.

    `given` stages (compute stages at root, each also in `args`) are inputs computed elsewhere
    (a weight transform done once, `autotune.ir.hoist`): their buffers are read, never written,
    and neither they nor what only they read is computed here."""
    if not isinstance(s, Schedule):
        raise TypeError(f"lower expects a Schedule (te.create_schedule), got {type(s).__name__}")
    needed = needed_stages(s, given)                                 # what this function computes
    params, order, outputs = param_buffers(s, list(args), given, needed)   # argument buffers, checked
    bounds = BoundInference(s)                                       # regions for compute_at, extents
    body = _after("build", NestBuilder(s, bounds, params, needed).build())  # loops, guards, flat accesses
    body = _after("simplify", simplify(body))                       # fold index math, drop proven guards
    body = _after("partition", partition_loops(body))               # main ranges without tail guards
    body = _after("unswitch", unswitch_selects(body))               # selects a loop body cannot change, hoisted
    body = _after("vectorize", vectorize_loops(body))               # vector loops -> Ramp/Broadcast lanes
    body = _after("unroll", unroll_loops(body))                     # unrolled loops -> body copies
    body = _after("simplify", simplify(body))                       # fold what unrolling exposed
    body = _after("register tiles", unmask_register_tiles(body))    # tails' local tiles unmasked
    return verify(PrimFunc(name, tuple(order), body, {"outputs": outputs}))  # invariants of the loop IR
