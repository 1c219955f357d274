"""Loop IR -> CUDA C: one `extern "C" __global__` kernel per PrimFunc.

A small C emitter: expressions through one op table, types through dtype.py, the CUDA specifics
as data (launch bounds, `__shared__`, index names, the barrier). A loop bound to threadIdx or
blockIdx becomes a read of that index, guarded where the loop is shorter than the launch; vthread
and serial loops are C loops in each thread. Vector IR is written lane by lane, except float32
x4 accesses that are provably 16-byte aligned, which become one float4 load or store.
"""
from __future__ import annotations

import math
import re

from ..dtype import dtype_info
from ..errors import BuildError
from ..ir.bounds import const_bound
from ..ir.functor import walk
from ..ir.nodes import (
    Allocate,
    Broadcast,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    Let,
    Load,
    Prefetch,
    PrimFunc,
    Ramp,
    Seq,
    Stmt,
    Store,
    ThreadAllReduce,
)
from ..ir.passes.barriers import BARRIER
from ..ir.passes.gpu import prepare_kernel
from ..ir.passes.gpu_launch import LaunchShape, allreduce_warps
from ..te.expr import And, Binary, BinOp, Call, Cast, Compare, Const, Expr, Not, Or, Select, Var

PRELUDE = """\
template <typename T> __device__ __forceinline__ T at_max(T a, T b) { return a > b ? a : b; }
template <typename T> __device__ __forceinline__ T at_min(T a, T b) { return a < b ? a : b; }
__device__ __forceinline__ int at_floordiv(int a, int b) {
  int q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
__device__ __forceinline__ int at_floormod(int a, int b) { int r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
__device__ __forceinline__ float at_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ double at_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
"""  # noqa: E501  (the CUDA prelude is emitted verbatim; its text is part of the kernel source)

_BINARY = {BinOp.ADD: "+", BinOp.SUB: "-", BinOp.MUL: "*", BinOp.DIV: "/"}
_HELPER = {BinOp.MAX: "at_max", BinOp.MIN: "at_min", BinOp.FLOORDIV: "at_floordiv", BinOp.FLOORMOD: "at_floormod"}
# intrinsic -> (float32 spelling, float64 spelling)
_MATH = {"exp": ("expf", "exp"), "log": ("logf", "log"), "sqrt": ("sqrtf", "sqrt"), "rsqrt": ("rsqrtf", "rsqrt"),
         "tanh": ("tanhf", "tanh"), "erf": ("erff", "erf"), "fabs": ("fabsf", "fabs"), "floor": ("floorf", "floor"),
         "ceil": ("ceilf", "ceil"), "pow": ("powf", "pow"), "sigmoid": ("at_sigmoid", "at_sigmoid"),
         "sin": ("sinf", "sin"), "cos": ("cosf", "cos")}
INDEX_TAGS = frozenset(f"{p}.{a}" for p in ("threadIdx", "blockIdx") for a in "xyz")   # CUDA's own names
# names a variable or buffer must not take: C/C++ keywords, CUDA built-ins, the math functions
RESERVED = frozenset((
    "auto", "bool", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum",
    "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short",
    "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while",
    "class", "delete", "new", "operator", "private", "public", "template", "this", "true", "false", "namespace",
    "using", "half", "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "max", "min", "abs", "exp", "log",
    "sqrt", "pow", "tanh", "erf", "floor", "ceil", "float4", "make_float4"
)) | {fn for pair in _MATH.values() for fn in pair}


def _float_literal(value: float, dtype: str) -> str:
    if math.isnan(value):
        return "__int_as_float(0x7fc00000)" if dtype == "float32" else "__longlong_as_double(0x7ff8000000000000LL)"
    if math.isinf(value):
        bits = ("0x7f800000", "0xff800000") if dtype == "float32" else ("0x7ff0000000000000LL", "0xfff0000000000000LL")
        fn = "__int_as_float" if dtype == "float32" else "__longlong_as_double"
        return f"{fn}({bits[value < 0]})"
    text = repr(float(value))
    return f"{text}f" if dtype == "float32" else text if dtype == "float64" else f"__float2half({text}f)"


