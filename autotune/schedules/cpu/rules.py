"""The shared vocabulary of CPU default rules: what a template's default config is derived from.

A knob's first value is the default config (what an untuned kernel runs and what the xgb tuner
measures first). Templates put there the value a rule on the shape and the target picks (vector
lanes, cache sizes, cores) and keep the other values in a fixed order that no measurement chose.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ...dtype import dtype_info
from ...errors import InstantiationError
from ...target import CpuFacts, Target


def cpu_facts(cfg: Any) -> CpuFacts:
    """The facts of the target the config space is for (this machine's CPU when it has none)."""
    target = getattr(cfg, "target", None)
    if target is None or target.kind != "llvm":
        target = Target.parse("llvm")
    return target.cpu


def constant_input(cfg: Any, position: int) -> bool:
    """Whether the input at `position` is constant where the kernel runs (a model's weight, so a
    repack of it is done once at compile time: `autotune.ir.hoist`)."""
    return position in getattr(cfg, "constant_inputs", ())


def lanes(cfg: Any, dtype: str) -> int:
    """Elements of `dtype` in one vector register of the target."""
    return cpu_facts(cfg).lanes(dtype_info(dtype).bytes)


def l2_elements(cfg: Any, dtype: str) -> int:
    """Elements of `dtype` that one core's L2 holds."""
    return cpu_facts(cfg).l2_bytes // dtype_info(dtype).bytes


class VectorTarget(NamedTuple):
    """The target as a register tile's rule sees it for one dtype: elements per vector register,
    architectural vector registers, elements one core's L2 holds, and elements a vector
    operation executes at a time (`CpuFacts.unit_lanes`)."""
    lanes: int
    registers: int
    l2_elements: int
    unit_lanes: int


def vector_target(cfg: Any, dtype: str) -> VectorTarget:
    """The `VectorTarget` of the config space's target for `dtype`."""
    return VectorTarget(lanes(cfg, dtype), vector_registers(cfg), l2_elements(cfg, dtype),
                        cpu_facts(cfg).unit_lanes(dtype_info(dtype).bytes))


def first(chosen: Any, others: Sequence[Any]) -> list[Any]:
    """`chosen` (the rule's pick) followed by the other values in their given order."""
    return [chosen, *[v for v in others if v != chosen]]


def closest(value: float, options: Sequence[int]) -> int:
    """The option nearest to `value` (the smaller one on a tie)."""
    return min(options, key=lambda o: (abs(o - value), o))


def largest_fitting(options: Sequence[int], fits: Any) -> int:
    """The largest option for which `fits(option)` holds, else the smallest option."""
    ok = [o for o in options if fits(o)]
    return max(ok) if ok else min(options)


def split_first(inner: int, extent: int, others: Sequence[int]) -> list[list[int]]:
    """Two-way split candidates [-1, f] with the rule's inner factor first (shrunk to the extent)."""
    return [[-1, f] for f in first(min(inner, extent), [min(o, extent) for o in others])]


# -- shared rules (each template's docstring says which it uses) -------------------------------
CHUNKS_PER_CORE = 4           # parallel iterations per core: enough for the dynamic schedule to balance
FMAS_PER_STEP = 64        # vector multiply-adds of one unrolled k step: enough to hide the loop's own cost
PARALLEL_MIN_ELEMENTS = 1 << 15   # below, one core finishes the loop in about the time waking the others takes
MAX_TILE_REGISTERS = 2        # a register tile's vector accumulators, in vector registers (check_register_tile)


def vector_registers(cfg: Any) -> int:
    """Architectural vector registers of the target (`CpuFacts.vector_registers`)."""
    return cpu_facts(cfg).vector_registers


def check_register_tile(cfg: Any, vectors: int, what: str) -> None:
    """InstantiationError for a register tile of more than MAX_TILE_REGISTERS x the vector
    registers of vector accumulators (`what`: the template and how its tile counts them). Such a
    tile can only spill, and LLVM's register allocator spends tens of seconds on its unrolled
    body, past a build worker's 30 s timeout: matmul on AVX2 (16 registers, 8 rows x 96 columns
    unrolled) 72 s against 0.5-10 s within the limit, 21-47 GFLOP/s against the default's 148
    (Zen 3); on AVX-512 (Zen 4), the conv tiles over it among 2272 configs measured by 32-trial
    tunes of 71 conv shapes ran 0.04-0.45x their shape's best (direct NCHW, 20 configs) and
    0.05-0.59x (blocked, 93), building in up to 27 s."""
    limit = MAX_TILE_REGISTERS * vector_registers(cfg)
    if vectors > limit:
        raise InstantiationError(f"{what}: a register tile of {vectors} vector accumulators is over {limit} "
                                 f"({MAX_TILE_REGISTERS}x the vector registers)")


def accumulators(cfg: Any) -> int:
    """Vector accumulators a register tile may hold: three quarters of the registers, the rest
    left for the operands (a row of B, a broadcast A value) so nothing spills."""
    return vector_registers(cfg) * 3 // 4


def vector_tile(cfg: Any, dtype: str, extent: int) -> int:
    """The vector tile of a contiguous axis: 4x, 2x or 1x the lanes, the widest that the extent
    holds four times (so the tail is at most a fifth of the axis); the lanes when none does."""
    width = lanes(cfg, dtype)
    return next((m * width for m in (4, 2) if 4 * m * width <= extent), width)


def enough_chunks(cfg: Any, iterations: int) -> bool:
    """Whether a parallel loop of `iterations` gives every core CHUNKS_PER_CORE of them."""
    return iterations >= CHUNKS_PER_CORE * cpu_facts(cfg).cores


def worth_threads(cfg: Any, work: int) -> bool:
    """Whether a loop nest of `work` element operations (outputs, or multiply-adds of a product)
    should run in parallel: more than one core and at least PARALLEL_MIN_ELEMENTS of them."""
    return cpu_facts(cfg).cores > 1 and work >= PARALLEL_MIN_ELEMENTS


def ascending_first(chosen: Any, values: Sequence[Any]) -> list[Any]:
    """`chosen` then the other values in ascending order (the rule-free order of numeric knobs)."""
    return first(chosen, sorted(values))


def two_vectors(width: int, columns: Sequence[int]) -> int:
    """The register tile's columns: the option closest to two vectors of `width` lanes."""
    return closest(2 * width, columns)


def register_tile(cfg: Any, dtype: str, M: int, columns: Sequence[int], rows: Sequence[int],
                  unrolls: Sequence[int]) -> tuple[int, int, int]:
    """(columns, rows, k unroll) of the register tile by rule: two vectors of columns, the most
    rows (<= M) whose accumulators fit in 3/4 of the vector registers, and k unrolled so that a
    step issues about FMAS_PER_STEP vector multiply-adds."""
    width = lanes(cfg, dtype)
    bn = two_vectors(width, columns)
    vectors = max(1, bn // width)
    r = largest_fitting(rows, lambda x: x * vectors <= accumulators(cfg) and x <= M)
    return bn, r, closest(FMAS_PER_STEP / (r * vectors), unrolls)
