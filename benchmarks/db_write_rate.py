"""Committed records per second into one tuning database from concurrent writer processes, on
PostgreSQL and on SQLite: the database's side of "how many machines can tune into one database".

Each writer does what a tuner does per batch: claim a batch of configs of one shared workload
(`TuningDB.claim`), then store its records in one transaction (`add_records`), as fast as it can,
for --seconds. The rate is the records committed in the database over the wall time. PostgreSQL
is a server this script starts in a temporary directory (tuning_db.testing_pg), once durable
(synchronous_commit=on, its default) and once with synchronous_commit=off, which matches SQLite's
WAL with synchronous=NORMAL (a commit is not fsynced; an OS crash loses the last ones, never
consistency). Measured on this machine, so the writers share its cores with the server.

    PYTHONPATH=. python benchmarks/db_write_rate.py [--writers 8] [--seconds 5] [--batch 16]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import tempfile
import time
from dataclasses import dataclass

from tuning_db import Record, TuningDB
from tuning_db.testing_pg import PostgresServer

WORKLOAD = "matmul(M=1024,N=1024,K=1024)float32"
TARGET = "llvm -mcpu=bench -cores=8"


def batch_of(first: int, size: int) -> list[Record]:
    return [Record(WORKLOAD, TARGET, i, {"index": i, "knobs": {"tile": [i % 64, 8]}}, (1e-3, 1.1e-3, 0.9e-3),
                   "ok", "", 0.05, time.time()) for i in range(first, first + size)]


def writer(location: str, n: int, seconds: float, batch: int, barrier, results) -> None:
    """Claim and store batches of configs no other writer proposes (each has its own index range);
    report (records committed, wall time of the first claim, wall time of the last commit, CPU seconds)."""
    db = TuningDB(location)
    run_id = db.start_run(WORKLOAD, "matmul", {"M": 1024, "N": 1024, "K": 1024}, "float32", TARGET, "bench", 10**9)
    barrier.wait()
    started, cpu = time.time(), time.process_time()
    end, first, stored = time.monotonic() + seconds, n * 10**9, 0
    while time.monotonic() < end:
        claimed = set(db.claim(run_id, range(first, first + batch), lease_s=60))
        db.add_records(run_id, [r for r in batch_of(first, batch) if r.config_index in claimed])
        first, stored = first + batch, stored + len(claimed)
    results.put((stored, started, time.time(), time.process_time() - cpu))
    db.finish_run(run_id, stored)
    db.close()


@dataclass
class Figure:
    records: int
    per_s: float                      # committed records per second
    client_ms: float                  # writer CPU per batch (claim + store)
    server_ms: float | None = None    # PostgreSQL server CPU per batch


def rate(location: str, writers: int, seconds: float, batch: int, server: PostgresServer | None = None) -> Figure:
    """What `writers` processes writing for `seconds` commit, and the CPU it costs them and the server."""
    TuningDB(location).close()   # the schema first: the figure is of writing records, not of creating tables
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(writers), ctx.Queue()
    procs = [ctx.Process(target=writer, args=(location, n, seconds, batch, barrier, results)) for n in range(writers)]
    server0 = server.cpu_seconds() if server else 0.0
    for p in procs:
        p.start()
    reports = [results.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    if any(p.exitcode != 0 for p in procs):
        raise SystemExit(f"a writer failed on {location}")
    time.sleep(0.5)   # the server reaps the writers' backends, so their CPU time is counted
    records = sum(r[0] for r in reports)
    with TuningDB(location, readonly=True) as db:
        if len(db.measured_indices(WORKLOAD, TARGET)) != records:
            raise SystemExit(f"{location}: the writers committed {records} records, the database holds another count")
    batches = records / batch
    return Figure(records, records / (max(r[2] for r in reports) - min(r[1] for r in reports)),
                  1e3 * sum(r[3] for r in reports) / batches,
                  1e3 * (server.cpu_seconds() - server0) / batches if server else None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--batch", type=int, default=16, help="records per transaction (tune's default batch)")
    args = ap.parse_args()
    print(f"{args.writers} writers, batches of {args.batch}, {args.seconds:g} s each, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        figures["SQLite (WAL, synchronous=NORMAL)"] = rate(os.path.join(tmp, "bench.db"), args.writers,
                                                           args.seconds, args.batch)
    for label, settings in (("PostgreSQL (synchronous_commit=on)", {}),
                            ("PostgreSQL (synchronous_commit=off)", {"synchronous_commit": "off"})):
        with PostgresServer(settings) as server:
            figures[label] = rate(server.create_database("bench"), args.writers, args.seconds, args.batch, server)
    base = figures["SQLite (WAL, synchronous=NORMAL)"].per_s
    print(f"{'':38s} {'records/s':>9s} {'vs SQLite':>9s} {'writer CPU':>10s} {'server CPU':>10s} "
          f"{'records/s per server core':>25s}")
    for label, f in figures.items():
        server = "-" if f.server_ms is None else f"{f.server_ms:.2f} ms"
        per_core = "-" if f.server_ms is None else f"{args.batch * 1e3 / f.server_ms:.0f}"
        print(f"{label:38s} {f.per_s:9.0f} {f.per_s / base:8.2f}x {f.client_ms:7.2f} ms {server:>10s} {per_core:>25s}")
    print("(CPU per batch of claim + store; the last column is what one server core sustains at that CPU cost)")


if __name__ == "__main__":
    main()