def _lane(e: Expr, k: int, known: dict[int, list[Var]] | None = None) -> Expr:
    """Lane `k` of a vector expression, as a scalar expression; `known` gives the lanes of some
    subexpressions (by id) as variables already holding them."""
    if e.lanes == 1:
        return e
    if known and id(e) in known:
        return known[id(e)][k]
    if isinstance(e, Ramp):
        return e.base + e.stride * k if k else e.base
    if isinstance(e, Broadcast):
        return e.value
    if isinstance(e, Load):
        pred = None if e.predicate is None else _lane(e.predicate, k, known)
        return Load(e.buffer, _lane(e.index, k, known), pred)
    if isinstance(e, Binary):
        return Binary(e.op, _lane(e.a, k, known), _lane(e.b, k, known))
    if isinstance(e, Compare):
        return Compare(e.op, _lane(e.a, k, known), _lane(e.b, k, known))
    if isinstance(e, (And, Or)):
        return type(e)(_lane(e.a, k, known), _lane(e.b, k, known))
    if isinstance(e, Not):
        return Not(_lane(e.a, k, known))
    if isinstance(e, Select):
        return Select(_lane(e.cond, k, known), _lane(e.t, k, known), _lane(e.f, k, known))
    if isinstance(e, Call):
        return Call(e.fn, tuple(_lane(a, k, known) for a in e.args), e.dtype)
    if isinstance(e, Cast):
        return Cast(e.dtype, _lane(e.value, k, known))
    raise BuildError(f"cuda codegen: cannot split {type(e).__name__} {e} into lanes")


def _multiple_of(e: Expr, n: int) -> bool:
    """Whether `e` is provably a multiple of `n` (constants, products, sums of multiples)."""
    if isinstance(e, Const):
        return int(e.value) % n == 0
    if isinstance(e, Binary) and e.op is BinOp.MUL:
        return _multiple_of(e.a, n) or _multiple_of(e.b, n)
    if isinstance(e, Binary) and e.op in (BinOp.ADD, BinOp.SUB):
        return _multiple_of(e.a, n) and _multiple_of(e.b, n)
    return False


def _float4(index: Expr, dtype: str, predicate: Expr | None) -> Expr | None:
    """The base of an aligned float32 x4 access, or None when it must go lane by lane."""
    if (dtype == "float32" and predicate is None and isinstance(index, Ramp) and index.lanes == 4
            and isinstance(index.stride, Const) and index.stride.value == 1 and _multiple_of(index.base, 4)):
        return index.base
    return None


