#!/usr/bin/env bash
# PyCUDA (and autotune's other dependencies) on a GPU machine that cannot reach PyPI, such as the
# device machines lent to tasks (their image has python3 3.12, torch, numpy, click, rich, llvmlite,
# hypothesis and the CUDA toolkit, but no PyCUDA, SQLAlchemy, Alembic or XGBoost). PyCUDA has no wheels:
# it is built there, against that machine's CUDA toolkit and driver, with --no-build-isolation
# (the machine's setuptools and numpy: nothing can be fetched there). Checked on a machine without
# a GPU (CUDA 13.0 toolkit without cuRAND): everything compiles and only the link needs libcuda.
#
#   here, with PyPI:        scripts/gpu_setup.sh download   # fills .whl/ (git-ignored), ~13 MB
#   there, on the GPU:      scripts/gpu_setup.sh install    # then: export PYTHONPATH=/tmp/site:$PWD
#
# With the device tool: run(command="scripts/gpu_setup.sh install && export PYTHONPATH=/tmp/site:$PWD
# && python3 -m pytest -q tests/codegen/test_cuda.py tests/schedules && python3 benchmarks/cuda_gpu.py",
# carry=[".whl"]).
set -euo pipefail
WHEELS=.whl
SITE=${AUTOTUNE_SITE:-/tmp/site}

download() {
    mkdir -p "$WHEELS"
    grep -qsx "/$WHEELS/" .git/info/exclude || echo "/$WHEELS/" >> .git/info/exclude
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$WHEELS" pytools platformdirs mako sqlalchemy greenlet xgboost-cpu alembic siphash24
    # PyCUDA's source distribution (pip download would try to build it here)
    python3 - "$WHEELS" <<'PY'
import json, sys, urllib.request
info = json.load(urllib.request.urlopen("https://pypi.org/pypi/pycuda/json", timeout=60))
sdist = next(f for f in info["urls"] if f["packagetype"] == "sdist")
urllib.request.urlretrieve(sdist["url"], f"{sys.argv[1]}/{sdist['filename']}")
print("saved", sdist["filename"])
PY
}

cuda_root() {
    for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-*; do
        if [ -n "$d" ] && [ -f "$d/include/cuda.h" ]; then echo "$d"; return; fi
    done
    echo "no CUDA toolkit (include/cuda.h) under \$CUDA_HOME or /usr/local/cuda*" >&2
    exit 2
}

libcuda_dir() {
    # a folder holding libcuda.so (the driver; some images ship only libcuda.so.1, which -lcuda misses)
    local lib dir
    lib=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so(\.1)? /{print $NF; exit}')
    for d in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64 "$1/lib64/stubs"; do
        [ -z "$lib" ] && [ -e "$d/libcuda.so.1" ] && lib="$d/libcuda.so.1"
        [ -z "$lib" ] && [ -e "$d/libcuda.so" ] && lib="$d/libcuda.so"
    done
    [ -n "$lib" ] || { echo "no libcuda.so (the NVIDIA driver) found" >&2; exit 2; }
    dir=$(mktemp -d)
    ln -s "$lib" "$dir/libcuda.so"
    echo "$dir"
}

install() {
    local root src libdir curand=""
    root=$(cuda_root)
    libdir=$(libcuda_dir "$root")
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        "$WHEELS"/*.whl
    export PYTHONPATH="$SITE:${PYTHONPATH:-}"
    src=$(mktemp -d)
    tar xzf "$WHEELS"/pycuda-*.tar.gz -C "$src"
    [ -f "$root/include/curand.h" ] || curand=--no-cuda-enable-curand     # minimal toolkits lack cuRAND
    (cd "$src"/pycuda-* \
        && python3 configure.py --cuda-root="$root" --cudadrv-lib-dir="$libdir" $curand \
        && PATH="$root/bin:$PATH" python3 -m pip install -q --no-index --no-deps --no-build-isolation \
            --no-cache-dir --target "$SITE" .)
    python3 -c "import pycuda.driver as d; d.init(); dev = d.Device(0); print('PyCUDA sees', dev.name(), 'sm_%d%d' % dev.compute_capability())"
}

case "${1:-}" in
    download) download ;;
    install) install ;;
    *) echo "usage: $0 download|install" >&2; exit 2 ;;
esac
