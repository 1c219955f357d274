"""autotune.target: the one parser of target strings, the record keys, the limits as data."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

import autotune
from autotune.codegen.cuda_device import gpu_available
from autotune.errors import BuildError
from autotune.target import CUDA_LIMITS, GpuLimits, Target, host_cpu_name

HOST_CPU = host_cpu_name()

# The features the key held before target.py existed. A change here splits every tuning database:
# make it on purpose, never by accident.
KEY_FEATURES_OF_RECORDS = (
    "sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq",
    "avx512cd", "avx512vnni", "avx512bf16", "avx512fp16", "avxvnni", "amx-tile", "amx-bf16",
    "amx-int8", "neon", "fullfp16", "dotprod", "i8mm", "bf16", "sve", "sve2",
)


def key_as_records_hold_it() -> str:
    """The host key as `jit.target_key()` wrote it into existing databases, computed here anew."""
    import llvmlite.binding as llvm

    try:
        enabled = {k: bool(v) for k, v in llvm.get_host_cpu_features().items()}
    except RuntimeError:
        enabled = {}
    feats = ",".join(sorted(f for f in KEY_FEATURES_OF_RECORDS if enabled.get(f)))
    return f"llvm -mcpu={llvm.get_host_cpu_name()} -features={feats} -cores={os.cpu_count() or 1}"


# -- parsing -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["llvm", f"llvm -mcpu={HOST_CPU}", "cuda", "cuda -arch=sm_80",
                                  "cuda -arch=sm_90 -name=NVIDIA_H100", "cuda -arch=sm_90a"])
def test_str_round_trips(text):
    target = Target.parse(text)
    assert str(target) == text
    assert Target.parse(str(target)) == target
    assert eval(repr(target), {"Target": Target.parse}) == target


def test_options_come_out_in_one_order():
    assert str(Target.parse("  cuda   -name=x -arch=sm_80 ")) == "cuda -arch=sm_80 -name=x"


def test_parse_takes_a_target_as_it_is():
    target = Target.parse("cuda -arch=sm_80")
    assert Target.parse(target) is target


@pytest.mark.parametrize("text, message", [
    ("", "unknown target ''; expected one of ('llvm', 'cuda')"),
    ("tpu", "unknown target 'tpu'"),
    ("llvm -mcpu=notacpu", f"-mcpu=notacpu is not this machine's CPU ({HOST_CPU}); autotune compiles for "
                           "the host CPU only"),
    ("llvm -O3", f"unknown option '-O3'; llvm takes only -mcpu={HOST_CPU} (this CPU)"),
    ("llvm -mcpu", "unknown option '-mcpu'"),
    ("llvm -cores=4", "unknown option '-cores=4'"),            # a key's option, not a user's
    ("llvm -mcpu=", "-mcpu must be a CPU name, got ''"),
    ("cuda -arch=sm_90 -foo", "unknown option '-foo'; expected -arch=sm_XY or -name=GPU_NAME"),
    ("cuda -arch=90", "-arch must look like sm_80, got '90'"),
    ("cuda -arch=sm_80 -arch=sm_90", "-arch is given twice"),
    ("cuda -mcpu=x", "unknown option '-mcpu=x'"),
])
def test_bad_target_strings_name_the_problem(text, message):
    with pytest.raises(ValueError) as err:
        Target.parse(text)
    assert message in str(err.value)
    assert str(err.value).startswith("unknown target") or str(err.value).startswith(f"target {text!r}")


def test_fields_of_the_other_kind_are_refused():
    with pytest.raises(ValueError, match="a target of kind llvm has no arch"):
        Target("llvm", arch="sm_80")
    with pytest.raises(ValueError, match="a target of kind cuda has no mcpu, cores"):
        Target("cuda", mcpu="x", cores=2)
    with pytest.raises(ValueError, match="unknown target kind 'rocm'"):
        Target("rocm")


# -- keys ----------------------------------------------------------------------------------------

def test_the_host_key_is_the_one_existing_records_hold():
    assert Target.parse("llvm").key == key_as_records_hold_it()
    assert Target.parse(f"llvm -mcpu={HOST_CPU}").key == key_as_records_hold_it()
    assert Target.host().key == str(Target.host()) == key_as_records_hold_it()


@pytest.mark.parametrize("text, key", [("cuda -arch=sm_80", "cuda -arch=sm_80"),
                                       ("cuda -name=NVIDIA_H100 -arch=sm_90", "cuda -arch=sm_90 -name=NVIDIA_H100")])
def test_a_cuda_target_with_an_arch_is_its_own_key(text, key):
    assert Target.parse(text).key == key


@pytest.mark.parametrize("key", ["cuda -arch=sm_80", "cuda -arch=sm_90 -name=NVIDIA_H100",
                                 "llvm -mcpu=znver4 -features=avx,avx2,avx512f,fma -cores=64",
                                 "llvm -mcpu=cortex-a72 -features= -cores=4"])
def test_keys_of_any_machine_read_back(key):
    target = Target.from_key(key)
    assert target.complete and str(target) == target.key == key
    assert Target.from_key(target.key) == target


def test_the_host_key_reads_back_to_the_host():
    assert Target.from_key(Target.parse("llvm").key) == Target.host()


@pytest.mark.parametrize("key, message", [
    ("llvm -mcpu=x -features=avx -cores=0", "-cores must be a positive integer, got '0'"),
    ("llvm -mcpu=x -features=avx,,fma -cores=2", "-features must be a comma-separated list"),
    ("llvm -mcpu=x -O3", "unknown option '-O3'; a key of kind llvm has -mcpu=, -features=, -cores="),
    ("cuda -arch=80", "-arch must look like sm_80"),
])
def test_bad_keys_name_the_problem(key, message):
    with pytest.raises(ValueError, match=message):
        Target.from_key(key)


def test_code_is_shared_across_core_counts_only():
    here = Target.host()
    assert here.same_code(Target("llvm", here.mcpu, here.features, (here.cores or 1) + 7))
    assert not here.same_code(Target("llvm", here.mcpu + "-other", here.features, here.cores))
    assert not here.same_code(Target("llvm", here.mcpu, (*(here.features or ()), "made-up"), here.cores))


def test_a_cuda_target_without_an_arch_asks_the_device(monkeypatch):
    import autotune.codegen.cuda_device as cuda_device

    calls = []
    monkeypatch.setattr(cuda_device, "device_info",
                        lambda: calls.append(1) or {"arch": "sm_86", "name": "NVIDIA RTX  A6000"})
    target = Target.parse("cuda")
    assert calls == [] and not target.complete
    assert target.key == "cuda -arch=sm_86 -name=NVIDIA_RTX_A6000"
    assert target.key == "cuda -arch=sm_86 -name=NVIDIA_RTX_A6000" and calls == [1]     # looked up once
    assert Target.parse("cuda -name=mine").key == "cuda -arch=sm_86 -name=mine"


@pytest.mark.skipif(gpu_available(), reason="checks the error where there is no GPU")
def test_a_cuda_target_without_an_arch_or_a_gpu_says_to_name_the_arch():
    with pytest.raises(BuildError, match="name the arch: target='cuda -arch=sm_90'"):
        _ = Target.parse("cuda").key


# -- limits --------------------------------------------------------------------------------------

def test_limits_are_data_of_the_target():
    assert Target.parse("cuda -arch=sm_80").limits is CUDA_LIMITS
    assert Target.parse("llvm").limits is None
    assert (CUDA_LIMITS.max_threads_per_block, CUDA_LIMITS.max_block_dim, CUDA_LIMITS.shared_bytes_per_block,
            CUDA_LIMITS.warp_size) == (1024, (1024, 1024, 64), 48 * 1024, 32)


def test_the_launch_pass_checks_the_limits_it_is_given():
    from autotune import te
    from autotune.errors import ScheduleError
    from autotune.ir.passes.gpu_launch import launch_shape

    A = te.placeholder((256,), name="A")
    B = te.compute((256,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=128)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    func = autotune.lower(s, [A, B])
    assert launch_shape(func).block == (128, 1, 1)
    with pytest.raises(ScheduleError, match="128 threads per block .* over the limit 64"):
        launch_shape(func, GpuLimits(max_threads_per_block=64))


# -- tasks ---------------------------------------------------------------------------------------

def test_a_task_holds_its_target_and_keys_records_by_it():
    task = autotune.create_task("matmul", target="cuda -arch=sm_80", M=64, N=64, K=64)
    assert task.target == Target.parse("cuda -arch=sm_80") and task.target_key == "cuda -arch=sm_80"
    assert task.target.limits is not None and autotune.create_task("matmul", M=8, N=8, K=8).target.limits is None


LIGHT = """
import sys
{body}
heavy = sorted(m for m in ("llvmlite", "pycuda") if m in sys.modules)
assert not heavy, heavy
"""


@pytest.mark.parametrize("body", [
    "import autotune; autotune.create_task('matmul', M=64, N=64, K=64)",
    "import autotune; autotune.create_task('relu', target='cuda', shape=64)",
    "from autotune.cli import run; assert run(['ops', '--json']) == 0",
    "from autotune.schedules.task import TEMPLATES, _load_templates; _load_templates(); assert TEMPLATES",
])
def test_creating_tasks_and_listing_ops_start_neither_llvm_nor_cuda(body):
    p = subprocess.run([sys.executable, "-c", LIGHT.format(body=body)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr


def test_cpu_facts_come_from_the_targets_features_without_starting_llvm():
    import subprocess
    import sys

    code = ("import sys; from autotune.target import Target; "
            "f = Target.from_key('llvm -mcpu=x -features=avx2,fma -cores=3').cpu; "
            "g = Target.from_key('llvm -mcpu=x -features=avx512f -cores=1').cpu; "
            "h = Target.from_key('llvm -mcpu=x -features= -cores=1').cpu; "
            "print(f.vector_bytes, f.cores, f.lanes(4), g.lanes(4), h.lanes(8), f.l1d_bytes > 0, "
            "Target.parse('llvm').cpu.cores >= 1, 'llvmlite' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["32", "3", "8", "16", "2", "True", "True", "False"]
    with pytest.raises(ValueError, match="only llvm targets"):
        _ = Target.parse("cuda -arch=sm_90").cpu


@pytest.mark.parametrize("key, half", [
    ("llvm -mcpu=znver4 -features=avx2,avx512f,fma -cores=2", True),     # AVX-512 on 256-bit units
    ("llvm -mcpu=znver5 -features=avx2,avx512f,fma -cores=2", False),
    ("llvm -mcpu=sapphirerapids -features=avx2,avx512f,fma -cores=2", False),
    ("llvm -mcpu=znver4 -features=avx2,fma -cores=2", False),            # no 64-byte vectors to halve
])
def test_a_half_pumped_avx512_is_a_fact_of_the_cpu(key, half):
    facts = Target.from_key(key).cpu
    assert facts.half_pumped is half
    assert facts.unit_lanes(4) == (8 if half else facts.lanes(4))


def test_the_host_is_half_pumped_as_the_os_names_it(monkeypatch):
    """A target without -mcpu is the host: the OS's vendor and family say (AVX-512 given)."""
    from autotune.target import _host_half_pumped

    fields = {"vendor_id": "AuthenticAMD", "cpu family": "25"}
    monkeypatch.setattr("autotune.target._cpuinfo", lambda names: next(fields[n] for n in names if n in fields))
    def host_avx512():
        _host_half_pumped.cache_clear()
        return Target("llvm", features=("avx2", "avx512f", "fma"), cores=2).cpu

    assert host_avx512().half_pumped
    fields["cpu family"] = "26"
    assert not host_avx512().half_pumped
    _host_half_pumped.cache_clear()     # the real host's, for the tests after this one