class CudaEmitter:
    """Emits one kernel; `source()` is the whole translation unit (prelude + kernel)."""

    def __init__(self, func: PrimFunc, shape: LaunchShape) -> None:
        self.func = func
        self.shape = shape
        self.launch = {**dict(zip((f"threadIdx.{a}" for a in "xyz"), shape.block)),
                       **dict(zip((f"blockIdx.{a}" for a in "xyz"), shape.grid))}     # extent of each index
        self.names: dict[object, str] = {}
        self.used: set[str] = set()
        self.ranges: dict[Var, tuple[int, int]] = {}
        self.lines: list[str] = []
        self.shared: list[str] = []
        self.indent = 1

    # -- names ----------------------------------------------------------------------------------
    def name(self, key: object, hint: str) -> str:
        if key not in self.names:
            base = re.sub(r"\W", "_", hint) or "v"
            base = base if base[0].isalpha() or base[0] == "_" else f"v_{base}"
            base = f"{base}_" if base in RESERVED or base.startswith("at_") else base
            text, n = base, 0
            while text in self.used:
                n += 1
                text = f"{base}_{n}"
            self.used.add(text)
            self.names[key] = text
        return self.names[key]

    def line(self, text: str) -> None:
        self.lines.append("  " * self.indent + text)

    # -- expressions ------------------------------------------------------------------------------
    def expr(self, e: Expr) -> str:
        if e.lanes != 1:
            raise BuildError(f"cuda codegen: vector expression {e} where a scalar is needed")
        t = type(e)
        if type(e) is Var:
            return self.name(e, e.name)
        if type(e) is Const:
            return self.const(e)
        if type(e) is Binary:
            return self.binary(e)
        if type(e) is Compare:
            return f"({self.expr(e.a)} {e.op.value} {self.expr(e.b)})"
        if type(e) is And:
            return f"({self.expr(e.a)} && {self.expr(e.b)})"
        if type(e) is Or:
            return f"({self.expr(e.a)} || {self.expr(e.b)})"
        if type(e) is Not:
            return f"(!{self.expr(e.a)})"
        if type(e) is Select:
            return f"({self.expr(e.cond)} ? {self.expr(e.t)} : {self.expr(e.f)})"
        if type(e) is Cast:
            return f"(({dtype_info(e.dtype).cuda})({self.expr(e.value)}))"
        if type(e) is Call:
            return self.call(e)
        if type(e) is Load:
            ref = f"{self.name(e.buffer, e.buffer.name)}[{self.expr(e.index)}]"
            if e.predicate is None:
                return ref
            return f"({self.expr(e.predicate)} ? {ref} : ({dtype_info(e.dtype).cuda})0)"
        raise BuildError(f"cuda codegen: no rule for expression {t.__name__} {e}")

    def const(self, e: Const) -> str:
        kind = dtype_info(e.dtype).kind
        if kind == "float":
            return _float_literal(e.value, e.dtype)
        if kind == "bool":
            return "true" if e.value else "false"
        if e.dtype == "int32":
            return str(int(e.value))
        if e.dtype == "int64":
            return f"{int(e.value)}LL"
        return f"({dtype_info(e.dtype).cuda}){int(e.value)}"

    def binary(self, e: Binary) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.op in _BINARY:
            return f"({a} {_BINARY[e.op]} {b})"
        if e.op in (BinOp.FLOORDIV, BinOp.FLOORMOD) and self._nonnegative(e.a) and self._positive_const(e.b):
            return f"({a} {'/' if e.op is BinOp.FLOORDIV else '%'} {b})"
        return f"{_HELPER[e.op]}({a}, {b})"

    def _nonnegative(self, e: Expr) -> bool:
        b = const_bound(e, self.ranges)
        return b is not None and b[0] >= 0

    @staticmethod
    def _positive_const(e: Expr) -> bool:
        return isinstance(e, Const) and e.value > 0

    def call(self, e: Call) -> str:
        if e.fn not in _MATH or e.dtype not in ("float32", "float64"):
            raise BuildError(f"cuda codegen: no {e.dtype} implementation of {e.fn}")
        fn = _MATH[e.fn][e.dtype == "float64"]
        return f"{fn}({', '.join(self.expr(a) for a in e.args)})"

    # -- statements --------------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        t = type(s)
        if type(s) is Seq:
            for c in s.stmts:
                self.stmt(c)
        elif type(s) is For:
            self.loop(s)
        elif type(s) is Store:
            self.store(s)
        elif type(s) is Allocate:
            self.allocate(s)
        elif type(s) is IfThenElse:
            self.line(f"if ({self.expr(s.cond)}) {{")
            self.nested(s.then_case)
            if s.else_case is not None:
                self.line("} else {")
                self.nested(s.else_case)
            self.line("}")
        elif type(s) is Let:
            self.line(f"const {dtype_info(s.var.dtype).cuda} {self.name(s.var, s.var.name)} = {self.expr(s.value)};")
            self.stmt(s.body)
        elif type(s) is Evaluate and isinstance(s.value, Call) and s.value.fn == BARRIER:
            self.line("__syncthreads();")
        elif type(s) is ThreadAllReduce:
            self.allreduce(s)
        elif type(s) is Prefetch:
            pass            # a CPU cache hint: the GPU's loads go through their own caches
        else:
            raise BuildError(f"cuda codegen: no rule for statement {t.__name__}")

    def nested(self, s: Stmt) -> None:
        self.indent += 1
        self.stmt(s)
        self.indent -= 1

    def loop(self, s: For) -> None:
        v = self.name(s.var, s.var.name)
        self.ranges[s.var] = (0, s.extent - 1)
        if s.kind is ForKind.PARALLEL:
            raise BuildError(f"cuda codegen: loop {s.var.name} is parallel (a CPU schedule); bind it to "
                             "blockIdx/threadIdx instead")
        if s.kind is ForKind.THREAD_BOUND and s.thread in INDEX_TAGS:
            self.line("{")
            self.indent += 1
            self.line(f"const int {v} = {s.thread};")
            if s.extent < self.launch[s.thread]:
                self.line(f"if ({v} < {s.extent}) {{")
                self.nested(s.body)
                self.line("}")
            else:
                self.stmt(s.body)
            self.indent -= 1
            self.line("}")
            return
        if s.kind is ForKind.THREAD_BOUND:      # vthread: each thread runs the virtual threads in turn
            self.line("#pragma unroll")
        self.line(f"for (int {v} = 0; {v} < {s.extent}; ++{v}) {{")
        self.nested(s.body)
        self.line("}")

    def store(self, s: Store) -> None:
        buf = self.name(s.buffer, s.buffer.name)
        if s.value.lanes == 1:
            text = f"{buf}[{self.expr(s.index)}] = {self.expr(s.value)};"
            self.line(text if s.predicate is None else f"if ({self.expr(s.predicate)}) {text}")
            return
        base = _float4(s.index, s.buffer.dtype, s.predicate)
        known = self.float4_loads(s.value)
        if base is not None:
            lanes = ", ".join(self.expr(_lane(s.value, k, known)) for k in range(4))
            self.line(f"*(float4*)({buf} + {self.expr(base)}) = make_float4({lanes});")
            return
        for k in range(s.value.lanes):
            self.store(Store(s.buffer, _lane(s.index, k), _lane(s.value, k, known),
                             None if s.predicate is None else _lane(s.predicate, k)))

    def float4_loads(self, value: Expr) -> dict[int, list[Var]]:
        """Read each aligned float32x4 load of `value` once into a float4; its lanes as variables."""
        known: dict[int, list[Var]] = {}

        def visit(n: object) -> None:
            if (isinstance(n, Load) and n.lanes == 4 and id(n) not in known
                    and (base := _float4(n.index, n.buffer.dtype, n.predicate)) is not None):
                tmp = self.name(("float4", id(n), len(self.lines)), "f4")
                buf = self.name(n.buffer, n.buffer.name)
                self.line(f"const float4 {tmp} = *(const float4*)({buf} + {self.expr(base)});")
                lanes = [Var(f"{tmp}.{c}", "float32") for c in "xyzw"]
                for v in lanes:
                    self.names[v] = v.name
                known[id(n)] = lanes
        walk(value, visit)
        return known

    def allreduce(self, s: ThreadAllReduce) -> None:
        """Butterfly shuffles within each warp (every lane ends with its row's total); a row of
        threadIdx.x wider than a warp then exchanges one partial per warp through shared memory."""
        acc = self.name(s.buffer, s.buffer.name)
        ctype = dtype_info(s.buffer.dtype).cuda
        width, by, bz = self.shape.block
        op = {"sum": "{a} + {b}", "max": "at_max({a}, {b})", "min": "at_min({a}, {b})"}[s.combiner]
        self.line("{")
        self.indent += 1
        self.line("const int at_lane = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;")
        self.line(f"const int at_live = {self.shape.threads} - (at_lane & ~31);   // threads in this warp")
        self.line("const unsigned at_mask = at_live >= 32 ? 0xffffffffu : ((1u << at_live) - 1u);")
        self.line(f"{ctype} at_v = {acc}[0];")
        offset = min(width, 32) // 2
        while offset:
            self.line("at_v = " + op.format(a="at_v", b=f"__shfl_xor_sync(at_mask, at_v, {offset})") + ";")
            offset //= 2
        warps = allreduce_warps(self.shape.block)
        if warps:
            scratch = self.name(("scratch", id(s)), f"{s.buffer.name}_scratch")
            self.shared.append(f"__shared__ {ctype} {scratch}[{by * bz * warps}];")
            row = f"(threadIdx.z * {by} + threadIdx.y) * {warps}"
            self.line("__syncthreads();      // the previous use of the scratch is over")
            self.line(f"if ((threadIdx.x & 31) == 0) {scratch}[{row} + (threadIdx.x >> 5)] = at_v;")
            self.line("__syncthreads();")
            self.line(f"at_v = {scratch}[{row}];")
            self.line(f"for (int at_w = 1; at_w < {warps}; ++at_w) at_v = "
                      + op.format(a="at_v", b=f"{scratch}[{row} + at_w]") + ";")
        self.line(f"{acc}[0] = at_v;")
        self.indent -= 1
        self.line("}")

    def allocate(self, s: Allocate) -> None:
        b = s.buffer
        name = self.name(b, b.name)
        ctype = dtype_info(b.dtype).cuda
        if b.scope == "shared":
            self.shared.append(f"__shared__ __align__(16) {ctype} {name}[{b.size}];")
            self.stmt(s.body)
            return
        if b.scope != "local":
            raise BuildError(f"cuda codegen: buffer {b.name} in {b.scope} memory cannot be allocated in a kernel")
        self.line("{")
        self.indent += 1
        self.line(f"__align__(16) {ctype} {name}[{b.size}];")
        self.stmt(s.body)
        self.indent -= 1
        self.line("}")

    # -- the kernel ----------------------------------------------------------------------------------
    def source(self) -> str:
        outputs = set(self.func.attrs.get("outputs", range(len(self.func.params))))
        params = []
        for pos, p in enumerate(self.func.params):
            ctype = dtype_info(p.dtype).cuda
            const = "" if pos in outputs else "const "
            params.append(f"{const}{ctype}* __restrict__ {self.name(p, p.name)}")
        self.stmt(self.func.body)
        head = (f'extern "C" __global__ void __launch_bounds__({self.shape.threads}) '
                f"{kernel_name(self.func)}({', '.join(params)}) {{")
        body = ["  " + s for s in self.shared] + self.lines
        return "\n".join([PRELUDE, head, *body, "}", ""])


def kernel_name(func: PrimFunc) -> str:
    """The kernel's symbol: the function's name made an identifier, with a suffix (CUDA reserves
    `main`, and a suffix keeps clear of every other C name)."""
    return f"{re.sub(r'[^0-9A-Za-z_]', '_', func.name)}_kernel"


def emit_cuda(func: PrimFunc) -> tuple[str, LaunchShape]:
    """The CUDA C source of `func` and its launch shape; ScheduleError for an illegal binding."""
    func, shape = prepare_kernel(func)
    return CudaEmitter(func, shape).source(), shape
