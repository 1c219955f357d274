"""conv2d in the blocked NCHW[x]c layout on the CPU, vectorised along output channels (the shape of
TVM's x86 conv2d_NCHWc and oneDNN's nChw16c): the conv algorithm "nchwc", one kernel of four stages

  data_vec    X as N x G*CB x H' x W' x ic_bn, zero-padded spatially (H' x W': what the conv reads;
              along a 1-wide kernel axis with a stride, only every stride-th pixel) and in each
              group's channel tail (CB = ceil(C/G / ic_bn) blocks per group, G groups)
  kernel_vec  W as F/oc_bn x CB x KH x KW x ic_bn x oc_bn, zero in the channel tails
  conv        N x F/oc_bn x OH x OW x oc_bn, into a local buffer per (n, oc block, oh_bn rows), the
              parallel loop: a register tile of oh_bn rows x reg_n columns x oc_bn channels (oc_bn/L
              vectors each) accumulates over the ic blocks, kh, kw (unrollable) and ic_bn
  out         NCHW, read from that local block with the epilogue applied
In a model whose activations stay blocked between kernels (`autotune.graph.layout`), X may
arrive blocked (N x C/b x H x W x b: data_vec is then a copy of whole vectors with the zero
padding, or X itself when there is none) and the output may leave blocked (`blocked_output`,
whole vectors per store): ic_bn then divides b, oc_bn is a multiple of it.
The zero tails keep the inner loops free of branches, so F and C need not be multiples of the
blocks; with groups, no output block straddles two: oc_bn divides F/G, or each group's last
block is zero-padded (`padded_groups`: a group is then one output block of the parallel loop,
its conv block holding the group's blocks, the weights of which its next rows reuse). The repack of X
and the unpack are transposes: a loop over one block's channels (or columns), unrolled, around a
vector along the other axis, each vector a strided read, which the codegen reads together as
contiguous rows and shuffles (`codegen.llvm_transpose`; before, LLVM's SLP vectoriser made the
unrolled scalars into vgatherdps: a 96-channel 56x56 depthwise conv of 1x1 taps, nothing but
the two transposes, ran 8.2 GFLOP/s then and 17.0 now, Zen 5, 2 threads). The weight repacks stay
scalar blocks for SLP (a vectorised loop gathered one element at a time: 2x slower on 3x3
weights); a model repacks its weights once (`graph.hoist`).

Depthwise convs (groups == C == F) have no channel reduction: channels are blocked by oc_bn
(data_vec N x C/oc_bn x H' x W' x oc_bn, kernel_vec C/oc_bn x KH x KW x oc_bn) and the tile
accumulates over kh x kw only.

APPLIES: groups == 1; grouped convs with at least MIN_GROUP_VECTOR filters per group (narrower
groups would give a channel vector shorter than NCHW's vector along the width); depthwise convs
(the dispatcher puts "nchw" first for their short windows, this for 7x7 ones: `conv2d`).

Default rules: `conv2d_nchwc_knobs`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import te
from ...dtype import dtype_info
from ...topi.conv import ConvGeometry, Epilogue, Finish
from ..schedule import Schedule
from .conv2d_nchwc_knobs import (
    define_knobs as define_knobs,
    flat_geometry,
    packed_extent,
    padded_groups,
    per_group,
    read_extent,
    subsampled,
)
from .rules import check_register_tile, lanes

MIN_GROUP_VECTOR = 8
COPY_COLUMNS = 16           # columns per vector of a one-channel repack (a plain padded copy of each row)
MAX_UNROLLED = 256          # statements per unrolled block of a 1x1 weight transpose (compile time)


def applies(g: ConvGeometry) -> bool:
    return g.depthwise or g.groups == 1 or per_group(g)[1] >= MIN_GROUP_VECTOR


APPLIES = applies


# ---- computes -----------------------------------------------------------------------------------
def _spatial(g: ConvGeometry, axis: int, i: Any, size: int) -> tuple[Any, list[Any]]:
    """The input pixel data_vec's position i maps to along `axis` (of extent `size` in X), and
    the conditions for it to be inside X (outside: zero padding)."""
    step, pad = (g.stride[axis] if subsampled(g, axis) else 1), g.pad_before[axis]
    src = i * step if step > 1 else i
    src = src - pad if pad else src
    last = (packed_extent(g, axis) - 1) * step - pad
    return src, ([src >= 0] if pad else []) + ([src < size] if last >= size else [])


def _packed_steps(g: ConvGeometry) -> tuple[int, int]:
    """The strides at which the conv reads a repacked data_vec."""
    return (1 if subsampled(g, 0) else g.stride[0], 1 if subsampled(g, 1) else g.stride[1])


def pack_data(X: te.Tensor, g: ConvGeometry, ic_bn: int) -> tuple[te.Tensor, tuple[int, int]]:
    """X as N x G*CB x H' x W' x ic_bn, zero outside X and in each group's channel tail; with
    the strides at which the conv reads it."""
    N, _, H, W = X.shape
    Cg, groups = (g.in_channels, 1) if g.depthwise else (per_group(g)[0], g.groups)
    CB = -(-Cg // ic_bn)
    zero = te.const(0, X.dtype)

    def elem(n: Any, cb: Any, h: Any, w: Any, ci: Any) -> Any:
        local = (cb % CB if groups > 1 else cb) * ic_bn + ci
        c = (cb // CB) * Cg + local if groups > 1 else local
        (row, row_in), (col, col_in) = _spatial(g, 0, h, H), _spatial(g, 1, w, W)
        inside = ([local < Cg] if Cg % ic_bn else []) + row_in + col_in
        value = X[n, c, row, col]
        return te.if_then_else(te.all(*inside), value, zero) if inside else value

    shape = (N, groups * CB, packed_extent(g, 0), packed_extent(g, 1), ic_bn)
    return te.compute(shape, elem, name="data_vec"), _packed_steps(g)


def pad_blocked(X: te.Tensor, g: ConvGeometry, ic_bn: int) -> tuple[te.Tensor, tuple[int, int]]:
    """X given blocked (N x C/b x H x W x b) as data_vec in ic_bn blocks (ic_bn divides b),
    zero-padded spatially: a copy of whole vectors, no transpose. X itself when there is nothing
    to pad or re-block (the conv then reads X in place, at its strides)."""
    N, _, H, W, b = X.shape
    if ic_bn == b and not any(g.pad_before) and read_extent(g, 0) <= H and read_extent(g, 1) <= W:
        return X, (g.stride[0], g.stride[1])
    k, zero = b // ic_bn, te.const(0, X.dtype)

    def elem(n: Any, cb: Any, h: Any, w: Any, ci: Any) -> Any:
        (row, row_in), (col, col_in) = _spatial(g, 0, h, H), _spatial(g, 1, w, W)
        c_block, c = (cb // k, (cb % k) * ic_bn + ci) if k > 1 else (cb, ci)
        value = X[n, c_block, row, col, c]
        return te.if_then_else(te.all(*row_in, *col_in), value, zero) if row_in + col_in else value

    shape = (N, X.shape[1] * k, packed_extent(g, 0), packed_extent(g, 1), ic_bn)
    return te.compute(shape, elem, name="data_vec"), _packed_steps(g)


def pack_kernel(Wt: te.Tensor, ic_bn: int, oc_bn: int, groups: int = 1) -> te.Tensor:
    """W as FB x Cg/ic_bn x KH x KW x ic_bn x oc_bn, zero in the channel tails: FB = F/oc_bn
    blocks, or with groups whose F/G oc_bn does not divide (`padded_groups`) F/G/oc_bn blocks
    per group, each group's last one zero-padded."""
    F, Cg, KH, KW = Wt.shape
    CB, zero = -(-Cg // ic_bn), te.const(0, Wt.dtype)
    Fg = F // groups
    FBg = -(-Fg // oc_bn)
    padded = padded_groups(groups, Fg, oc_bn)

    def filter_of(fo: Any, fi: Any) -> tuple[Any, list[Any]]:
        """The filter at lane fi of block fo, and the conditions for it to exist."""
        if padded:
            local = (fo % FBg) * oc_bn + fi
            return (fo // FBg) * Fg + local, [local < Fg]
        f = fo * oc_bn + fi
        return f, [f < F] if F % oc_bn else []

    def elem(fo: Any, cb: Any, ky: Any, kx: Any, ci: Any, fi: Any) -> Any:
        (f, inside), c = filter_of(fo, fi), cb * ic_bn + ci
        inside = inside + ([c < Cg] if Cg % ic_bn else [])
        value = Wt[f, c, ky, kx]
        return te.if_then_else(te.all(*inside), value, zero) if inside else value

    FB = groups * FBg if padded else -(-F // oc_bn)
    return te.compute((FB, CB, KH, KW, ic_bn, oc_bn), elem, name="kernel_vec")


def pack_depthwise_kernel(Wt: te.Tensor, bn: int) -> te.Tensor:
    """W (C x 1 x KH x KW) as C/bn x KH x KW x bn, zero in the channel tail."""
    C, _, KH, KW = Wt.shape
    zero = te.const(0, Wt.dtype)

    def elem(cb: Any, ky: Any, kx: Any, ci: Any) -> Any:
        c = cb * bn + ci
        return te.if_then_else(c < C, Wt[c, 0, ky, kx], zero) if C % bn else Wt[c, 0, ky, kx]

    return te.compute((-(-C // bn), KH, KW, bn), elem, name="kernel_vec")


def padded_group(g: ConvGeometry, oc_bn: int) -> int:
    """F/G where each group's last block of oc_bn filters is zero-padded (`padded_groups`), else 0."""
    Fg = per_group(g)[1]
    return Fg if not g.depthwise and padded_groups(g.groups, Fg, oc_bn) else 0


def blocked_conv(D: te.Tensor, K: te.Tensor, g: ConvGeometry, oc_bn: int, steps: tuple[int, int]) -> te.Tensor:
    """conv[n, fo, y, x, fi] over the packed data, read at `steps`, and kernel (the group of block
    fo reads its own channel blocks; depthwise: channel block fo of the data, no channel reduction)."""
    N, FB = D.shape[0], K.shape[0]
    (sh, sw), (dh, dw) = steps, g.dilation
    if g.depthwise:
        ry, rx = te.reduce_axis((0, K.shape[1]), name="ry"), te.reduce_axis((0, K.shape[2]), name="rx")
        return te.compute((N, FB, *g.out, oc_bn), lambda n, fo, y, x, fi: te.sum(
            D[n, fo, y * sh + ry * dh, x * sw + rx * dw, fi] * K[fo, ry, rx, fi], axis=[ry, rx]), name="conv")
    CB, KH, KW, ic_bn = K.shape[1:5]
    per_group = FB // g.groups
    rcb, rci = te.reduce_axis((0, CB), name="rcb"), te.reduce_axis((0, ic_bn), name="rci")
    ry, rx = te.reduce_axis((0, KH), name="ry"), te.reduce_axis((0, KW), name="rx")

    def elem(n: Any, fo: Any, y: Any, x: Any, fi: Any) -> Any:
        cb = rcb if g.groups == 1 else (fo // per_group) * CB + rcb
        return te.sum(D[n, cb, y * sh + ry * dh, x * sw + rx * dw, rci] * K[fo, rcb, ry, rx, rci, fi],
                      axis=[rcb, ry, rx, rci])

    return te.compute((N, FB, *g.out, oc_bn), elem, name="conv")


def unpack(conv: te.Tensor, g: ConvGeometry, epilogue: Epilogue | None, flat: bool = False) -> te.Tensor:
    """The NCHW output (epilogue applied) of the blocked conv; `flat`: of the conv over the
    image as one row (`flat_view`), read at y * OW + x. Channel f is lane f % oc_bn of block
    f // oc_bn, or with padded groups lane r % oc_bn of its group's block r // oc_bn, r = f % (F/G)."""
    N, oc_bn, OW = conv.shape[0], conv.shape[-1], g.out[1]
    Fg = padded_group(g, oc_bn)

    def channel(f: Any) -> tuple[Any, Any]:
        if not Fg:
            return f // oc_bn, f % oc_bn
        r = f % Fg
        return (f // Fg) * -(-Fg // oc_bn) + r // oc_bn, r % oc_bn

    def elem(n: Any, f: Any, y: Any, x: Any) -> Any:
        block, lane = channel(f)
        v = conv[n, block, 0, y * OW + x, lane] if flat else conv[n, block, y, x, lane]
        return v if epilogue is None else epilogue(v, (n, f, y, x))

    return te.compute((N, g.out_channels, *g.out), elem, name="Y" if epilogue is None else "out")


def blocked_output(conv: te.Tensor, g: ConvGeometry, epilogue: Epilogue | None, block: int) -> te.Tensor:
    """The output blocked (N x F/block x OH x OW x block, epilogue applied) from the conv's
    oc_bn blocks, oc_bn a multiple of `block`: a copy of whole vectors."""
    N, oc_bn = conv.shape[0], conv.shape[-1]
    k = oc_bn // block

    def elem(n: Any, fb: Any, y: Any, x: Any, fj: Any) -> Any:
        v = conv[n, fb // k, y, x, (fb % k) * block + fj] if k > 1 else conv[n, fb, y, x, fj]
        return v if epilogue is None else epilogue(v, (n, fb * block + fj, y, x))

    return te.compute((N, g.out_channels // block, *g.out, block), elem, name="Y" if epilogue is None else "out")


# ---- schedule -----------------------------------------------------------------------------------

def _schedule_output(s: Schedule, out: te.Tensor, oc_bn: int, rows: int, vector: int, group: int = 0) -> Any:
    """out's (n, oc block, block of `rows`) loop in parallel; inside it, per row and `vector`
    columns, the oc_bn channels unrolled, each a vector read from the local conv block at a
    stride of oc_bn (together a transposed block, which the codegen reads as rows and shuffles),
    with the epilogue. Returns the parallel loop, where the conv block goes. With padded groups
    of `group` channels, the loop is over (n, group, block of rows): a block does not straddle
    two groups, so the conv block holds the group's blocks."""
    n, f, y, x = out.op.axis
    yo, yi = s[out].split(y, rows)
    xo, xi = s[out].split(x, vector)
    if group:
        fg, fr = s[out].split(f, group)
        fro, fi = s[out].split(fr, oc_bn)
        s[out].reorder(n, fg, yo, fro, yi, xo, fi, xi)
        block = s[out].fuse(n, fg, yo)
    else:
        fo, fi = s[out].split(f, oc_bn)
        s[out].reorder(n, fo, yo, yi, xo, fi, xi)
        block = s[out].fuse(n, fo, yo)
    s[out].parallel(block)
    s[out].unroll(fi)
    s[out].vectorize(xi)
    return block


def _schedule_blocked_output(s: Schedule, out: te.Tensor, oc_bn: int, rows: int, vector: int) -> Any:
    """The blocked output's (n, oc block, block of `rows`) loop in parallel; inside it, whole vectors
    copied from the local conv block with the epilogue (the output's blocks are the vectors,
    whatever `vector`). Returns the parallel loop."""
    n, fb, y, x, fj = out.op.axis
    fbo, fbi = s[out].split(fb, oc_bn // fj.extent)
    yo, yi = s[out].split(y, rows)
    s[out].reorder(n, fbo, yo, fbi, yi, x, fj)
    block = s[out].fuse(n, fbo, yo)
    s[out].parallel(block)
    s[out].vectorize(fj)
    return block


def _schedule_conv(cfg: Any, s: Schedule, conv: te.Tensor, K: te.Tensor, out: te.Tensor, block: Any,
                   block_rows: int) -> None:
    """The conv block local at `block`; its register tile (oh_bn rows x reg_n columns x oc_bn
    channels, vectorised along the channels) innermost, under the ic blocks, kh, kw and ic_bn
    (with `block_rows`, the ic blocks outside the block's tiles); the packed weights K prefetched
    along ic_bn by the prefetch knob. A tile over twice the vector registers is refused
    (`rules.check_register_tile`)."""
    s[conv].set_scope("local")
    s[conv].compute_at(s[out], block)
    _, _, cy, cx, cf = s[conv].op.axis
    tile = min(cfg["nchwc_oh_bn"].val, cy.extent) * min(cfg["nchwc_reg_n"].val, cx.extent)
    check_register_tile(cfg, tile * -(-cf.extent // lanes(cfg, conv.dtype)),
                        "conv2d nchwc (oh_bn rows x reg_n columns x oc_bn / lanes)")
    cxo, cxi = s[conv].split(cx, cfg["nchwc_reg_n"].val)
    reduce = list(s[conv].op.reduce_axis)       # (rcb, ry, rx, rci), or depthwise (ry, rx)
    rx = reduce[2] if len(reduce) == 4 else reduce[1]
    if block_rows:
        cyo, cy = s[conv].split(cy, cfg["nchwc_oh_bn"].val)
        s[conv].reorder(reduce[0], cyo, cxo, *reduce[1:], cy, cxi, cf)
    else:
        s[conv].reorder(cxo, *reduce, cy, cxi, cf)
    if cfg["nchwc_unroll_kw"].val:
        s[conv].unroll(rx)
    ahead = cfg["nchwc_prefetch"].val if len(reduce) == 4 else 0
    if ahead:           # iterations of the ic_bn loop (each reads oc_bn weights) in `ahead` bytes
        s[conv].prefetch(K, reduce[3], -(-ahead // (cf.extent * dtype_info(K.dtype).bytes)))
    s[conv].unroll(cy)
    s[conv].unroll(cxi)
    s[conv].vectorize(cf)


def _schedule_packing(s: Schedule, D: te.Tensor, K: te.Tensor, vector: int) -> None:
    """Both repacks at root, in parallel over their outer axes. Each is a transpose: X's as
    columns unrolled around vectors of at most `vector` channels (transposed blocks for the
    codegen; a wider vector would be a transpose of vectors several registers long), the
    weights' as scalars unrolled for SLP (module docstring); but X in blocks of one channel is
    a padded copy of each plane, vectorised along its rows."""
    if isinstance(D.op, te.ComputeOp):
        n, cb, h, w, ci = D.op.axis
        s[D].parallel(s[D].fuse(n, cb, h))
        if D.op.input_tensors[0].ndim == 5:         # from blocked X: a copy of whole vectors
            s[D].vectorize(ci)
        elif ci.extent == 1:
            s[D].vectorize(s[D].split(w, COPY_COLUMNS)[1])
        else:
            width = min(ci.extent, vector)
            _, wi = s[D].split(w, width)
            cio, cii = s[D].split(ci, width)
            s[D].unroll(wi)
            s[D].unroll(cio)
            s[D].vectorize(cii)
    *_, fi = K.op.axis
    s[K].unroll(fi)
    if len(K.op.axis) == 4:         # depthwise: C x KH x KW weights, a small transpose
        return
    fo, _, ky, kx, ci, _ = K.op.axis
    s[K].parallel(fo)
    if ky.extent * kx.extent == 1:      # 1x1: the channels are contiguous in W too
        s[K].unroll(s[K].split(ci, max(1, MAX_UNROLLED // fi.extent))[1])


def build(cfg: Any, X: te.Tensor, Wt: te.Tensor, g: ConvGeometry, epilogue: Epilogue | None,
          extra: Sequence[te.Tensor], out_block: int = 0, finish: Finish | None = None,
          flat: bool = False) -> tuple[Schedule, te.Tensor]:
    """The conv2d of X and Wt (epilogue on the local tile) through the blocked layout; `extra`
    (the epilogue's own inputs) are read in place. X is NCHW, or blocked (5-d: N x C/b x H x W
    x b); the output NCHW, or blocked by `out_block`. `flat`: a 1x1 stride-1 conv without padding
    over its image as one row (`flat_view`; NCHW in and out), the whole image one output block."""
    if flat and (X.ndim != 4 or out_block):
        raise ValueError("conv2d_nchwc.build: the one-row view takes NCHW in and out, "
                         f"got X of {X.ndim} dims and out_block {out_block}")
    oc_bn = cfg["nchwc_oc_bn"].val
    ic_bn = oc_bn if g.depthwise else cfg["nchwc_ic_bn"].val
    source, conv_g = flat_view(X, g) if flat else (X, g)
    D, steps = pad_blocked(X, g, ic_bn) if X.ndim == 5 else pack_data(source, conv_g, ic_bn)
    K = pack_depthwise_kernel(Wt, oc_bn) if g.depthwise else pack_kernel(Wt, ic_bn, oc_bn, g.groups)
    conv = blocked_conv(D, K, conv_g, oc_bn, steps)
    out = blocked_output(conv, g, epilogue, out_block) if out_block else unpack(conv, g, epilogue, flat)
    final = finish(out) if finish else out
    s = te.create_schedule(final.op)
    if flat:
        s[source].compute_inline()
    _schedule_packing(s, D, K, lanes(cfg, X.dtype))
    block_rows = 0 if g.depthwise else cfg["nchwc_block_rows"].val
    rows = g.out[0] if flat else block_rows or cfg["nchwc_oh_bn"].val
    if out_block:
        block = _schedule_blocked_output(s, out, oc_bn, rows, lanes(cfg, out.dtype))
    else:
        block = _schedule_output(s, out, oc_bn, rows, lanes(cfg, out.dtype), padded_group(g, oc_bn))
    _schedule_conv(cfg, s, conv, K, out, block, block_rows)
    return s, final


def flat_view(X: te.Tensor, g: ConvGeometry) -> tuple[te.Tensor, ConvGeometry]:
    """X (N x C x H x W) as N x C x 1 x H*W, a view inlined into the repack, and the conv's
    geometry over it (`flat_geometry`)."""
    N, C, H, W = X.shape
    view = te.compute((N, C, 1, H * W), lambda n, c, _, p: X[n, c, p // W, p % W], name="X_flat")
    return view, flat_geometry(g)
