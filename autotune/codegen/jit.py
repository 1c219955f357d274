"""Compiling LLVM IR for the host: target machine, O3 (new pass manager), MCJIT; and what LLVM
says the host CPU is (`host_cpu`, from which `autotune.target` makes the host's key).

Only compilation lives here; what the IR says is `llvm.py`'s business and how it is called is
`module.py`'s.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from dataclasses import dataclass

import llvmlite.binding as llvm

from ..errors import BuildError
from .elf_symbols import undefined_symbols


@dataclass(frozen=True)
class _Host:
    machine: llvm.TargetMachine   # for the optimizer and assembly text; never given to an engine
    triple: str
    cpu: str
    flat_features: str
    openmp: bool        # libgomp loaded: PARALLEL loops can be launched with GOMP_parallel
    libmvec: bool       # glibc's vector math library loaded (`llvm_vecmath`)

    def new_machine(self) -> llvm.TargetMachine:
        """A target machine for the host: opt level 3, host CPU and all its features."""
        return llvm.Target.from_triple(self.triple).create_target_machine(
            cpu=self.cpu, features=self.flat_features, opt=3, codemodel="jitdefault", jit=True)


@dataclass(frozen=True)
class HostCPU:
    """What LLVM reports of this CPU: the JIT's target machine and the record key are made from it."""

    name: str                   # LLVM's name of this CPU ("skylake-avx512")
    flat_features: str          # "+avx2,-avx512f,...", what a target machine is created with
    features: dict[str, bool]   # feature -> enabled


@functools.cache
def host_cpu() -> HostCPU:
    """This CPU as LLVM sees it. Asking needs no initialised target, so a record key can be
    made without starting the JIT (nor loading libgomp)."""
    try:
        features = llvm.get_host_cpu_features()
        flat, enabled = features.flatten(), {k: bool(v) for k, v in features.items()}
    except RuntimeError:   # some hosts cannot report features: the CPU name alone decides
        flat, enabled = "", {}
    return HostCPU(llvm.get_host_cpu_name(), flat, enabled)


def scales_vectors() -> bool:
    """Whether this CPU multiplies a vector by powers of two in one instruction, with IEEE
    overflow and subnormals (AVX-512's scalef): `codegen.llvm_math`'s exp then uses it."""
    return bool(host_cpu().features.get("avx512f"))


def permutes_vectors() -> bool:
    """Whether this CPU picks each lane of a 16-lane vector by an index vector in one instruction
    (AVX-512's vpermps): `codegen.llvm` then reads a window of rising indices that way."""
    return bool(host_cpu().features.get("avx512f"))


def masked_vectors() -> bool:
    """Whether this CPU masks vector loads and stores at no cost (AVX-512's mask registers, at
    every width): `codegen.llvm` then makes a tail of an odd lane count one masked access."""
    features = host_cpu().features
    return bool(features.get("avx512f") and features.get("avx512vl"))


@functools.cache
def host() -> _Host:
    """The host description, made once (initializes LLVM's native target, keeps the C heap's large
    blocks mapped and loads libgomp and libmvec)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    cpu, triple = host_cpu(), llvm.get_process_triple()
    machine = llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu.name, features=cpu.flat_features, opt=3, codemodel="jitdefault", jit=True)
    _keep_heap_mapped()
    return _Host(machine, triple, cpu.name, cpu.flat_features, _load_openmp(), _load_library("libmvec.so.1"))


def vector_libm() -> tuple[str, int] | None:
    """(ISA letter, float lanes) of the libmvec functions this CPU runs, or None: "e" and 16 with
    AVX-512, "d" and 8 with AVX2 (the x86 vector function ABI's names)."""
    features = host_cpu().features
    if not host().libmvec:
        return None
    return ("e", 16) if features.get("avx512f") else ("d", 8) if features.get("avx2") else None


def _load_library(name: str) -> bool:
    try:
        llvm.load_library_permanently(name)
        return True
    except RuntimeError:
        return False


# libgomp's wait before a thread sleeps, in spin iterations, unless the user set OMP_WAIT_POLICY
# or GOMP_SPINCOUNT. Its default (300000, milliseconds of `pause`) is made for a machine of its
# own: when another process holds a core, every join waits on a descheduled thread while the
# other one spins out its time slice. ResNet-18 with one core taken by another process (2 cores,
# 2 threads): 386 ms a run at the default, 34 at 10000, 25 at 3000, 23 at 1000, 20 passive;
# onnxruntime 40. Idle, a spin still has to cover the gap between two kernels of a model: 3000
# and 10000 ran as fast as the default (12.0 ms), 1000 was 5% slower.
GOMP_SPINCOUNT = "3000"


# glibc maps an allocation over its mmap threshold (128 KiB at first) afresh and unmaps it on free,
# and trims the heap's free top back to the OS past 128 KiB: a kernel whose local buffers go to
# the heap (over llvm.HEAP_THRESHOLD) then page-faults through them on every call. The threshold
# rises by itself only once such a block has been freed, so the same kernel ran fast or slow by
# what the process had done before: Winograd 64 -> 64 at 56x56 (two 2.4 MB buffers) 0.37x or
# 2.2x onnxruntime. Both thresholds are set once, the mmap one to glibc's largest, unless the
# user set them (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3          # mallopt's parameter numbers (malloc.h)
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20


def _keep_heap_mapped() -> None:
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)      # glibc's; absent elsewhere
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def _load_openmp() -> bool:
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", GOMP_SPINCOUNT)   # read once, when libgomp loads
    return any(_load_library(name) for name in (ctypes.util.find_library("gomp"), "libgomp.so.1") if name)


