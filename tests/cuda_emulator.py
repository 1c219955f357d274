"""Runs generated CUDA C on the CPU with real concurrency, for tests on machines without a GPU.

The kernel source is compiled as C++ (g++ -std=c++20) against a small header that gives the
CUDA names CPU meanings: each thread of a block is an OS thread (blocks run one after another),
`__shared__` arrays are static (one copy, shared by the block's threads), `__syncthreads()` is a
barrier of the block's threads and `__shfl_xor_sync` exchanges values through a per-warp buffer
between two barriers of the warp. So barriers, shuffles, thread guards and the SPMD index math
run as they would on a GPU: a missing barrier can show up as a wrong result, a barrier that not
every thread reaches as a reported deadlock (barriers time out instead of hanging the tests).
This checks what the serial reading (`serialize_threads`) cannot: the CUDA translation itself.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

from autotune.dtype import dtype_info

HEADER = r"""
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
using std::sqrt; using std::exp; using std::log; using std::tanh; using std::erf; using std::floor;
using std::ceil; using std::pow; using std::fabs;

struct dim3_ { unsigned x, y, z; };
// internal linkage: every emulated kernel (its own .so) keeps its own state
static thread_local dim3_ threadIdx, blockIdx;
static dim3_ blockDim, gridDim;
static std::atomic<bool> emu_failed{false};

// a barrier of `count` threads; a thread that leaves drops out; threads meeting at different
// barriers of the source (`site`), or a wait over 10 s, mark the launch failed
struct EmuBarrier {
    std::mutex m; std::condition_variable cv; int count, waiting = 0, site = -1; long generation = 0;
    explicit EmuBarrier(int n) : count(n) {}
    void wait(int at) {
        std::unique_lock<std::mutex> lock(m);
        long gen = generation;
        if (waiting == 0) site = at;
        else if (site != at) emu_failed = true;
        if (++waiting >= count) { waiting = 0; ++generation; cv.notify_all(); return; }
        if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return generation != gen; })) {
            emu_failed = true; waiting = 0; ++generation; cv.notify_all();
        }
    }
    void drop() {
        std::unique_lock<std::mutex> lock(m);
        if (--count > 0 && waiting >= count) { waiting = 0; ++generation; cv.notify_all(); }
    }
};
static EmuBarrier* emu_block;
static std::vector<EmuBarrier*> emu_warps;
static std::vector<double> emu_exchange;   // 32 slots per warp

inline int emu_linear() { return (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x; }
#define __syncthreads() emu_block->wait(__LINE__)
template <typename T> T __shfl_xor_sync(unsigned, T v, int offset) {
    int lane = emu_linear() % 32, warp = emu_linear() / 32;
    std::memcpy(&emu_exchange[warp * 32 + lane], &v, sizeof(T));
    emu_warps[warp]->wait(-offset);
    T r;
    std::memcpy(&r, &emu_exchange[warp * 32 + (lane ^ offset)], sizeof(T));
    emu_warps[warp]->wait(-offset);
    return r;
}
struct float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline double __longlong_as_double(long long i) { double f; std::memcpy(&f, &i, 8); return f; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
"""

LAUNCHER = r"""
extern "C" int emu_launch(void** args, unsigned gx, unsigned gy, unsigned gz,
                          unsigned bx, unsigned by, unsigned bz) {
    blockDim = {bx, by, bz}; gridDim = {gx, gy, gz}; emu_failed = false;
    int n = bx * by * bz, warps = (n + 31) / 32;
    emu_exchange.assign(32 * warps, 0.0);
    for (unsigned z = 0; z < gz; ++z) for (unsigned y = 0; y < gy; ++y) for (unsigned x = 0; x < gx; ++x) {
        EmuBarrier block(n);
        std::vector<EmuBarrier*> ws;
        for (int w = 0; w < warps; ++w) ws.push_back(new EmuBarrier(n - 32 * w < 32 ? n - 32 * w : 32));
        emu_block = &block; emu_warps = ws;
        std::vector<std::thread> threads;
        for (int t = 0; t < n; ++t) threads.emplace_back([=, &block] {
            blockIdx = {x, y, z};
            threadIdx = {unsigned(t % bx), unsigned(t / bx % by), unsigned(t / (bx * by))};
            KERNEL_CALL;
            emu_warps[t / 32]->drop();
            block.drop();
        });
        for (auto& th : threads) th.join();
        for (auto* w : ws) delete w;
        if (emu_failed) return 1;
    }
    return 0;
}
"""


def gxx_path() -> str | None:
    return shutil.which("g++")


class EmulatedKernel:
    """`kernel(*arrays)`: the CUDA source launched on the CPU over its grid (numpy arrays in place)."""

    def __init__(self, source: str, func, shape, workdir: str) -> None:
        from autotune.codegen.cuda import kernel_name

        params = [f"({dtype_info(p.dtype).cuda}*)args[{i}]" for i, p in enumerate(func.params)]
        call = f"{kernel_name(func)}({', '.join(params)})"
        text = HEADER + source.replace('extern "C" __global__', 'extern "C"') + LAUNCHER.replace("KERNEL_CALL", call)
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        src, lib = os.path.join(workdir, f"{digest}.cpp"), os.path.join(workdir, f"{digest}.so")
        with open(src, "w") as f:
            f.write(text)
        proc = subprocess.run([gxx_path() or "g++", "-std=c++20", "-O1", "-w", "-shared", "-fPIC", "-pthread",
                               src, "-o", lib], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"g++ could not compile the emulated kernel:\n{proc.stderr[:3000]}")
        self._lib = ctypes.CDLL(lib)
        self._shape = shape
        self._params = func.params

    def __call__(self, *arrays: np.ndarray) -> None:
        for a, p in zip(arrays, self._params):
            assert a.shape == tuple(p.shape) and a.flags.c_contiguous, p.name
        ptrs = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
        grid, block = self._shape.grid, self._shape.block
        if self._lib.emu_launch(ptrs, *grid, *block) != 0:
            raise RuntimeError("emulated kernel: threads of a block met at different barriers or shuffles, or "
                               "waited 10 s at one that not every thread reached")


def emulate(func, workdir: str | None = None) -> EmulatedKernel:
    """Compile the CUDA translation of a lowered PrimFunc for CPU emulation."""
    from autotune.codegen.cuda import emit_cuda

    source, shape = emit_cuda(func)
    return EmulatedKernel(source, func, shape, workdir or tempfile.mkdtemp(prefix="autotune-emu-"))
