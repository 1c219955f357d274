"""What the LLVM codegen tells LLVM's own loop passes: which loops its vectorizer leaves alone
(periodic addresses it misreads) and which its unroller leaves alone (register tiles it would
spill). Each is a walk of the lowered IR; the codegen attaches the answer as `!llvm.loop`
metadata (`llvm_helpers.for_range`)."""
from __future__ import annotations

from typing import cast

from llvmlite import ir

from ..ir.functor import walk
from ..ir.nodes import Evaluate, Load, Prefetch, Seq, Stmt, Store
from ..te.expr import Binary, BinOp, Const, Var
from .llvm_helpers import reads_itself

FLATTENED_UPDATES = 64          # vector updates of a loop that LLVM's O3 flattens (~4 instructions each)


def periodic_vars(body: Stmt) -> set[Var]:
    """The variables of `body` that address memory modulo or divided by a power of two.

    LLVM 22's loop vectorizer takes such a periodic access, as B[4*jo + f % 4] in loop f, for a
    consecutive one and loads the wrong elements (a minimal case is in tests/codegen/test_llvm.py):
    loops over these variables are kept away from it. autotune's own vectorize is unaffected.
    Read once per function: the walk per loop cost a fifth of a conv kernel's codegen.
    """
    found: set[Var] = set()

    def periodic(n: object) -> None:
        if (isinstance(n, Binary) and n.op in (BinOp.FLOORMOD, BinOp.FLOORDIV) and isinstance(n.b, Const)
                and (c := cast(int, n.b.value)) > 1 and c & (c - 1) == 0):
            walk(n.a, lambda x: found.add(x) if type(x) is Var else None)

    def visit(n: object) -> None:
        if isinstance(n, (Load, Store)):
            walk(n.index, periodic)

    walk(body, visit)
    return found


def tile_updates(body: Stmt) -> int:
    """The vectors that straight-line `body` updates in place (each store reads the element it
    writes): a register tile's accumulators, when `body` is the step of its reduction loop. 0 when
    `body` holds a loop or a branch."""
    updates = 0
    for stmt in body.stmts if isinstance(body, Seq) else (body,):
        if isinstance(stmt, Store):
            updates += int(stmt.index.lanes > 1 and reads_itself(stmt))
        elif not isinstance(stmt, (Prefetch, Evaluate)):
            return 0
    return updates


def llvm_may_unroll(start: ir.Value | int, stop: ir.Value | int, body: Stmt, vector_registers: int) -> bool:
    """False for the reduction loop of a register tile of at least half the vector registers
    in accumulators, unless LLVM flattens it (at most FLATTENED_UPDATES vector updates in all:
    a row of 3 taps, whose copies then share the input columns they read). LLVM unrolls a
    longer one partially (2 copies, 7 steps as 3 x 2 and a remainder), and its scheduler
    hoists the second copy's loads above the first's multiply-adds: with 16 registers a 9-
    or 11-accumulator tile spilled, each update passing through the stack (Zen 3, default
    configs: 289 -> 375 at 9x9, 32 steps of 9 columns, 78 -> 118-120 GFLOP/s; a 7 -> 37
    stem at 109x109, 7 taps of 11 columns, 90 -> 137)."""
    updates = tile_updates(body)
    steps = stop - start if isinstance(start, int) and isinstance(stop, int) else None
    flattened = steps is not None and steps * updates <= FLATTENED_UPDATES
    return flattened or updates < vector_registers // 2
