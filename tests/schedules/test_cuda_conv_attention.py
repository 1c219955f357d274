"""CUDA conv2d and attention templates: the default and seeded legal configs compute the numpy
reference on odd shapes (the kernel read serially on the CPU, `serialize_threads`), compile with
nvcc for sm_80 and sm_90, and illegal points are rejected at instantiation, never at build."""
from __future__ import annotations

import math
import os
import sys

import pytest

import autotune.schedules.cuda as cuda_templates
from autotune.codegen.cuda import emit_cuda
from autotune.codegen.nvcc import compile_cuda, nvcc_path
from autotune.ir.lower import lower
from autotune.schedules.task import create_task
sys.path.insert(0, os.path.dirname(__file__))
from cuda_checks import (ATTN, CONV, TARGET, CONV_ATTENTION_CASES as CASES, check_numerics, check_rejected,  # noqa: E402
                         guards_of_stores, legal_configs)

cuda_templates.load("conv2d")
cuda_templates.load("attention")


def kernel_source(task, index: int) -> str:
    s, args = task.instantiate(index)
    return emit_cuda(lower(s, args, name=f"{task.name}_kernel"))[0]


@pytest.mark.parametrize("op,params,seed", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_configs_match_numpy(op, params, seed):
    task = create_task(op, target=TARGET, **params)
    configs = legal_configs(task, 3, seed)
    assert len(configs) == 4, f"{task}: too few legal configs"
    for index in configs:
        check_numerics(task, index)


@pytest.mark.parametrize("op,params,knobs", [
    ("conv2d", {**CONV, "F": 9}, {"tile_f": [-1, 2, 2, 1], "tile_y": [-1, 1, 8, 1], "tile_x": [-1, 2, 4, 1],
                                  "reduce_order": "kernel_outer"}),
    ("attention", {**ATTN, "seq_k": 150, "causal": 1}, {"tile_q": [-1, 8], "threads": 64, "inline_exp": 1}),
], ids=["conv2d-vthreads", "attention-inline-exp"])
def test_chosen_points_match_numpy(op, params, knobs):
    """Points the seeded draws may miss: virtual threads on two axes; exp recomputed in P @ V."""
    task = create_task(op, target=TARGET, **params)
    config = task.config({"index": 0, "knobs": {**task.config(0).to_json()["knobs"], **knobs}})
    assert task.is_valid(config.index)
    check_numerics(task, config.index)


@pytest.mark.parametrize("params", [
    {"N": 1, "C": 11, "H": 13, "W": 13, "F": 19, "KH": 3, "KW": 3, "stride": 1, "padding": 1},
    {"N": 2, "C": 5, "H": 17, "W": 11, "F": 7, "KH": 3, "KW": 3, "stride": 2, "padding": 1},
], ids=["stride1", "stride2"])
def test_conv_tails_cost_only_the_fetch_and_the_store(params):
    """Where the tiles do not divide the filters, rows, columns or channels, the register tile
    accumulates guard-free (the fetch reads zero beyond the input) and the store alone tests the
    bounds the tiles cross."""
    task = create_task("conv2d", target=TARGET, **params)
    OH = (params["H"] + 2 * params["padding"] - params["KH"]) // params["stride"] + 1
    OW = (params["W"] + 2 * params["padding"] - params["KW"]) // params["stride"] + 1
    s, args = task.instantiate(0)
    func = lower(s, args, name="conv")
    accumulate = guards_of_stores(func.body, "Y.local")
    assert accumulate
    bounds = {params["F"], OH, OW, params["C"]}
    for guards in accumulate:
        assert not any(f"< {n})" in g for g in guards for n in bounds), guards
    knobs = task.config(0).to_json()["knobs"]
    tails = [n for n, knob in ((params["F"], "tile_f"), (OH, "tile_y"), (OW, "tile_x"))
             if n % math.prod(knobs[knob][1:])]
    assert tails
    stores = guards_of_stores(func.body, args[-1].name)
    assert stores and all(any(f"< {n})" in g for g in guards) for guards in stores for n in tails)
    check_numerics(task, 0)


def test_defaults_for_large_shapes():
    """The first value of each knob is the config meant for the big layers (and legal there)."""
    conv = create_task("conv2d", target=TARGET, N=1, C=64, H=56, W=56, F=64, KH=3, KW=3, stride=1, padding=1)
    s, args = conv.instantiate(0)
    src, shape = emit_cuda(lower(s, args, name="conv"))
    assert shape.block == (7, 4, 8) and shape.grid == (4, 14, 2)
    assert "__restrict__ pad" not in src and src.count("__global__") == 1   # padding done in the fetch
    attn = create_task("attention", target=TARGET, batch=1, heads=12, seq_q=1024, seq_k=1024, head_dim=64, causal=1)
    s, args = attn.instantiate(0)
    src, shape = emit_cuda(lower(s, args, name="attn"))
    assert shape.block == (128, 1, 1) and shape.grid == (12 * 256, 1, 1)
    assert src.count("__shfl_xor_sync") == 2 * 5       # row max and row sum, butterfly over a warp


@pytest.mark.skipif(nvcc_path() is None, reason="nvcc (CUDA toolkit) not installed")
@pytest.mark.parametrize("op,params,seed", [CASES[1], CASES[4]], ids=["conv2d", "attention"])
def test_nvcc_compiles(op, params, seed):
    task = create_task(op, target=TARGET, **params)
    configs = legal_configs(task, 1, seed)
    for index in configs:
        for arch in ("sm_80", "sm_90"):
            compile_cuda(kernel_source(task, index), arch)


@pytest.mark.parametrize("op,params,knobs,match", [
    ("conv2d", {**CONV, "C": 64, "H": 56, "W": 56, "F": 64},
     {"tile_f": [-1, 1, 16, 2], "tile_y": [-1, 1, 8, 1], "tile_x": [-1, 1, 16, 1]}, "threads per block >"),
    ("conv2d", {**CONV, "C": 64, "H": 56, "W": 56, "F": 64},
     {"tile_f": [-1, 1, 2, 4], "tile_y": [-1, 1, 2, 1], "tile_x": [-1, 1, 4, 2]}, "less than a warp"),
    ("conv2d", {**CONV, "C": 64, "H": 56, "W": 56, "F": 64},
     {"tile_f": [-1, 1, 2, 4], "tile_y": [-1, 1, 8, 1], "tile_x": [-1, 1, 32, 1], "tile_rc": [-1, 32]}, "shared"),
    ("conv2d", {**CONV, "C": 64, "H": 56, "W": 56, "F": 64},
     {"tile_f": [-1, 1, 4, 8], "tile_y": [-1, 1, 1, 4], "tile_x": [-1, 1, 7, 4]}, "register tile"),
    ("attention", {**ATTN, "seq_q": 64, "seq_k": 4096, "causal": 0},
     {"tile_q": [-1, 4], "inline_exp": 0}, "shared memory"),
])
def test_illegal_points_rejected_at_instantiation(op, params, knobs, match):
    check_rejected(op, params, knobs, match)
