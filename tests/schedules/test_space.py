"""Config spaces and tasks: index <-> knobs <-> JSON, legality, task creation errors, flop counts."""
import math
import random

import pytest
from hypothesis import given, settings, strategies as st

import autotune
from autotune.errors import InstantiationError
from autotune.schedules.space import ConfigSpace, split_candidates


def test_split_policies_only_produce_legal_points():
    assert all(f[0] == -1 for f in split_candidates(12, 3, "factors", None, None))
    assert {f[1] * f[2] for f in split_candidates(12, 3, "factors", None, None)} <= {1, 2, 3, 4, 6, 12}
    assert all(a * b <= 10 for _, a, b in split_candidates(10, 3, "power2", None, None))
    assert split_candidates(7, 2, "candidate", [[-1, 4], [-1, 8]], None) == [(-1, 4), (-1, 7)]
    assert split_candidates(3, 3, "candidate", [[-1, 4, 4]], None) == [(-1, 1, 1)]


TASK = autotune.create_task("matmul", M=61, N=47, K=29)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(TASK.config_space) - 1))
def test_index_knob_json_round_trip(index):
    space = TASK.config_space
    assert space.knob2point(space.point2knob(index)) == index
    cfg = space.get(index)
    assert space.from_json(cfg.to_json()).index == index
    assert len(space.knob_vector(index)) == len(space.knob_vector(0))
    assert space.aligned_knob_vector(cfg.to_json()["knobs"]) == space.knob_vector(index)


CONV_A = autotune.create_task("conv2d_grouped", N=1, C=64, H=56, W=56, F=64, KH=3, KW=3, stride=1, padding=1,
                               dilation=1, groups=1)
CONV_B = autotune.create_task("conv2d_grouped", N=1, C=256, H=14, W=14, F=256, KH=3, KW=3, stride=2, padding=1,
                               dilation=1, groups=1)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 12))
def test_aligned_knob_vector_of_a_spaces_own_config_is_its_knob_vector(seed, steps):
    rng = random.Random(seed)
    for task in (CONV_A, CONV_B):
        index = task.default_index
        for _ in range(steps):
            index = task.config_space.neighbour(index, rng)
        knobs = task.config(index).to_json()["knobs"]
        assert task.config_space.aligned_knob_vector(knobs) == task.config_space.knob_vector(index)


def test_aligned_knob_vector_places_another_shapes_values_by_name_and_value():
    """Conv spaces differ by shape in their knobs and in the order of each knob's values (the
    rules list the default first); a stride-2 layer has no Winograd knobs."""
    here = CONV_B.config_space
    knobs = dict(CONV_A.config(CONV_A.default_index).to_json()["knobs"], algorithm="nchwc")
    vector = dict(zip(_slots(here), here.aligned_knob_vector(knobs)))
    algorithms = [e.to_json() for e in here.knobs["algorithm"].entities]
    assert vector["algorithm"] == algorithms.index("nchwc")                      # by value, not position
    assert vector["nchwc_oc_bn"] == knobs["nchwc_oc_bn"]
    assert not any(name.startswith("winograd") for name in vector)
    other = {"algorithm": "winograd", "nchwc_oc_bn": 3, "tile_y": [-1, 3], "tile_f": [-1, 2, 4]}
    vector = dict(zip(_slots(here), here.aligned_knob_vector(other)))
    assert math.isnan(vector["algorithm"])                                      # a value this shape lacks
    assert vector["nchwc_oc_bn"] == 3.0 and vector["tile_y.0"] == math.log2(3)  # numbers mean the same
    assert math.isnan(vector["tile_f.0"]) and math.isnan(vector["gemm_tile_p.0"])   # another split; no knob


def _slots(space):
    """A name per number of the knob vector (split knobs give one per inner factor)."""
    return [name if k.kind != "split" else f"{name}.{j}" for name, k in space.knobs.items()
            for j in range(len(k.entities[0].size) - 1 if k.kind == "split" else 1)]


def test_bad_configs_raise_instantiation_error():
    space = TASK.config_space
    with pytest.raises(InstantiationError, match="outside the space"):
        space.get(len(space))
    bad = space.get(0).to_json()
    bad["knobs"]["tile_x"] = [-1, 7]
    with pytest.raises(InstantiationError, match="tile_x"):
        space.from_json(bad)
    with pytest.raises(InstantiationError, match="do not match"):
        space.from_json({"knobs": {"nope": 1}})


