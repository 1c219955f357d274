#!/usr/bin/env bash
# PyCUDA (and autotune's other dependencies) on a GPU machine that cannot reach PyPI, such as the
# device machines lent to tasks (their image has python3 3.12, torch, numpy, click, rich, llvmlite,
# hypothesis and the CUDA toolkit, but no PyCUDA, SQLAlchemy or XGBoost). PyCUDA has no wheels:
# it is built there, against that machine's CUDA toolkit.
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
        -d "$WHEELS" pytools platformdirs mako sqlalchemy greenlet xgboost-cpu
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

install() {
    local root
    root=$(cuda_root)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        "$WHEELS"/*.whl
    export PYTHONPATH="$SITE:${PYTHONPATH:-}"
    # --no-build-isolation: build with the machine's setuptools and numpy (nothing can be fetched)
    CUDA_ROOT="$root" PATH="$root/bin:$PATH" python3 -m pip install -q --no-index --no-deps \
        --no-build-isolation --no-cache-dir --target "$SITE" "$WHEELS"/pycuda-*.tar.gz
    python3 -c "import pycuda.driver as d; d.init(); dev = d.Device(0); print('PyCUDA sees', dev.name(), 'sm_%d%d' % dev.compute_capability())"
}

case "${1:-}" in
    download) download ;;
    install) install ;;
    *) echo "usage: $0 download|install" >&2; exit 2 ;;
esac
