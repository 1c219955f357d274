"""Random legal schedules must not change the answer: matmul, padded conv2d and softmax vs numpy.

Each `draw_*` helper builds one program, applies a random legal schedule drawn with hypothesis
and returns it as a `Drawn`: schedule, args, inputs, numpy's answer and a description, the
schedule written as Python (a cache stage's axes keep the names of the stage it caches), so a
failing example reads like the code that reproduces it. Shapes are odd or prime so that every
split has a tail. "Legal" is decided here, from the rules the primitives document:
vectorize only data-parallel axes, unroll only short loops, parallel on one data-parallel axis
of a stage that no parallel loop encloses (never nested), and compute_at only where every
consumer of the attached stage runs inside the attach loop. Input data depend only on the
shapes, so hypothesis replays a failure with the same numbers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import autotune
import autotune.te as te
from autotune.errors import ScheduleError
from autotune.schedules.schedule import Schedule, Stage
from autotune.te.expr import IterVar

# a vectorize that cannot run as lanes falls back to a scalar loop with a warning: expected here
pytestmark = pytest.mark.filterwarnings("ignore:loop .* runs as a scalar loop")

SETTINGS = settings(max_examples=40, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MAX_VECTOR_LANES = 64     # wider vectors are legal but only slow the build down
MAX_UNROLL_EXTENT = 16


@dataclass
class Drawn:
    """A scheduled program, the arrays to call it with and the schedule written out as code."""

    schedule: Schedule
    args: list
    inputs: list[np.ndarray]
    expected: list[np.ndarray]
    lines: list[str] = field(default_factory=list)

    @property
    def description(self) -> str:
        return "\n".join(self.lines)


def _rand(shape: tuple[int, ...], salt: int = 0) -> np.ndarray:
    return np.random.default_rng([*shape, salt]).standard_normal(shape).astype(np.float32)


def _name(iv: IterVar) -> str:
    return iv.name.replace(".", "_")


def _pick(data: st.DataObject, items: list, label: str):
    """One of `items`, drawn by position so that hypothesis reports a short integer."""
    return items[data.draw(st.integers(0, len(items) - 1), label=label)]


def _var(name: str) -> str:
    """The Python name a stage's tensor has in the description: C.local -> CL."""
    return name.replace(".local", "L")


# ---- loop structure: split / nparts / tile / fuse / reorder ---------------------------------------

def random_loop_ops(data: st.DataObject, stage: Stage, log: list[str], max_ops: int = 3) -> None:
    """Up to `max_ops` structural primitives on `stage`'s current leaf axes."""
    T = _var(stage.name)
    for _ in range(data.draw(st.integers(0, max_ops), label=f"{T}: number of loop ops")):
        leaves = list(stage.leaf_iter_vars)
        kind = data.draw(st.sampled_from(["split", "nparts", "tile", "fuse", "reorder"]), label=f"{T}: op")
        if kind in ("split", "nparts"):
            ax = _pick(data, leaves, f"{T}: {kind} axis")
            n = data.draw(st.integers(1, ax.extent + 3), label=f"{T}: {kind}")
            key = "factor" if kind == "split" else "nparts"
            outer, inner = stage.split(ax, **{key: n})
            log.append(f"{_name(outer)}, {_name(inner)} = s[{T}].split({_name(ax)}, {key}={n})")
        elif kind == "tile" and len(leaves) >= 2:
            pairs = [(x, y) for x in leaves for y in leaves if x is not y]
            x, y = _pick(data, pairs, f"{T}: tile axes")
            fx = data.draw(st.integers(1, x.extent + 3), label=f"{T}: tile x factor")
            fy = data.draw(st.integers(1, y.extent + 3), label=f"{T}: tile y factor")
            out = stage.tile(x, y, fx, fy)
            log.append(f"{', '.join(map(_name, out))} = s[{T}].tile({_name(x)}, {_name(y)}, {fx}, {fy})")
        elif kind == "fuse":
            pairs = [(a, b) for a, b in zip(leaves, leaves[1:]) if a.kind == b.kind]
            if pairs:
                a, b = _pick(data, pairs, f"{T}: fuse pair")
                fused = stage.fuse(a, b)
                log.append(f"{_name(fused)} = s[{T}].fuse({_name(a)}, {_name(b)})")
        elif kind == "reorder":
            perm = data.draw(st.permutations(range(len(leaves))), label=f"{T}: reorder")
            order = [leaves[p] for p in perm]
            stage.reorder(*order)
            log.append(f"s[{T}].reorder({', '.join(map(_name, order))})")


# ---- annotations: vectorize / unroll / parallel --------------------------------------------------

