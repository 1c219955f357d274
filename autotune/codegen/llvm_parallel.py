"""PARALLEL loops on libgomp: outline the loop, launch it with `GOMP_parallel` on every thread.

The loop becomes two private functions. `body(bufs..., status, vars..., begin, end)` runs
iterations [begin, end) of the loop: its buffers are noalias parameters, the free variables of
the loop body are passed by value. `launcher(closure)` unpacks a struct of those arguments and
calls the body, which is always inlined into it (so the no-alias facts survive), on chunks it
takes from a shared counter in the closure until none is left: about CHUNKS_PER_THREAD chunks
per thread, so a thread slowed by another process does less of the loop instead of making every
other thread wait for it (a static split finishes with its slowest thread). The kernel fills the
closure on its stack and calls `GOMP_parallel(launcher, closure, threads, 0)`.

An allocation failure in a thread stores its error code to `status` (an i32 in the kernel's
frame) and ends that thread's chunk; the kernel checks it once every thread has joined.
Without libgomp the loops run serially, with one warning per process (`warn_serial_once`).
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from llvmlite import ir

from ..ir.functor import walk
from ..ir.nodes import Allocate, For, Let, Load, Store
from ..te.expr import Var
from . import llvm_helpers as h
from .llvm_helpers import I32, PTR, VOID

if TYPE_CHECKING:
    from .llvm import LLVMCodegen

OPENMP_LIBRARY = "libgomp.so.1"
CHUNKS_PER_THREAD = 8
_warned_serial = False


def warn_serial_once() -> None:
    """Running PARALLEL loops serially is a silent slowdown; say so, once per process."""
    global _warned_serial
    if not _warned_serial:
        _warned_serial = True
        warnings.warn(f"{OPENMP_LIBRARY} (the GNU OpenMP runtime) could not be loaded: parallel "
                      "loops run serially on one thread; install libgomp to use every core",
                      RuntimeWarning, stacklevel=3)


def captures(loop: For) -> tuple[list[Var], list]:
    """Free variables and buffers of a parallel loop's body, in first-use order."""
    used_vars: dict[Var, None] = {}
    bound_vars = {loop.var}
    used_bufs: dict = {}
    bound_bufs = set()

    def visit(n):
        if isinstance(n, Var):
            used_vars.setdefault(n)
        elif isinstance(n, (For, Let)):
            bound_vars.add(n.var)
        elif isinstance(n, (Load, Store)):
            used_bufs.setdefault(n.buffer)
        elif isinstance(n, Allocate):
            bound_bufs.add(n.buffer)

    walk(loop.body, visit)
    return ([v for v in used_vars if v not in bound_vars],
            [buf for buf in used_bufs if buf not in bound_bufs])


def emit_parallel_for(cg: LLVMCodegen, loop: For) -> None:
    """Outline `loop` (see the module docstring) and launch it from the current function."""
    vars, bufs = captures(loop)
    values = [cg.var_value(v) for v in vars]
    ptrs = [cg.buffer_ptr(buf) for buf in bufs]
    status = cg.status_slot()
    name = cg.outlined_name()
    types = [PTR] * (len(ptrs) + 1) + [v.type for v in values]
    body = cg.new_function(f"{name}_body", types + [I32, I32], noalias=len(ptrs), internal=True)
    body.attributes.add("alwaysinline")
    args = body.args
    labels = [buf.name for buf in bufs] + ["status"] + [v.name for v in vars] + ["begin", "end"]
    for arg, label in zip(args, labels):
        arg.name = label
    body_scope = cg.emit_function(
        body, dict(zip(vars, args[len(ptrs) + 1:-2])), dict(zip(bufs, args[:len(ptrs)])),
        lambda: cg.serial_loop(loop.var, args[-2], args[-1], loop.body), status=args[len(ptrs)])
    closure_ty = ir.LiteralStructType(types + [I32])     # + the next chunk's first iteration
    launcher = cg.new_function(name, [PTR], internal=True)
    cg.emit_function(launcher, {}, {}, lambda: _launcher_body(cg, launcher, closure_ty, body, loop.extent))
    b = cg.b
    closure = h.alloca_once(b, closure_ty, name=f"{name}.closure")
    b.store(ir.Constant(I32, 0), status)
    for k, v in enumerate(ptrs + [status] + values + [ir.Constant(I32, 0)]):
        b.store(v, b.gep(closure, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True,
                         source_etype=closure_ty))
    gomp = h.declare(cg.module, "GOMP_parallel", VOID, [PTR, PTR, I32, I32])
    threads = b.load(cg.num_threads, typ=I32)          # 0 (never set) lets libgomp choose
    cap = ir.Constant(I32, loop.extent)                # no idle threads for short loops
    threads = b.select(b.icmp_signed(">", threads, cap), cap, threads)
    b.call(gomp, [launcher, closure, threads, ir.Constant(I32, 0)])
    if body_scope.fail is not None:                    # a thread could not allocate
        code = b.load(status, typ=I32)
        cg.fail_if(b.icmp_signed("!=", code, ir.Constant(I32, 0)), code)


def _launcher_body(cg: LLVMCodegen, launcher: ir.Function, closure_ty: ir.LiteralStructType,
                   body: ir.Function, extent: int) -> None:
    b = cg.b
    slots = [b.gep(launcher.args[0], [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True,
                   source_etype=closure_ty) for k in range(len(closure_ty.elements))]
    fields = [b.load(p, typ=ty) for p, ty in zip(slots[:-1], closure_ty.elements[:-1])]
    next_chunk = slots[-1]
    nthreads = b.call(h.declare(cg.module, "omp_get_num_threads", I32, []), [])
    # chunk = max(1, ceil(extent / (threads * CHUNKS_PER_THREAD)))
    parts = b.mul(nthreads, ir.Constant(I32, CHUNKS_PER_THREAD))
    chunk = b.sdiv(b.add(parts, ir.Constant(I32, extent - 1)), parts)
    grab = b.append_basic_block("grab")
    work = b.append_basic_block("work")
    done = b.append_basic_block("done")
    b.branch(grab)
    b.position_at_end(grab)
    begin = b.atomic_rmw("add", next_chunk, chunk, "monotonic")
    b.cbranch(b.icmp_signed("<", begin, ir.Constant(I32, extent)), work, done)
    b.position_at_end(work)
    end = b.add(begin, chunk)
    end = b.select(b.icmp_signed("<", end, ir.Constant(I32, extent)), end, ir.Constant(I32, extent))
    b.call(body, fields + [begin, end])
    b.branch(grab)
    b.position_at_end(done)
