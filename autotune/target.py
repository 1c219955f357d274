"""What a target is: its kind, the CPU or GPU it names, its launch limits, and the key tuning
records and kernel caches are stored under. The one parser of target strings lives here.

A leaf every layer may read: it imports nothing heavy. What the text leaves to the machine
(the host CPU's name and features, the GPU's arch) is looked up only when a key is needed, so
creating a task or listing ops never starts LLVM or the CUDA driver.

Two grammars share one option table:
  `Target.parse`     what a user names: "llvm [-mcpu=<this CPU>]", "cuda [-arch=sm_XY] [-name=GPU]";
  `Target.from_key`  a stored record key, of any machine: "llvm -mcpu=.. -features=.. -cores=..",
                     "cuda -arch=sm_XY [-name=GPU]".
"""
from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from .errors import BuildError

TARGETS = ("llvm", "cuda")

# option: (the target's field, what its value must match, how an error says so)
OPTIONS = {
    "mcpu": ("mcpu", r"\S+", "be a CPU name"),
    "features": ("features", r"[^\s,]+(,[^\s,]+)*|", "be a comma-separated list of CPU features"),
    "cores": ("cores", r"[1-9][0-9]*", "be a positive integer"),
    "arch": ("arch", r"sm_\d+a?", "look like sm_80"),
    "name": ("gpu_name", r"\S+", "be a GPU name"),
}
USER_OPTIONS = {"llvm": ("mcpu",), "cuda": ("arch", "name")}                  # what `parse` accepts
KEY_OPTIONS = {"llvm": ("mcpu", "features", "cores"), "cuda": ("arch", "name")}   # what a key holds
KEY_REQUIRED = {"llvm": ("mcpu", "features", "cores"), "cuda": ("arch",)}      # in a complete target

# CPU features that change the code LLVM generates for our kernels (vector width, FMA, dot
# products, half/bfloat conversion). Only these enter the key, so unrelated flags (rdrnd, sha,
# ...) do not split the tuning database.
KEY_FEATURES = (
    "sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
    "avx512cd", "avx512vnni", "avx512bf16", "avx512fp16", "avxvnni", "amx-tile", "amx-bf16",
    "amx-int8", "neon", "fullfp16", "dotprod", "i8mm", "bf16", "sve", "sve2",
)


@dataclass(frozen=True)
class GpuLimits:
    """What one kernel launch may use. Templates reject configs past these before measuring
    them, and the launch pass rejects kernels past them before generating code."""

    max_threads_per_block: int = 1024
    max_block_dim: tuple[int, int, int] = (1024, 1024, 64)          # threadIdx.x, .y, .z
    max_grid_dim: tuple[int, int, int] = (2**31 - 1, 65535, 65535)  # blockIdx.x, .y, .z
    shared_bytes_per_block: int = 48 * 1024     # static __shared__; more needs dynamic shared memory
    warp_size: int = 32


CUDA_LIMITS = GpuLimits()      # every CUDA GPU since sm_20 allows this much