def _parallel_free(stage: Stage) -> bool:
    """No stage whose loops enclose `stage` (its compute_at chain) has a parallel loop."""
    parent = stage.attach_stage
    while parent is not None:
        if any(a.kind == "parallel" for a in parent.iter_attrs.values()):
            return False
        parent = parent.attach_stage
    return True


def random_annotations(data: st.DataObject, stage: Stage, log: list[str]) -> None:
    """vectorize a data-parallel axis (usually the innermost), unroll short loops, and
    parallelize one data-parallel axis unless an enclosing stage already has a parallel loop.
    Annotate parents before the stages attached to them."""
    T = _var(stage.name)
    allow_parallel = _parallel_free(stage)
    leaves = list(stage.leaf_iter_vars)
    taken: set[int] = set()
    vec = [iv for iv in leaves if iv.kind == "data" and iv.extent <= MAX_VECTOR_LANES]
    if vec and data.draw(st.booleans(), label=f"{T}: vectorize?"):
        innermost = leaves[-1] in vec and data.draw(st.integers(0, 3), label=f"{T}: vectorize where") < 3
        ax = leaves[-1] if innermost else _pick(data, vec, f"{T}: vectorize axis")
        stage.vectorize(ax)
        taken.add(id(ax))
        log.append(f"s[{T}].vectorize({_name(ax)})")
    short = [iv for iv in leaves if iv.extent <= MAX_UNROLL_EXTENT and id(iv) not in taken]
    budget = 64    # product of unrolled extents: keeps the unrolled body small
    for _ in range(data.draw(st.integers(0, 2), label=f"{T}: unrolls")):
        fits = [iv for iv in short if iv.extent <= budget and id(iv) not in taken]
        if not fits:
            break
        ax = _pick(data, fits, f"{T}: unroll axis")
        stage.unroll(ax)
        taken.add(id(ax))
        budget //= ax.extent
        log.append(f"s[{T}].unroll({_name(ax)})")
    par = [iv for iv in leaves if iv.kind == "data" and id(iv) not in taken]
    if allow_parallel and par and data.draw(st.booleans(), label=f"{T}: parallel?"):
        ax = _pick(data, par, f"{T}: parallel axis")
        stage.parallel(ax)
        log.append(f"s[{T}].parallel({_name(ax)})")


def random_attach(data: st.DataObject, s: Schedule, producer: te.Tensor, parent: te.Tensor,
                  log: list[str], options: tuple[str, ...] = ("root", "at")) -> int | None:
    """Place `producer`: at root, inlined, or at a random leaf axis of `parent` (returned as its
    position in parent's leaf order; root is None, inline is -1)."""
    where = data.draw(st.sampled_from(options), label=f"{producer.name}: placement")
    P, T = _var(producer.name), _var(parent.name)
    if where == "inline":
        s[producer].compute_inline()
        log.append(f"s[{P}].compute_inline()")
        return -1
    if where == "root":
        return None
    leaves = s[parent].leaf_iter_vars
    pos = data.draw(st.integers(0, len(leaves) - 1), label=f"{P}: attach position in {T}")
    s[producer].compute_at(s[parent], leaves[pos])
    log.append(f"s[{P}].compute_at(s[{T}], {_name(leaves[pos])})")
    return pos


# ---- the programs ---------------------------------------------------------------------------------

def draw_matmul(data: st.DataObject) -> Drawn:
    """C = A @ B, optionally with cache_write(C, "local") computed at C and a cache_read of A or B."""
    M, N, K = (data.draw(st.sampled_from(v), label=l) for v, l in
               (((13, 17, 23), "M"), ((11, 19, 29), "N"), ((7, 9, 13), "K")))
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    log = [f"# matmul M={M} N={N} K={K}; C = sum_k A[i, k] * B[k, j]", "s = te.create_schedule(C.op)"]
    reader = C
    if data.draw(st.booleans(), label="cache_write?"):
        reader = s.cache_write(C, "local")
        log.append("CL = s.cache_write(C, 'local')")
    cached = None
    if data.draw(st.booleans(), label="cache_read?"):
        src = _pick(data, [A, B], "cache_read of")
        cached = s.cache_read(src, "local", [reader])
        log.append(f"{src.name}L = s.cache_read({src.name}, 'local', [{_var(reader.name)}])")
    random_loop_ops(data, s[C], log)
    if reader is not C:
        random_attach(data, s, reader, C, log)
        random_loop_ops(data, s[reader], log)
    if cached is not None:
        random_attach(data, s, cached, reader, log)
        random_loop_ops(data, s[cached], log, max_ops=2)
    for t in [C] + ([reader] if reader is not C else []) + ([cached] if cached is not None else []):
        random_annotations(data, s[t], log)
    a, b = _rand((M, K)), _rand((K, N), 1)
    return Drawn(s, [A, B, C], [a, b], [a.astype(np.float64) @ b], log)