def test_a_space_past_what_an_index_counts_is_refused_by_name():
    space = ConfigSpace()
    for i in range(62):
        space.define_knob(f"k{i}", [0, 1])
    with pytest.raises(ValueError, match=r"knob .k62. takes the config space to 9.22e\+18 canonical configs"):
        space.define_knob("k62", [0, 1])
    assert len(space) == 2 ** 62


def test_constraints_make_points_illegal():
    def tmpl(cfg, n):
        cfg.define_knob("a", [1, 2, 3])
        cfg.raise_if(cfg["a"].val == 2 and n == 5, "a=2 is illegal at n=5")

    space = ConfigSpace()
    tmpl(space, 5)
    tmpl(space.get(0), 5)
    with pytest.raises(InstantiationError, match="a=2 is illegal"):
        tmpl(space.get(1), 5)


def test_task_identity_and_flop():
    t = autotune.create_task("matmul", K=29, N=47, M=61)
    assert t.workload_key == "matmul(M=61,N=47,K=29)float32"
    assert t.flop == 2 * 61 * 47 * 29
    assert t.target_key.startswith("llvm -mcpu=") and "-cores=" in t.target_key
    conv = autotune.create_task("conv2d", N=1, C=3, H=8, W=8, F=4, KH=3, KW=3, stride=1, padding=1)
    assert conv.flop == 2 * 4 * 8 * 8 * 3 * 9
    assert autotune.create_task("dense", M=4, N=5, K=6).flop == 2 * 4 * 5 * 6 + 2 * 4 * 5


def test_the_op_index_names_every_built_in_template_and_its_module():
    from autotune.schedules import cpu
    from autotune.schedules.task import TEMPLATES, _load_templates

    _load_templates()
    built_in = {n: t.func.__module__ for (n, kind), t in TEMPLATES.items()
                if kind == "llvm" and t.func.__module__.startswith(cpu.__name__ + ".")}
    assert built_in == {op: f"{cpu.__name__}.{m}" for op, m in cpu.MODULE_OF_OP.items()}


def test_a_task_imports_only_its_op_module():
    import subprocess
    import sys

    code = ("import sys, autotune; autotune.create_task('matmul', M=4, N=4, K=4); "
            "print(sorted(m for m in sys.modules if m.startswith('autotune.schedules.cpu.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # rules: shared defaults; panels: the matmul family's packed-weight layout
    assert out.strip() == ("['autotune.schedules.cpu.matmul', 'autotune.schedules.cpu.panels', "
                           "'autotune.schedules.cpu.rules']")


def test_parameters_with_a_template_default_may_be_left_out():
    short = autotune.create_task("layer_norm", M=7, N=9)
    full = autotune.create_task("layer_norm", M=7, N=9, eps=1e-5)
    assert short.params == full.params == {"M": 7, "N": 9, "eps": 1e-5}
    assert short.workload_key == full.workload_key == "layer_norm(M=7,N=9,eps=1e-05)float32"
    assert autotune.create_task("layer_norm", M=7, N=9, eps=1e-6).workload_key != full.workload_key


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(op="matmul", M=4, N=4), ValueError, r"missing parameter\(s\) \['K'\]"),
    (dict(op="matmul", M=4, N=4, K=4, Q=1), ValueError, r"unknown parameter\(s\) \['Q'\]"),
    (dict(op="gemm", M=4), ValueError, "unknown op 'gemm'"),
    (dict(op="matmul", M=4, N=4, K=4, target="opencl"), ValueError, "unknown target"),
    (dict(op="matmul", M=4, N=4, K=4, dtype="float8"), TypeError, "unknown dtype"),
    (dict(op="matmul", M=4.5, N=4, K=4), TypeError, "M must be an int"),
    (dict(op="conv2d", N=1, C=1, H=2, W=2, F=1, KH=5, KW=5, stride=1, padding=0), ValueError, "larger than"),
])
def test_create_task_errors_name_the_parameter(kwargs, exc, match):
    op = kwargs.pop("op")
    with pytest.raises(exc, match=match):
        autotune.create_task(op, **kwargs)