def triple_and_layout() -> tuple[str, str]:
    """What the emitted module should declare, so the optimizer sees the real target."""
    tm = host().machine
    return tm.triple, str(tm.target_data)


def has_openmp() -> bool:
    return host().openmp


@dataclass
class Compiled:
    """A finalized MCJIT engine (owns the machine code) and the optimized module's IR text
    ("" when the engine was loaded from object code)."""

    engine: llvm.ExecutionEngine
    address: int
    optimized_ir: str

    def global_address(self, name: str) -> int:
        return self.engine.get_global_value_address(name)


def optimize(module: llvm.ModuleRef) -> None:
    """O3 through the new pass manager, with loop and SLP vectorization on."""
    tm = host().machine
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    options.loop_vectorization = True
    options.slp_vectorization = True
    builder = llvm.create_pass_builder(tm, options)
    builder.getModulePassManager().run(module, builder)


def _parse_optimized(ir_text: str, entry: str) -> llvm.ModuleRef:
    """parse -> verify -> O3; BuildError when LLVM rejects the IR."""
    host()
    try:
        module = llvm.parse_assembly(ir_text)
        module.verify()
    except RuntimeError as exc:
        raise BuildError(f"llvm rejected the generated IR for {entry}: {exc}") from exc
    optimize(module)
    return module


def _engine(module: llvm.ModuleRef) -> llvm.ExecutionEngine:
    # an MCJIT engine owns (and frees) its target machine, so each gets its own
    return llvm.create_mcjit_compiler(module, host().new_machine())


def _entry_address(engine: llvm.ExecutionEngine, entry: str) -> int:
    engine.finalize_object()
    address = engine.get_function_address(entry)
    if not address:
        raise BuildError(f"function {entry} not found after compilation")
    return address


def compile_ir(ir_text: str, entry: str) -> Compiled:
    """parse -> verify -> O3 -> MCJIT -> finalize; the address of function `entry`."""
    module = _parse_optimized(ir_text, entry)
    optimized = str(module)
    engine = _engine(module)
    objects: list[bytes] = []
    engine.set_object_cache(lambda _module, obj: objects.append(bytes(obj)))
    address = _entry_address(engine, entry)
    for obj in objects:
        check_resolvable(obj, entry)
    return Compiled(engine, address, optimized)


@functools.cache
def _process() -> ctypes.CDLL:
    """The process's own symbols (dlopen(NULL)): the names MCJIT also finds, libm's among them,
    which LLVM's own search lacks."""
    return ctypes.CDLL(None)


def check_resolvable(obj: bytes, entry: str) -> None:
    """A BuildError naming each function `obj` calls that no loaded library provides (LLVM lowers
    some operations to runtime-library calls: the kernel would crash on reaching one)."""
    missing = [name for name in undefined_symbols(obj) or ()
               if not llvm.address_of_symbol(name) and not hasattr(_process(), name)]
    if missing:
        raise BuildError(f"{entry} calls {', '.join(missing)}, which no library loaded in this process provides "
                         "(LLVM lowered an operation to a runtime-library call)")


def emit_object(ir_text: str, entry: str = "module") -> bytes:
    """parse -> verify -> O3 -> relocatable object code for the host (what MCJIT would run).

    The bytes stand alone: `load_object` in another process (or after a restart, from a disk
    cache) needs nothing else. They reference only libc/libm, libgomp for parallel loops and
    libmvec for vectors of sines and cosines; `host()` loads both.
    """
    module = _parse_optimized(ir_text, entry)
    return host().new_machine().emit_object(module)


def load_object(obj: bytes, entry: str) -> Compiled:
    """Link object code from `emit_object` into a fresh MCJIT engine; the address of `entry`.

    The caller vouches that the bytes are intact object code for this host: LLVM does not
    validate them and crashes on garbage (module.py checks a hash first).
    """
    host()                      # LLVM initialised, libgomp loaded
    check_resolvable(obj, entry)
    empty = llvm.parse_assembly("")
    empty.triple = host().triple
    engine = _engine(empty)
    engine.add_object_file(llvm.ObjectFileRef.from_data(bytes(obj)))
    return Compiled(engine, _entry_address(engine, entry), "")


def assembly(ir_text: str) -> str:
    """Host assembly for (optimized) IR text: parsed afresh, since the engine owns its module."""
    return host().machine.emit_assembly(llvm.parse_assembly(ir_text))
