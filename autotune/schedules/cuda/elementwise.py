"""Elementwise ops on CUDA: one template per CPU elementwise op, all scheduled by the generic
injective CUDA schedule (`autotune.schedules.cuda.generic.schedule_injective`).

The computes, shape parameters, argument order and numpy references are the CPU module's
(`autotune.schedules.cpu.elementwise`), so a CUDA task and a CPU task of one op are checked
against the same reference.
"""
from __future__ import annotations

from ..cpu.elementwise import register_elementwise
from .generic import injective_schedule

register_elementwise("cuda", injective_schedule)
