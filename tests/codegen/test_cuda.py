"""CUDA codegen: kernels generated from schedules compile with nvcc (sm_80 and sm_90), compute
what numpy does when their bound loops run serially on the CPU, and illegal bindings are refused
before compiling. Tests that launch on a GPU skip without one."""
from __future__ import annotations

import numpy as np
import pytest

import autotune
from autotune import te
from autotune.codegen import build_module
from autotune.codegen.cuda import emit_cuda
from autotune.codegen.cuda_device import gpu_available
from autotune.codegen.nvcc import compile_cuda, nvcc_path
from autotune.errors import BuildError, ScheduleError
from autotune.ir.lower import lower
from autotune.ir.passes.gpu import serialize_threads

needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc (CUDA toolkit) not installed")


needs_gpu = pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU (or PyCUDA) on this machine")


def _thread(tag: str) -> te.IterVar:
    return te.thread_axis(tag)


def elementwise(n: int = 1000, threads: int = 128, vector: int = 1):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]) * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, rest = s[B].split(B.op.axis[0], factor=threads * vector)
    tx, vec = s[B].split(rest, factor=vector)
    s[B].bind(bx, _thread("blockIdx.x"))
    s[B].bind(tx, _thread("threadIdx.x"))
    if vector > 1:
        s[B].vectorize(vec)
    return s, [A, B], lambda a: np.exp(a) * 2 + 1


