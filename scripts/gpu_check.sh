#!/usr/bin/env bash
# The GPU checks of one short device-machine lease, in one command: PyCUDA built there
# (scripts/gpu_setup.sh install, wheels carried in .whl/), every test that needs a GPU, then the
# CUDA benchmark. Logs go to $OUT (the device tool brings them back) or /tmp/gpu_out.
#
#   here:   scripts/gpu_setup.sh download
#   device: run(command="bash scripts/gpu_check.sh", carry=[".whl"], timeout_s=540)
#
# TRIALS (default 32) and BENCH_S (default 240) size the benchmark to the time left; BENCH_S=0
# runs the tests alone.
set -uo pipefail
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$OUT/gpu.txt"
scripts/gpu_setup.sh install > "$OUT/setup.log" 2>&1 || { tail -40 "$OUT/setup.log"; exit 1; }
tail -2 "$OUT/setup.log"
export PYTHONPATH=/tmp/site:$PWD
timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests/e2e/test_cuda_templates_gpu.py \
    tests/e2e/test_cuda_gpu.py tests/codegen/test_cuda.py 2>&1 | tee "$OUT/tests.log" | tail -60
if [ "${BENCH_S:-240}" -gt 0 ]; then
    timeout "${BENCH_S:-240}" python3 benchmarks/cuda_gpu.py --trials "${TRIALS:-32}" 2>&1 | tee "$OUT/bench.log"
fi
