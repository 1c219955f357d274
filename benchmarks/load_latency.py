"""Latency of `autotune.load` for a tuned matmul: cold (compile), warm process (disk cache), hot (memory).

Each of the first two is a fresh Python process that imports autotune (timed apart: it is paid
once per process) and then times one `load` call; the hot figure is the median of repeated calls in one process. Targets: disk-cache load
<= 20 ms, memory hit <= 50 us.

    python benchmarks/load_latency.py [--size 512]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

PROBE = """
import json, sys, time, statistics, warnings
t = time.perf_counter()
import autotune, autotune.runtime   # once per process: numpy, llvmlite, the templates
imports = time.perf_counter() - t
warnings.simplefilter("ignore")
db, n, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = time.perf_counter()
k = autotune.load("matmul", db=db, M=n, N=n, K=n)
first = time.perf_counter() - t
hot = []
for _ in range(repeat):
    t = time.perf_counter()
    autotune.load("matmul", db=db, M=n, N=n, K=n)
    hot.append(time.perf_counter() - t)
print(json.dumps({"first": first, "hot": statistics.median(hot) if hot else None, "provenance": k.provenance,
                  "opened_db": "tuning_db" in sys.modules, "imports": imports}))
"""


def probe(db: str, n: int, cache: str, repeat: int = 0) -> dict:
    env = dict(os.environ, AUTOTUNE_CACHE=cache)
    out = subprocess.run([sys.executable, "-c", PROBE, db, str(n), str(repeat)], capture_output=True, text=True,
                         env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=512)
    n = ap.parse_args().size
    import autotune

    with tempfile.TemporaryDirectory() as tmp:
        db, cache = os.path.join(tmp, "t.db"), os.path.join(tmp, "cache")
        t = time.perf_counter()
        autotune.tune(autotune.create_task("matmul", M=n, N=n, K=n), trials=16, tuner="random", db=db, seed=0)
        print(f"tuned matmul {n}^3 with 16 trials in {time.perf_counter() - t:.0f} s")
        cold = probe(db, n, cache)
        warm = probe(db, n, cache, repeat=2000)
    print(f"autotune.load('matmul', M=N=K={n}) [{cold['provenance']}]")
    print(f"  import autotune.runtime    : {warm['imports'] * 1e3:8.1f} ms   (once per process, not part of load)")
    print(f"  cold (compile)             : {cold['first'] * 1e3:8.1f} ms")
    print(f"  warm process (disk cache)  : {warm['first'] * 1e3:8.1f} ms   (target <= 20 ms; database "
          f"{'opened' if warm['opened_db'] else 'unchanged, not opened'})")
    print(f"  hot (memory)               : {warm['hot'] * 1e6:8.1f} us   (target <= 50 us)")


if __name__ == "__main__":
    main()