def tiled_matmul(M: int, N: int, K: int, block: int = 32, threads: int = 8, ktile: int = 8,
                 fetch_x: int | None = None):
    """A shared-memory tiled matmul: C in registers per thread, A and B tiles fetched cooperatively."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    by, yi = s[C].split(C.op.axis[0], factor=block)
    bx, xi = s[C].split(C.op.axis[1], factor=block)
    ty, yi = s[C].split(yi, nparts=threads)
    tx, xi = s[C].split(xi, nparts=threads)
    s[C].reorder(by, bx, ty, tx, yi, xi)
    for axis, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        s[C].bind(axis, _thread(tag))
    s[CL].compute_at(s[C], tx)
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], factor=ktile)
    s[CL].reorder(ko, ki, *s[CL].op.axis)
    for X in (AA, BB):
        s[X].compute_at(s[CL], ko)
        fused = s[X].fuse(*s[X].op.axis)
        fx = fetch_x or threads
        _, inner = s[X].split(fused, factor=threads * fx)
        t1, t2 = s[X].split(inner, nparts=threads)
        s[X].bind(t1, _thread("threadIdx.y"))
        s[X].bind(t2, _thread("threadIdx.x"))
    return s, [A, B, C]


def run_serially(s, args, *arrays):
    build_module(serialize_threads(lower(s, args)))(*arrays)


# -- numerics of the schedules (bound loops run serially) ----------------------------------------
@pytest.mark.parametrize("vector", [1, 4])
def test_elementwise_kernel_computes_numpy(vector):
    s, args, ref = elementwise(1000, 64, vector)
    a = np.random.default_rng(0).standard_normal(1000).astype("float32")
    b = np.full(1000, np.nan, "float32")
    run_serially(s, args, a, b)
    np.testing.assert_allclose(b, ref(a), rtol=1e-5)


@pytest.mark.parametrize("shape", [(131, 97, 75), (64, 64, 64), (37, 53, 1)])
def test_tiled_matmul_with_shared_tiles_computes_numpy(shape):
    M, N, K = shape
    s, args = tiled_matmul(M, N, K)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((M, K)).astype("float32"), rng.standard_normal((K, N)).astype("float32")
    c = np.full((M, N), np.nan, "float32")
    run_serially(s, args, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_shared_tile_covers_the_block_not_one_thread():
    s, args = tiled_matmul(128, 128, 64, block=32, threads=8, ktile=8)
    func = lower(s, args)
    sizes = {b.name: b.size for b in _allocations(func.body)}
    assert sizes["A.shared"] == 32 * 8 and sizes["B.shared"] == 8 * 32
    assert sizes["C.local"] == 4 * 4


def _allocations(body):
    from autotune.ir.functor import walk
    from autotune.ir.nodes import Allocate
    out = []
    walk(body, lambda n: out.append(n.buffer) if isinstance(n, Allocate) else None)
    return out


# -- the CUDA source ----------------------------------------------------------------------------
def test_source_binds_indices_and_places_barriers_around_shared_fills():
    s, args = tiled_matmul(131, 97, 75)
    src, shape = emit_cuda(lower(s, args, name="mm"))
    assert shape.grid == (4, 5, 1) and shape.block == (8, 8, 1) and shape.shared_bytes == 2 * 256 * 4
    assert 'extern "C" __global__ void __launch_bounds__(64) mm_kernel(' in src
    assert "__shared__ __align__(16) float A_shared[256];" in src
    assert src.count("__syncthreads();") == 2     # before the fills (previous reads done) and after
    assert "const int i_outer = blockIdx.y;" in src
    assert "const float* __restrict__ A" in src and "float* __restrict__ C" in src


def test_aligned_vector_accesses_become_float4():
    s, args, _ = elementwise(1024, 64, 4)
    src, _ = emit_cuda(lower(s, args))
    assert "*(float4*)(B +" in src and "const float4" in src


def test_unaligned_vector_accesses_go_lane_by_lane():
    A = te.placeholder((1001,), name="A")
    B = te.compute((1000,), lambda i: A[i + 1] * 2.0, name="B")
    s = te.create_schedule(B.op)
    bx, rest = s[B].split(B.op.axis[0], factor=256)
    tx, vec = s[B].split(rest, factor=4)
    s[B].bind(bx, _thread("blockIdx.x"))
    s[B].bind(tx, _thread("threadIdx.x"))
    s[B].vectorize(vec)
    src, _ = emit_cuda(lower(s, [A, B]))
    assert "const float4" not in src           # A[i + 1] is not 16-byte aligned


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_generated_kernels_compile_with_nvcc(arch):
    for s, args in (elementwise(1000, 128, 1)[:2], elementwise(4096, 256, 4)[:2], tiled_matmul(131, 97, 75),
                    tiled_matmul(256, 256, 256, block=64, threads=16, ktile=16)):
        src, _ = emit_cuda(lower(s, args))
        ptx = compile_cuda(src, arch, "ptx").decode()
        assert f".target {arch}" in ptx


@needs_nvcc
def test_nvcc_errors_are_build_errors():
    with pytest.raises(BuildError, match="nvcc failed for sm_80"):
        compile_cuda("this is not CUDA", "sm_80")


# -- illegal bindings, refused before compiling -------------------------------------------------
def test_too_many_threads_per_block():
    s, args, _ = elementwise(1 << 16, 2048)
    with pytest.raises(ScheduleError, match="threadIdx.x has extent 2048, over the limit 1024"):
        emit_cuda(lower(s, args))


def test_too_many_threads_over_two_axes():
    s, args = tiled_matmul(256, 256, 64, block=64, threads=64, ktile=8)
    with pytest.raises(ScheduleError, match="4096 threads per block"):
        emit_cuda(lower(s, args))


def test_too_much_shared_memory():
    s, args = tiled_matmul(1024, 1024, 1024, block=256, threads=16, ktile=32)
    with pytest.raises(ScheduleError, match="bytes of shared memory per block, over the limit 49152"):
        emit_cuda(lower(s, args))


def test_kernel_without_block_binding():
    A = te.placeholder((10,), name="A")
    B = te.compute((10,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(ScheduleError, match="must be bound to blockIdx"):
        emit_cuda(lower(s, [A, B]))


def test_producer_left_at_root_needs_a_grid_barrier():
    A = te.placeholder((100,), name="A")
    T = te.compute((100,), lambda i: A[i] + 1.0, name="T")
    B = te.compute((100,), lambda i: T[99 - i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    for st in (s[T], s[B]):
        o, i = st.split(st.op.axis[0], factor=32)
        st.bind(o, _thread("blockIdx.x"))
        st.bind(i, _thread("threadIdx.x"))
    with pytest.raises(ScheduleError, match="intermediate T is computed at root"):
        emit_cuda(lower(s, [A, B]))


def row_reduction(rows: int, cols: int, threads: int, combiner=te.sum):
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    B = te.compute((rows,), lambda i: combiner(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=threads)
    s[B].reorder(B.op.axis[0], ki, ko)
    s[B].bind(B.op.axis[0], _thread("blockIdx.x"))
    s[B].bind(ki, _thread("threadIdx.x"))
    return s, [A, B]


@pytest.mark.parametrize("threads", [8, 32, 128, 1024])
@pytest.mark.parametrize("combiner,ref", [(te.sum, np.sum), (te.max, np.max), (te.min, np.min)])
def test_reduction_across_threads(threads, combiner, ref):
    s, args = row_reduction(13, 1301, threads, combiner)
    a = np.random.default_rng(4).standard_normal((13, 1301)).astype("float32")
    b = np.full(13, np.nan, "float32")
    run_serially(s, args, a, b)
    np.testing.assert_allclose(b, ref(a, axis=1), rtol=1e-5, atol=1e-5)
    src, shape = emit_cuda(lower(s, args))
    assert "__shfl_xor_sync" in src
    assert ("_scratch[" in src) == (threads > 32)
    assert shape.shared_bytes == (4 * threads // 32 if threads > 32 else 0)


@needs_nvcc
def test_reduction_across_threads_compiles():
    for threads in (16, 256):
        src, _ = emit_cuda(lower(*row_reduction(13, 301, threads)))
        assert ".target sm_90" in compile_cuda(src, "sm_90").decode()


def test_reduction_across_threads_needs_a_power_of_two_width():
    with pytest.raises(ScheduleError, match="power-of-two block width, got 96"):
        emit_cuda(lower(*row_reduction(13, 301, 96)))


def test_reduction_bound_to_threadidx_y_is_refused():
    A = te.placeholder((16, 256), name="A")
    k = te.reduce_axis((0, 256), name="k")
    B = te.compute((16,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=64)
    s[B].bind(B.op.axis[0], _thread("blockIdx.x"))
    s[B].bind(ki, _thread("threadIdx.y"))
    with pytest.raises(ScheduleError, match="threadIdx.x only"):
        lower(s, [A, B])


def test_threads_updating_one_shared_element_race():
    # a shared reduction stage inside C's thread loop, its own loops not bound: every thread
    # would read-modify-write the same shared elements
    A = te.placeholder((64, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    R = te.compute((64,), lambda i: te.sum(A[i, k], axis=k), name="R")
    C = te.compute((64, 64), lambda i, j: A[i, j] / R[i], name="C")
    s = te.create_schedule(C.op)
    s[R].set_scope("shared")
    s[C].bind(C.op.axis[0], _thread("blockIdx.x"))
    s[C].bind(C.op.axis[1], _thread("threadIdx.x"))
    s[R].compute_at(s[C], C.op.axis[1])
    with pytest.raises(ScheduleError, match="updates the same element of R"):
        emit_cuda(lower(s, [A, C]))


def test_block_index_inside_thread_index():
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], _thread("threadIdx.x"))
    s[B].bind(B.op.axis[1], _thread("blockIdx.x"))
    with pytest.raises(ScheduleError):
        emit_cuda(lower(s, [A, B]))


def test_barrier_under_a_partial_thread_loop():
    # the fetch binds threadIdx.x to 16 threads, C to 8: C's loop is a branch around the barrier
    s, args = tiled_matmul(64, 64, 64, block=32, threads=8, ktile=8, fetch_x=16)
    with pytest.raises(ScheduleError, match="barrier sits under loop"):
        emit_cuda(lower(s, args))


def test_binding_one_thread_tag_twice_in_a_stage():
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], _thread("threadIdx.x"))
    with pytest.raises(ScheduleError, match="threadIdx.x is already bound"):
        s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.x", name="tx"))


def test_parallel_loop_in_a_cuda_kernel():
    s, args, _ = elementwise(1000, 128)
    A, B = args
    s2 = te.create_schedule(B.op)
    o, i = s2[B].split(B.op.axis[0], factor=128)
    s2[B].bind(o, _thread("blockIdx.x"))
    s2[B].parallel(i)
    with pytest.raises(BuildError, match="parallel"):
        emit_cuda(lower(s2, [A, B]))


# -- targets and the runtime side without a GPU -------------------------------------------------
def test_target_with_an_arch_needs_no_gpu():
    from autotune.target import Target
    assert Target.parse("cuda -arch=sm_80").key == "cuda -arch=sm_80"
    assert Target.parse("cuda -arch=sm_90 -name=H100").key == "cuda -arch=sm_90 -name=H100"
    with pytest.raises(ValueError, match="-arch must look like sm_80"):
        Target.parse("cuda -arch=80")
    with pytest.raises(ValueError, match="unknown option"):
        Target.parse("cuda -fast")


@pytest.mark.skipif(gpu_available(), reason="checks the error where there is no GPU")
def test_build_for_cuda_without_a_gpu_says_what_is_missing():
    s, args, _ = elementwise()
    with pytest.raises(BuildError, match="PyCUDA|no GPU|driver"):
        autotune.build(s, args, target="cuda")
    with pytest.raises(BuildError, match="name the arch"):
        autotune.build(s, args, target="cuda")


# -- on a GPU -----------------------------------------------------------------------------------
@needs_gpu
def test_gpu_elementwise_and_matmul_match_numpy():
    s, args, ref = elementwise(1000, 128, 4)
    f = autotune.build(s, args, target="cuda")
    a = np.random.default_rng(2).standard_normal(1000).astype("float32")
    b = np.zeros(1000, "float32")
    f(a, b)
    np.testing.assert_allclose(b, ref(a), rtol=1e-5)
    s, args = tiled_matmul(131, 97, 75)
    f = autotune.build(s, args, target="cuda")
    x, y = np.random.rand(131, 75).astype("float32"), np.random.rand(75, 97).astype("float32")
    z = np.zeros((131, 97), "float32")
    f(x, y, z)
    np.testing.assert_allclose(z, x @ y, rtol=1e-4)
    assert ".entry main_kernel" in f.get_source("ptx") and "__global__" in f.get_source("cuda")


@needs_gpu
def test_gpu_arrays_are_used_in_place():
    import pycuda.gpuarray as gpuarray
    s, args, ref = elementwise(1000, 128)
    f = autotune.build(s, args, target="cuda")
    a = np.random.default_rng(3).standard_normal(1000).astype("float32")
    da, db = gpuarray.to_gpu(a), gpuarray.zeros(1000, np.float32)
    f(da, db)
    np.testing.assert_allclose(db.get(), ref(a), rtol=1e-5)
    with pytest.raises(ValueError, match="expected shape"):
        f(da, gpuarray.zeros(999, np.float32))


# -- virtual threads ----------------------------------------------------------------------------
def _vthread_matmul(M: int, N: int, K: int):
    task = autotune.create_task("matmul", target="cuda -arch=sm_90", M=M, N=N, K=K)
    knobs = dict(task.config(0).to_json()["knobs"], tile_y=[-1, 2, 8, 2], tile_x=[-1, 2, 8, 2])
    return task.instantiate(task.config({"knobs": knobs}).index)


def check_pass_keeps_matmul(schedule, gpu_pass, shape) -> None:
    """A GPU pass applied to a matmul kernel, read serially, still computes a @ b."""
    from autotune.ir.nodes import PrimFunc

    M, N, K = shape
    f = lower(*schedule(M, N, K))
    g = PrimFunc(f.name, f.params, gpu_pass(f.body), f.attrs)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((M, K)).astype("float32"), rng.standard_normal((K, N)).astype("float32")
    c = np.full((M, N), np.nan, "float32")
    build_module(serialize_threads(g))(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(67, 45, 39), (64, 64, 16)])
def test_injected_virtual_threads_compute_the_same(shape):
    from autotune.ir.passes.virtual_threads import inject_virtual_threads

    check_pass_keeps_matmul(_vthread_matmul, inject_virtual_threads, shape)


def test_virtual_threads_share_one_fetch_of_the_shared_tiles():
    s, args = _vthread_matmul(128, 128, 64)
    src, _ = emit_cuda(lower(s, args))
    fills = [ln for ln in src.splitlines() if "A_shared +" in ln or ln.strip().startswith("A_shared[")]
    assert len(fills) == 1                       # one cooperative fetch, not one per virtual thread
    assert "float C_local[16];" in src           # 2 x 2 virtual threads, each its own 2 x 2 tile
    if nvcc_path() is not None:
        assert ".target sm_90" in compile_cuda(src, "sm_90").decode()


# -- GPU array arguments (checked before anything reaches the driver) -----------------------------
class _DeviceArray:
    """Stands for a torch/CuPy array: only its __cuda_array_interface__ is read."""

    def __init__(self, shape, typestr="<f4", ptr=1 << 20, strides=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False),
                                         "strides": strides, "version": 3}


def test_gpu_array_arguments_are_checked():
    from autotune.codegen.cuda_module import _device_pointer
    from autotune.errors import ArgumentError

    f32 = np.dtype("float32")
    assert _device_pointer(_DeviceArray((4, 5)), "argument 0 (A)", (4, 5), f32) == 1 << 20
    assert _device_pointer(np.zeros((4, 5), f32), "argument 0 (A)", (4, 5), f32) is None
    with pytest.raises(ArgumentError, match=r"argument 0 \(A\): expected dtype float32, got float64"):
        _device_pointer(_DeviceArray((4, 5), "<f8"), "argument 0 (A)", (4, 5), f32)
    with pytest.raises(ValueError, match=r"expected shape \(4, 5\), got \(5, 4\)"):
        _device_pointer(_DeviceArray((5, 4)), "argument 0 (A)", (4, 5), f32)
    with pytest.raises(ValueError, match="C-contiguous"):
        _device_pointer(_DeviceArray((4, 5), strides=(4, 16)), "argument 0 (A)", (4, 5), f32)
    assert _device_pointer(_DeviceArray((4, 5), strides=(20, 4)), "a", (4, 5), f32) == 1 << 20
    with pytest.raises(ValueError, match="16-byte aligned"):
        _device_pointer(_DeviceArray((4, 5), ptr=(1 << 20) + 4), "argument 0 (A)", (4, 5), f32)
    with pytest.raises(ArgumentError, match="expected a numpy array or a GPU array"):
        _device_pointer([1, 2, 3], "argument 0 (A)", (3,), f32)


def test_kernel_signature_and_cubin_are_checked_before_the_driver():
    from autotune.codegen.cuda_module import check_cuda_signature

    with pytest.raises(ValueError, match="expected version 1"):
        check_cuda_signature({"version": 0}, b"")
    with pytest.raises(ValueError, match="bytes are damaged"):
        check_cuda_signature({"version": 1, "name": "k", "cubin_sha256": "0" * 64}, b"cubin")


@needs_nvcc
def test_compile_kernel_gives_a_cubin_and_its_launch():
    from autotune.codegen.cuda_module import compile_kernel

    s, args, _ = elementwise(1000, 128, 4)
    sig, cubin = compile_kernel(lower(s, args, name="ew"), "sm_80")
    assert sig["entry"] == "ew_kernel" and sig["launch"]["block"] == [128, 1, 1]
    assert sig["launch"]["grid"] == [2, 1, 1] and sig["outputs"] == [1] and sig["arch"] == "sm_80"
    assert cubin[:4] == b"\x7fELF"


# -- double buffering ---------------------------------------------------------------------------
def _double_buffered_matmul(M: int, N: int, K: int):
    s, args = tiled_matmul(M, N, K)
    for st in s.stages:
        if st.scope == "shared":
            st.double_buffer()
    return s, args


@pytest.mark.parametrize("shape", [(131, 97, 75), (64, 64, 64), (40, 40, 8)])
def test_double_buffering_computes_the_same(shape):
    from autotune.ir.passes.double_buffer import inject_double_buffers

    check_pass_keeps_matmul(_double_buffered_matmul, inject_double_buffers, shape)


def test_double_buffering_halves_the_barriers_and_doubles_the_tiles():
    src, shape = emit_cuda(lower(*tiled_matmul(64, 64, 64)))
    src2, shape2 = emit_cuda(lower(*_double_buffered_matmul(64, 64, 64)))
    assert shape2.shared_bytes == 2 * shape.shared_bytes
    loop = src2[src2.index("k_outer_pair"):]
    assert loop.count("__syncthreads();") == 2               # per two k steps (one before the loop)
    assert src.count("__syncthreads();") == 2                 # per k step
    assert "A_shared_0[" in src2 and "A_shared_1[" in src2