@dataclass(frozen=True)
class CpuFacts:
    """What CPU templates derive their default tiles from (each template's docstring states its rule)."""

    vector_bytes: int     # the widest vector register the features allow: 64 (AVX-512), 32 (AVX), 16
    l1d_bytes: int        # per-core level-1 data cache
    l2_bytes: int         # per-core level-2 cache
    cores: int            # cores the parallel loops may use
    half_pumped: bool = False   # 64-byte vectors run as two 32-byte halves (Zen 4's AVX-512)

    def lanes(self, dtype_bytes: int) -> int:
        """Elements of one vector register."""
        return max(1, self.vector_bytes // dtype_bytes)

    def unit_lanes(self, dtype_bytes: int) -> int:
        """Elements one vector operation's execution takes at a time: half a register where
        it is half-pumped, so a vector of at most that many elements costs half a full one."""
        return max(1, self.lanes(dtype_bytes) // (2 if self.half_pumped else 1))

    @property
    def vector_registers(self) -> int:
        """Architectural vector registers: 32 with 64-byte vectors (AVX-512's zmm0-31), else 16
        (AVX2/SSE's ymm/xmm0-15)."""
        return 32 if self.vector_bytes >= 64 else 16


# The CPU code generator loads a vector whose lanes are 2 to this many elements apart as one
# load of the span and a shuffle (a gather beyond): schedules rely on strides up to it.
MAX_SHUFFLED_STRIDE = 4

# The register of one masked vector operation, in bytes: AVX-512's, the only CPU target whose
# code has masked tails (`codegen.jit.masked_vectors`). An access wider than it is several.
MASKED_REGISTER_BYTES = 64

# CPUs whose AVX-512 executes on 256-bit units, each 64-byte operation as two halves: by LLVM
# name (a target's -mcpu), and by the OS's (vendor, family) of the host
HALF_PUMPED_AVX512 = frozenset({"znver4"})
HALF_PUMPED_FAMILIES = frozenset({("AuthenticAMD", "25")})

# cache sizes assumed where the OS does not say (a common x86 core of the last decade)
FALLBACK_CACHES = {1: 32 * 1024, 2: 1024 * 1024}
LIMITS: dict[str, GpuLimits | None] = {"llvm": None, "cuda": CUDA_LIMITS}


@dataclass(frozen=True)
class Target:
    """A compilation target. Fields left None are this machine's, resolved on first use of `key`."""

    kind: str                               # "llvm" (the host CPU) or "cuda"
    mcpu: str | None = None                 # llvm: the CPU's LLVM name ("skylake-avx512")
    features: tuple[str, ...] | None = None  # llvm: the enabled KEY_FEATURES, sorted
    cores: int | None = None                # llvm: cores the parallel loops may use
    arch: str | None = None                 # cuda: "sm_90"
    gpu_name: str | None = None             # cuda: the device's name, spaces as underscores

    def __post_init__(self) -> None:
        if self.kind not in TARGETS:
            raise ValueError(f"unknown target kind {self.kind!r}; expected one of {TARGETS}")
        foreign = [f.name for f in fields(self)[1:] if getattr(self, f.name) is not None
                   and _option_of(f.name) not in KEY_OPTIONS[self.kind]]
        if foreign:
            raise ValueError(f"a target of kind {self.kind} has no {', '.join(foreign)}")

    @classmethod
    def parse(cls, text: str | Target) -> Target:
        """The target a user names (a Target is returned as is). ValueError naming the problem:
        an unknown kind or option, a malformed -arch, or an -mcpu other than this machine's
        (llvm code is JIT-compiled for the host CPU only)."""
        if isinstance(text, Target):
            return text
        kind, opts = _read(str(text), USER_OPTIONS, _user_hint)
        if "mcpu" in opts and opts["mcpu"] != host_cpu_name():
            raise ValueError(f"target {str(text)!r}: -mcpu={opts['mcpu']} is not this machine's CPU "
                             f"({host_cpu_name()}); autotune compiles for the host CPU only")
        return _make(kind, opts)

    @classmethod
    def from_key(cls, key: str) -> Target:
        """The target of a stored record key, of this machine or another: no option is checked
        against this machine. ValueError when an option is unknown or malformed."""
        return _make(*_read(str(key), KEY_OPTIONS, _key_hint))

    @classmethod
    def host(cls) -> Target:
        """This machine's CPU, complete (asks LLVM for the CPU's name and features)."""
        return _host_target()

    @property
    def complete(self) -> bool:
        """Whether every field a key holds is known (nothing is left to this machine)."""
        return all(getattr(self, OPTIONS[o][0]) is not None for o in KEY_REQUIRED[self.kind])

    def resolved(self) -> Target:
        """This target with what it leaves to the machine filled in: the host CPU's for llvm,
        the device's arch and name for a cuda target without -arch (BuildError without a GPU)."""
        if self.complete:
            return self
        if self.kind == "llvm":
            given = {f.name: getattr(self, f.name) for f in fields(self)[1:] if getattr(self, f.name) is not None}
            return replace(Target.host(), **given)
        info = _device_info()
        return replace(self, arch=info["arch"], gpu_name=self.gpu_name or re.sub(r"\s+", "_", info["name"]))

    @functools.cached_property
    def key(self) -> str:
        """The string tuning records and kernel caches are keyed by: configs tuned for one CPU
        or GPU are not reused on another. `Target.from_key` reads it back."""
        return str(self.resolved())

    @functools.cached_property
    def cpu(self) -> CpuFacts:
        """The CPU facts of an llvm target: vector width from its features (the host's when it
        names none, read from the OS without starting LLVM), caches and cores of this machine
        (llvm code only ever runs on the host)."""
        if self.kind != "llvm":
            raise ValueError(f"target {self}: only llvm targets have CPU facts")
        features = set(self.features if self.features is not None else _host_cpu_flags())
        width = 64 if "avx512f" in features else 32 if features & {"avx", "avx2"} else 16
        caches = _host_caches()
        half_pumped = width == 64 and (self.mcpu in HALF_PUMPED_AVX512 if self.mcpu else _host_half_pumped())
        return CpuFacts(width, caches[1], caches[2], self.cores or usable_cores(), half_pumped)

    @property
    def limits(self) -> GpuLimits | None:
        """The launch limits of this target's kernels (None for the CPU, which has none to check)."""
        return LIMITS[self.kind]

    def same_code(self, other: Target) -> bool:
        """Whether code compiled for `other` is code for this target: all but the core count
        (cores change which config is fastest, not which instructions run)."""
        return replace(self, cores=None) == replace(other, cores=None)

    def __str__(self) -> str:
        words = [self.kind]
        for option, (name, _, _) in OPTIONS.items():
            value = getattr(self, name)
            if value is not None:
                words.append(f"-{option}={','.join(value) if isinstance(value, tuple) else value}")
        return " ".join(words)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"


def _option_of(field_name: str) -> str:
    return next(o for o, (name, _, _) in OPTIONS.items() if name == field_name)


def _read(text: str, allowed: dict[str, tuple[str, ...]],
          hint: Callable[[str], str]) -> tuple[str, dict[str, str]]:
    """(kind, {option: value}) of `text`, every option known to `allowed[kind]`, well-formed, once."""
    words = text.split()
    if not words or words[0] not in TARGETS:
        raise ValueError(f"unknown target {text!r}; expected one of {TARGETS}")
    kind, opts = words[0], {}
    for word in words[1:]:
        m = re.fullmatch(r"-([\w-]+)=(\S*)", word)
        if m is None or m.group(1) not in allowed[kind]:
            raise ValueError(f"target {text!r}: unknown option {word!r}; {hint(kind)}")
        option, value = m.groups()
        if option in opts:
            raise ValueError(f"target {text!r}: -{option} is given twice")
        if not re.fullmatch(OPTIONS[option][1], value):
            raise ValueError(f"target {text!r}: -{option} must {OPTIONS[option][2]}, got {value!r}")
        opts[option] = value
    return kind, opts


def _user_hint(kind: str) -> str:
    if kind == "llvm":
        return f"llvm takes only -mcpu={host_cpu_name()} (this CPU)"
    return "expected -arch=sm_XY or -name=GPU_NAME"


def _key_hint(kind: str) -> str:
    return f"a key of kind {kind} has " + ", ".join(f"-{o}=" for o in KEY_OPTIONS[kind])


def _make(kind: str, opts: dict[str, str]) -> Target:
    values: dict[str, object] = {OPTIONS[o][0]: v for o, v in opts.items()}
    if "features" in opts:
        values["features"] = tuple(f for f in opts["features"].split(",") if f)
    if "cores" in opts:
        values["cores"] = int(opts["cores"])
    return Target(kind, **values)  # type: ignore[arg-type]


def host_cpu_name() -> str:
    """This CPU's LLVM name (imports llvmlite, without initialising a target)."""
    from .codegen.jit import host_cpu

    return host_cpu().name


@functools.cache
def _host_target() -> Target:
    from .codegen.jit import host_cpu

    cpu = host_cpu()
    return Target("llvm", mcpu=cpu.name, features=tuple(sorted(f for f in KEY_FEATURES if cpu.features.get(f))),
                  cores=os.cpu_count() or 1)


@functools.cache
def _host_cpu_flags() -> frozenset[str]:
    """The host CPU's feature flags as the OS lists them (Linux /proc/cpuinfo; empty elsewhere)."""
    return frozenset(_cpuinfo(("flags", "Features")).split())


@functools.cache
def _host_half_pumped() -> bool:
    """Whether the host's AVX-512 runs on 256-bit units, as the OS names the CPU (without
    starting LLVM): AMD's family 25 (0x19) with AVX-512 is Zen 4."""
    return (_cpuinfo(("vendor_id",)), _cpuinfo(("cpu family",))) in HALF_PUMPED_FAMILIES


def _cpuinfo(names: tuple[str, ...]) -> str:
    """The value of the first /proc/cpuinfo line whose key is one of `names` ("" if none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in names:
                    return value.strip()
    except OSError:
        pass
    return ""


@functools.cache
def _host_caches() -> dict[int, int]:
    """{level: bytes} of the data/unified caches of core 0 (Linux sysfs), FALLBACK_CACHES otherwise."""
    out = dict(FALLBACK_CACHES)
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = os.listdir(root)
    except OSError:
        return out
    for entry in entries:
        try:
            with open(f"{root}/{entry}/level") as f:
                level = int(f.read())
            with open(f"{root}/{entry}/type") as f:
                kind = f.read().strip()
            with open(f"{root}/{entry}/size") as f:
                size = f.read().strip()
        except (OSError, ValueError):
            continue
        m = re.fullmatch(r"(\d+)([KMG]?)", size)
        if level in out and kind in ("Data", "Unified") and m:
            out[level] = int(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2)]
    return out


@functools.cache
def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, which a container or taskset can
    narrow below os.cpu_count()); looked up once, since it is slow on some systems."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _device_info() -> dict[str, Any]:
    """Arch and name of this machine's GPU (starts the CUDA driver); BuildError without one."""
    from .codegen.cuda_device import device_info

    try:
        return device_info()
    except BuildError as exc:
        raise BuildError(f"{exc}; to generate and compile kernels without a GPU, name the arch: "
                         "target='cuda -arch=sm_90'") from None