def conv2d_ref(x: np.ndarray, w: np.ndarray, pad: int, stride: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    f, _, kh, kw = w.shape
    oh, ow = (xp.shape[2] - kh) // stride + 1, (xp.shape[3] - kw) // stride + 1
    out = np.zeros((x.shape[0], f, oh, ow))
    for y in range(kh):
        for x_ in range(kw):
            patch = xp[:, :, y:y + stride * oh:stride, x_:x_ + stride * ow:stride]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, y, x_])
    return out


def draw_conv2d(data: st.DataObject) -> Drawn:
    """NCHW conv2d over a zero-padded stage (te.if_then_else), stride 1 or 2; the padding is
    inlined, computed at root, or computed at a random axis of the conv."""
    N = data.draw(st.sampled_from((1, 2)), label="batch")
    CI = data.draw(st.sampled_from((2, 3)), label="in channels")
    H, W = data.draw(st.sampled_from((7, 9)), label="H"), data.draw(st.sampled_from((5, 11)), label="W")
    F = data.draw(st.sampled_from((3, 5)), label="out channels")
    KH, KW = data.draw(st.sampled_from((1, 3)), label="KH"), 3
    pad, stride = data.draw(st.sampled_from((1, 2)), label="pad"), data.draw(st.sampled_from((1, 2)), label="stride")
    X = te.placeholder((N, CI, H, W), name="X")
    Wt = te.placeholder((F, CI, KH, KW), name="Wt")
    P = te.compute((N, CI, H + 2 * pad, W + 2 * pad), lambda n, c, h, w: te.if_then_else(
        te.all(h >= pad, h < H + pad, w >= pad, w < W + pad), X[n, c, h - pad, w - pad], te.const(0.0)),
        name="P")
    OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    rc, ry, rx = (te.reduce_axis((0, e), name=nm) for e, nm in ((CI, "rc"), (KH, "ry"), (KW, "rx")))
    Y = te.compute((N, F, OH, OW), lambda n, f, y, x: te.sum(
        P[n, rc, y * stride + ry, x * stride + rx] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    s = te.create_schedule(Y.op)
    log = [f"# conv2d X={X.shape} W={Wt.shape} pad={pad} stride={stride}; P = zero-padded X",
           "s = te.create_schedule(Y.op)"]
    random_loop_ops(data, s[Y], log, max_ops=4)
    placed = random_attach(data, s, P, Y, log, ("inline", "root", "at"))
    random_annotations(data, s[Y], log)
    if placed != -1:
        random_loop_ops(data, s[P], log, max_ops=2)
        random_annotations(data, s[P], log)
    x, w = _rand(X.shape), _rand(Wt.shape, 1)
    return Drawn(s, [X, Wt, Y], [x, w], [conv2d_ref(x, w, pad, stride)], log)


def draw_softmax(data: st.DataObject) -> Drawn:
    """Y = exp(X - max) / sum(exp(X - max)) by rows in four stages (mx, ex, sm, Y); mx, ex and sm
    at root or at a random axis of Y (ex may be inlined), every stage inside its producers' loops."""
    M, N = data.draw(st.sampled_from((5, 7)), label="M"), data.draw(st.sampled_from((13, 29, 33)), label="N")
    X = te.placeholder((M, N), name="X")
    k1 = te.reduce_axis((0, N), name="k1")
    mx = te.compute((M,), lambda i: te.max(X[i, k1], axis=k1), name="mx")
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="ex")
    k2 = te.reduce_axis((0, N), name="k2")
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), name="sm")
    Y = te.compute((M, N), lambda i, j: ex[i, j] / sm[i], name="Y")
    s = te.create_schedule(Y.op)
    log = [f"# softmax M={M} N={N}", "s = te.create_schedule(Y.op)"]
    random_loop_ops(data, s[Y], log)
    leaves = s[Y].leaf_iter_vars
    level = st.one_of(st.none(), st.integers(0, len(leaves) - 1))    # None: root
    want = {t.name: data.draw(level, label=f"{t.name}: attach position in Y") for t in (mx, ex, sm)}
    inline_ex = data.draw(st.booleans(), label="inline ex?")
    # a producer must run outside (or at) every consumer's loop: root counts as outermost
    depth = {k: -1 if v is None else v for k, v in want.items()}
    if not inline_ex:
        depth["ex"] = min(depth["ex"], depth["sm"])
    mx_consumers = ["sm"] if inline_ex else ["ex"]
    depth["mx"] = min([depth["mx"]] + [depth[c] for c in mx_consumers])
    random_annotations(data, s[Y], log)
    for t in (mx, ex, sm):
        if t is ex and inline_ex:
            s[ex].compute_inline()
            log.append("s[ex].compute_inline()")
            continue
        if depth[t.name] >= 0:
            s[t].compute_at(s[Y], leaves[depth[t.name]])
            log.append(f"s[{t.name}].compute_at(s[Y], {_name(leaves[depth[t.name]])})")
        random_loop_ops(data, s[t], log, max_ops=2)
        random_annotations(data, s[t], log)
    if not inline_ex and depth["ex"] >= 0 and data.draw(st.booleans(), label="ex stored in Y?"):
        s[ex].store_in(s[Y])
        log.append("s[ex].store_in(s[Y])")
    x = _rand((M, N)) * 4
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return Drawn(s, [X, Y], [x], [e / e.sum(axis=1, keepdims=True)], log)


# ---- the property ---------------------------------------------------------------------------------

def check_matches_numpy(drawn: Drawn, rtol: float, atol: float) -> None:
    note(drawn.description)
    f = autotune.build(drawn.schedule, drawn.args)
    outs = [np.zeros(t.shape, t.dtype) for t in drawn.args[len(drawn.inputs):]]
    f(*drawn.inputs, *outs)
    for got, want in zip(outs, drawn.expected):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=drawn.description)


@SETTINGS
@given(st.data())
def test_random_matmul_schedules(data):
    check_matches_numpy(draw_matmul(data), rtol=1e-4, atol=1e-4)


@SETTINGS
@given(st.data())
def test_random_conv2d_schedules(data):
    check_matches_numpy(draw_conv2d(data), rtol=1e-4, atol=1e-4)


@SETTINGS
@given(st.data())
def test_random_softmax_schedules(data):
    """store_in may refuse a drawn schedule (its rules are checked when lowering); nothing else may."""
    drawn = draw_softmax(data)
    try:
        check_matches_numpy(drawn, rtol=1e-5, atol=1e-6)
    except ScheduleError as err:
        if not str(err).startswith("store_in of ex in Y"):
            raise


# ---- bugs found by the properties above, minimised --------------------------------------------------

def test_fused_cache_stage_with_a_power_of_two_inner_extent():
    """Its loop reads B[k, 4*j.outer + fused % 4]; LLVM 22's loop vectorizer took that for a
    consecutive access (wrong numbers, NaN) until the codegen kept such loops from it."""
    A, B = te.placeholder((13, 7), name="A"), te.placeholder((7, 29), name="B")
    k = te.reduce_axis((0, 7), name="k")
    C = te.compute((13, 29), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = C.op.axis
    jo, ji = s[C].split(j, 4)
    s[C].reorder(jo, i, ji)
    s[CL].compute_at(s[C], jo)
    s[CL].fuse(*s[CL].op.axis)
    a, b = _rand((13, 7)), _rand((7, 29), 1)
    c = np.zeros((13, 29), np.float32)
    autotune.build(s, [A, B, C])(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def _matmul_with(M: int, N: int, K: int, schedule) -> tuple[np.ndarray, np.ndarray]:
    A, B = te.placeholder((M, K), name="A"), te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    schedule(s[C], *C.op.axis, k)
    a, b = _rand((M, K)), _rand((K, N), 1)
    c = np.zeros((M, N), np.float32)
    autotune.build(s, [A, B, C])(a, b, c)
    return c, a.astype(np.float64) @ b


def _split_k_inner(sc, i, j, k):         # k (7) -> 3 x 3 -> k.inner (3) -> 2 x 2: k.inner reaches 3
    _, ki = sc.split(k, 3)
    sc.split(ki, 2)


def _split_i_inner_under_k(sc, i, j, k):  # the same on a data axis, with the reduction outside it
    io, ii = sc.split(i, 3)
    iio, iii = sc.split(ii, 2)
    sc.reorder(k, io, iio, iii)


def _split_fused_inner(sc, i, j, k):      # i.inner (4) fused with j (3) is 12, split by 5 -> 15
    io, ii = sc.split(i, 4)
    f = sc.fuse(ii, j)
    sc.reorder(k, io, f)
    sc.split(f, 5)


@pytest.mark.parametrize("shape,schedule", [((1, 1, 7), _split_k_inner), ((7, 1, 2), _split_i_inner_under_k),
                                            ((13, 3, 1), _split_fused_inner)], ids=["k", "i-under-k", "fused"])
def test_split_of_an_inner_axis_with_a_tail(shape, schedule):
    got, want = _matmul_with(*shape, schedule)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
